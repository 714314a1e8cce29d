"""Generation end to end: pipeline → real HTTP server on 127.0.0.1 → audit in a real library.

The ``library`` fixture runs each test on a real SQLite file and, when ``LOOMSCOPE_TEST_DB`` is
set (``make test-postgres``), on a fresh PostgreSQL database too (see ``tests/dbtest.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.cli import main as cli_main
from engine.generation import ProviderConfig, generate, generate_and_store
from engine.schema import Chat, ChatMessage, ContextSettings
from engine.storage import Store, open_store
from tests.dbtest import BACKENDS, library_url, query, stored_text
from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer

KEY = "sk-test-NEVER-STORE-ME-42"
ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "consult_catalogue", "description": "Search.",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def small_chat(n: int = 6, tools: bool = True) -> Chat:
    msgs = [ChatMessage(role="system", content="You are Marisol, an archivist.")]
    for i in range(n):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"Message {i}: " + "fog " * 20))
    msgs.append(ChatMessage(role="user", content="What is in the parcel?"))
    return Chat(messages=msgs, tools=TOOLS if tools else [], user_name="Wren", character_name="Marisol")


SETTINGS = ContextSettings(model="gpt-4o", context_limit=4096, reply_reserve=512)


@pytest.fixture(params=BACKENDS)
def library(request, tmp_path: Path, monkeypatch):
    """``(store, chat_id, url)``: a library holding one chat, on each backend."""
    monkeypatch.delenv("LOOMSCOPE_DB", raising=False)
    with library_url(request.param, tmp_path) as url:
        store = open_store(url, seed=False)
        chat_id = store.chats.add(small_chat(), settings=SETTINGS)
        try:
            yield store, chat_id, url
        finally:
            store.close()


@pytest.fixture
def server():
    with FakeProviderServer("answer", stall_s=10) as srv:
        yield srv


def audit_rows(url: str) -> list[tuple]:
    """``(chat_id, status, error_code, data)`` of every stored audit (``data`` as a JSON string)."""
    rows = query(url, "SELECT chat_id, status, error_code, data FROM audits")
    return [(*r[:3], r[3] if isinstance(r[3], str) else json.dumps(r[3])) for r in rows]


CASES = [
    ("answer", "completed", None),
    ("stream", "completed", None),
    ("stall", "failed", "PROVIDER_TIMEOUT"),
    ("401", "failed", "PROVIDER_AUTHENTICATION"),
    ("429", "failed", "PROVIDER_RATE_LIMITED"),
    ("500", "failed", "PROVIDER_SERVER_ERROR"),
    ("400_context", "failed", "PROVIDER_CONTEXT_LENGTH_EXCEEDED"),
    ("malformed", "failed", "PROVIDER_BAD_RESPONSE"),
    ("drop", "failed", "PROVIDER_NETWORK_ERROR"),
    ("drop_stream", "failed", "PROVIDER_NETWORK_ERROR"),
]


@pytest.mark.parametrize(("mode", "status", "code"), CASES)
def test_each_provider_outcome_leaves_one_clean_audit(library, server, mode, status, code) -> None:
    store, chat_id, db = library
    store.audits.put(_first_audit(store, chat_id, server))  # an older audit that must be replaced
    server.mode = mode
    before = len(store.chats.get(chat_id).chat.messages)
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", KEY, timeout_s=0.8))
    assert (result.audit.status, result.audit.error_code) == (status, code)
    rows = audit_rows(db)
    assert len(rows) == 1 and rows[0][:3] == (chat_id, status, code)
    stored = json.loads(rows[0][3])
    assert stored["generation_id"] == result.audit.generation_id
    dumped = json.dumps(stored)
    assert UPSTREAM_MARKER not in dumped and KEY not in dumped
    assert KEY not in stored_text(db)
    assert stored["finished_at"] and stored["created_at"] <= stored["finished_at"]
    # the audit records what was actually sent
    last = server.requests[-1]["body"]
    assert stored["provider_messages"] == last["messages"] and stored["tools"] == last["tools"] == TOOLS
    messages = store.chats.get(chat_id).chat.messages
    if status == "completed":
        assert result.reply is not None and messages[-1].content == server.reply_text
        assert len(messages) == before + 1 and result.reply_index == before
    else:
        assert result.reply is None and len(messages) == before


def _first_audit(store: Store, chat_id: str, server: FakeProviderServer):
    result = generate(store.chats.build_request(chat_id), ProviderConfig(server.base_url, "gpt-4o", KEY), chat_id=chat_id)
    assert result.audit.status == "completed"
    return result.audit


def test_audit_fields_match_the_preview(library, server) -> None:
    from engine.pipeline import preview

    store, chat_id, _ = library
    request = store.chats.build_request(chat_id)
    pv = preview(request)
    created: list = []

    def on_created(audit) -> None:
        created.append((audit.status, len(server.requests)))

    result = generate(request, ProviderConfig(server.base_url + "/", "", KEY), chat_id=chat_id,
                      on_audit_created=on_created)
    assert created == [("pending", 0)]  # the audit exists before any network call
    a = result.audit
    assert a.model == "gpt-4o" and a.provider == server.base_url
    assert (a.context_limit, a.reply_reserve, a.prompt_tokens, a.strategy) == (
        pv.context_limit, pv.reply_reserve, pv.prompt_tokens, pv.strategy)
    assert a.tokenizer.profile == pv.tokenizer.profile and a.tokenizer.approximate is False
    assert [b.model_dump() for b in a.blocks] == [b.model_dump() for b in pv.blocks]
    assert [b.position for b in a.blocks] == list(range(len(a.blocks)))
    assert a.provider_messages == pv.messages
    assert a.usage == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    fields = set(json.loads(a.model_dump_json()))
    assert {"generation_id", "chat_id", "provider", "model", "status", "error_code", "created_at", "finished_at",
            "context_limit", "reply_reserve", "safety_margin", "prompt_tokens", "strategy", "tokenizer", "blocks",
            "provider_messages", "interceptor_diagnostics"} <= fields


def test_budget_exceeded_sends_nothing(library, server) -> None:
    store, chat_id, db = library
    tight = SETTINGS.model_copy(update={"context_limit": 200, "reply_reserve": 150})
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", KEY), settings=tight)
    assert server.requests == []
    assert (result.audit.status, result.audit.error_code) == ("failed", "TOKEN_BUDGET_EXCEEDED")
    assert result.audit.finished_at is not None and result.reply is None
    assert [r[1:3] for r in audit_rows(db)] == [("failed", "TOKEN_BUDGET_EXCEEDED")]


def test_progress_events_stream_then_done(library, server) -> None:
    store, chat_id, _ = library
    server.mode = "stream"
    events = []
    generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", KEY), on_progress=events.append)
    assert {e.step for e in events} == {"stream"} and len({e.step_id for e in events}) == 1
    assert events[0].state == "running" and events[-1].state == "done"
    assert events[-1].text == server.reply_text
    texts = [e.text for e in events if e.state == "running" and e.text]
    assert texts == sorted(texts, key=len) and len(texts) >= 3


def test_cancel_closes_audit_as_cancelled(library, server) -> None:
    store, chat_id, db = library
    server.mode = "stall"
    cancel = threading.Event()
    events = []
    threading.Timer(0.3, cancel.set).start()
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", KEY, timeout_s=30),
                                cancel=cancel, on_progress=events.append)
    assert (result.audit.status, result.audit.error_code) == ("cancelled", "CANCELLED")
    assert events[-1].state == "cancelled"
    assert [r[1:3] for r in audit_rows(db)] == [("cancelled", "CANCELLED")]


def test_message_is_appended_and_tool_call_reply_stored(library, server) -> None:
    store, chat_id, _ = library
    server.mode = "tool_call"
    n = len(store.chats.get(chat_id).chat.messages)
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", None), message="Look it up.")
    msgs = store.chats.get(chat_id).chat.messages
    assert msgs[n].role == "user" and msgs[n].content == "Look it up."
    assert msgs[n + 1].tool_calls and msgs[n + 1].tool_calls[0].id == "call_fake_1"
    assert server.requests[0]["body"]["messages"][-1]["content"] == "Look it up."
    assert result.audit.finish_reason == "tool_calls"


def test_interceptor_diagnostics_are_audited(library, server) -> None:
    from engine.pipeline import default_registries

    store, chat_id, _ = library
    reg = default_registries()

    def shout(messages, ctx):
        return [*messages, {"role": "system", "content": "Reply in capitals."}], ["added a style note"]

    cleanup = reg.interceptors.register("shout", shout)
    try:
        result = generate(store.chats.build_request(chat_id), ProviderConfig(server.base_url, "gpt-4o", KEY),
                          chat_id=chat_id, registries=reg)
    finally:
        cleanup()
    assert any("added a style note" in d for d in result.audit.interceptor_diagnostics)
    sent = server.requests[0]["body"]["messages"]
    assert sent[-1]["content"] == "Reply in capitals." and result.audit.provider_messages == sent


# ------------------------------------------------------------------------------------------ CLI


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_generate_exit_codes_and_audit(library, server, capsys, monkeypatch) -> None:
    _store, chat_id, db = library
    monkeypatch.setenv("LOOMSCOPE_API_KEY", KEY)
    monkeypatch.setenv("LOOMSCOPE_DB", str(db))
    server.reply_text = "A plain reply."  # it becomes chat history; the marker must only come from error bodies
    code, out, err = run_cli(capsys, "generate", chat_id, "--base-url", server.base_url, "--format", "json",
                             "--message", "Open it.")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "completed" and doc["reply"]["content"] == server.reply_text
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"

    server.mode = "429"
    code, out, err = run_cli(capsys, "generate", chat_id, "--base-url", server.base_url, "--format", "json")
    assert code == 4 and "PROVIDER_RATE_LIMITED" in err and UPSTREAM_MARKER not in err + out

    code, out, err = run_cli(capsys, "audit", chat_id, "--format", "json")
    assert code == 0
    audit = json.loads(out)
    assert (audit["status"], audit["error_code"]) == ("failed", "PROVIDER_RATE_LIMITED")
    assert set(audit["tokenizer"]) >= {"profile", "approximate"}
    assert KEY not in out and UPSTREAM_MARKER not in out

    n_requests = len(server.requests)
    code, out, err = run_cli(capsys, "generate", chat_id, "--base-url", server.base_url,
                             "--context-limit", "100", "--reply-reserve", "90", "--format", "json")
    assert code == 3 and "TOKEN_BUDGET_EXCEEDED" in err and len(server.requests) == n_requests

    code, _, err = run_cli(capsys, "generate", "no-such-chat", "--base-url", server.base_url)
    assert code == 2 and "CHAT_NOT_FOUND" in err
    code, _, err = run_cli(capsys, "generate", chat_id, "--strategy", "nope", "--base-url", server.base_url)
    assert code == 2 and "UNKNOWN_STRATEGY" in err

    # the table form prints the blocks
    code, out, _ = run_cli(capsys, "audit", chat_id, "--format", "table")
    assert code == 0 and "TOKEN_BUDGET_EXCEEDED" in out
    assert KEY not in stored_text(db)


def test_cli_library_commands(tmp_path, capsys, monkeypatch) -> None:
    db = tmp_path / "lib.db"
    monkeypatch.setenv("LOOMSCOPE_DB", str(db))
    chat_file = tmp_path / "chat.json"
    chat_file.write_text(json.dumps([{"role": "user", "content": "Hello"}]))
    code, out, err = run_cli(capsys, "import", str(chat_file), "--format", "json")
    assert code == 0, err
    [ref] = json.loads(out)
    assert set(ref) == {"kind", "id", "name", "status"} and ref["kind"] == "chat" and ref["status"] == "added"
    code, out, _ = run_cli(capsys, "chats", "--format", "json")
    [row] = json.loads(out)
    assert {"id", "title", "character", "messages", "has_audit"} <= set(row)
    assert (row["id"], row["messages"], row["has_audit"]) == (ref["id"], 1, False)
    code, _, err = run_cli(capsys, "audit", ref["id"])
    assert code == 2 and "AUDIT_NOT_FOUND" in err
    code, _, err = run_cli(capsys, "audit", "missing-chat")
    assert code == 2 and "CHAT_NOT_FOUND" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    code, _, err = run_cli(capsys, "import", str(chat_file), str(bad))
    assert code == 2 and "IMPORT_" in err and str(bad) in err
    code, out, _ = run_cli(capsys, "chats", "--format", "json")
    assert len(json.loads(out)) == 1  # the batch with the bad file stored nothing
    code, out, _ = run_cli(capsys, "delete-chat", ref["id"], "--format", "json")
    assert code == 0 and json.loads(out) == {"deleted": ref["id"]}
    code, _, err = run_cli(capsys, "delete-chat", ref["id"])
    assert code == 2 and "CHAT_NOT_FOUND" in err
    # --db overrides the environment
    other = tmp_path / "other.db"
    code, out, _ = run_cli(capsys, "chats", "--db", f"sqlite:///{other}", "--format", "json")
    assert code == 0 and json.loads(out) == [] and other.exists()


def _default_sigint() -> None:
    """Give the child a terminal-like SIGINT: a shell running the suite in the background (cmd &
    without job control) starts it with SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler, so the Ctrl+C under test would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
