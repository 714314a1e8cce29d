"""What a SillyTavern user folder holds beyond cards, worlds and chats, read for issue 27.

* World entry hashes (:func:`with_entry_hashes`): SillyTavern keys the stored timed effects by
  a hash of each entry's raw JSON (``getSortedEntries``), recorded at import so that timers
  stored by SillyTavern keep working (:mod:`engine.lorebook.st_hash`).

Each reader takes what :func:`engine.importers.st_folder.read_st_folder` already holds; none of
them reads outside the folder or fails an import: a part that cannot be read is left out.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import LoomscopeImportError
from ..lorebook.st_hash import record_hashes
from ..schema.lorebook import Lorebook
from ._io import decode_utf8, parse_json, read_bytes

__all__ = ["with_entry_hashes"]


def with_entry_hashes(book: Lorebook, path: Path) -> Lorebook:
    """``book`` (read from world file ``path``) with SillyTavern's entry hashes recorded.

    The book's ``st_entry_hashes`` maps a digest of each entry to the hash SillyTavern 1.12.6
    gives its raw JSON (``getStringHash(JSON.stringify(entry))``, world-info.js 3620–3627). The
    file was read already; if it cannot be read again the book is returned unchanged.
    """
    try:
        name, raw = read_bytes(path)
        data = parse_json(decode_utf8(raw, name), name)
    except (LoomscopeImportError, OSError):
        return book
    if not isinstance(data, dict):
        return book
    return record_hashes(book, data.get("entries"))
