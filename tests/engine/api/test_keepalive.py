"""An INTERNAL_ERROR answer does not break the client's keep-alive connection."""

from __future__ import annotations

import httpx

from engine.api import API_PREFIX, make_server
from engine.pipeline import default_registries
from engine.storage import open_store
from engine.tokenizers.profiles import TokenizerProfile

from .conftest import start_server, stop_server


def _broken_count(texts):
    raise ZeroDivisionError("plugin bug")


def test_requests_after_an_internal_error_reuse_the_connection(tmp_path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False)
    regs = default_registries()
    regs.tokenizers.register(TokenizerProfile(name="broken-plugin", approximate=True, version="1",
                                              description="raises", count_batch=_broken_count))
    server = make_server(store, port=0, registries=regs, log_level="critical")
    thread = start_server(server)
    client = httpx.Client(base_url=server.url, trust_env=False, timeout=10)
    try:
        for _ in range(30):
            resp = client.post(f"{API_PREFIX}/context-preview",
                               json={"chat": {"messages": [{"role": "user", "content": "hi"}]},
                                     "settings": {"tokenizer": "broken-plugin"}})
            assert resp.status_code == 500 and resp.json()["error"]["code"] == "INTERNAL_ERROR"
            assert "plugin bug" not in resp.text
            assert client.get(f"{API_PREFIX}/health").status_code == 200  # same connection, no reset
    finally:
        client.close()
        stop_server(server, thread)
        store.close()