def test_cli_ctrl_c_cancels_with_130(library, server) -> None:
    _store, chat_id, db = library
    server.mode = "stall"
    env = {**os.environ, "LOOMSCOPE_DB": str(db), "LOOMSCOPE_API_KEY": KEY, "LOOMSCOPE_NO_KEYRING": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "generate", chat_id, "--base-url", server.base_url,
                             "--format", "json"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 20
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.requests, "the CLI never reached the server"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "CANCELLED" in err
    assert [r[1:3] for r in audit_rows(db)] == [("cancelled", "CANCELLED")]


# ------------------------------------------------------------------ review fixes


def test_invalid_settings_leave_the_chat_untouched(library, server) -> None:
    from engine.errors import SettingsError

    store, chat_id, _ = library
    before = store.chats.get(chat_id).chat.messages
    bad = SETTINGS.model_copy(update={"context_limit": 100})  # reply reserve 512 ≥ limit
    with pytest.raises(SettingsError):
        generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", None),
                           message="Hello?", settings=bad)
    assert store.chats.get(chat_id).chat.messages == before
    assert server.requests == [] and store.audits.get(chat_id) is None


def test_cli_generate_with_unknown_strategy_does_not_append_the_message(library, server, capsys,
                                                                         monkeypatch) -> None:
    store, chat_id, db = library
    monkeypatch.setenv("LOOMSCOPE_API_KEY", KEY)
    n = len(store.chats.get(chat_id).chat.messages)
    code, _out, err = run_cli(capsys, "generate", chat_id, "--db", str(db), "--base-url", server.base_url,
                              "--message", "Hi", "--strategy", "no-such-strategy")
    assert code == 2 and "UNKNOWN_STRATEGY" in err
    assert len(store.chats.get(chat_id).chat.messages) == n


