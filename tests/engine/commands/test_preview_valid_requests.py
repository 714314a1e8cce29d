"""Issue 9's cases through ``loomscope preview --format json``: ``messages`` is what would be sent.

Each case writes real input files (SillyTavern chat JSONL with a ``loomscope`` object per line
for tool calls, an OpenAI message array with ``meta`` flags, a SillyTavern world JSON) and
checks the JSON the command prints with the independent validator of
``tests/request_validator.py``.
"""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from tests.request_validator import request_problems


def _preview(capsys, *args: str) -> dict:
    code = main(["preview", *args, "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def _call(*ids: str) -> list[dict]:
    return [{"id": i, "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": i})}}
            for i in ids]


def _st_chat(path, lines: list[dict], metadata: dict | None = None) -> str:
    header = {"user_name": "User", "character_name": "Bot", "chat_metadata": metadata or {}}
    path.write_text("\n".join(json.dumps(x) for x in [header, *lines]) + "\n", encoding="utf-8")
    return str(path)


def _user(text: str) -> dict:
    return {"name": "User", "is_user": True, "mes": text}


def _calls(*ids: str) -> dict:
    return {"name": "Bot", "is_user": False, "mes": "", "loomscope": {"role": "assistant", "content": None,
                                                                      "tool_calls": _call(*ids)}}


def _result(cid: str, text: str) -> dict:
    return {"name": "weather", "is_user": False, "mes": text, "loomscope": {"role": "tool", "tool_call_id": cid}}


def _world(path, **entry) -> str:
    e = {"uid": 0, "key": ["weather"], "keysecondary": [], "comment": "lore", "content": "LORE: the valley floods",
         "constant": True, "selective": False, "disable": False, "order": 100, "position": 4, "depth": 1, "role": 0,
         **entry}
    path.write_text(json.dumps({"entries": {"0": e}}), encoding="utf-8")
    return str(path)


def test_world_info_at_depth_1_goes_before_the_tool_batch(tmp_path, capsys):
    # The case: [user, assistant(w1, w2), tool w1, tool w2] with a depth-1 entry was sent
    # as [..., assistant, tool w1, system LORE, tool w2].
    chat = _st_chat(tmp_path / "c.jsonl", [_user("weather in both towns?"), _calls("w1", "w2"),
                                           _result("w1", "sunny"), _result("w2", "rain")])
    pv = _preview(capsys, "--chat", chat, "--lorebook", _world(tmp_path / "w.json"))
    msgs = pv["messages"]
    assert request_problems(msgs) == []
    assert [m["role"] for m in msgs] == ["user", "system", "assistant", "tool", "tool"]
    assert msgs[1]["content"] == "LORE: the valley floods"
    lore = next(b for b in pv["blocks"] if b["kind"] == "lorebook")
    # the preview shows where it went and why
    assert lore["trace"]["placement"]["depth"] == 1
    assert lore["trace"]["placement"]["moved_before_tool_call"] == 1
    assert lore["trace"]["placement"]["before_message"] == 1
    call = next(b for b in pv["blocks"] if b["kind"] == "tool_call")
    assert lore["position"] == call["position"] - 1


@pytest.mark.parametrize("depth", range(0, 7))
def test_world_info_at_every_depth_keeps_batches_whole(tmp_path, capsys, depth):
    lines = [_user("weather?"), _calls("a1"), _result("a1", "sunny"), _user("and tomorrow?"),
             _calls("b1", "b2", "b3"), _result("b1", "rain"), _result("b2", "fog"), _result("b3", "snow")]
    chat = _st_chat(tmp_path / "c.jsonl", lines)
    pv = _preview(capsys, "--chat", chat, "--lorebook", _world(tmp_path / "w.json", depth=depth))
    assert request_problems(pv["messages"]) == []
    assert any(m["content"] == "LORE: the valley floods" for m in pv["messages"])


