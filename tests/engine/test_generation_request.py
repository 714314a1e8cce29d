"""What generation puts on the wire (issue 9): the reply reserve as ``max_tokens`` or
``max_completion_tokens``, read back from the request body at the real local test server;
the audit's record of it; the stored reply's speaker ``name``; the unknown-model warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main as cli_main
from engine.generation import ProviderConfig, generate, generate_and_store, speaker_name
from engine.pipeline import preview
from engine.providers import default_reply_limit_param, reply_limit_fields
from engine.schema import Character, Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.storage import open_store
from tests.fake_provider import FakeProviderServer
from tests.request_validator import request_problems

SETTINGS = ContextSettings(model="gpt-4o", context_limit=4096, reply_reserve=700)


def _chat(named: bool = False) -> Chat:
    names = {"user": "Wren", "assistant": "Marisol"} if named else {"user": None, "assistant": None}
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"line {i}",
                        name=names["user" if i % 2 == 0 else "assistant"]) for i in range(5)]
    return Chat(messages=msgs, user_name="Wren", character_name="Marisol")


@pytest.fixture
def server():
    with FakeProviderServer("answer") as srv:
        yield srv


@pytest.mark.parametrize(("model", "field"), [
    ("gpt-4o", "max_tokens"), ("gpt-4.1-mini", "max_tokens"), ("o3-mini", "max_completion_tokens"),
    ("o1", "max_completion_tokens"), ("gpt-5-nano", "max_completion_tokens"),
    ("llama-3.1-8b-instruct", "max_tokens"), ("openai/o3", "max_tokens"),  # a router takes max_tokens
])
def test_the_request_body_carries_the_reply_reserve(server, model, field):
    request = PreviewRequest(chat=_chat(), settings=SETTINGS.model_copy(update={"model": model}))
    result = generate(request, ProviderConfig(server.base_url, model, stream=False), chat_id="c1")
    assert result.audit.status == "completed"
    body = server.requests[-1]["body"]
    assert body[field] == 700 == result.audit.reply_reserve
    other = ({"max_tokens", "max_completion_tokens"} - {field}).pop()
    assert other not in body
    assert result.audit.request_params == {"model": model, "stream": False, field: 700}
    assert request_problems(body["messages"]) == []
    # prompt + reply fit the context window
    assert result.audit.prompt_tokens + body[field] <= result.audit.context_limit


@pytest.mark.parametrize(("param", "sent"), [
    ("max_completion_tokens", {"max_completion_tokens": 700}),
    ("both", {"max_tokens": 700, "max_completion_tokens": 700}),
    ("none", {}),
])
def test_the_field_is_overridable(server, param, sent):
    request = PreviewRequest(chat=_chat(), settings=SETTINGS)
    config = ProviderConfig(server.base_url, "gpt-4o", reply_limit_param=param,
                            extra_body={"max_tokens": 99_999, "temperature": 0.2})
    result = generate(request, config, chat_id="c1")
    body = server.requests[-1]["body"]
    got = {k: body[k] for k in ("max_tokens", "max_completion_tokens") if k in body}
    # the reserve replaces a limit in extra_body; with "none" the writer's extra_body stands
    assert got == (sent or {"max_tokens": 99_999})
    assert body["temperature"] == 0.2
    assert {k: v for k, v in result.audit.request_params.items() if k.startswith("max_")} == sent


def test_a_bad_override_is_refused():
    with pytest.raises(ValueError, match="max_tokens"):
        ProviderConfig("http://127.0.0.1:1", reply_limit_param="max_reply")
    with pytest.raises(ValueError):
        reply_limit_fields("gpt-4o", 10, "bogus")
    assert reply_limit_fields("gpt-4o", 0) == {}
    assert default_reply_limit_param("O3-MINI") == "max_completion_tokens"


def test_cli_generate_sends_and_records_the_reserve(tmp_path: Path, server, capsys, monkeypatch):
    monkeypatch.delenv("LOOMSCOPE_DB", raising=False)
    monkeypatch.setenv("LOOMSCOPE_API_KEY", "sk-test")
    db = tmp_path / "lib.sqlite3"
    store = open_store(f"sqlite:///{db}", seed=False)
    chat_id = store.chats.add(_chat(named=True), settings=SETTINGS)
    store.close()
    code = cli_main(["generate", chat_id, "--db", f"sqlite:///{db}", "--base-url", server.base_url,
                     "--model", "o4-mini", "--reply-reserve", "321", "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert server.requests[-1]["body"]["max_completion_tokens"] == 321
    assert doc["request_params"]["max_completion_tokens"] == 321
    code = cli_main(["generate", chat_id, "--db", f"sqlite:///{db}", "--base-url", server.base_url,
                     "--model", "o4-mini", "--reply-limit-param", "max_tokens", "--format", "json"])
    capsys.readouterr()
    assert code == 0 and server.requests[-1]["body"]["max_tokens"] == 700
    assert cli_main(["audit", chat_id, "--db", f"sqlite:///{db}", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["request_params"]["max_tokens"] == 700


def test_stored_reply_and_message_carry_names_like_the_chat(tmp_path: Path, server):
    store = open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False)
    try:
        named = store.chats.add(_chat(named=True), settings=SETTINGS)
        plain = store.chats.add(_chat(named=False), settings=SETTINGS)
        result = generate_and_store(store, named, ProviderConfig(server.base_url, "gpt-4o"), message="go on")
        msgs = store.chats.get(named).chat.messages
        assert result.reply.name == "Marisol" and msgs[-1].name == "Marisol" and msgs[-1].role == "assistant"
        assert msgs[-2].name == "Wren" and msgs[-2].content == "go on"
        generate_and_store(store, plain, ProviderConfig(server.base_url, "gpt-4o"), message="go on")
        msgs = store.chats.get(plain).chat.messages
        assert msgs[-1].name is None and msgs[-2].name is None
    finally:
        store.close()


def test_speaker_name_prefers_the_card():
    req = PreviewRequest(chat=_chat(named=True), character=Character(name="Mira"))
    assert speaker_name(req, "assistant") == "Mira"
    assert speaker_name(req, "user") == "Wren"


def test_unknown_model_warning_names_what_is_used_after_overrides():
    chat = _chat()
    pv = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="my-finetune", context_limit=32_000,
                                                                    tokenizer="cl100k_base", reply_reserve=100)))
    w = next(w for w in pv.warnings if "unknown model" in w)
    assert "'cl100k_base'" in w and "32000-token" in w and "generic-approx" not in w and "8192" not in w
    assert "for exact figures" not in w
    pv = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="my-finetune", reply_reserve=100)))
    w = next(w for w in pv.warnings if "unknown model" in w)
    assert "'generic-approx'" in w and "8192-token" in w and "set the context limit and the tokenizer" in w
    pv = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="my-finetune", context_limit=16_000,
                                                                    reply_reserve=100)))
    w = next(w for w in pv.warnings if "unknown model" in w)
    assert "16000-token context limit you set" in w and "'generic-approx'" in w and "set the tokenizer" in w