def test_message_is_kept_with_a_failed_generation(library, server) -> None:
    store, chat_id, _ = library
    server.mode = "500"
    n = len(store.chats.get(chat_id).chat.messages)
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", None), message="Again?")
    assert result.audit.error_code == "PROVIDER_SERVER_ERROR" and result.reply_index is None
    msgs = store.chats.get(chat_id).chat.messages
    assert len(msgs) == n + 1 and msgs[n].content == "Again?"
    assert store.audits.get(chat_id).generation_id == result.audit.generation_id


def test_tool_call_with_object_arguments_completes_and_is_stored(library) -> None:
    from tests.engine.providers.test_client import _completion, _RawServer

    store, chat_id, _ = library
    srv = _RawServer(_completion([{"id": "c1", "type": "function",
                                   "function": {"name": "consult_catalogue", "arguments": {"q": "atlas"}}}]))
    try:
        result = generate_and_store(store, chat_id, ProviderConfig(srv.base_url, "gpt-4o", None, stream=False))
    finally:
        srv.close()
    assert result.audit.status == "completed"
    stored = store.chats.get(chat_id).chat.messages[result.reply_index]
    assert stored.tool_calls[0].function.arguments == '{"q": "atlas"}'
    assert store.audits.get(chat_id).generation_id == result.audit.generation_id


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "soon"])
def test_cli_generate_rejects_a_bad_timeout_before_anything_runs(library, server, capsys, timeout) -> None:
    store, chat_id, db = library
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "generate", chat_id, "--db", str(db), "--base-url", server.base_url,
                "--timeout", timeout)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "USAGE" in err and "--timeout" in err and err.count("\n") == 1
    assert server.requests == [] and store.audits.get(chat_id) is None


