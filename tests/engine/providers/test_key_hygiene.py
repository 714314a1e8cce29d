"""Issue 15 (6): a key in the base URL path is masked; a key no header can carry is a local error.

Before: ``http://host/sk-…/v1`` was stored verbatim as the audit's ``provider`` and shown by
``loomscope audit``; a non-ASCII or CR/LF key failed inside httpx as a provider/network error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main as cli_main
from engine.errors import ProviderError
from engine.generation import ProviderConfig, generate_and_store
from engine.providers import ChatCompletionsClient, public_endpoint
from engine.providers.openai_compat import check_api_key
from engine.schema import Chat, ChatMessage, ContextSettings
from engine.storage import open_store
from tests.fake_provider import FakeProviderServer

SECRET = "sk-proj-Abc123Def456Ghi789Jkl0"


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://127.0.0.1:9/{SECRET}/v1", "http://127.0.0.1:9/***/v1"),
    ("http://host/v1/key-8f3a9c2e77/chat", "http://host/v1/***/chat"),
    ("http://host/proxy/0123456789abcdefABCDEF0123/v1", "http://host/proxy/***/v1"),
    ("https://user:pw@host/v1?api_key=x#frag", "https://host/v1"),
    ("http://localhost:8080/v1", "http://localhost:8080/v1"),
    ("https://api.openai.com/v1", "https://api.openai.com/v1"),
    ("http://host/openai/deployments/gpt-4o-mini-2024-07-18/v1", "http://host/openai/deployments/gpt-4o-mini-2024-07-18/v1"),
])
def test_key_like_path_segments_are_masked(url: str, shown: str) -> None:
    assert public_endpoint(url) == shown


def test_the_configured_key_is_masked_wherever_it_appears_in_the_path() -> None:
    assert public_endpoint("http://host/v1/tenant-shortkey/x", api_key="shortkey") == "http://host/v1/***/x"
    assert "shortkey" not in repr(ProviderConfig("http://host/shortkey/v1", "m", "shortkey"))


def test_a_key_in_the_base_url_never_reaches_the_audit_or_the_cli(tmp_path: Path, capsys) -> None:
    db = tmp_path / "lib.sqlite3"
    with FakeProviderServer("answer") as server:
        base = f"{server.base_url}/{SECRET}"
        store = open_store(str(db), seed=False)
        try:
            chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]),
                                     settings=ContextSettings(context_limit=4096, reply_reserve=100))
            # the fake server serves any path; the key travels only in the URL the client calls
            result = generate_and_store(store, chat_id, ProviderConfig(base, "gpt-4o", None))
            assert result.audit.status == "completed"
            assert SECRET not in result.audit.provider and result.audit.provider.endswith("/***")
            assert SECRET not in store.audits.get(chat_id).model_dump_json()
        finally:
            store.close()
    assert cli_main(["audit", chat_id, "--db", str(db), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out and "***" in out
    assert SECRET.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("lib.sqlite3*"))


@pytest.mark.parametrize(("key", "what"), [
    ("sk-abc\r\nX-Injected: 1", "a carriage return"),
    ("sk-abc\ndef", "a line feed"),
    ("sk-ключ", "U+043A"),
    ("sk abc", "a space"),
    ("sk-abc\x00", "U+0000"),
])
def test_a_key_no_header_can_carry_is_invalid_api_key_locally(key: str, what: str, tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as err:
        check_api_key(key)
    assert err.value.code == "INVALID_API_KEY" and what in err.value.message and key not in err.value.message
    with pytest.raises(ProviderError):
        ChatCompletionsClient("http://127.0.0.1:9/v1", key)
    with FakeProviderServer("answer") as server:
        store = open_store(str(tmp_path / "lib.sqlite3"), seed=False)
        try:
            chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]),
                                     settings=ContextSettings(context_limit=4096, reply_reserve=100))
            result = generate_and_store(store, chat_id, ProviderConfig(server.base_url, "gpt-4o", key))
            assert (result.audit.status, result.audit.error_code) == ("failed", "INVALID_API_KEY")
            assert server.requests == []  # nothing was sent
        finally:
            store.close()


def test_cli_generate_with_a_bad_key_exits_2_without_sending(tmp_path: Path, monkeypatch, capsys) -> None:
    db = tmp_path / "lib.sqlite3"
    with open_store(str(db), seed=False) as store:
        chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]))
    monkeypatch.setenv("LOOMSCOPE_API_KEY", "sk-äöü")
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")
    with FakeProviderServer("answer") as server:
        code = cli_main(["generate", chat_id, "--db", str(db), "--base-url", server.base_url, "--format", "json"])
        assert server.requests == []
    err = capsys.readouterr().err
    assert code == 2 and "INVALID_API_KEY" in err and err.count("\n") == 1 and "äöü" not in err
    with open_store(str(db), seed=False) as store:
        assert store.audits.get(chat_id) is None
    json.dumps(err)  # printable
