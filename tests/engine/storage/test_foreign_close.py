"""The library survives a foreign close (issue 25 item 1).

On POSIX, opening and closing the library file anywhere in the process drops every lock SQLite holds on it;
another process (here a real ``loomscope chats`` run) then checkpoints and deletes the ``-wal`` file this process
writes into, and every later write was invisible to other processes. The storage layer now notices the lost lock
(or the replaced ``-wal`` file) before the next unit of work and reconnects.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.library_files import is_library_file
from engine.schema import Chat, ChatMessage
from engine.storage import open_store
from engine.storage.lock_guard import PROC_LOCKS, process_holds_lock

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX advisory locks")


def _titles_seen_by_another_process(db: Path) -> list[str]:
    """``loomscope chats --format json`` in a separate process (the CLI a writer runs in a terminal)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "engine.cli", "chats", "--db", str(db), "--format", "json"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=True)
    return sorted(c["title"] for c in json.loads(out.stdout))


def _chat(title: str) -> Chat:
    return Chat(messages=[ChatMessage(role="user", content=f"{title} says hello")])


def test_both_writes_are_visible_after_a_foreign_close(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "lib.db"
    store = open_store(str(db), seed=False)
    try:
        store.chats.add(_chat("first"), title="first")
        with open(db, "rb") as fh:  # any code in the process: a sniffer, a dialog, a backup
            assert fh.read(16) == b"SQLite format 3\x00"
        if PROC_LOCKS.exists():
            assert process_holds_lock((db.stat().st_dev, db.stat().st_ino)) is False  # the mechanism
        assert _titles_seen_by_another_process(db) == ["first"]
        with caplog.at_level(logging.WARNING, logger="engine.storage"):
            store.chats.add(_chat("second"), title="second")
        assert _titles_seen_by_another_process(db) == ["first", "second"]
        assert [r.levelname for r in caplog.records if r.name == "engine.storage"] == ["WARNING"]
        assert sorted(c.title for c in store.chats.summaries()) == ["first", "second"]
    finally:
        store.close()


@pytest.mark.skipif(not PROC_LOCKS.exists(), reason="needs /proc/locks (Linux)")
def test_a_lost_lock_is_taken_again_before_another_process_deletes_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "lib.db"
    store = open_store(str(db), seed=False)
    try:
        store.chats.add(_chat("first"), title="first")
        ident = (db.stat().st_dev, db.stat().st_ino)
        with open(db, "rb") as fh:
            fh.read(16)
        assert process_holds_lock(ident) is False
        store.chats.summaries()  # the next unit of work notices and takes the lock again
        assert process_holds_lock(ident) is True
        wal = Path(f"{db}-wal")
        assert wal.exists()
        assert _titles_seen_by_another_process(db) == ["first"]
        assert wal.exists()  # the other process saw our lock and left the WAL alone
        store.chats.add(_chat("second"), title="second")
        assert _titles_seen_by_another_process(db) == ["first", "second"]
    finally:
        store.close()


def test_the_open_library_is_never_read_by_an_importer(tmp_path: Path) -> None:
    from engine.errors import LoomscopeImportError
    from engine.importers import load_any

    db = tmp_path / "lib.db"
    store = open_store(str(db), seed=False)
    try:
        store.chats.add(_chat("first"), title="first")
        assert is_library_file(db) and is_library_file(f"{db}-wal")
        link = tmp_path / "innocent.json"
        link.symlink_to(db)
        for path in (db, link, Path(f"{db}-wal")):
            with pytest.raises(LoomscopeImportError) as err:
                load_any(path)
            assert "library" in err.value.message
        if PROC_LOCKS.exists():
            assert process_holds_lock((db.stat().st_dev, db.stat().st_ino)) is True
    finally:
        store.close()
    assert not is_library_file(tmp_path / "other.db")
