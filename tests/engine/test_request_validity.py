"""Every request the pipeline builds is one a provider accepts, and honours the writer (issue 9).

A hypothesis property runs the whole pipeline (assembly with World Info at depth 0–6 and the
author's note, tool groups, every built-in strategy, host checks) over generated chats with
parallel and non-adjacent tool batches, interleaved batches, results before their calls,
calls whose results never come, orphaned results, and hidden, pinned and excluded messages.
For each one:

* the final ``messages`` pass the independent validator in ``tests/request_validator.py``;
* no hidden message is sent, and no message the writer excluded (strategies that honour
  exclusions: ``manual``, ``summarize``; ``truncate`` ignores the toggles by design);
* no built-in strategy's result is rejected by the host checks;
* a quarter of the examples also run a plugin interceptor that inserts a message anywhere and
  drops another: its output is used only when the request stays valid;
* the prompt fits the budget unless the result is ``TOKEN_BUDGET_EXCEEDED``.

1,000 examples (derandomized, so every run checks the same chats; about half a minute).
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.pipeline import default_registries, prepare
from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, PreviewRequest, ToolCall, ToolFunction
from engine.schema.lorebook import Lorebook
from tests.request_validator import request_problems

EXAMPLES = int(__import__('os').environ.get('LOOMSCOPE_VALIDITY_EXAMPLES', '1000'))
REGISTRIES = default_registries()


def _meddle(messages, ctx):
    """A plugin interceptor that inserts a note somewhere and drops a message (deterministic)."""
    out = list(messages)
    if len(out) > 3:
        out.pop(len(out) // 2)
    out.insert((len(out) * 5 + 3) % (len(out) + 1), {"role": "system", "content": "MEDDLE"})
    return out, []


MEDDLING = default_registries()
MEDDLING.interceptors.register("meddle", _meddle)
KEYS = ("tool_call_id", "toolCallId", "callId")


def _marker(i: int) -> str:
    return f"<<m{i}>>"


@st.composite
def scenarios(draw):
    """(request, hidden markers, excluded markers) for one generated chat."""
    msgs: list[ChatMessage] = []
    pending: list[str] = []      # call ids waiting for their result
    early: list[str] = []        # ids whose result was written before the call
    counter = [0]

    def flags() -> MessageMeta:
        return MessageMeta(hidden=draw(st.integers(0, 7)) == 0, pinned=draw(st.integers(0, 7)) == 0,
                           manualExcluded=draw(st.integers(0, 7)) == 0)

    def text(role: str) -> str:
        return f"{role} says {_marker(len(msgs))} " + "word " * draw(st.integers(0, 30))

    def result(cid: str) -> ChatMessage:
        key = draw(st.sampled_from(KEYS))
        return ChatMessage(role="tool", content=f"result {_marker(len(msgs))} for {cid}", meta=flags(),
                           **{key: cid})

    for _ in range(draw(st.integers(0, 14))):
        event = draw(st.sampled_from(["user", "assistant", "batch", "batch", "result", "result",
                                      "early", "orphan", "legacy"]))
        if event in ("user", "assistant"):
            msgs.append(ChatMessage(role=event, content=text(event), meta=flags()))
        elif event == "batch":
            counter[0] += 1
            ids = [f"c{counter[0]}_{k}" for k in range(draw(st.integers(1, 3)))]
            if early and draw(st.booleans()):
                ids.append(early.pop())  # a call whose result came first
            msgs.append(ChatMessage(
                role="assistant", content=draw(st.sampled_from([None, f"calling {_marker(len(msgs))}"])),
                tool_calls=[ToolCall(id=c, function=ToolFunction(name="lookup", arguments=json.dumps({"q": c})))
                            for c in ids], meta=flags()))
            pending += [c for c in ids if c.startswith("c")]
            draw(st.randoms()).shuffle(pending)  # results may come back in any order
        elif event == "result" and pending:
            msgs.append(result(pending.pop(0)))
        elif event == "early":
            counter[0] += 1
            cid = f"e{counter[0]}"
            early.append(cid)
            msgs.append(result(cid))
        elif event == "orphan":
            msgs.append(result(f"nobody{len(msgs)}"))
        elif event == "legacy":
            msgs.append(ChatMessage(role="assistant", content=None, meta=flags(),
                                    function_call={"name": "lookup", "arguments": "{}"}))  # type: ignore[call-arg]
            if draw(st.booleans()):
                msgs.append(ChatMessage(role="function", name="lookup", content=f"legacy {_marker(len(msgs))}",
                                        meta=flags()))
    for cid in list(pending):  # most calls get their results in the end, some never do
        if draw(st.integers(0, 4)) > 0:
            msgs.append(result(cid))
    if draw(st.integers(0, 3)) > 0:
        msgs.append(ChatMessage(role="user", content=text("user"), meta=flags()))

    entries = []
    for uid in range(draw(st.integers(0, 3))):
        entries.append({"uid": uid, "keys": ["word"], "content": f"LORE{uid} at depth",
                        "constant": draw(st.booleans()), "position": 4, "depth": draw(st.integers(0, 6)),
                        "role": draw(st.integers(0, 2)), "order": uid})
    books = [Lorebook.model_validate({"name": "depths", "entries": entries})] if entries else []
    metadata = {}
    if draw(st.booleans()):
        metadata = {"note_prompt": "AUTHOR NOTE", "note_depth": draw(st.integers(0, 6)),
                    "note_role": draw(st.integers(0, 2))}
    strategy = draw(st.sampled_from(["manual", "truncate", "summarize", "vector-recall", "compact"]))
    limit = draw(st.integers(150, 2500))
    request = PreviewRequest(
        chat=Chat(messages=msgs, metadata=metadata), lorebooks=books,
        system_prompt=draw(st.sampled_from([None, "You are a careful assistant."])),
        settings=ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=50, strategy=strategy))
    hidden = {_marker(i) for i, m in enumerate(msgs) if m.meta.hidden}
    hidden_ids = {c.id for m in msgs if m.meta.hidden for c in (m.tool_calls or [])}
    excluded = {_marker(i) for i, m in enumerate(msgs) if m.meta.manualExcluded}
    excluded_ids = {c.id for m in msgs if m.meta.manualExcluded for c in (m.tool_calls or [])}
    return request, (hidden, hidden_ids), (excluded, excluded_ids), draw(st.integers(0, 3)) == 0


def _sent_markers(messages: list[dict]) -> tuple[str, set[str]]:
    text = json.dumps([m.get("content") for m in messages], ensure_ascii=False)
    ids = {c.get("id") for m in messages for c in (m.get("tool_calls") or [])}
    ids |= {m.get("tool_call_id") for m in messages if m.get("tool_call_id")}
    return text, ids


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_every_request_is_valid_and_honours_the_writer(scenario):
    request, (hidden, hidden_ids), (excluded, excluded_ids), meddle = scenario
    prepared = prepare(request, registries=MEDDLING if meddle else REGISTRIES)
    pv = prepared.preview
    for b in pv.blocks:  # what the examples covered (pytest --hypothesis-show-statistics)
        if b.trace and "moved_before_tool_call" in (b.trace.get("placement") or {}):
            event("depth insertion moved before a tool batch")
        if b.trace and "send_order" in b.trace:
            event("non-adjacent results gathered after their call")
        if b.reason in ("TOOL_PAIR_INCOMPLETE", "TOOL_RESULT_ORPHANED", "HIDDEN", "MANUAL_EXCLUDED"):
            event(b.reason)
        if b.kind == "tool_call" and b.status == "kept" and b.text.count("→") > 1:
            event("parallel batch sent")
    messages = prepared.messages
    assert pv.messages == messages
    if messages:
        assert request_problems(messages) == [], json.dumps(messages, indent=1)
    text, ids = _sent_markers(messages)
    assert not [h for h in hidden if h in text], "a hidden message was sent"
    assert not (hidden_ids & ids), "a hidden tool call was sent"
    if request.settings.strategy != "truncate":  # every built-in strategy but truncate honours exclusions
        assert not [x for x in excluded if x in text], "a message the writer excluded was sent"
        assert not (excluded_ids & ids)
    assert not [d for d in pv.diagnostics if "rejected" in d], pv.diagnostics
    if meddle and any("would split a tool call" in d for d in pv.diagnostics):
        event("interceptor output refused: it split a tool batch")
    if pv.error is None:
        assert pv.prompt_tokens <= pv.budget - pv.safety_margin
    # depth insertions are placed, never dropped for the tool batches (they are protected or
    # lorebook blocks: excluded only by the budget)
    for b in pv.blocks:
        if b.source == "author_note" or (b.source.startswith("lorebook:") and b.trace
                                         and "placement" in b.trace):
            assert b.status == "kept" or b.reason in ("OVER_BUDGET_PROTECTED", "PRIORITY_LOWEST_FIRST", "LOW_RELEVANCE",
                                                      "INTERCEPTOR_REMOVED",
                                                      "TOO_LARGE_FOR_BUDGET", "LOREBOOK_BUDGET")