def test_authors_note_at_default_depth_4_goes_before_the_calls(tmp_path, capsys):
    # depth 4 counted from the end falls on the first of three results: without the fix the note
    # was sent right after the assistant's calls.
    lines = [_user("check the three towns"), _calls("t1", "t2", "t3"), _result("t1", "dry"),
             _result("t2", "wet"), _result("t3", "windy"), _user("summarize")]
    chat = _st_chat(tmp_path / "c.jsonl", lines, {"note_prompt": "[Author's note: keep it short]"})
    pv = _preview(capsys, "--chat", chat)
    msgs = pv["messages"]
    assert request_problems(msgs) == []
    roles = [m["role"] for m in msgs]
    assert roles == ["user", "system", "assistant", "tool", "tool", "tool", "user"]
    assert msgs[1]["content"] == "[Author's note: keep it short]"
    note = next(b for b in pv["blocks"] if b["source"] == "author_note")
    assert note["trace"]["placement"] == {
        "depth": 4, "moved_before_tool_call": 1, "before_message": 1,
        "note": "depth 4 fell inside the tool batch of message 1; placed before its tool call"}


def test_non_adjacent_results_are_sent_after_their_call(tmp_path, capsys):
    lines = [_user("weather?"), _calls("w1", "w2"), _result("w1", "sunny"), _user("hurry up"),
             _result("w2", "rain"), _user("thanks")]
    pv = _preview(capsys, "--chat", _st_chat(tmp_path / "c.jsonl", lines))
    msgs = pv["messages"]
    assert request_problems(msgs) == []
    assert [m.get("content") for m in msgs] == ["weather?", None, "sunny", "rain", "hurry up", "thanks"]
    moved = next(b for b in pv["blocks"] if b["message_index"] == 4)
    assert moved["trace"]["send_order"]["moved_after_tool_call"] == 1
    assert any("messages 4" in w and "directly after their calls" in w for w in pv["warnings"])


def test_hidden_call_with_pinned_result_and_an_exclusion(tmp_path, capsys):
    # The case 2: the host check rejected the correct `manual` result and fell back to
    # `truncate`, which sent the excluded message.
    msgs = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "look up my account"},
        {"role": "assistant", "content": None, "tool_calls": _call("k1"), "meta": {"hidden": True}},
        {"role": "tool", "tool_call_id": "k1", "content": "account: 42", "meta": {"pinned": True}},
        {"role": "user", "content": "my password is hunter2", "meta": {"manualExcluded": True}},
        {"role": "assistant", "content": "I will not store that."},
        {"role": "user", "content": "what is my balance?"},
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    for strategy in ("manual", "summarize"):
        pv = _preview(capsys, "--chat", str(path), "--strategy", strategy, "--context-limit", "2000",
                      "--reply-reserve", "100")
        sent = json.dumps(pv["messages"])
        assert "hunter2" not in sent and "k1" not in sent and "account: 42" not in sent
        assert request_problems(pv["messages"]) == []
        assert not [d for d in pv["diagnostics"] if "rejected" in d]
        by_index = {b["message_index"]: b for b in pv["blocks"] if b["message_index"] is not None}
        assert by_index[2]["reason"] == "HIDDEN" and by_index[3]["reason"] == "TOOL_GROUP_DROPPED"
        assert by_index[4]["reason"] == "MANUAL_EXCLUDED"


def test_fallback_from_a_rejected_strategy_honours_exclusions():
    # A plugin strategy whose result is rejected: the fallback drops what the writer removed.
    from engine.pipeline import default_registries, preview
    from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, PreviewRequest, ShiftResult

    regs = default_registries()

    def keep_all(blocks, count, budget, options):  # "forgets" hidden and excluded messages
        return ShiftResult(kept=[b.id for b in blocks], budget=budget)

    regs.strategies.register("keep-all", keep_all)
    chat = Chat(messages=[ChatMessage(role="user", content="hi"),
                          ChatMessage(role="assistant", content="secret plan", meta=MessageMeta(hidden=True)),
                          ChatMessage(role="user", content="my password is hunter2",
                                      meta=MessageMeta(manualExcluded=True)),
                          ChatMessage(role="user", content="go on")])
    pv = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", strategy="keep-all")),
                 registries=regs)
    assert any("rejected" in d and "honouring manual exclusions" in d for d in pv.diagnostics)
    sent = json.dumps(pv.messages)
    assert "hunter2" not in sent and "secret plan" not in sent


