"""The library files SQLite holds open in this process, which nothing else in it may open (issue 25).

On POSIX systems a process's advisory locks on a file are dropped when *any* descriptor of that file is
closed in the process (``fcntl(2)``, "the locks are released when any file descriptor referring to the
file is closed"). SQLite keeps a read lock on the library file for as long as a connection is open and
relies on it: a second process that finds no lock believes it is the last user and, when it closes,
checkpoints and deletes the ``-wal`` file this process still writes into; those writes are then
invisible to every other process. So code in this process (a file-type sniffer, a file dialog, an
importer handed the library by mistake) must never open and close the library file or its ``-wal`` /
``-shm`` / ``-journal`` siblings.

:mod:`engine.storage.database` registers every SQLite library it opens here (:func:`register`) and
the importers refuse to read a registered file (:func:`is_library_file`). This module opens nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

#: Suffixes of the files SQLite keeps next to a database (``-wal``, ``-shm``, rollback ``-journal``).
SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")

_OPEN: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) of a library file -> engines holding it
_LOCK = threading.Lock()


def identity(path: str | Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``path`` (``stat``; nothing is opened), or ``None`` when it does not exist."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def register(path: str | Path) -> Callable[[], None]:
    """Note that SQLite holds the library file ``path`` open; returns the callable that forgets it again."""
    ident = identity(path)
    if ident is None:
        return lambda: None
    with _LOCK:
        _OPEN[ident] = _OPEN.get(ident, 0) + 1

    def forget() -> None:
        with _LOCK:
            left = _OPEN.get(ident, 0) - 1
            if left > 0:
                _OPEN[ident] = left
            else:
                _OPEN.pop(ident, None)

    return forget


def is_library_file(path: str | Path) -> bool:
    """Whether ``path`` is an open library file or one of its SQLite siblings (``stat`` only).

    Links are followed, so a link to the library counts as the library.
    """
    with _LOCK:
        if not _OPEN:
            return False
        known = set(_OPEN)
    if identity(path) in known:
        return True
    text = str(path)
    return any(text.endswith(suffix) and identity(text[: -len(suffix)]) in known for suffix in SIDECAR_SUFFIXES)


__all__ = ["SIDECAR_SUFFIXES", "identity", "is_library_file", "register"]
