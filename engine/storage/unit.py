"""The library's database handle: one SQLAlchemy engine, its sessions and the unit of work.

Every repository of :class:`~engine.storage.Store` shares one :class:`Database`. A unit of work
(:meth:`Database.unit`) is one transaction: committed on return, rolled back on any error. A
read-write unit takes the write lock first (SQLite ``BEGIN IMMEDIATE`` through
:data:`~engine.storage.database.WRITE_OPTION`, see :mod:`engine.storage.lock_guard`), so nothing is
ever half-written. Sessions are never shared across threads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError
from sqlalchemy import JSON, Engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from ..errors import LoomscopeError, StorageError
from . import _orm as orm
from .database import WRITE_OPTION, describe_failure


def _raised_while_reading_rows(exc: BaseException) -> bool:
    """Whether ``exc`` came out of SQLAlchemy turning stored values into Python ones.

    Such as a JSON text that does not parse or a malformed date, as opposed to an error of our own code.
    """
    tb = exc.__traceback__
    last_module = ""
    while tb is not None:
        last_module = tb.tb_frame.f_globals.get("__name__", "") or last_module
        tb = tb.tb_next
    return last_module.startswith(("sqlalchemy.", "json.", "json")) or last_module == "json.decoder"


class Database:
    """One library database: the engine, a session factory and the unit of work.

    Parameters
    ----------
    engine:
        A SQLAlchemy engine whose database is at the latest migration.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @property
    def url(self) -> str:
        """The database URL (password hidden)."""
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        """Backend name: ``sqlite``, ``postgresql``, ..."""
        return self.engine.dialect.name

    def dispose(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    @contextmanager
    def unit(self, *, write: bool = True) -> Iterator[Session]:
        """One transaction (SQLite: ``BEGIN IMMEDIATE`` when ``write``).

        Parameters
        ----------
        write:
            Take the write lock up front (a read-only unit never blocks a writer).

        Yields
        ------
        Session
            Used by this thread only, for the duration of the ``with`` block.

        Raises
        ------
        StorageError
            ``STORAGE_ERROR`` for any database failure, and for a stored row this version cannot read
            (naming the table when SQLite can find it); :class:`~engine.errors.LoomscopeError` raised inside
            passes through unchanged. Either way the transaction is rolled back.
        """
        try:
            with self._sessions.begin() as session:
                session.connection(execution_options={WRITE_OPTION: write})
                yield session
        except LoomscopeError:
            raise
        except ValidationError as exc:
            raise self._unreadable_model(exc) from None
        except SQLAlchemyError as exc:
            raise self._database_failure(exc) from None
        except ValueError as exc:
            # a JSON column holding text that is not JSON (a row written by hand or by another tool):
            # SQLAlchemy's JSON type fails while reading it. Name the table (and row) instead of a traceback.
            if not _raised_while_reading_rows(exc):
                raise
            raise self._unreadable_json(exc) from None

    def _unreadable_model(self, exc: ValidationError) -> StorageError:
        # a row this version cannot read (written by hand, or by another version sharing the
        # database): an error with a stable code, never a traceback
        first: Mapping[str, Any] = exc.errors(include_url=False, include_input=False)[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ())) or None
        return StorageError(
            "STORAGE_ERROR", f"the library holds a {exc.title} this version cannot read",
            file=self.url, place=where, details={"error": str(first.get("msg", ""))[:300]},
        )

    def _database_failure(self, exc: SQLAlchemyError) -> StorageError:
        plain = describe_failure(exc)
        orig = getattr(exc, "orig", None)  # the DBAPI error, when the driver raised one
        if plain.startswith(("the library is read-only", "disk full")):
            return StorageError("STORAGE_ERROR", plain, file=self.url,
                                details={"error": str(orig if orig else exc)[:300]})
        return StorageError(
            "STORAGE_ERROR", f"the library could not be read or written ({type(exc).__name__})",
            file=self.url, details={"error": str(orig if orig else exc)[:300]},
        )

    def _unreadable_json(self, exc: ValueError) -> StorageError:
        table, column, key = self._malformed_json_place()
        where = f"{table}.{column}" + (f" (row {key})" if key else "") if table else None
        return StorageError(
            "STORAGE_ERROR",
            f"the library's table {table!r} holds a value this version cannot read ({type(exc).__name__})"
            if table else f"the library holds a value this version cannot read ({type(exc).__name__})",
            file=self.url, place=where, details={"error": str(exc)[:300], "table": table},
        )

    def _malformed_json_place(self) -> tuple[str | None, str | None, str | None]:
        """``(table, column, primary key)`` of the first JSON cell that is not valid JSON.

        SQLite only (``json_valid``); PostgreSQL's ``json`` type never stores invalid JSON.
        ``(None, None, None)`` when nothing is found or the check itself fails.
        """
        if self.dialect != "sqlite":
            return None, None, None
        try:
            with self.engine.connect() as conn:
                for table in orm.Base.metadata.sorted_tables:
                    pk = [c.name for c in table.primary_key.columns]
                    for col in table.columns:
                        if not isinstance(col.type, JSON):
                            continue
                        key_sql = " || '/' || ".join(f'CAST("{k}" AS TEXT)' for k in pk) or "rowid"
                        row = conn.execute(text(
                            f'SELECT {key_sql} FROM "{table.name}" WHERE "{col.name}" IS NOT NULL '
                            f'AND json_valid("{col.name}") = 0 LIMIT 1')).first()
                        if row is not None:
                            return table.name, col.name, str(row[0])
        except SQLAlchemyError:
            return None, None, None
        return None, None, None


class Repository:
    """One area of the library (``store.chats``, ``store.lorebooks``, ...) over the shared database.

    Parameters
    ----------
    db:
        The library database, shared with the other repositories (one unit of work and write lock).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