def test_cli_generate_against_openai_without_a_key_says_so(tmp_path, monkeypatch, capsys):
    from engine.cli import main
    from engine.storage import open_store

    for var in ("LOOMSCOPE_API_KEY", "OPENAI_API_KEY", "LOOMSCOPE_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")
    url = f"sqlite:///{tmp_path / 'lib.db'}"
    store = open_store(url)
    chat_id = store.chats.summaries()[0].id if store.chats.summaries() else None
    if chat_id is None:
        from engine.schema import Chat, ChatMessage
        chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]))
    store.close()
    code = main(["generate", chat_id, "--db", url])
    err = capsys.readouterr().err
    assert code == 4
    assert "NO_API_KEY" in err and len(err.strip().splitlines()) == 1


def test_empty_prompt_sends_nothing(tmp_path: Path, server) -> None:
    from engine.schema import Chat

    store = open_store(f"sqlite:///{tmp_path / 'empty.sqlite3'}", seed=False)
    try:
        chat_id = store.chats.add(Chat(), settings=SETTINGS)
        result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", KEY))
        assert server.requests == []
        assert (result.audit.status, result.audit.error_code) == ("failed", "EMPTY_PROMPT")
        assert store.audits.get(chat_id).error_code == "EMPTY_PROMPT"
    finally:
        store.close()


