"""The library :class:`Store`: the composition root of the storage package.

It opens the database (URL or SQLite path, migrations, the write-lock guard of
:mod:`engine.storage.database` and :mod:`engine.storage.lock_guard`), and exposes one repository
per area plus the import service::

    store.chats        chats, their setup, branches and preview requests
    store.messages     a chat's messages
    store.characters   characters (cards)
    store.personas     personas
    store.lorebooks    lorebooks and their entries
    store.audits       the audit of each chat's last generation
    store.compaction   each chat's compaction state
    store.sync         import identities and SillyTavern folder sync state
    store.imports      files and SillyTavern folders written into the library

Every public repository method is one unit of work (one transaction, committed on return, rolled
back on any error), takes and returns pydantic models, and never hands out ORM objects. Sessions
are never shared across threads, so a ``Store`` may be used from several threads at once (the
GUI's preview worker and a generation thread).
"""

from __future__ import annotations

import os

from sqlalchemy import Engine

from .database import DB_ENV, create_db_engine, default_db_url, normalize_url, upgrade
from .imports import ImportService
from .repositories import (
    AuditRepository,
    CharacterRepository,
    ChatRepository,
    CompactionRepository,
    LorebookRepository,
    MessageRepository,
    PersonaRepository,
    SyncRepository,
)
from .seed import seed_sample
from .unit import Database


class Store:
    """The library. Build it with :meth:`Store.open` (or :func:`engine.storage.open_store`).

    Parameters
    ----------
    engine:
        A SQLAlchemy engine whose database is at the latest migration.

    Attributes
    ----------
    database:
        The shared :class:`~engine.storage.unit.Database` (engine, sessions, unit of work).
    chats, messages, characters, personas, lorebooks, audits, compaction, sync:
        The repositories (:mod:`engine.storage.repositories`).
    imports:
        The :class:`~engine.storage.imports.ImportService`.

    Notes
    -----
    Errors: missing objects raise :class:`~engine.errors.NotFoundError` (``CHAT_NOT_FOUND``,
    ``LOREBOOK_NOT_FOUND``, ``CHARACTER_NOT_FOUND``, ``PERSONA_NOT_FOUND``, ``MESSAGE_NOT_FOUND``);
    database failures raise :class:`~engine.errors.StorageError` (``STORAGE_ERROR``); nothing is
    half-written.
    """

    def __init__(self, engine: Engine) -> None:
        self.database = Database(engine)
        self.chats = ChatRepository(self.database)
        self.messages = MessageRepository(self.database)
        self.characters = CharacterRepository(self.database)
        self.personas = PersonaRepository(self.database)
        self.lorebooks = LorebookRepository(self.database)
        self.audits = AuditRepository(self.database)
        self.compaction = CompactionRepository(self.database)
        self.sync = SyncRepository(self.database)
        self.imports = ImportService(self.database)

    @classmethod
    def open(cls, url: str | None = None, *, seed: bool | None = None) -> Store:
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
        embedded = url is None and not os.environ.get(DB_ENV, "").strip()
        resolved = normalize_url(url) if url is not None else default_db_url()
        engine = create_db_engine(resolved)
        try:
            upgrade(engine)
            store = cls(engine)
            if seed if seed is not None else embedded:
                seed_sample(store.database)
        except BaseException:
            engine.dispose()
            raise
        return store

    @property
    def url(self) -> str:
        """The database URL (password hidden)."""
        return self.database.url

    @property
    def dialect(self) -> str:
        """Backend name: ``sqlite``, ``postgresql``, ..."""
        return self.database.dialect

    def close(self) -> None:
        """Release every pooled connection."""
        self.database.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
