"""One real API server per test module and backend: uvicorn on 127.0.0.1 (free port) over a temp library.

The library is a SQLite file and, when ``LOOMSCOPE_TEST_DB`` is set (``make test-postgres``), also a
fresh PostgreSQL database (``tests/dbtest.py``).

The library is the seeded sample (a chat with a character, persona, lorebooks and settings)
plus two chats the tests add: ``bare`` (no audit yet) and ``audited`` (free for ``put_audit``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from engine.api import ApiServer, make_server
from engine.schema import Chat, ChatMessage
from engine.storage import Store, open_store
from tests.dbtest import BACKENDS, library_url

SERVER_START_TIMEOUT_S = 15.0


@dataclass
class Live:
    """The running server, its library and a client bound to it."""

    server: ApiServer
    store: Store
    db_url: str
    client: httpx.Client
    sample_id: str
    bare_id: str
    audited_id: str


def start_server(server: ApiServer) -> threading.Thread:
    """Run ``server`` in a daemon thread and wait until uvicorn reports ``started``."""
    thread = threading.Thread(target=server.run, name="loomscope-api-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server.server.started:
        if not thread.is_alive():
            raise RuntimeError("the API server thread ended before it started")
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError("the API server did not start in time")
        time.sleep(0.01)
    return thread


def stop_server(server: ApiServer, thread: threading.Thread) -> None:
    """Ask uvicorn to exit and wait for the thread."""
    server.stop()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the API server did not shut down"


@pytest.fixture(scope="module", params=BACKENDS)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A seeded temp library served on 127.0.0.1 (one server per test module and backend)."""
    with library_url(request.param, tmp_path_factory.mktemp("api")) as db_url:
        yield from _serve(db_url)


def _serve(db_url: str) -> Iterator[Live]:
    store = open_store(db_url, seed=True)
    sample_id = store.chats.summaries()[0].id
    bare_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="Hello there")]), title="bare")
    audited_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="audited")
    server = make_server(store, host="127.0.0.1", port=0)
    thread = start_server(server)
    client = httpx.Client(base_url=server.url, timeout=30, trust_env=False)
    try:
        yield Live(server, store, db_url, client, sample_id, bare_id, audited_id)
    finally:
        client.close()
        stop_server(server, thread)
        store.close()
