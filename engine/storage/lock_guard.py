"""Noticing that SQLite lost its locks on the library, and taking them again (issue 25 item 1).

See :mod:`engine.storage.database` for why a lock is lost (POSIX drops a process's locks on a file when
any of its descriptors of that file is closed) and what follows from it (another process deletes the
``-wal`` file this one still writes into). :class:`LockGuard` checks, at every pool checkout (each unit
of work of the :class:`~engine.storage.Store`), that

1. the library file and its ``-wal`` file on disk are the ones the connection opened (device and inode,
   by ``stat``; nothing is opened), and
2. where ``/proc/locks`` exists (Linux), this process still holds a lock on the library file.

When either fails: the connection checkpoints what its WAL holds (only when that WAL is still the file
on disk: a deleted WAL's frames were checkpointed by the process that deleted it), every idle pooled
connection is closed and the pool invalidated, so that SQLite, whose in-process lock bookkeeping is
shared by all connections to one file, takes its locks afresh; one warning is logged; the checkout is
retried on a new connection (SQLAlchemy's disconnect handling). The unit of work has not started yet,
so nothing is lost and nothing is written twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import InvalidatePoolError

from .. import library_files

_log = logging.getLogger("engine.storage")

#: ``/proc/locks`` (Linux): one line per lock, ``N: POSIX ADVISORY READ <pid> <maj>:<min>:<inode> <start> <end>``.
PROC_LOCKS = Path("/proc/locks")
#: ``record.info`` key of what a connection opened: ``(library (dev, ino), wal (dev, ino) or None)``.
_OPENED = "loomscope_opened_files"


def _device_text(dev: int) -> str:
    """``st_dev`` as ``/proc/locks`` writes it: ``%02x:%02x`` of major and minor."""
    return f"{os.major(dev):02x}:{os.minor(dev):02x}"


def process_holds_lock(ident: tuple[int, int], pid: int | None = None) -> bool | None:
    """Whether process ``pid`` (default: this one) holds a POSIX lock on the file ``ident`` = ``(dev, inode)``.

    ``None`` when this cannot be told (no ``/proc/locks``: not Linux).
    """
    try:
        text = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    want_pid = str(os.getpid() if pid is None else pid)
    want_file = f"{_device_text(ident[0])}:{ident[1]}"
    for line in text.splitlines():
        parts = line.split()
        # "1: POSIX  ADVISORY  READ 8236 fe:00:5408323 1073741826 1073742335" (blocked waiters: "->")
        if len(parts) >= 6 and parts[1] == "POSIX" and parts[4] == want_pid and parts[5] == want_file:
            return True
    return False


class LockGuard:
    """The lock and file checks of one SQLite engine (see the module docstring).

    Parameters
    ----------
    engine:
        A SQLAlchemy engine on the SQLite file ``path`` (not an in-memory database).
    path:
        The library file, resolved.
    """

    def __init__(self, engine: Engine, path: Path) -> None:
        self.engine = engine
        self.path = path
        self.wal = Path(f"{path}-wal")
        self._forget: Any = None
        self._lock = threading.Lock()
        #: incidents noticed (each logged once) — for tests and the log
        self.recoveries = 0

    def install(self) -> None:
        """Listen to the engine's ``connect`` and ``checkout`` events."""
        event.listen(self.engine, "connect", self._on_connect)
        event.listen(self.engine.pool, "checkout", self._on_checkout)

    def _on_connect(self, dbapi_conn: sqlite3.Connection, record: Any) -> None:
        # a read opens the WAL (SQLite keeps it open until the connection closes): what it opened is
        # what is on disk right now
        with contextlib.suppress(sqlite3.Error):  # the unit of work reports it
            dbapi_conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        record.info[_OPENED] = (library_files.identity(self.path), library_files.identity(self.wal))
        with self._lock:
            if self._forget is None and record.info[_OPENED][0] is not None:
                forget = library_files.register(self.path)
                self._forget = forget
                # forgotten when the engine goes away (the pool's connections close with it)
                weakref.finalize(self.engine, forget)

    def problem(self, record: Any) -> tuple[str, bool] | None:
        """What is wrong with the connection of ``record``, and whether its WAL is still the one on disk.

        ``None`` when nothing is.
        """
        opened = record.info.get(_OPENED)
        if opened is None:
            return None
        lib, wal = opened
        now_lib = library_files.identity(self.path)
        if lib is not None and now_lib != lib:
            return "the library file was replaced or removed", False
        now_wal = library_files.identity(self.wal)
        if wal is None:
            record.info[_OPENED] = (lib, now_wal)  # a brand-new library: its WAL came with the first write
        elif now_wal != wal:
            return "its -wal file was deleted by another process", False
        if lib is not None and process_holds_lock(lib) is False:
            return "its lock was dropped (other code in this process opened and closed the file)", True
        return None

    def _on_checkout(self, dbapi_conn: sqlite3.Connection, record: Any, _proxy: Any) -> None:
        found = self.problem(record)
        if found is None:
            return
        why, wal_is_ours = found
        if wal_is_ours:  # copy what the WAL holds into the library file before the connections close
            with contextlib.suppress(sqlite3.Error):  # closing the last connection checkpoints too
                dbapi_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        with self._lock:
            self.recoveries += 1
        _log.warning("library %s: %s; SQLite's locks were taken again on new connections "
                     "(nothing was lost)", self.path, why)
        # SQLite shares its lock state among all connections of the process to one file: every one
        # must close before a new connection takes a real lock again
        self.engine.pool.dispose()
        raise InvalidatePoolError(f"library connection lost its locks: {why}")


__all__ = ["PROC_LOCKS", "LockGuard", "process_holds_lock"]
