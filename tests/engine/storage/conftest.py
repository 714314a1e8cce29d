"""Store fixtures, parametrized over backends.

``sqlite`` always runs (a real file in ``tmp_path``). ``postgresql`` runs when the environment
variable ``LOOMSCOPE_TEST_DB`` names a database, e.g.::

    LOOMSCOPE_TEST_DB=postgresql+psycopg://postgres@127.0.0.1:5432/loomscope_test \
        .venv/bin/python -m pytest tests/engine/storage -q

The database must exist and be disposable: every test drops Loomscope's tables first.
Without the variable, the ``postgresql`` cases skip with that reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from engine.storage import Store, open_store

TEST_DB_ENV = "LOOMSCOPE_TEST_DB"


def reset_database(url: str) -> None:
    """Drop every Loomscope table (and Alembic's version table) from ``url``'s database."""
    from engine.storage._orm import Base

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            Base.metadata.drop_all(conn)
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path, monkeypatch) -> str:
    """A fresh, empty library URL for each backend."""
    monkeypatch.delenv("LOOMSCOPE_DB", raising=False)
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'library.sqlite3'}"
    url = os.environ.get(TEST_DB_ENV, "").strip()
    if not url:
        pytest.skip(f"PostgreSQL run skipped: set {TEST_DB_ENV} to a disposable database URL "
                    "(postgresql+psycopg://user@host:port/db) to run the storage suite against it")
    reset_database(url)
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """An empty, migrated library (not seeded)."""
    s = open_store(db_url, seed=False)
    try:
        yield s
    finally:
        s.close()
