"""The library: SQLAlchemy storage behind a pydantic :class:`Store` and its repositories (SPEC §8).

``open_store(url)`` opens (and migrates) a library; ``None`` means ``$LOOMSCOPE_DB`` or the
embedded SQLite file in the user data directory, which is seeded with the sample library on its
first start. The ORM is private to this package; the Store speaks pydantic only.
"""

from __future__ import annotations

from .database import DB_ENV, default_db_path, default_db_url, normalize_url
from .models import (
    CharacterSummary,
    ChatSetup,
    ChatSummary,
    FolderImportReport,
    ImportRef,
    LorebookLink,
    LorebookSummary,
    PersonaSummary,
    StoredChat,
    SyncConflict,
    Usage,
)
from .store import Store

__all__ = [
    "DB_ENV", "CharacterSummary", "ChatSetup", "ChatSummary", "FolderImportReport", "ImportRef",
    "LorebookLink", "LorebookSummary", "PersonaSummary",
    "Store", "StoredChat", "SyncConflict", "Usage", "default_db_path", "default_db_url", "normalize_url", "open_store",
]


def open_store(url: str | None = None, *, seed: bool | None = None) -> Store:
    """Open the library at ``url`` (see :meth:`Store.open`: migrations, lock guard, seeding).

    Parameters
    ----------
    url:
        A SQLAlchemy URL or a SQLite file path; ``None`` → ``$LOOMSCOPE_DB`` or the embedded default.
    seed:
        Store the sample library if this library was never seeded; ``None`` seeds only the embedded default.

    Raises
    ------
    StorageError
        ``STORAGE_ERROR`` when the database cannot be opened or migrated.
    """
    return Store.open(url, seed=seed)
