"""Fifty API clients at once against a real uvicorn server on 127.0.0.1 (issue 25 item 5).

Each client posts previews (inline chats with tool groups, pins and exclusions, and library chats by id) on its
own connection; every answer must be 200 and equal, byte for byte, to the single-client answer for the same
request. ``LOOMSCOPE_STRESS=1`` runs 20 requests per client instead of 6.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from engine.api.app import API_PREFIX
from tests.engine.test_concurrent_previews import _requests

from .conftest import Live

CLIENTS = 50
PER_CLIENT = 20 if os.environ.get("LOOMSCOPE_STRESS") == "1" else 6
PREVIEW = f"{API_PREFIX}/context-preview"


def _bodies(live: Live) -> list[dict]:
    inline = [r.model_dump(mode="json", exclude_defaults=True) for r in _requests()[::6]]
    by_id = [{"chat_id": cid} for cid in (live.sample_id, live.bare_id, live.audited_id)]
    return inline + by_id + [{"chat_id": live.sample_id, "settings": {"context_limit": 600}}]


def test_fifty_clients_at_once_get_the_single_client_answers(live: Live) -> None:
    bodies = _bodies(live)
    expected = []
    for body in bodies:
        resp = live.client.post(PREVIEW, json=body)
        assert resp.status_code == 200, resp.text[:300]
        expected.append(resp.content)
    start = threading.Barrier(CLIENTS)
    failures: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> int:
        done = 0
        with httpx.Client(base_url=live.server.url, timeout=120, trust_env=False) as http:
            start.wait()
            for j in range(PER_CLIENT):
                i = (k * 7 + j * 3) % len(bodies)
                try:
                    resp = http.post(PREVIEW, json=bodies[i])
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(f"client {k}: {exc!r}")
                    continue
                if resp.status_code != 200 or resp.content != expected[i]:
                    with lock:
                        failures.append(f"client {k} body {i}: {resp.status_code} {resp.text[:200]}")
                    continue
                done += 1
        return done

    with ThreadPoolExecutor(CLIENTS) as pool:
        done = sum(pool.map(client, range(CLIENTS)))
    assert not failures, f"{len(failures)} failures, first: {failures[0]}"
    assert done == CLIENTS * PER_CLIENT
