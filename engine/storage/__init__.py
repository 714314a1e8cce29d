"""The library: SQLAlchemy storage behind a pydantic :class:`Store` (SPEC §8).

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
    """Open the library at ``url``, apply pending Alembic migrations, and seed it if asked.

    Parameters
    ----------
    url:
        A SQLAlchemy URL or a SQLite file path; ``None`` → ``$LOOMSCOPE_DB`` or the embedded
        default (``user_data_dir("loomscope")/library.sqlite3``).
    seed:
        Store the sample library if this library was never seeded. ``None`` (default) seeds only
        the embedded default library (no ``url`` and no ``$LOOMSCOPE_DB``).

    Raises
    ------
    StorageError
        ``STORAGE_ERROR`` when the database cannot be opened or migrated.
    """
    import os

    from .database import create_db_engine, upgrade

    embedded = url is None and not os.environ.get(DB_ENV, "").strip()
    resolved = normalize_url(url) if url is not None else default_db_url()
    engine = create_db_engine(resolved)
    try:
        upgrade(engine)
        store = Store(engine)
        if seed if seed is not None else embedded:
            from .seed import seed_sample

            seed_sample(store)
    except BaseException:
        engine.dispose()
        raise
    return store