def test_sticky_world_info_survives_to_the_next_turn(tmp_path: Path, server) -> None:
    """A sticky entry's state is stored with a completed generation (chat metadata
    ``timedWorldInfo``, as SillyTavern keeps it), so the next preview still includes it."""
    from engine.pipeline import preview
    from engine.schema import Chat, ChatMessage, Lorebook, LorebookEntry

    store = open_store(f"sqlite:///{tmp_path / 'sticky.sqlite3'}", seed=False)
    try:
        book_id = store.lorebooks.add(Lorebook(name="Arms", entries=[
            LorebookEntry(uid=1, keys=["sword"], content="The sword is cursed.", sticky=3)]))
        chat = Chat(messages=[ChatMessage(role="user", content="I draw my sword.")])
        chat_id = store.chats.add(chat, settings=SETTINGS, lorebook_ids=[book_id])
        result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", KEY))
        assert result.audit.status == "completed"
        assert store.chats.get(chat_id).chat.metadata.get("timedWorldInfo")
        store.messages.append(chat_id, ChatMessage(role="user", content="I walk on."))
        pv = preview(store.chats.build_request(chat_id))
        lore = [b for b in pv.blocks if b.kind == "lorebook"]
        assert [(b.status, b.reason) for b in lore] == [("kept", "LOREBOOK_STICKY")]
    finally:
        store.close()