def test_incomplete_groups_leave_whole_with_a_warning_naming_the_ids(tmp_path, capsys):
    msgs = [
        {"role": "user", "content": "start"},
        {"role": "tool", "tool_call_id": "early1", "content": "result that came first"},
        {"role": "assistant", "content": None, "tool_calls": _call("early1")},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": None, "tool_calls": _call("x1", "x2")},
        {"role": "tool", "tool_call_id": "x1", "content": "only half"},
        {"role": "user", "content": "and now?"},
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    pv = _preview(capsys, "--chat", str(path))
    assert request_problems(pv["messages"]) == []
    assert [m["content"] for m in pv["messages"]] == ["start", "next", "and now?"]
    reasons = {b["message_index"]: b["reason"] for b in pv["blocks"] if b["message_index"] is not None}
    assert [reasons[i] for i in (1, 2, 4, 5)] == ["TOOL_PAIR_INCOMPLETE"] * 4
    warned = " ".join(w for w in pv["warnings"] if "TOOL_PAIR_INCOMPLETE" in w)
    assert "early1: result before its call" in warned and "x2: no result" in warned
    assert "messages 1, 2" in warned and "messages 4, 5" in warned


CHATS = ["Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl", "1673323621108.jsonl", "airline-longest-task.json",
         "gpt-4o-airline.json", "function_calling_simple.traj", "test_case.json",
         "127_ChatGPT_DFS_woFilter_w2.json"]


@pytest.mark.parametrize("name", CHATS)
@pytest.mark.parametrize("limit", ["1500", "128000"])
def test_real_chats_give_valid_requests(shared_data, capsys, name, limit):
    books = ["--lorebook", str(shared_data / "lorebooks" / "Eldoria.json")]
    pv = _preview(capsys, "--chat", str(shared_data / "chats" / name), "--context-limit", limit,
                  "--reply-reserve", "200", *books)
    if pv["messages"]:
        assert request_problems(pv["messages"]) == []


def test_an_interceptor_cannot_split_a_tool_batch():
    from engine.pipeline import default_registries, preview
    from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest, ToolCall, ToolFunction

    regs = default_registries()

    def wedge(messages, ctx):  # puts a note right after every assistant tool call
        out = []
        for m in messages:
            out.append(m)
            if m.get("tool_calls"):
                out.append({"role": "system", "content": "WEDGE"})
        return out, []

    def half(messages, ctx):  # drops one result of a parallel batch
        return [m for m in messages if m.get("tool_call_id") != "w2"], []

    def note(messages, ctx):  # a harmless one: a note at the very end
        return [*messages, {"role": "system", "content": "NOTE"}], []

    for name, fn in (("wedge", wedge), ("half", half), ("note", note)):
        regs.interceptors.register(name, fn)
    calls = [ToolCall(id=i, function=ToolFunction(name="f", arguments="{}")) for i in ("w1", "w2")]
    chat = Chat(messages=[ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", tool_calls=calls),
                          ChatMessage(role="tool", tool_call_id="w1", content="1"),
                          ChatMessage(role="tool", tool_call_id="w2", content="2"),
                          ChatMessage(role="user", content="and?")])
    pv = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o")), registries=regs)
    assert request_problems(pv.messages) == []
    sent = json.dumps(pv.messages)
    assert "WEDGE" not in sent and '"w2"' in sent and "NOTE" in sent
    assert sum("would split a tool call" in d for d in pv.diagnostics) == 2


def test_engine_tool_sequence_check_agrees_with_the_validator():
    from engine.shifting import tool_sequence_problems

    call = {"role": "assistant", "content": None, "tool_calls": _call("a", "b")}
    ra = {"role": "tool", "tool_call_id": "a", "content": "1"}
    rb = {"role": "tool", "tool_call_id": "b", "content": "2"}
    user = {"role": "user", "content": "x"}
    for msgs, ok in (([user, call, rb, ra, user], True), ([user, call, ra, user, rb], False),
                     ([user, call, ra], False), ([ra, user], False)):
        assert (tool_sequence_problems(msgs) == []) is ok
        assert (request_problems(msgs) == []) is ok
