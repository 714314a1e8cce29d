"""Issue 15 (5): schemathesis against the served OpenAPI schema finds no 5xx (bounded run).

Schemathesis reads ``/api/v2/openapi.json`` from a real server (uvicorn on 127.0.0.1 over a
seeded SQLite library) and sends generated requests, valid and invalid, to every operation.
Every answer must be below 500. ``LOOMSCOPE_FUZZ_EXAMPLES`` raises the number of examples per
operation (default 30); the long on-demand run with its figures is
``tests/benchmarks/bench_api_fuzz.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the `test` extra")
from hypothesis import HealthCheck, settings  # noqa: E402

from engine.api import API_PREFIX, make_server  # noqa: E402
from engine.storage import open_store  # noqa: E402

from .conftest import start_server, stop_server  # noqa: E402

EXAMPLES = int(os.environ.get("LOOMSCOPE_FUZZ_EXAMPLES", "30"))


@pytest.fixture(scope="module")
def served_schema(tmp_path_factory) -> Iterator[object]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'lib.sqlite3'}", seed=True)
    server = make_server(store, port=0, log_level="critical")
    thread = start_server(server)
    try:
        yield schemathesis.openapi.from_url(f"{server.url}{API_PREFIX}/openapi.json")
    finally:
        stop_server(server, thread)
        store.close()


def test_no_server_errors(served_schema) -> None:
    """Every operation of the served schema, ``EXAMPLES`` generated cases each (schemathesis
    strategies driven by hypothesis directly: its pytest plugin does not load under pytest 9)."""
    from hypothesis import given

    operations = [result.ok() for result in served_schema.get_all_operations()]
    assert len(operations) >= 4
    statuses: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case) -> None:
            response = case.call(timeout=30)
            statuses.append(response.status_code)
            assert response.status_code < 500, (case.as_curl_command(), response.text[:500])
            if response.status_code >= 400:
                body = response.json()
                assert set(body) == {"error"} and body["error"]["code"], body

        check()
    assert len(statuses) >= len(operations) * 5 and max(statuses) < 500
