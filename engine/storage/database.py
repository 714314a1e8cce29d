"""Database engine, connection settings and Alembic migrations for the library.

The default library is a SQLite file ``library.sqlite3`` in ``platformdirs.user_data_dir("loomscope")``;
any SQLAlchemy URL (e.g. ``postgresql+psycopg://user@host/db``) works too. SQLite connections get
``journal_mode=WAL``, ``foreign_keys=ON`` and a 10 s busy timeout (SQLite's own pragmas; WAL lets a
reader see the last committed state while a writer holds a transaction open).

Opening a SQLite file is careful (issue 15): before any pragma touches it, the file is read
through a separate read-only connection to refuse another application's database (tables but no
Loomscope schema) and to run ``PRAGMA quick_check`` (cached by file identity, so an unchanged
file is checked once per process); a file the process cannot write is opened read-only (no WAL
switch, no migration when none is pending; writes then fail with a "read-only" message); WAL is
switched on only when it is off; migrations run only when one is pending, under the write lock
taken up front (``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so several processes opening a
brand-new library at once all succeed.

Migrations live in ``engine/storage/migrations`` (shipped as package data) and run through a
programmatic :class:`alembic.config.Config`, so no ``alembic.ini`` is needed.

**The library file is opened by SQLite only (issue 25).** On POSIX a process loses *all* its advisory
locks on a file when any descriptor of that file is closed in it, so ``open(library).read()`` anywhere
in the process (a file-type sniffer, a file dialog's icon lookup, a backup) drops the read lock SQLite
holds; another process then takes itself for the last user, checkpoints and deletes the ``-wal`` file
and every later write of this process goes into the deleted file, invisible to everyone else. Rule for
contributors: never open the library file or its ``-wal``/``-shm`` siblings with anything but SQLite
(:mod:`engine.library_files` lists them; the importers refuse them; the app's file dialogs never read
file contents). And the storage layer defends itself: before each unit of work (a pool checkout) the
connection's files are checked (:class:`~engine.storage.lock_guard.LockGuard`): the library file and the ``-wal`` file on disk must
be the ones the connection opened (device and inode) and, where ``/proc/locks`` exists, the process
must still hold its lock on the library. When not, the connection checkpoints what its WAL holds (when
that WAL is still the one on disk), every pooled connection is closed so that SQLite takes its locks
afresh, one warning is logged, and the unit of work runs on a new connection. Nothing is retried, so
nothing is written twice.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import quote

from cachetools import LRUCache
from platformdirs import user_data_dir
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import StaticPool

from ..cache import lru
from ..errors import StorageError
from .lock_guard import LockGuard

#: Environment variable naming the library URL (same as every ``--db`` flag).
DB_ENV = "LOOMSCOPE_DB"
#: File name of the embedded library inside the user data directory.
DEFAULT_DB_FILE = "library.sqlite3"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 10_000
#: Fresh attempts of a migration that SQLite refused at once with "database is locked" (see upgrade).
UPGRADE_LOCKED_RETRIES = 5
#: Connection execution option marking a read-write unit of work.
WRITE_OPTION = "loomscope_write"


def default_db_path() -> Path:
    """Path of the embedded SQLite library (``user_data_dir("loomscope")/library.sqlite3``)."""
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
        read_only = False
        if not memory and "mode=ro" not in str(parsed.query):
            path = Path(database).expanduser()
            check_sqlite_file(path)
            read_only = _sqlite_read_only(path)
            if read_only:  # open through a read-only URI: nothing can be changed, not even the journal mode
                parsed = parsed.set(database=f"file:{path.resolve()}?{_read_only_params(path)}",
                                    query={**parsed.query, "uri": "true"})
        elif "mode=ro" in str(parsed.query) or "mode=ro" in database:
            read_only = True
        kwargs: dict = {"connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
        if memory:
            kwargs["poolclass"] = StaticPool  # one shared in-memory database
        engine = create_engine(parsed, **kwargs)
        _install_sqlite_pragmas(engine, wal=not memory and not read_only)
        if not memory and "immutable=1" not in (parsed.database or ""):  # immutable: SQLite takes no locks
            LockGuard(engine, Path(database).expanduser().resolve()).install()
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
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # switch to WAL only when it is off (the switch is a write; a library already in WAL
        # mode is left untouched, and a read-only one is never switched)
        if wal and str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL" if wal else "PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # Writers take the write lock up front (BEGIN IMMEDIATE) so that two read-then-write
        # transactions never deadlock or fail with SQLITE_BUSY_SNAPSHOT; readers stay deferred and
        # never wait for a writer under WAL.
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


#: Tables a Loomscope library may hold besides its own (Alembic's and SQLite's bookkeeping).
_BOOKKEEPING_TABLES = {"alembic_version", "sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}
#: ``(path, dev, inode, size, mtime_ns, wal size, wal mtime_ns)`` of files that passed ``quick_check``
#: (the most recent 1,024; a file whose identity is forgotten is checked again).
_CHECKED: LRUCache[tuple[object, ...], bool] = lru(1024)
_CHECKED_LOCK = threading.Lock()  # stores are opened from worker threads too


def _passed_check(ident: tuple[object, ...]) -> bool:
    with _CHECKED_LOCK:
        return ident in _CHECKED


def _identity(path: Path) -> tuple | None:
    """What identifies the file's current content cheaply.

    Device, inode, size and mtime of the file and of its ``-wal`` sibling (a commit changes one of them).
    """
    try:
        st = path.stat()
    except OSError:
        return None
    try:
        wal = Path(f"{path}-wal").stat()
        wal_id: tuple = (wal.st_size, wal.st_mtime_ns)
    except OSError:
        wal_id = (None, None)
    return (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, *wal_id)


def check_sqlite_file(path: Path) -> None:
    """Refuse a SQLite file that is not a usable Loomscope library, before anything writes to it.

    Read through a separate read-only connection (``mode=ro``; no pragma changes anything):

    - not a SQLite database at all → ``STORAGE_ERROR`` "not a SQLite database";
    - tables but no Loomscope schema (no ``alembic_version`` or no ``chats`` table) → ``STORAGE_ERROR``
      "another application's database", listing a few of its tables (the file is left as it was);
    - ``PRAGMA quick_check`` reports damage → ``STORAGE_ERROR`` "damaged" with SQLite's first finding.

    A missing or empty file passes (it becomes a new library). The quick check result is cached
    per process by file identity (:func:`_identity`), so an unchanged file is checked once.
    """
    ident = _identity(path)
    if ident is None or ident[3] == 0 or _passed_check(ident):
        return
    uri = f"file:{quote(str(path.resolve()))}?{_read_only_params(path)}"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StorageError("STORAGE_ERROR", f"cannot open the library file: {_one_line(exc)}",
                           file=str(path)) from None
    try:
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise StorageError("STORAGE_ERROR", f"not a SQLite database, or a damaged one ({exc})",
                                   file=str(path)) from None
            raise StorageError("STORAGE_ERROR", f"cannot read the library file: {_one_line(exc)}",
                               file=str(path)) from None
        if tables and not ({"alembic_version", "chats"} <= tables):
            others = sorted(tables - _BOOKKEEPING_TABLES)
            shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
            raise StorageError(
                "STORAGE_ERROR", f"another application's database, not a Loomscope library (tables: {shown}); "
                "it was left untouched", file=str(path))
        try:
            rows = [str(r[0]) for r in con.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as exc:
            rows = [str(exc)]
        if rows != ["ok"]:
            raise StorageError("STORAGE_ERROR", f"the library file is damaged (SQLite quick_check: {rows[0][:200]}); "
                               "nothing was written to it", file=str(path), details={"quick_check": rows[:5]})
    finally:
        con.close()
    with _CHECKED_LOCK:
        _CHECKED[ident] = True


def _read_only_params(path: Path) -> str:
    """SQLite URI parameters for reading ``path`` without writing anything.

    ``mode=ro``; plus ``immutable=1`` when the folder cannot be written and SQLite's ``-shm``
    file is absent: reading a WAL-mode library needs that file, which cannot be created there
    (SQLite then reads the main file as it is, without locks; nothing else can change it from
    this process anyway).
    """
    folder = path.resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK) and not Path(f"{path}-shm").exists():
        return "mode=ro&immutable=1"
    return "mode=ro"


def _sqlite_read_only(path: Path) -> bool:
    """Whether this process cannot write the library at ``path`` (an existing, non-empty file).

    SQLite needs the file itself and, for its ``-wal``/``-shm``/journal files, the folder (unless
    those files already exist and are writable).
    """
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return False
    except OSError:
        return False
    if not os.access(path, os.W_OK):
        return True
    folder = path.resolve().parent
    if os.access(folder, os.W_OK | os.X_OK):
        return False
    siblings = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    return not all(p.exists() and os.access(p, os.W_OK) for p in siblings)


def _one_line(exc: BaseException) -> str:
    """``Type: first line`` of a driver error (SPEC §10: errors print on one line).

    SQLAlchemy appends its own "Background on this error" lines and drivers add hints on
    further lines; only the driver's first line is kept.
    """
    orig = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return f"{type(orig).__name__}: {lines[0]}" if lines else type(orig).__name__


def describe_failure(exc: BaseException) -> str:
    """A driver error in words people act on: read-only and disk-full are named as such."""
    text = str(getattr(exc, "orig", None) or exc).lower()
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if "readonly" in text or "read-only" in text or sqlstate == "25006":
        return "the library is read-only (no permission to write it or its folder); nothing was changed"
    if "disk is full" in text or "no space left" in text or sqlstate == "53100":
        return "disk full: the library could not be written; nothing was changed"
    return _one_line(exc)


def _safe_url(url: str) -> str:
    """The URL with any password hidden (for messages)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


