"""Alembic environment for the Loomscope library (run programmatically; see ``database.upgrade``).

The engine comes from ``config.attributes["engine"]``; SQLite runs in batch mode so that later
migrations can alter tables (SQLite has no ``ALTER COLUMN``).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from engine.storage._orm import Base
from engine.storage.database import WRITE_OPTION

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run the migrations on ``config.attributes["engine"]`` under the library's write lock."""
    engine = config.attributes["engine"]
    # The write lock is taken up front (SQLite: BEGIN IMMEDIATE via WRITE_OPTION; PostgreSQL: a
    # transaction-scoped advisory lock), before Alembic reads the current revision: processes
    # opening a brand-new library at once migrate one after the other instead of racing.
    with engine.connect().execution_options(**{WRITE_OPTION: True}) as connection, connection.begin():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(7450312655)"))
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():  # pragma: no cover - offline SQL generation is not used
    raise SystemExit("offline migrations are not supported; run loomscope with --db instead")
run_migrations_online()
