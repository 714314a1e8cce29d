"""Alembic environment for the Loomscope library (run programmatically; see ``database.upgrade``).

The engine comes from ``config.attributes["engine"]``; SQLite runs in batch mode so that later
migrations can alter tables (SQLite has no ``ALTER COLUMN``).
"""

from __future__ import annotations

from alembic import context

from engine.storage._orm import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes["engine"]
    with engine.connect() as connection:
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
