"""Compaction at generation, end to end: real SQLite library → real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from engine.cli import main as cli_main
from engine.compaction import thresholds
from engine.generation import ProviderConfig, generate_and_store
from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, ToolCall, ToolFunction
from engine.storage import open_store
from tests.fake_provider import DEFAULT_SUMMARY, UPSTREAM_MARKER, FakeProviderServer

KEY = "sk-test-compaction"
TRACE = """Traceback (most recent call last):
  File "/home/u/proj-fix-123/apps/api/mapper.py", line 42, in map_row
    return row["id"]
KeyError: 'id'"""


@pytest.fixture
def store(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("LOOMSCOPE_API_KEY", KEY)
    monkeypatch.setenv("LOOMSCOPE_DB", str(tmp_path / "lib.sqlite3"))
    s = open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def server():
    with FakeProviderServer("answer", stall_s=10, reply_text="Done.") as srv:
        yield srv


def kinds(server):
    return [r["kind"] for r in server.requests]


def settings(limit, reserve, **opts):
    return ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=reserve, strategy="compact",
                           strategy_options={"retry_delay_s": 0.05, **opts})


def words(n, word="harbor"):
    return " ".join([word] * n)


def long_chat(n=40, size=60) -> Chat:
    msgs = [ChatMessage(role="system", content="You are a ship's log.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"entry {i}: " + words(size))
             for i in range(n)]
    msgs.append(ChatMessage(role="user", content="Next entry?"))
    return Chat(messages=msgs)


def provider(server):
    return ProviderConfig(base_url=server.base_url, model="gpt-4o", api_key=KEY, stream=False)


def test_compaction_summarizes_then_generates_and_the_next_turn_reuses_the_summary(store, server):
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    events = []
    res = generate_and_store(store, chat_id, provider(server), on_progress=events.append)
    audit = res.audit
    assert kinds(server) == ["summary", "chat"]
    assert audit.status == "completed" and audit.compaction["status"] == "compacted"
    trigger, target = thresholds(2000)
    assert audit.compaction["prompt_tokens_before"] >= trigger > audit.prompt_tokens
    assert audit.prompt_tokens <= target
    [summary] = [b for b in audit.blocks if b.kind == "summary"]
    assert summary.status == "kept" and DEFAULT_SUMMARY in summary.text
    lo, hi = audit.compaction["range"]
    folded = [b for b in audit.blocks if b.status == "truncated"]
    assert folded and {b.message_index for b in folded} == set(range(lo, hi + 1))
    assert all(b.reason == "SUMMARIZED" and b.summary_id == summary.id for b in folded)
    # the newest 10 messages are verbatim
    sent = server.requests[1]["body"]["messages"]
    assert any(DEFAULT_SUMMARY in m["content"] for m in sent)
    chat = store.chats.get(chat_id).chat
    for m in chat.messages[-11:-1]:  # the 10 newest before the reply
        assert any(s["content"] == m.content for s in sent)
    # the progress step: running, then done
    comp = [e for e in events if e.step == "compaction"]
    assert comp[0].state == "running" and comp[0].label == "Compacting context…"
    assert comp[-1].state == "done" and comp[-1].label.endswith("done")
    assert len({e.step_id for e in comp}) == 1
    # stored with the chat; the next preview and generation reuse it (no new summary request)
    state = store.compaction.get(chat_id)
    assert state.summary is not None and state.summary.id == audit.compaction["summary_id"]
    pv = preview(store.chats.build_request(chat_id))
    assert any(b.kind == "summary" and b.status == "kept" for b in pv.blocks)
    assert pv.strategy_info["summary"]["id"] == state.summary.id
    res2 = generate_and_store(store, chat_id, provider(server), message="And then?")
    assert kinds(server) == ["summary", "chat", "chat"]
    assert res2.audit.compaction["status"] == "not_needed" and res2.audit.compaction["summary_id"] == state.summary.id


def test_fails_twice_then_answers_exactly_three_requests_and_a_fallback(store, server, caplog):
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    server.script.extend(["429", "429"])
    events = []
    with caplog.at_level(logging.WARNING, logger="loomscope.compaction"):
        res = generate_and_store(store, chat_id, provider(server), on_progress=events.append)
    assert [r["mode"] for r in server.requests] == ["429", "429", "answer"]
    assert kinds(server) == ["summary", "summary", "chat"]
    audit = res.audit
    assert audit.status == "completed"
    assert audit.compaction["status"] == "fell_back" and audit.compaction["fallback"] == "truncation"
    assert [a["error_code"] for a in audit.compaction["attempts"]] == ["PROVIDER_RATE_LIMITED"] * 2
    assert audit.prompt_tokens <= thresholds(2000)[1]  # truncated to the target
    assert not any(b.kind == "summary" for b in audit.blocks)
    assert "fell back to truncation" in caplog.text
    # no error text anywhere in the chat or what was sent
    chat = store.chats.get(chat_id).chat
    dumped = json.dumps(chat.model_dump(mode="json")) + json.dumps(audit.provider_messages)
    assert UPSTREAM_MARKER not in dumped and "Rate limit" not in dumped
    comp = [e for e in events if e.step == "compaction"]
    assert comp[-1].label == "Compacting context… fell back to truncation" and comp[-1].state == "failed"
    assert store.compaction.get(chat_id).failures == 1


def test_summary_over_its_cap_is_re_requested_once_then_truncation_and_the_prompt_fits(store, server):
    server.summary_text = "The crew logged the harbor at length and in great detail. " * 45  # ~509 tokens
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200, summary_cap_tokens=20))
    res = generate_and_store(store, chat_id, provider(server))
    assert kinds(server) == ["summary", "summary", "chat"]
    audit = res.audit
    assert [a["outcome"] for a in audit.compaction["attempts"]] == ["over_cap", "over_cap"]
    assert audit.compaction["attempts"][0]["tokens"] > 500
    assert audit.compaction["status"] == "fell_back"
    assert audit.prompt_tokens <= audit.budget and audit.prompt_tokens <= thresholds(2000)[1]
    assert not any(server.summary_text[:40] in m["content"] for m in audit.provider_messages)


def test_path_and_error_line_survive_a_summary_that_drops_them(store, server):
    msgs = [ChatMessage(role="system", content="You are a coding agent.")]
    msgs.append(ChatMessage(role="user", content="The API crashes when mapping rows; please fix it. " + words(80, "context")))
    msgs.append(ChatMessage(role="assistant", tool_calls=[ToolCall(id="c1", function=ToolFunction(
        name="run", arguments='{"cmd": "pytest apps/api"}'))]))
    msgs.append(ChatMessage(role="tool", tool_call_id="c1", content=f"{words(60, 'collected')}\n{TRACE}\n1 failed"))
    for i in range(14):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"step {i} " + words(50, "edit")))
    msgs.append(ChatMessage(role="user", content="Is it fixed?"))
    server.summary_text = "The assistant was editing mapper.py."
    chat_id = store.chats.add(Chat(messages=msgs), settings=settings(1200, 100))
    res = generate_and_store(store, chat_id, provider(server))
    assert res.audit.compaction["status"] in ("compacted", "compacted_then_truncated")
    sent = json.dumps(server.requests[-1]["body"]["messages"])
    text = "\n".join(m["content"] or "" for m in server.requests[-1]["body"]["messages"])
    assert "/home/u/proj-fix-123/apps/api/mapper.py" in text and "KeyError: 'id'" in text, sent
    assert res.audit.compaction["reappended"] >= 1  # the whole trace (it fits the cap)


def test_window_too_large_truncates_in_the_same_pass_and_does_not_refire(store, server):
    # limit 1,000, buffer 8 % → trigger 736, target 650; the newest 10 messages hold ~700 tokens,
    # one tool result of 500
    msgs = [ChatMessage(role="system", content="Be brief.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=words(45, "old")) for i in range(6)]
    window = [
        ChatMessage(role="user", content=words(20, "look")),
        ChatMessage(role="assistant", tool_calls=[ToolCall(id="t1", function=ToolFunction(name="fetch", arguments="{}"))]),
        ChatMessage(role="tool", tool_call_id="t1", content=words(494, "row")),
        ChatMessage(role="assistant", content=words(20, "seen")),
        ChatMessage(role="user", content=words(20, "more")),
        ChatMessage(role="assistant", content=words(20, "sure")),
        ChatMessage(role="user", content=words(20, "again")),
        ChatMessage(role="assistant", content=words(20, "fine")),
        ChatMessage(role="user", content=words(20, "last")),
        ChatMessage(role="user", content="now?"),
    ]
    msgs += window
    chat_id = store.chats.add(Chat(messages=msgs), settings=settings(1000, 80, summary_cap_tokens=60))
    pv0 = preview(store.chats.build_request(chat_id))
    window_tokens = sum(b.tokens for b in pv0.blocks if b.message_index is not None and b.message_index >= 7)
    assert 650 < window_tokens < 736 + 30
    res = generate_and_store(store, chat_id, provider(server))
    audit = res.audit
    assert kinds(server) == ["summary", "chat"]
    assert audit.compaction["status"] == "compacted_then_truncated"
    assert audit.prompt_tokens <= 650
    by_index = {b.message_index: b for b in audit.blocks if b.message_index is not None}
    call, result = by_index[8], by_index[9]
    assert call.status == result.status  # the pair goes or stays together
    # next turn: no new compaction without progress
    res2 = generate_and_store(store, chat_id, provider(server), message="ok")
    assert kinds(server) == ["summary", "chat", "chat"]
    assert res2.audit.compaction["status"] == "no_progress"
    assert res2.audit.prompt_tokens <= 650


def test_three_failures_in_a_row_stop_auto_compaction_and_say_so(store, server):
    server.summary_text = ""  # an empty summary is a failure
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    for turn in range(3):
        res = generate_and_store(store, chat_id, provider(server), message=f"turn {turn}")
        assert res.audit.compaction["status"] == "fell_back"
    assert store.compaction.get(chat_id).failures == 3 and res.audit.compaction.get("disabled")
    n = len(server.requests)
    res = generate_and_store(store, chat_id, provider(server), message="turn 4")
    assert len(server.requests) == n + 1 and kinds(server)[-1] == "chat"
    assert res.audit.compaction["status"] == "disabled"
    assert any("auto-compaction stopped" in w for w in res.audit.warnings)
    store.compaction.reset_failures(chat_id)
    server.summary_text = DEFAULT_SUMMARY
    res = generate_and_store(store, chat_id, provider(server), message="turn 5")
    assert res.audit.compaction["status"] == "compacted"


def test_a_summary_is_removable_and_the_removal_undoable(store, server):
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    generate_and_store(store, chat_id, provider(server))
    summary = store.compaction.get(chat_id).summary
    removed = store.compaction.remove_summary(chat_id)
    assert removed.id == summary.id and store.compaction.get(chat_id).summary is None
    pv = preview(store.chats.build_request(chat_id))
    assert not any(b.kind == "summary" for b in pv.blocks)
    assert pv.strategy_info["fire"] and any("compaction runs at generation" in w for w in pv.warnings)
    store.compaction.restore_summary(chat_id, removed)
    pv = preview(store.chats.build_request(chat_id))
    assert any(b.kind == "summary" and b.status == "kept" for b in pv.blocks)


def test_an_edited_covered_message_makes_the_summary_stale(store, server):
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    generate_and_store(store, chat_id, provider(server))
    first = store.compaction.get(chat_id).summary.first
    store.messages.update(chat_id, first, ChatMessage(role="user", content="rewritten"))
    pv = preview(store.chats.build_request(chat_id))
    assert not any(b.kind == "summary" for b in pv.blocks)
    assert any("not used" in w for w in pv.warnings)


def test_a_preview_never_calls_the_provider_and_writes_nothing(store, server):
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    before = store.chats.get(chat_id)
    pv = preview(store.chats.build_request(chat_id))
    assert server.requests == []
    assert store.chats.get(chat_id).updated_at == before.updated_at
    assert pv.strategy_info["fire"] and pv.prompt_tokens <= thresholds(2000)[1]


def test_cli_generate_compact_on_the_airline_chat(shared_data, store, server, capsys):
    """Acceptance: 62-message airline chat, context 6,000 / reply 500."""
    code = cli_main(["import", str(shared_data / "chats" / "airline-longest-task.json"), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    chat_id = next(r["id"] for r in json.loads(out) if r["kind"] == "chat")
    assert len(store.chats.get(chat_id).chat.messages) == 62
    code = cli_main(["generate", chat_id, "--strategy", "compact", "--context-limit", "6000", "--reply-reserve", "500",
                     "--base-url", server.base_url, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert kinds(server) == ["summary", "chat"]
    assert any(DEFAULT_SUMMARY in (m["content"] or "") for m in server.requests[1]["body"]["messages"])
    assert doc["compaction"]["status"] == "compacted" and doc["prompt_tokens"] <= 3900
    code = cli_main(["audit", chat_id, "--format", "json"])
    audit = json.loads(capsys.readouterr()[0])
    assert any(b["kind"] == "summary" and b["status"] == "kept" for b in audit["blocks"])
    assert audit["prompt_tokens"] <= 3900 and audit["compaction"]["range"][0] >= 1


def test_cli_generate_compact_fails_twice_then_answers(shared_data, store, server, capsys):
    cli_main(["import", str(shared_data / "chats" / "airline-longest-task.json"), "--format", "json"])
    chat_id = next(r["id"] for r in json.loads(capsys.readouterr()[0]) if r["kind"] == "chat")
    stored = store.chats.get(chat_id).settings
    store.chats.save_settings(chat_id, stored.model_copy(update={"strategy_options": {"retry_delay_s": 0.1}}))
    server.script.extend(["429", "429"])
    code = cli_main(["generate", chat_id, "--strategy", "compact", "--context-limit", "6000", "--reply-reserve", "500",
                     "--base-url", server.base_url, "--format", "table"])
    _out, err = capsys.readouterr()
    assert code == 0, err
    assert len(server.requests) == 3
    assert "compaction: fell back to truncation" in err and "PROVIDER_RATE_LIMITED" in err
    audit = store.audits.get(chat_id)
    assert audit.status == "completed" and audit.compaction["status"] == "fell_back"
    assert audit.prompt_tokens <= 3900


def test_summary_model_and_the_summarizers_own_budget(store, server):
    # the summarizer is a small-context model: its request is fitted to 600 tokens of context
    chat_id = store.chats.add(long_chat(n=40, size=60), settings=settings(
        2000, 200, summary_model="gpt-3.5-turbo-0301", summary_context_limit=600, summary_cap_tokens=100))
    res = generate_and_store(store, chat_id, provider(server))
    summary_req, chat_req = server.requests
    assert summary_req["body"]["model"] == "gpt-3.5-turbo-0301" and chat_req["body"]["model"] == "gpt-4o"
    assert summary_req["body"]["max_tokens"] == 100 and summary_req["body"]["stream"] is False
    from engine.tokenizers import default_tokenizer_registry, num_tokens_from_messages

    profile = default_tokenizer_registry().get("cl100k_base")
    assert num_tokens_from_messages(profile, summary_req["body"]["messages"]) + 100 <= 600
    rec = res.audit.compaction
    assert rec["input_cut"] > 0 and rec["model"] == "gpt-3.5-turbo-0301"
    # messages the summarizer never saw are not claimed as summarized: they stay history
    lo, _hi = rec["range"]
    assert lo > 1 and res.audit.compaction["status"] in ("compacted", "compacted_then_truncated")
    assert all(b.status != "truncated" for b in res.audit.blocks if b.message_index is not None
               and b.message_index < lo)


def test_cancel_while_summarizing_ends_cancelled_and_compacts_nothing(store, server):
    import threading

    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    server.script.append("stall")
    cancel = threading.Event()
    events = []

    def on_progress(e):
        events.append(e)
        if e.step == "compaction" and e.state == "running":
            threading.Timer(0.2, cancel.set).start()

    res = generate_and_store(store, chat_id, provider(server), on_progress=on_progress, cancel=cancel)
    assert res.audit.status == "cancelled" and res.audit.compaction == {"status": "cancelled"}
    assert [e.state for e in events if e.step == "compaction"][-1] == "cancelled"
    assert store.compaction.get(chat_id).summary is None and kinds(server) == ["summary"]


def test_compaction_ends_at_the_target_even_when_the_summary_gets_below_the_trigger(store, server):
    # 20 kept-verbatim messages of ~64 tokens: after the summary the prompt is between the
    # target (1,300) and the trigger (1,472), so the same pass truncates to the target
    chat_id = store.chats.add(long_chat(n=40, size=60), settings=settings(2000, 200, keep_recent=20))
    res = generate_and_store(store, chat_id, provider(server))
    rec = res.audit.compaction
    _trigger, target = thresholds(2000)
    assert rec["status"] == "compacted" and rec["truncated_to_target"]
    assert res.audit.prompt_tokens <= target
    assert any(b.status == "excluded" and b.reason == "HISTORY_OLDEST_FIRST" for b in res.audit.blocks)
    # the next preview (not right after a compaction) uses the budget again
    pv = preview(store.chats.build_request(chat_id))
    assert pv.prompt_tokens > target and pv.strategy_info["reason"] == "below_trigger"


def test_a_branch_keeps_the_summary_only_when_it_covers_nothing_after_the_branch_point(store, server):
    chat_id = store.chats.add(long_chat(), settings=settings(2000, 200))
    generate_and_store(store, chat_id, provider(server))
    summary = store.compaction.get(chat_id).summary
    inside = store.chats.branch(chat_id, summary.last - 1)
    assert store.compaction.get(inside).summary is None
    pv = preview(store.chats.build_request(inside))
    assert not any("not used" in w for w in pv.warnings)
    after = store.chats.branch(chat_id, summary.last + 3)
    assert store.compaction.get(after).summary.id == summary.id
    assert any(b.kind == "summary" for b in preview(store.chats.build_request(after)).blocks)
