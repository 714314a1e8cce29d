"""The first migration's DDL is pinned: restructuring ``0001_initial_library_schema`` must not change it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command

from engine.storage.database import alembic_config, create_db_engine

#: ``sqlite_master.sql`` of a fresh SQLite library after ``alembic upgrade 0001`` (made before the
#: migration's ``upgrade`` was split into one helper per table group).
EXPECTED = Path(__file__).with_name("schema_0001_sqlite.sql")


def _schema_at(tmp_path: Path, revision: str) -> str:
    path = tmp_path / "lib.db"
    engine = create_db_engine(f"sqlite:///{path}")
    try:
        command.upgrade(alembic_config(engine), revision)
    finally:
        engine.dispose()
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
    finally:
        con.close()
    return "".join(f"{sql};\n" for (sql,) in rows)


def test_first_migration_ddl_is_unchanged(tmp_path: Path) -> None:
    assert _schema_at(tmp_path, "0001") == EXPECTED.read_text(encoding="utf-8")
