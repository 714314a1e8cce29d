"""One implementation per step rule (issue 29 item 2): the block and column paths apply the same rules.

:mod:`engine.step_rules` holds the rules of steps 4, 8 and 9 that both paths used to write out
each (the sendable part and its tool-group warnings, estimated counts and the safety margin, the
tools sent, content-part warnings, ``TOKEN_BUDGET_EXCEEDED``). A built-in ``truncate`` /
``manual`` run with OpenAI accounting goes down the column path; the same request with an
interceptor that changes nothing goes down the block path. The two previews must be equal, on
requests that reach each of those rules. Also: a ``PreparedPrompt``'s messages are its own copies,
made when first read, never shared with its preview or with the next run.
"""

from __future__ import annotations

import base64

import pytest

import engine.pipeline as pipeline
from engine.registries import default_registries
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, MessageMeta, PreviewRequest

_AUDIO = base64.b64encode(b"\0" * 32000).decode()  # one second of 16 kHz 16-bit audio
_TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "find a fact " * 5,
                                            "parameters": {"type": "object", "properties": {}}}}]


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def _turns(n: int) -> list[ChatMessage]:
    return [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " * 25) for i in range(n)]


def _tool_chat() -> Chat:
    """An incomplete tool group (a call without its result) and a call id used twice, among plain turns."""
    msgs = _turns(6)
    msgs += [ChatMessage(role="assistant", content=None, tool_calls=[_call("c1")]),
             ChatMessage(role="tool", tool_call_id="c1", content="fact one " * 10),
             ChatMessage(role="assistant", content=None, tool_calls=[_call("c2")]),
             ChatMessage(role="tool", tool_call_id="c2", content="fact two " * 10),
             ChatMessage(role="assistant", content=None, tool_calls=[_call("c2")]),
             ChatMessage(role="tool", tool_call_id="c2", content="fact three " * 10),
             ChatMessage(role="assistant", content=None, tool_calls=[_call("c9")])]
    return Chat(messages=msgs + _turns(4), tools=_TOOLS)


def _parts_chat() -> Chat:
    """Messages with an audio part (counted by estimate) and with a part type Loomscope does not know."""
    msgs = _turns(8)
    msgs[3] = ChatMessage(role="assistant", content=[{"type": "text", "text": "hear this " * 10},
                                                     {"type": "input_audio", "input_audio": {"data": _AUDIO, "format": "wav"}}])
    msgs[6] = ChatMessage(role="user", content=[{"type": "text", "text": "and this"}, {"type": "mystery_part", "x": 1}])
    return Chat(messages=msgs)


def _flagged_chat() -> Chat:
    """Pinned, hidden and hand-excluded messages."""
    msgs = _turns(30)
    for i, meta in ((1, MessageMeta(pinned=True)), (20, MessageMeta(pinned=True)), (5, MessageMeta(hidden=True)),
                    (27, MessageMeta(manualExcluded=True))):
        msgs[i] = msgs[i].model_copy(update={"meta": meta})
    return Chat(messages=msgs)


def _lore_chat() -> Chat:
    """Turns that name two entries of the request's lorebook (:data:`_BOOK`)."""
    msgs = _turns(12)
    msgs[10] = ChatMessage(role="user", content="We reach the harbor before the storm. " * 3)  # scan depth 2
    return Chat(messages=msgs)


_BOOK = Lorebook(name="Coast", entries=[LorebookEntry(uid=0, keys=["harbor"], content="The harbor is closed. " * 8),
                                         LorebookEntry(uid=1, keys=["storm"], content="Storms come at dusk. " * 8),
                                         LorebookEntry(uid=2, keys=["castle"], content="Never shown.")])
_CHATS = {"tools": _tool_chat, "parts": _parts_chat, "flags": _flagged_chat, "lorebook": _lore_chat}
#: (context limit, reply reserve): the whole chat, a cut, a window the protected blocks overflow
_WINDOWS = [(None, 1024), (900, 200), (160, 100)]


def _paths(request: PreviewRequest, monkeypatch) -> tuple[pipeline.PreparedPrompt, pipeline.PreparedPrompt]:
    """``request`` on the column path and on the block path (an interceptor that changes nothing)."""
    runs = []
    real = pipeline.report_preview

    def spy(run):
        runs.append(run.columnar)
        return real(run)

    monkeypatch.setattr(pipeline, "report_preview", spy)
    columns = pipeline.prepare(request, registries=default_registries())
    with_interceptor = default_registries()
    with_interceptor.interceptors.register("unchanged", lambda messages, ctx: (messages, []))
    blocks = pipeline.prepare(request, registries=with_interceptor)
    assert runs == [True, False]
    return columns, blocks


@pytest.mark.parametrize("window", _WINDOWS)
@pytest.mark.parametrize("model", ["gpt-4o", "claude-3-5-sonnet"])
@pytest.mark.parametrize("strategy", ["truncate", "manual"])
@pytest.mark.parametrize("chat", sorted(_CHATS))
def test_the_block_and_column_paths_give_the_same_preview(chat: str, strategy: str, model: str,
                                                          window: tuple[int | None, int], monkeypatch) -> None:
    request = PreviewRequest(chat=_CHATS[chat](), lorebooks=[_BOOK] if chat == "lorebook" else [],
                             settings=ContextSettings(model=model, strategy=strategy, context_limit=window[0],
                                                      reply_reserve=window[1]))
    columns, blocks = _paths(request, monkeypatch)
    assert columns.preview.model_dump_json() == blocks.preview.model_dump_json()
    if chat == "lorebook" and window[0] is None:  # each activated entry's block carries its activation record
        traced = [b.trace for b in columns.preview.blocks if b.kind == "lorebook"]
        assert len(traced) == 2 and all(t and t.get("activated") for t in traced)
    assert (columns.messages, columns.tools, columns.budget_ok) == (blocks.messages, blocks.tools, blocks.budget_ok)


def test_the_shared_rules_are_reached(monkeypatch) -> None:
    """The requests above reach each rule of :mod:`engine.step_rules` (else the test above proves little)."""
    seen: dict[str, bool] = {}
    for chat, limit, model in (("tools", None, "gpt-4o"), ("parts", None, "gpt-4o"), ("flags", 160, "claude-3-5-sonnet")):
        request = PreviewRequest(chat=_CHATS[chat](), settings=ContextSettings(
            model=model, strategy="truncate", context_limit=limit, reply_reserve=100 if limit else 1024))
        pv, _ = _paths(request, monkeypatch)
        seen[f"{chat} warnings"] = bool(pv.preview.warnings)
        seen[f"{chat} safety"] = pv.preview.safety_margin > 0
        seen[f"{chat} error"] = pv.preview.error is not None
        seen[f"{chat} tools"] = bool(pv.tools)
    assert seen["tools warnings"] and seen["tools tools"]  # incomplete group, reused id; the tools block sent
    assert seen["parts warnings"] and seen["parts safety"]  # audio and unknown parts; audio makes counts estimates
    assert seen["flags error"] and seen["flags safety"]  # the pinned turns overflow 60 tokens; claude is approximate
    warnings = " ".join(_paths(PreviewRequest(chat=_tool_chat()), monkeypatch)[0].preview.warnings)
    assert "TOOL_PAIR_INCOMPLETE" in warnings and "'c2' is used by more than one call" in warnings


def test_the_budget_error_names_the_figures(monkeypatch) -> None:
    request = PreviewRequest(chat=_flagged_chat(), settings=ContextSettings(
        model="claude-3-5-sonnet", strategy="truncate", context_limit=160, reply_reserve=100))
    for prepared in _paths(request, monkeypatch):
        error = prepared.preview.error
        assert error is not None and error.code == "TOKEN_BUDGET_EXCEEDED" and not prepared.budget_ok
        budget = 60 - 3  # context − reserve − the 5 % safety margin of an approximate profile, rounded up
        assert error.details["budget"] == budget and error.details["protected_tokens"] > budget
        assert error.message == (f"the protected blocks alone need {error.details['protected_tokens']} tokens but the "
                                 f"budget is {budget} tokens (context 160 − reply reserve 100 − safety margin 3)")
        blocks = {b.id: b for b in prepared.preview.blocks}
        assert error.details["protected_blocks"] and all(
            blocks[i].protected or blocks[i].pinned for i in error.details["protected_blocks"])
        assert not any(blocks[i].message_index == 5 for i in error.details["protected_blocks"])  # hidden: not sendable


def _mutate(messages: list[dict]) -> None:
    messages[0]["content"] = "changed"
    messages.append({"role": "user", "content": "added"})


@pytest.mark.parametrize("path", ["columns", "blocks", "chat-template"])
def test_prepared_messages_are_their_own_copies_made_when_read(path: str) -> None:
    regs = default_registries()
    if path == "blocks":
        regs.interceptors.register("unchanged", lambda messages, ctx: (messages, []))
    model = "llama-3-8b-instruct" if path == "chat-template" else "gpt-4o"
    msgs = _turns(40)
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model=model, strategy="truncate", context_limit=900, reply_reserve=100))
    first = pipeline.prepare(request, registries=regs)
    assert "messages" not in vars(first)  # no copy until read
    expected = [dict(m) for m in first.preview.messages]
    _mutate(first.messages)
    assert first.preview.messages == expected  # the preview's are its own
    again = pipeline.prepare(request, registries=regs)  # the same request: a remembered run on the columns
    assert again.messages == expected
    toggled = list(msgs)
    toggled[39] = msgs[39].model_copy(update={"meta": MessageMeta(pinned=True)})
    warm = pipeline.prepare(request.model_copy(update={"chat": Chat(messages=toggled)}), registries=regs)
    assert warm.messages == warm.preview.messages and warm.messages[-1]["content"] == expected[-1]["content"]
    with pytest.raises(TypeError, match="read-only"):  # the preview's are shared with the next run: read-only
        _mutate(warm.preview.messages)
    assert warm.messages[0] == expected[0] and pipeline.prepare(request, registries=regs).messages == expected
