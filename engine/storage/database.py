"""Database engine, connection settings and Alembic migrations for the library.

The default library is a SQLite file ``library.sqlite3`` in ``platformdirs.user_data_dir("loomscope")``;
any SQLAlchemy URL (e.g. ``postgresql+psycopg://user@host/db``) works too. SQLite connections get
``journal_mode=WAL``, ``foreign_keys=ON`` and a 10 s busy timeout (SQLite's own pragmas; WAL lets a
reader see the last committed state while a writer holds a transaction open).

Migrations live in ``engine/storage/migrations`` (shipped as package data) and run through a
programmatic :class:`alembic.config.Config`, so no ``alembic.ini`` is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from ..errors import StorageError

#: Environment variable naming the library URL (same as every ``--db`` flag).
DB_ENV = "LOOMSCOPE_DB"
#: File name of the embedded library inside the user data directory.
DEFAULT_DB_FILE = "library.sqlite3"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 10_000
#: Connection execution option marking a read-write unit of work.
WRITE_OPTION = "loomscope_write"


def default_db_path() -> Path:
    """Path of the embedded SQLite library (``user_data_dir("loomscope")/library.sqlite3``)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("loomscope", appauthor=False)) / DEFAULT_DB_FILE


def default_db_url() -> str:
    """The library URL used when none is given: ``$LOOMSCOPE_DB`` or the embedded SQLite file."""
    env = os.environ.get(DB_ENV, "").strip()
    if env:
        return normalize_url(env)
    return f"sqlite:///{default_db_path()}"


def normalize_url(url: str) -> str:
    """Accept a SQLAlchemy URL or a plain file path (``./lib.db`` → ``sqlite:///./lib.db``)."""
    text = url.strip()
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser()}"
    return text


def create_db_engine(url: str) -> Engine:
    """Create an engine for ``url`` with the library's connection settings.

    Raises
    ------
    StorageError
        ``STORAGE_ERROR`` when the URL is malformed or the SQLite directory cannot be created.
    """
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError and friends
        raise StorageError("STORAGE_ERROR", f"not a database URL: {exc}", file=url) from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        memory = database in ("", ":memory:") or database.startswith("file::memory:")
        if not memory:
            try:
                Path(database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError("STORAGE_ERROR", f"cannot create the library folder: {exc.strerror}",
                                   file=database) from None
        kwargs: dict = {"connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
        if memory:
            kwargs["poolclass"] = StaticPool  # one shared in-memory database
        engine = create_engine(parsed, **kwargs)
        _install_sqlite_pragmas(engine, wal=not memory)
        return engine
    try:
        return create_engine(parsed, pool_pre_ping=True)
    except Exception as exc:  # missing driver etc.
        raise StorageError("STORAGE_ERROR", f"cannot open the database: {_one_line(exc)}",
                           file=_safe_url(url)) from None


def _install_sqlite_pragmas(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # pragma: no branch - tiny
        # pysqlite's implicit BEGIN handling breaks SAVEPOINT and DDL in transactions; take
        # control of BEGIN ourselves (SQLAlchemy docs, "Serializable isolation / Savepoints").
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if wal:
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA synchronous=NORMAL" if wal else "PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # Writers take the write lock up front (BEGIN IMMEDIATE) so that two read-then-write
        # transactions never deadlock or fail with SQLITE_BUSY_SNAPSHOT; readers stay deferred and
        # never wait for a writer under WAL.
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _one_line(exc: BaseException) -> str:
    """``Type: first line`` of a driver error (SPEC §10: errors print on one line).

    SQLAlchemy appends its own "Background on this error" lines and drivers add hints on
    further lines; only the driver's first line is kept.
    """
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return f"{type(orig).__name__}: {lines[0]}" if lines else type(orig).__name__


def _safe_url(url: str) -> str:
    """The URL with any password hidden (for messages)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


def alembic_config(engine: Engine):
    """A programmatic Alembic config bound to ``engine`` (no ``alembic.ini``)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (``alembic upgrade head``) to ``engine``'s database.

    Raises
    ------
    StorageError
        ``STORAGE_ERROR`` when the database cannot be reached or migrated.
    """
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), "head")
    except StorageError:
        raise
    except Exception as exc:
        raise StorageError("STORAGE_ERROR", f"cannot prepare the library: {_one_line(exc)}",
                           file=_safe_url(str(engine.url))) from None