#: The newest migration's revision (``migrations/versions``): a library stamped with it needs no
#: migration, and opening it does not import Alembic (about 130 ms of every app start and every
#: command that opens a library). ``tests/engine/storage`` checks it against Alembic's own heads.
HEAD_REVISION = "0002"


def alembic_config(engine: Engine):  # an alembic.config.Config (Alembic is imported only to migrate)
    """A programmatic Alembic config bound to ``engine`` (no ``alembic.ini``)."""
    from alembic.config import Config  # Alembic only when a library is migrated

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def migration_pending(engine: Engine) -> bool:
    """Whether ``engine``'s database is not at :data:`HEAD_REVISION` (read in a read-only transaction).

    Reads the ``alembic_version`` table as Alembic keeps it (no table, no row or another revision:
    pending); Alembic itself is not needed for the answer.
    """
    with engine.connect() as conn:
        current: set[str] = set()
        if inspect(conn).has_table("alembic_version"):
            current = {row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))}
        conn.rollback()
    return current != {HEAD_REVISION}


def _upgrade_to_head(engine: Engine) -> None:
    """``alembic upgrade head`` on ``engine`` (Alembic imported here: only a library that needs it pays)."""
    from alembic import command  # Alembic only when a library is migrated

    command.upgrade(alembic_config(engine), "head")


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (``alembic upgrade head``) to ``engine``'s database.

    Nothing happens (no transaction that writes) when the database is already at the head. The
    migration transaction takes the write lock up front (SQLite ``BEGIN IMMEDIATE``, PostgreSQL
    ``pg_advisory_xact_lock``; see ``migrations/env.py``) and Alembic reads the current revision
    inside it, so of several processes opening a brand-new library at once, one migrates and the
    others wait, then find nothing to do.

    Raises
    ------
    StorageError
        ``STORAGE_ERROR`` when the database cannot be reached or migrated.
    """
    try:
        for attempt in range(UPGRADE_LOCKED_RETRIES + 1):
            try:
                if not migration_pending(engine):
                    return  # nothing to write: a read-only library opens, and no lock is taken
                _upgrade_to_head(engine)
                return
            except OperationalError as exc:
                # SQLite answers "database is locked" without waiting out the busy timeout when
                # waiting could deadlock (a brand-new file, its WAL switch racing another process's
                # migration): the whole attempt is a transaction, so it is safe to start it again.
                if "locked" not in str(exc) or attempt == UPGRADE_LOCKED_RETRIES:
                    raise
                time.sleep(0.05 * (attempt + 1))
    except StorageError:
        raise
    except Exception as exc:
        raise StorageError("STORAGE_ERROR", f"cannot prepare the library: {describe_failure(exc)}",
                           file=_safe_url(str(engine.url))) from None
