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


def test_head_revision_is_alembics_newest_migration() -> None:
    """``database.HEAD_REVISION`` (read without Alembic when a library opens) is Alembic's one head."""
    from alembic.script import ScriptDirectory

    from engine.storage.database import HEAD_REVISION

    engine = create_db_engine("sqlite://")
    assert ScriptDirectory.from_config(alembic_config(engine)).get_heads() == [HEAD_REVISION]


def test_opening_an_up_to_date_library_does_not_import_alembic(tmp_path) -> None:
    """A library at the head opens without Alembic (the app's start and every library command)."""
    import subprocess
    import sys

    from engine.storage import open_store

    url = f"sqlite:///{tmp_path / 'lib.db'}"
    open_store(url, seed=False).close()  # created and migrated here
    code = ("import sys; from engine.storage import open_store; "
            f"open_store({url!r}, seed=False).close(); print('alembic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
