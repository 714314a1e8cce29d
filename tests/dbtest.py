"""Test libraries on either backend: a real SQLite file, or a fresh PostgreSQL database.

``LOOMSCOPE_TEST_DB`` names a disposable PostgreSQL database (``make test-postgres`` starts a
throwaway server and sets it). Fixtures parametrized over :data:`BACKENDS` get a SQLite file in
``tmp_path`` for ``sqlite`` and, for ``postgresql``, a brand-new database created next to the
named one (``CREATE DATABASE lt_<hex>``, dropped afterwards), so module- and function-scoped
libraries never share tables. Without the variable the ``postgresql`` cases skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

TEST_DB_ENV = "LOOMSCOPE_TEST_DB"
BACKENDS = ["sqlite", "postgresql"]


def postgres_url() -> str | None:
    """The disposable PostgreSQL URL from ``$LOOMSCOPE_TEST_DB``, or ``None``."""
    return os.environ.get(TEST_DB_ENV, "").strip() or None


def skip_without_postgres() -> str:
    """The PostgreSQL URL, or skip the test saying how to enable it."""
    url = postgres_url()
    if not url:
        pytest.skip(f"PostgreSQL run skipped: set {TEST_DB_ENV} to a disposable database URL "
                    "(postgresql+psycopg://user@host:port/db), or run `make test-postgres`")
    return url


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """Create an empty database on the ``$LOOMSCOPE_TEST_DB`` server; yield its URL; drop it."""
    base = make_url(skip_without_postgres())
    name = f"lt_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        try:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()


@contextmanager
def library_url(backend: str, folder: Path, name: str = "library.sqlite3") -> Iterator[str]:
    """A URL of an empty library on ``backend`` (``sqlite``: a file in ``folder``)."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / name}"
        return
    with fresh_postgres_database() as url:
        yield url


def row_counts(url: str) -> dict[str, int]:
    """Rows in every table of the library at ``url`` (read with plain SQL, not with our Store)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            tables = inspect(conn).get_table_names()
            return {t: conn.execute(text(f'SELECT COUNT(*) FROM "{t}"')).scalar_one() for t in tables}
    finally:
        engine.dispose()


def query(url: str, sql: str, **params) -> list[tuple]:
    """Run one SELECT against the library at ``url``; rows as tuples."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql), params).all()]
    finally:
        engine.dispose()


def stored_text(url: str) -> str:
    """Everything the library holds, as text (to check that a secret was never stored).

    SQLite: the raw bytes of the database file and its WAL/journal siblings (so deleted or
    uncommitted pages count too); PostgreSQL: every row of every table, rendered as text.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        db = Path(parsed.database or "")
        return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*")).decode("latin-1")
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            parts = []
            for t in inspect(conn).get_table_names():
                parts.extend(repr(tuple(r)) for r in conn.execute(text(f'SELECT * FROM "{t}"')).all())
            return "\n".join(parts)
    finally:
        engine.dispose()
