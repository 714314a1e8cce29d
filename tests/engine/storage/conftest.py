"""Store fixtures, parametrized over backends.

``sqlite`` always runs (a real file in ``tmp_path``). ``postgresql`` runs when the environment
variable ``LOOMSCOPE_TEST_DB`` names a database, e.g.::

    LOOMSCOPE_TEST_DB=postgresql+psycopg://postgres@127.0.0.1:5432/loomscope_test \
        .venv/bin/python -m pytest tests/engine/storage -q

``make test-postgres`` starts a throwaway server and sets the variable. Each test gets a new
database created on that server (``tests/dbtest.py``). Without the variable, the ``postgresql``
cases skip with that reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.storage import Store, open_store
from tests.dbtest import BACKENDS, library_url


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path, monkeypatch) -> Iterator[str]:
    """A fresh, empty library URL for each backend (PostgreSQL: a new database per test)."""
    monkeypatch.delenv("LOOMSCOPE_DB", raising=False)
    with library_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """An empty, migrated library (not seeded)."""
    s = open_store(db_url, seed=False)
    try:
        yield s
    finally:
        s.close()
