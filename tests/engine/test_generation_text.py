"""Text Completion generation end to end (issue 26 item 5): pipeline → ``POST /v1/completions`` on a real
HTTP server on 127.0.0.1 → audit in a real library.

The preview is the pipeline's own, turned into a Text Completion one (one prompt string, spans, stop
strings) by ``tests/tc_preview.py`` at the point where generation prepares it, so these tests hold
whichever engine builds the string; the test that reads the imported SillyTavern folder checks the
engine's own string when the engine builds one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engine.pipeline as pipeline
from engine.cli import main as cli_main
from engine.generation import ProviderConfig, cut_at_stop, generate_and_store
from engine.schema import Chat, ChatMessage, ContextSettings
from engine.storage import open_store
from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer
from tests.tc_preview import STOP, prepared_as_text_completion

KEY = "sk-test-NEVER-STORE-ME-42"
SETTINGS = ContextSettings(model="koboldcpp/llama-3-8b", context_limit=4096, reply_reserve=300)


def small_chat() -> Chat:
    msgs = [ChatMessage(role="system", content="You are Marisol, an archivist.")]
    for i in range(6):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", name="Wren" if i % 2 == 0 else "Marisol",
                                content=f"Message {i}: “fog” \\ " + "fog " * 20))
    msgs.append(ChatMessage(role="user", name="Wren", content="What is in the parcel?"))
    return Chat(messages=msgs, user_name="Wren", character_name="Marisol")


@pytest.fixture
def library(tmp_path: Path, monkeypatch):
    """``(store, chat_id, url)``; every prepared prompt is a Text Completion one."""
    real = pipeline.prepare
    monkeypatch.setattr(pipeline, "prepare", lambda request, **kw: prepared_as_text_completion(real(request, **kw)))
    monkeypatch.delenv("LOOMSCOPE_DB", raising=False)
    url = f"sqlite:///{tmp_path / 'lib.db'}"
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


@pytest.mark.parametrize("stream", [False, True])
def test_sends_the_previewed_string_and_the_audit_holds_it(library, server, stream: bool) -> None:
    store, chat_id, _ = library
    server.mode = "stream" if stream else "answer"
    server.reply_text = " The parcel holds a map.\n### Instruction:\nWren: more"
    expected = pipeline.prepare(store.chats.build_request(chat_id)).preview
    events: list = []
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "", KEY, stream=stream),
                                on_progress=events.append)
    assert result.audit.status == "completed", result.audit.error_message
    [req] = server.requests
    body = req["body"]
    assert req["path"] == "/v1/completions"
    assert body["prompt"] == expected.prompt and body["prompt"].endswith("### Response:\n")
    assert body["max_tokens"] == expected.reply_reserve == 300
    assert body["stop"] == STOP and body["stream"] is stream and body["model"] == SETTINGS.model
    assert "messages" not in body
    # the stored audit: api, the exact string, stop, the blocks with their spans
    audit = store.audits.get(chat_id)
    assert audit is not None and audit.generation_id == result.audit.generation_id
    assert (audit.api, audit.prompt, audit.stop) == ("text_completion", body["prompt"], STOP)
    assert audit.request_params == {"model": SETTINGS.model, "stream": stream, "max_tokens": 300}
    spans = [b.span for b in audit.blocks if b.status != "excluded"]
    assert spans and all(s is not None for s in spans)
    for b in audit.blocks:
        if b.span is not None:
            assert audit.prompt[b.span[0]:b.span[1]] == b.text
    assert [b.span for b in audit.blocks] == [b.span for b in expected.blocks]
    # the reply: streamed in pieces, stored as SillyTavern keeps it (cut at the stop string, trimmed)
    assert store.chats.get(chat_id).chat.messages[-1].content == "The parcel holds a map."
    assert result.reply is not None and result.reply.name == "Marisol"
    assert events[-1].state == "done" and events[-1].text == server.reply_text
    if stream:
        assert len([e for e in events if e.state == "running" and e.text]) >= 3


@pytest.mark.parametrize("route", ["404", "405", "400_chat_only"])
def test_chat_only_endpoint_fails_with_a_normalized_code(library, server, route: str) -> None:
    store, chat_id, _ = library
    server.text_route = route
    before = len(store.chats.get(chat_id).chat.messages)
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "m", KEY))
    assert (result.audit.status, result.audit.error_code) == ("failed", "PROVIDER_NO_TEXT_COMPLETION")
    stored = store.audits.get(chat_id)
    assert stored is not None and stored.error_code == "PROVIDER_NO_TEXT_COMPLETION" and stored.prompt
    dumped = stored.model_dump_json()
    assert UPSTREAM_MARKER not in dumped and KEY not in dumped
    assert len(store.chats.get(chat_id).chat.messages) == before


def test_reply_limit_none_sends_no_max_tokens(library, server) -> None:
    store, chat_id, _ = library
    generate_and_store(store, chat_id, ProviderConfig(server.base_url, "m", None, reply_limit_param="none"))
    assert "max_tokens" not in server.requests[0]["body"]


def test_empty_prompt_sends_nothing(library, server, monkeypatch) -> None:
    store, chat_id, _ = library
    real = pipeline.prepare

    def empty(request, **kw):
        p = real(request, **kw)
        return p.__class__(**{**p.__dict__, "preview": p.preview.model_copy(update={"prompt": ""})})

    monkeypatch.setattr(pipeline, "prepare", empty)
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "m", None))
    assert (result.audit.status, result.audit.error_code) == ("failed", "EMPTY_PROMPT") and server.requests == []


def test_cut_at_stop() -> None:
    assert cut_at_stop("  Hi there.\nWren: no", ["\nWren:"]) == "Hi there."
    assert cut_at_stop("a STOP b stop", ["stop", "STOP"]) == "a"
    assert cut_at_stop(" plain ", []) == "plain"


def test_cli_generate_text_completion(library, server, capsys, monkeypatch) -> None:
    _store, chat_id, url = library
    monkeypatch.setenv("LOOMSCOPE_DB", url)
    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr("engine.generation.resolve_api_key", lambda: None)
    monkeypatch.setattr("engine.providers.keys.lookup_api_key", lambda *a, **k: None, raising=False)
    server.reply_text = "A plain reply."
    base = server.base_url.removesuffix("/v1")  # a KoboldCpp-style server URL: the /v1 is added
    code = cli_main(["generate", chat_id, "--base-url", base, "--format", "json", "--no-stream"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["status"], doc["api"], doc["reply"]["content"]) == ("completed", "text_completion", "A plain reply.")
    assert doc["request_params"]["max_tokens"] == 300
    assert server.requests[-1]["path"] == "/v1/completions"

    server.text_route = "404"
    code = cli_main(["generate", chat_id, "--base-url", base])
    out, err = capsys.readouterr()
    assert code == 4
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"loomscope: {chat_id}: PROVIDER_NO_TEXT_COMPLETION: ")
    assert "Chat Completion" in lines[0] and UPSTREAM_MARKER not in err + out


# ------------------------------------------------------- the engine's own string, imported folder


@pytest.fixture
def st_library(tmp_path: Path, shared_data: Path):
    """``(store, chat_id, url)``: the shared SillyTavern user folder (koboldhorde, Default context) imported."""
    from engine.importers.st_folder import read_st_folder

    url = f"sqlite:///{tmp_path / 'st.db'}"
    store = open_store(url, seed=False)
    report = store.imports.st_folder(read_st_folder(shared_data / "st-user" / "default-user"))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    try:
        yield store, chat_id, url
    finally:
        store.close()


@pytest.mark.parametrize("stream", [False, True])
def test_imported_text_completion_chat_sends_the_engine_string(st_library, server, stream: bool) -> None:
    store, chat_id, _ = st_library
    request = store.chats.build_request(chat_id)
    assert request.sillytavern is not None and request.sillytavern.text_completion is not None
    pv = pipeline.preview(request)
    assert pv.api == "text_completion" and pv.prompt and pv.stop
    server.mode = "stream" if stream else "answer"
    server.reply_text = "*Seraphina smiles.* Rest now.\nUser: and then"
    result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "", None, stream=stream))
    assert result.audit.status == "completed", result.audit.error_message
    body = server.requests[0]["body"]
    assert body["prompt"] == pv.prompt  # character for character what the preview shows
    assert body["max_tokens"] == pv.reply_reserve == request.sillytavern.text_completion.amount_gen
    assert body["stop"] == pv.stop and body["stream"] is stream
    audit = store.audits.get(chat_id)
    assert (audit.api, audit.prompt, audit.stop) == ("text_completion", pv.prompt, pv.stop)
    assert [b.span for b in audit.blocks] == [b.span for b in pv.blocks]
    assert all(audit.prompt[s:e] for s, e in (b.span for b in audit.blocks if b.span))
    # the reply is cut at the "\nUser:" stop string, as SillyTavern keeps it
    assert store.chats.get(chat_id).chat.messages[-1].content == "*Seraphina smiles.* Rest now."


def test_cli_preview_and_generate_agree_on_the_imported_folder(st_library, server, capsys, monkeypatch) -> None:
    _store, chat_id, url = st_library
    monkeypatch.setenv("LOOMSCOPE_DB", url)
    monkeypatch.setattr("engine.generation.resolve_api_key", lambda: None)
    assert cli_main(["preview", "--chat-id", chat_id, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert cli_main(["generate", chat_id, "--base-url", server.base_url.removesuffix("/v1"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["api"] == "text_completion" and out["request_params"]["max_tokens"] == shown["reply_reserve"]
    assert server.requests[0]["body"]["prompt"] == shown["prompt"] and server.requests[0]["body"]["stop"] == shown["stop"]


def test_cli_generate_defaults_to_the_setups_server_url(st_library, server, capsys, monkeypatch) -> None:
    store, chat_id, url = st_library
    for var in ("LOOMSCOPE_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LOOMSCOPE_DB", url)
    monkeypatch.setattr("engine.generation.resolve_api_key", lambda: None)
    st = store.chats.get_setup(chat_id).sillytavern
    # a KoboldCpp setup: SillyTavern keeps its server URL without /v1
    tc = st.text_completion.model_copy(update={"main_api": "textgenerationwebui", "textgen_type": "koboldcpp",
                                               "server_url": server.base_url.removesuffix("/v1")})
    store.chats.save_setup(chat_id, st.model_copy(update={"text_completion": tc}))
    assert cli_main(["generate", chat_id, "--format", "json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["status"] == "completed"
    assert [r["path"] for r in server.requests] == ["/v1/completions"]


def test_cli_param_sends_sampler_fields_and_the_audit_records_them(library, server, capsys, monkeypatch) -> None:
    _store, chat_id, url = library
    monkeypatch.setenv("LOOMSCOPE_DB", url)
    monkeypatch.setattr("engine.generation.resolve_api_key", lambda: None)
    code = cli_main(["generate", chat_id, "--base-url", server.base_url, "--format", "json", "--param",
                     "temperature=0.7", "--param", "top_k=40", "--param", "mirostat_mode=off",
                     "--param", "prompt=not this", "--param", "stop=[\"x\"]"])
    out, err = capsys.readouterr()
    assert code == 0, err
    body = server.requests[-1]["body"]
    assert (body["temperature"], body["top_k"], body["mirostat_mode"]) == (0.7, 40, "off")
    assert body["prompt"] != "not this" and body["stop"] == STOP  # never replaced
    assert json.loads(out)["request_params"] == {"temperature": 0.7, "top_k": 40, "mirostat_mode": "off",
                                                 "model": SETTINGS.model, "stream": True, "max_tokens": 300}
    with pytest.raises(SystemExit) as bad:  # argparse's usage error: exit 2, one line
        cli_main(["generate", chat_id, "--base-url", server.base_url, "--param", "no-equals-sign"])
    assert bad.value.code == 2 and "NAME=VALUE" in capsys.readouterr().err
