"""Server-side failures keep the error envelope: a broken library (503) and a broken plugin (500)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import create_engine, text

from engine.api import API_PREFIX, make_server
from engine.pipeline import default_registries
from engine.schema import Chat, ChatMessage
from engine.storage import open_store
from engine.tokenizers.profiles import TokenizerProfile
from tests.dbtest import BACKENDS, library_url

from .conftest import start_server, stop_server


def _broken_count(texts):
    raise ZeroDivisionError("plugin bug")


@pytest.fixture(scope="module", params=BACKENDS)
def served(request, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str, str]]:
    """A server whose registries hold a tokenizer plugin that raises, over a small library (each backend)."""
    with library_url(request.param, tmp_path_factory.mktemp("api-fail")) as db:
        yield from _serve(db)


def _serve(db: str) -> Iterator[tuple[httpx.Client, str, str]]:
    store = open_store(db, seed=False)
    chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="one")
    regs = default_registries()
    regs.tokenizers.register(TokenizerProfile(name="broken-plugin", approximate=True, version="1",
                                              description="raises", count_batch=_broken_count))
    server = make_server(store, port=0, registries=regs, log_level="critical")
    thread = start_server(server)
    client = httpx.Client(base_url=server.url, trust_env=False, timeout=10)
    try:
        yield client, db, chat_id
    finally:
        client.close()
        stop_server(server, thread)
        store.close()


def test_unexpected_exception_is_internal_error(served) -> None:
    client, _, _ = served
    resp = client.post(f"{API_PREFIX}/context-preview",
                       json={"chat": {"messages": [{"role": "user", "content": "hi"}]},
                             "settings": {"tokenizer": "broken-plugin"}})
    assert resp.status_code == 500
    err = resp.json()["error"]
    assert err["code"] == "INTERNAL_ERROR" and "ZeroDivisionError" in err["message"]
    assert "plugin bug" not in resp.text  # exception text stays in the server log
    # the server keeps serving
    assert client.get(f"{API_PREFIX}/health").status_code == 200


def test_unreadable_library_is_storage_error_without_driver_text(served) -> None:
    client, db, chat_id = served
    engine = create_engine(db, isolation_level="AUTOCOMMIT")
    con = engine.connect()
    try:
        con.execute(text("ALTER TABLE audits RENAME TO audits_gone"))
        resp = client.get(f"{API_PREFIX}/chats/{chat_id}/context-audit")
        assert resp.status_code == 503
        err = resp.json()["error"]
        assert err["code"] == "STORAGE_ERROR" and err["details"] == {}
        assert "audits" not in resp.text  # no SQL or driver message leaks
    finally:
        con.execute(text("ALTER TABLE audits_gone RENAME TO audits"))
        con.close()
        engine.dispose()
    assert client.get(f"{API_PREFIX}/chats/{chat_id}/context-audit").json()["error"]["code"] == "AUDIT_NOT_FOUND"
