"""The library :class:`Store`: chats, messages, characters, personas, lorebooks, settings, audits.

Every public method is one unit of work (``with sessions.begin()``: one transaction, committed
on return, rolled back on any error), takes and returns pydantic models, and never hands out
ORM objects. Sessions are never shared across threads, so a ``Store`` may be used from several
threads at once (the GUI's preview worker and a generation thread).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError
from sqlalchemy import Engine, Table, delete, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from ..errors import LoomscopeError, NotFoundError, StorageError
from ..schema import (
    Character,
    Chat,
    ChatMessage,
    ContextSettings,
    Lorebook,
    LorebookEntry,
    Persona,
    PreviewRequest,
)
from ..schema.audit import PromptContextAudit
from ..schema.sillytavern import GroupSetup, SillyTavernSetup
from . import _orm as orm
from .database import WRITE_OPTION, describe_failure
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

#: Lorebook link scopes (SillyTavern ``getSortedEntries``).
LOREBOOK_SCOPES = ("chat", "character", "global")

_RESULT_KEYS = ("tool_call_id", "toolCallId", "callId")
_FLAG_KEYS = ("pinned", "manualExcluded", "hidden")


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


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes; everything we store is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


# --------------------------------------------------------------------------------------------
# pydantic <-> row conversion (pure functions; rows never leave this module)


def _message_row(chat_id: str, idx: int, message: ChatMessage) -> orm.MessageRow:
    return orm.MessageRow(**_message_values(chat_id, idx, message))


#: Messages inserted per statement when a chat is stored (progress is reported per batch).
MESSAGE_BATCH = 5000


def _message_values(chat_id: str, idx: int, message: ChatMessage) -> dict[str, Any]:
    """The ``messages`` row of one message as column values (for ORM rows and bulk inserts)."""
    dump = message.model_dump(mode="json")
    meta: dict[str, Any] = dict(dump.pop("meta", None) or {})
    flags = {key: bool(meta.pop(key, False)) for key in _FLAG_KEYS}
    role = dump.pop("role")
    content = dump.pop("content", None)
    name = dump.pop("name", None)
    tool_calls = dump.pop("tool_calls", None)
    result_id = result_key = None
    for key in _RESULT_KEYS:
        value = dump.pop(key, None)
        if value is None:
            continue
        if result_id is None:
            result_id, result_key = str(value), key
        else:  # a second, different id key: keep it verbatim
            dump[key] = value
    swipes = None
    swipes_in = None
    if "swipes" in meta:
        swipes, swipes_in = meta.pop("swipes"), "meta"
    elif "swipes" in dump:
        swipes, swipes_in = dump.pop("swipes"), "fields"
    return dict(
        chat_id=chat_id,
        idx=idx,
        role=role,
        name=name,
        content=content,
        tool_calls=tool_calls,
        tool_result_id=result_id,
        tool_result_key=result_key,
        pinned=flags["pinned"],
        manual_excluded=flags["manualExcluded"],
        hidden=flags["hidden"],
        swipes=swipes,
        extra={"meta": meta, "fields": dump, "swipes_in": swipes_in},
    )


def _message_model(row: orm.MessageRow) -> ChatMessage:
    extra = row.extra or {}
    data: dict[str, Any] = dict(extra.get("fields") or {})
    meta: dict[str, Any] = dict(extra.get("meta") or {})
    meta.update(pinned=row.pinned, manualExcluded=row.manual_excluded, hidden=row.hidden)
    if extra.get("swipes_in") == "meta":
        meta["swipes"] = row.swipes
    elif extra.get("swipes_in") == "fields":
        data["swipes"] = row.swipes
    data.update(role=row.role, content=row.content, meta=meta)
    if row.name is not None:
        data["name"] = row.name
    if row.tool_calls is not None:
        data["tool_calls"] = row.tool_calls
    if row.tool_result_id is not None:
        data[row.tool_result_key or "tool_call_id"] = row.tool_result_id
    return ChatMessage.model_validate(data)


def _entry_row(lorebook_id: str, position: int, entry: LorebookEntry) -> orm.LorebookEntryRow:
    return orm.LorebookEntryRow(
        lorebook_id=lorebook_id,
        position=position,
        uid=str(entry.uid),
        comment=entry.comment,
        constant=entry.constant,
        disable=entry.disable,
        data=entry.model_dump(mode="json"),
    )



def _chunks(values: list[str], size: int) -> Iterator[list[str]]:
    """``values`` in lists of at most ``size`` (bound parameters per statement stay few)."""
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _read_import_files(path_list: list[str | Path], on_warning: Callable[[str, str], None] | None,
                       on_progress: Callable[[str, str, int, int], None] | None) -> list[tuple[Path, Any]]:
    """Parse every file (``load_any``), reporting warnings and read progress; the first bad file raises."""
    from ..importers import load_any  # lazy: the importers are a sibling package

    items = []
    for n_read, path in enumerate(path_list):
        if on_progress is not None:
            on_progress("read", str(path), n_read, len(path_list))
        item = load_any(Path(path))
        for warning in getattr(item, "warnings", None) or []:
            if on_warning is not None:
                on_warning(str(path), str(warning))
        items.append((Path(path), item))
    if on_progress is not None and path_list:
        on_progress("read", str(path_list[-1]), len(path_list), len(path_list))
    return items

class _SameFile:
    """Imports of single files without silent duplicates (issue 30).

    A file imported before (identity: its resolved path, ``file:<path>`` in ``import_sources``; a
    file of several transcripts adds ``#k``) is updated in place (``changed``), or left alone when
    its content is the same (``unchanged``); failing that, an object of the same kind, name and
    content digest already in the library is that object (``unchanged``). An object edited in
    Loomscope since its file was imported is never overwritten: the file comes in as a new copy,
    with a warning. ``as_new`` keeps both always (a new object; later imports of the path update it).
    """

    def __init__(self, store: Store, session: Session, as_new: bool,
                 on_warning: Callable[[str, str], None] | None) -> None:
        self.s, self.session, self.as_new, self.on_warning = store, session, as_new, on_warning

    def _find(self, kind: str, key: str, name: str, digest: str, value: Any, path: Path) -> tuple[str | None, str]:
        from ..importers.st_folder import content_digest  # lazy: the importers are a sibling package

        session = self.session
        src = session.get(orm.ImportSourceRow, (kind, key))
        row_cls: Any = {"character": orm.CharacterRow, "lorebook": orm.LorebookRow, "chat": orm.ChatRow}[kind]
        if src is not None and session.get(row_cls, src.object_id) is not None:
            if src.digest == digest:
                return src.object_id, "unchanged"
            if self.s._locally_edited(session, kind, src.object_id, src):
                if self.on_warning is not None:
                    self.on_warning(str(path), f"the {kind} imported from this file before was edited in Loomscope "
                                               "since; kept, and the file imported as a new copy")
                return None, "added"
            self.s._replace_imported(session, kind, src.object_id, value)
            return src.object_id, "changed"
        name_col = row_cls.title if kind == "chat" else row_cls.name
        for cand in session.scalars(select(row_cls.id).where(name_col == name)).all():
            found = self.s._load_value(session, kind, cand)
            if kind == "chat":
                found = found.model_copy(update={"title": name})
            if content_digest(found) == digest:
                return str(cand), "unchanged"
        return None, "added"

    def store(self, kind: str, path: Path, name: str, value: Any, insert: Callable[[], str],
              part: str = "") -> ImportRef:
        """Insert ``value`` (``insert()``), or find / update the object it already is; record the file's identity."""
        from ..importers.st_folder import content_digest

        key = f"file:{path.resolve()}{part}"
        digest = content_digest(value)
        obj_id, status = (None, "added") if self.as_new else self._find(kind, key, name, digest, value, path)
        if obj_id is None:
            obj_id = insert()
        if status != "unchanged":
            src = self.session.get(orm.ImportSourceRow, (kind, key))
            if src is None:
                self.session.add(orm.ImportSourceRow(kind=kind, key=key, object_id=obj_id, digest=digest,
                                                     updated_at=_now()))
            else:
                src.object_id, src.digest, src.updated_at = obj_id, digest, _now()
            self.session.flush()
        return ImportRef(kind=kind, id=obj_id, name=name, status=status)  # type: ignore[arg-type]


#: What a stored SillyTavern setup never holds: request-only fields (lorebook scopes live on the
#: links; a group's speaker and its members' cards are filled per preview).
_SETUP_NOT_STORED: dict[str, Any] = {"lorebook_scopes": True,
                                     "group": {"speaker": True, "members": {"__all__": {"character"}}}}


class Store:
    """The library. Build it with :func:`engine.storage.open_store` (which migrates and seeds).

    Parameters
    ----------
    engine:
        A SQLAlchemy engine whose database is at the latest migration.

    Notes
    -----
    Errors: missing objects raise :class:`~engine.errors.NotFoundError` (``CHAT_NOT_FOUND``,
    ``LOREBOOK_NOT_FOUND``, ``CHARACTER_NOT_FOUND``, ``MESSAGE_NOT_FOUND``); database failures
    raise :class:`~engine.errors.StorageError` (``STORAGE_ERROR``); nothing is half-written.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        #: Test hook: called inside :meth:`put_audit`'s transaction after the new row is flushed
        #: and before the commit (the crash-safety test kills the process there).
        self._after_audit_flush: Callable[[], None] | None = None

    # ---------------------------------------------------------------- plumbing
    @property
    def url(self) -> str:
        """The database URL (password hidden)."""
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        """Backend name: ``sqlite``, ``postgresql``, ..."""
        return self._engine.dialect.name

    def close(self) -> None:
        """Release every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _unit(self, *, write: bool = True) -> Iterator[Session]:
        """One transaction (SQLite: ``BEGIN IMMEDIATE`` when ``write``); SQLAlchemy errors become ``STORAGE_ERROR``."""
        try:
            with self._sessions.begin() as session:
                session.connection(execution_options={WRITE_OPTION: write})
                yield session
        except LoomscopeError:
            raise
        except ValidationError as exc:
            # a row this version cannot read (written by hand, or by another version sharing the
            # database): an error with a stable code, never a traceback
            first: Mapping[str, Any] = exc.errors(include_url=False, include_input=False)[0] if exc.errors() else {}
            where = ".".join(str(x) for x in first.get("loc", ())) or None
            raise StorageError(
                "STORAGE_ERROR", f"the library holds a {exc.title} this version cannot read",
                file=self.url, place=where, details={"error": str(first.get("msg", ""))[:300]},
            ) from None
        except SQLAlchemyError as exc:
            plain = describe_failure(exc)
            orig = getattr(exc, "orig", None)  # the DBAPI error, when the driver raised one
            if plain.startswith(("the library is read-only", "disk full")):
                raise StorageError("STORAGE_ERROR", plain, file=self.url,
                                   details={"error": str(orig if orig else exc)[:300]}) from None
            raise StorageError(
                "STORAGE_ERROR", f"the library could not be read or written ({type(exc).__name__})",
                file=self.url, details={"error": str(orig if orig else exc)[:300]},
            ) from None
        except ValueError as exc:
            # a JSON column holding text that is not JSON (a row written by hand or by another tool):
            # SQLAlchemy's JSON type fails while reading it. Name the table (and row) instead of a traceback.
            if not _raised_while_reading_rows(exc):
                raise
            table, column, key = self._malformed_json_place()
            where = f"{table}.{column}" + (f" (row {key})" if key else "") if table else None
            raise StorageError(
                "STORAGE_ERROR",
                f"the library's table {table!r} holds a value this version cannot read ({type(exc).__name__})"
                if table else f"the library holds a value this version cannot read ({type(exc).__name__})",
                file=self.url, place=where, details={"error": str(exc)[:300], "table": table},
            ) from None

    def _malformed_json_place(self) -> tuple[str | None, str | None, str | None]:
        """``(table, column, primary key)`` of the first JSON cell that is not valid JSON.

        SQLite only (``json_valid``); PostgreSQL's ``json`` type never stores invalid JSON.
        ``(None, None, None)`` when nothing is found or the check itself fails.
        """
        if self.dialect != "sqlite":
            return None, None, None
        from sqlalchemy import JSON, text

        try:
            with self._engine.connect() as conn:
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

    @staticmethod
    def _chat_row(session: Session, chat_id: str, *, lock: bool = False) -> orm.ChatRow:
        # lock: SELECT ... FOR UPDATE on PostgreSQL, so concurrent appends number messages in turn
        row = session.get(orm.ChatRow, chat_id, with_for_update=lock or None)
        if row is None:
            raise NotFoundError("CHAT_NOT_FOUND", "no chat with that id in the library", file=chat_id)
        return row

    @staticmethod
    def _lorebook_row(session: Session, lorebook_id: str) -> orm.LorebookRow:
        row = session.get(orm.LorebookRow, lorebook_id)
        if row is None:
            raise NotFoundError("LOREBOOK_NOT_FOUND", "no lorebook with that id in the library",
                                file=lorebook_id)
        return row

    @staticmethod
    def _touch(row: orm.ChatRow) -> None:
        row.updated_at = _now()

    # ---------------------------------------------------------------- inserts (session-level)
    @staticmethod
    def _insert_lorebook(session: Session, book: Lorebook, *, character_id: str | None = None) -> str:
        book_id = _new_id()
        session.add(orm.LorebookRow(
            id=book_id, name=book.name, character_id=character_id, created_at=_now(),
            data=book.model_dump(mode="json", exclude={"entries"}),
        ))
        session.flush()  # parent row before its entries (PostgreSQL checks FKs per statement)
        session.add_all(_entry_row(book_id, i, e) for i, e in enumerate(book.entries))
        return book_id

    @classmethod
    def _insert_character(cls, session: Session, character: Character, *, avatar: bytes | None = None) -> str:
        char_id = _new_id()
        session.add(orm.CharacterRow(
            id=char_id, name=character.name, created_at=_now(),
            data=character.model_dump(mode="json", exclude={"character_book"}), avatar=avatar,
        ))
        session.flush()
        if character.character_book is not None:
            book = character.character_book
            if not book.name:
                book = book.model_copy(update={"name": f"{character.name or 'Character'} (card)"})
            cls._insert_lorebook(session, book, character_id=char_id)
        return char_id

    @staticmethod
    def _insert_persona(session: Session, persona: Persona) -> str:
        persona_id = _new_id()
        session.add(orm.PersonaRow(id=persona_id, name=persona.name, created_at=_now(),
                                   data=persona.model_dump(mode="json")))
        return persona_id

    @staticmethod
    def _insert_chat(
        session: Session,
        chat: Chat,
        *,
        title: str | None = None,
        character_id: str | None = None,
        persona_id: str | None = None,
        lorebook_ids: Sequence[str] = (),
        settings: ContextSettings | None = None,
        parent_id: str | None = None,
        branch_point: int | None = None,
        setup: SillyTavernSetup | None = None,
        scopes: Sequence[str] = (),
        on_progress: Callable[[int, int], None] | None = None,
    ) -> str:
        chat_id = _new_id()
        now = _now()
        if session.new:
            session.flush()  # a character or persona added in this unit of work, which the chat refers to
        # a Core INSERT on the session's connection (same transaction): an ORM add and flush per chat
        # was most of a 10,000-chat folder import (issue 25 item 4)
        conn = session.connection()
        conn.execute(insert(cast(Table, orm.ChatRow.__table__)), [dict(
            id=chat_id,
            title=title if title is not None else chat.title,
            character_id=character_id,
            persona_id=persona_id,
            parent_id=parent_id,
            branch_point=branch_point,
            settings=(settings or ContextSettings()).model_dump(mode="json"),
            data=chat.model_dump(mode="json", exclude={"messages", "title"}),
            setup=setup.model_dump(mode="json", exclude=_SETUP_NOT_STORED) if setup is not None else None,
            created_at=now,
            updated_at=now,
        )])
        # messages go in as bulk INSERTs (executemany) in batches: a 99,000-message chat is
        # stored in seconds, and ``on_progress(stored, total)`` follows along
        total = len(chat.messages)
        for start in range(0, total, MESSAGE_BATCH):
            batch = chat.messages[start:start + MESSAGE_BATCH]
            # Core INSERT on the session's connection (same transaction), not the ORM bulk path
            conn.execute(insert(cast(Table, orm.MessageRow.__table__)),
                         [_message_values(chat_id, start + k, m) for k, m in enumerate(batch)])
            if on_progress is not None:
                on_progress(start + len(batch), total)
        scope_of = dict(zip(lorebook_ids, scopes))
        links = [dict(chat_id=chat_id, lorebook_id=book_id, position=i, scope=scope_of.get(book_id, "chat"))
                 for i, book_id in enumerate(dict.fromkeys(lorebook_ids))]
        if links:
            conn.execute(insert(cast(Table, orm.ChatLorebookRow.__table__)), links)
        return chat_id

    # ---------------------------------------------------------------- reads (session-level)
    @staticmethod
    def _load_lorebook(session: Session, row: orm.LorebookRow) -> Lorebook:
        entries = session.scalars(
            select(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == row.id)
            .order_by(orm.LorebookEntryRow.position)
        ).all()
        return Lorebook.model_validate({**(row.data or {}), "name": row.name,
                                        "entries": [e.data for e in entries]})

    @classmethod
    def _load_character(cls, session: Session, char_id: str) -> tuple[Character, str | None]:
        row = session.get(orm.CharacterRow, char_id)
        if row is None:
            raise NotFoundError("CHARACTER_NOT_FOUND", "no character with that id in the library",
                                file=char_id)
        book_row = session.scalars(
            select(orm.LorebookRow).where(orm.LorebookRow.character_id == char_id)
            .order_by(orm.LorebookRow.created_at).limit(1)
        ).first()
        book = cls._load_lorebook(session, book_row) if book_row is not None else None
        data = {**(row.data or {}), "character_book": book}
        return Character.model_validate(data), (book_row.id if book_row is not None else None)

    @staticmethod
    def _load_messages(session: Session, chat_id: str) -> list[ChatMessage]:
        rows = session.scalars(
            select(orm.MessageRow).where(orm.MessageRow.chat_id == chat_id).order_by(orm.MessageRow.idx)
        ).all()
        return [_message_model(r) for r in rows]

    @staticmethod
    def _attached_ids(session: Session, chat_id: str) -> list[str]:
        return list(session.scalars(
            select(orm.ChatLorebookRow.lorebook_id).where(orm.ChatLorebookRow.chat_id == chat_id)
            .order_by(orm.ChatLorebookRow.position)
        ).all())

    @staticmethod
    def _attached_links(session: Session, chat_id: str) -> list[tuple[str, str, str]]:
        """``(lorebook_id, name, scope)`` of the chat's attached books, in order."""
        rows = session.execute(
            select(orm.ChatLorebookRow.lorebook_id, orm.LorebookRow.name, orm.ChatLorebookRow.scope)
            .join(orm.LorebookRow, orm.LorebookRow.id == orm.ChatLorebookRow.lorebook_id)
            .where(orm.ChatLorebookRow.chat_id == chat_id).order_by(orm.ChatLorebookRow.position)
        ).all()
        return [(str(i), str(n), str(sc or "chat")) for i, n, sc in rows]

    def _stored_chat(self, session: Session, row: orm.ChatRow) -> StoredChat:
        chat = Chat.model_validate({**(row.data or {}), "title": row.title,
                                    "messages": self._load_messages(session, row.id)})
        character = None
        if row.character_id is not None:
            character, _ = self._load_character(session, row.character_id)
        persona = None
        if row.persona_id is not None:
            prow = session.get(orm.PersonaRow, row.persona_id)
            persona = Persona.model_validate(prow.data) if prow is not None else None
        links = self._attached_links(session, row.id)
        return StoredChat(
            id=row.id, title=row.title, chat=chat,
            character_id=row.character_id, character=character,
            persona_id=row.persona_id, persona=persona,
            lorebook_ids=[i for i, _, _ in links], lorebook_scopes=[sc for _, _, sc in links],
            settings=ContextSettings.model_validate(row.settings or {}),
            setup=SillyTavernSetup.model_validate(row.setup) if row.setup is not None else None,
            parent_id=row.parent_id, branch_point=row.branch_point,
            created_at=_utc(row.created_at), updated_at=_utc(row.updated_at),
        )

    # ================================================================ chats
    def list_chats(self) -> list[ChatSummary]:
        """Every chat, most recently changed first."""
        counts = (
            select(orm.MessageRow.chat_id, func.count(orm.MessageRow.id).label("n"))
            .group_by(orm.MessageRow.chat_id).subquery()
        )
        stmt = (
            select(orm.ChatRow, orm.CharacterRow.name, counts.c.n, orm.AuditRow.chat_id)
            .outerjoin(orm.CharacterRow, orm.CharacterRow.id == orm.ChatRow.character_id)
            .outerjoin(counts, counts.c.chat_id == orm.ChatRow.id)
            .outerjoin(orm.AuditRow, orm.AuditRow.chat_id == orm.ChatRow.id)
            .order_by(orm.ChatRow.updated_at.desc(), orm.ChatRow.id)
        )
        with self._unit(write=False) as session:
            return [
                ChatSummary(id=row.id, title=row.title, character=char_name, messages=int(n or 0),
                            has_audit=audit_id is not None, parent_id=row.parent_id,
                            branch_point=row.branch_point, updated_at=_utc(row.updated_at))
                for row, char_name, n, audit_id in session.execute(stmt).all()
            ]

    def get_chat(self, chat_id: str) -> StoredChat:
        """The chat with its character, persona, attached lorebook ids and settings.

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit(write=False) as session:
            return self._stored_chat(session, self._chat_row(session, chat_id))

    def build_request(self, chat_id: str) -> PreviewRequest:
        """Everything attached to the chat, ready for :func:`engine.pipeline.preview`.

        ``lorebooks`` holds the card's embedded book first (if any), then the attached books in
        order; the request's ``character.character_book`` is ``None`` so that no book is
        activated twice. A chat imported from a SillyTavern folder (one with a stored setup)
        gets ``request.sillytavern`` (with ``lorebook_scopes``, one per book) and only its linked
        worlds: SillyTavern never activates a card's embedded book by itself (it becomes a world
        on import, linked by ``extensions.world``). Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit(write=False) as session:
            row = self._chat_row(session, chat_id)
            stored = self._stored_chat(session, row)
            books: list[Lorebook] = []
            character = stored.character
            if stored.setup is not None:
                for book_id in stored.lorebook_ids:
                    books.append(self._load_lorebook(session, self._lorebook_row(session, book_id)))
                setup = stored.setup.model_copy(update={"lorebook_scopes": list(stored.lorebook_scopes)})
                if setup.group is not None:  # issue 27 item 7: every member's card, for the speaker's prompt
                    setup = setup.model_copy(update={"group": self._group_cards(session, setup.group)})
                return PreviewRequest(chat=stored.chat, character=character, persona=stored.persona,
                                      lorebooks=books, settings=stored.settings, sillytavern=setup)
            if character is not None and character.character_book is not None:
                # the card's book is character lore (SillyTavern getCharacterLore; World Info
                # character_strategy ranks it against the global books)
                books.append(character.character_book.model_copy(update={"scope": "character"}))
                character = character.model_copy(update={"character_book": None})
            for book_id in stored.lorebook_ids:
                books.append(self._load_lorebook(session, self._lorebook_row(session, book_id)))
            return PreviewRequest(chat=stored.chat, character=character, persona=stored.persona,
                                  lorebooks=books, settings=stored.settings)

    def _group_cards(self, session: Session, group: GroupSetup) -> GroupSetup:
        """``group`` with each member's card from the library (found by its import key; ``None`` when gone)."""
        members = []
        for m in group.members:
            card = None
            src = session.get(orm.ImportSourceRow, ("character", m.key)) if m.key else None
            if src is not None and session.get(orm.CharacterRow, src.object_id) is not None:
                card, _ = self._load_character(session, src.object_id)
            members.append(m.model_copy(update={"character": card}))
        return group.model_copy(update={"members": members})

    def add_chat(
        self,
        chat: Chat,
        *,
        title: str | None = None,
        character_id: str | None = None,
        persona_id: str | None = None,
        lorebook_ids: Sequence[str] = (),
        settings: ContextSettings | None = None,
    ) -> str:
        """Store a new chat (messages included); returns its id."""
        with self._unit() as session:
            return self._insert_chat(session, chat, title=title, character_id=character_id,
                                     persona_id=persona_id, lorebook_ids=lorebook_ids,
                                     settings=settings)

    def rename_chat(self, chat_id: str, title: str) -> None:
        """Set the chat's title. Raises ``CHAT_NOT_FOUND``."""
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            row.title = title
            self._touch(row)

    def delete_chat(self, chat_id: str) -> None:
        """Delete the chat, its messages, lorebook links and its audit. Raises ``CHAT_NOT_FOUND``."""
        with self._unit() as session:
            self._chat_row(session, chat_id)
            # Explicit deletes as well as ON DELETE CASCADE: correct even on a database
            # whose foreign keys are off (an SQLite file opened by another tool).
            session.execute(delete(orm.AuditRow).where(orm.AuditRow.chat_id == chat_id))
            session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == chat_id))
            session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == chat_id))
            session.execute(delete(orm.ChatRow).where(orm.ChatRow.id == chat_id))

    def save_chat_settings(self, chat_id: str, settings: ContextSettings) -> None:
        """Replace the chat's context settings. Raises ``CHAT_NOT_FOUND``."""
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            row.settings = settings.model_dump(mode="json")
            self._touch(row)

    def _attach(self, chat_id: str, column: str, row_cls: type, item_id: str | None, code: str,
                what: str) -> None:
        """Set ``chats.<column>`` to ``item_id`` (or none) after checking the item exists."""
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            if item_id is not None and session.get(row_cls, item_id) is None:
                raise NotFoundError(code, f"no {what} with that id in the library", file=item_id)
            setattr(row, column, item_id)
            self._touch(row)

    def set_chat_character(self, chat_id: str, character_id: str | None) -> None:
        """Give the chat a character (or none): a chat imported without its card gets one.

        Raises ``CHAT_NOT_FOUND``/``CHARACTER_NOT_FOUND``.
        """
        self._attach(chat_id, "character_id", orm.CharacterRow, character_id, "CHARACTER_NOT_FOUND", "character")

    def set_chat_persona(self, chat_id: str, persona_id: str | None) -> None:
        """Attach a persona (or none). Raises ``CHAT_NOT_FOUND``/``PERSONA_NOT_FOUND``."""
        self._attach(chat_id, "persona_id", orm.PersonaRow, persona_id, "PERSONA_NOT_FOUND", "persona")

    def set_chat_lorebooks(self, chat_id: str, lorebook_ids: Sequence[str]) -> None:
        """Replace the list of attached lorebooks (order kept, duplicates dropped).

        Raises ``CHAT_NOT_FOUND``/``LOREBOOK_NOT_FOUND``.
        """
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            ids = list(dict.fromkeys(lorebook_ids))
            for book_id in ids:
                self._lorebook_row(session, book_id)
            session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == chat_id))
            session.add_all(orm.ChatLorebookRow(chat_id=chat_id, lorebook_id=b, position=i)
                            for i, b in enumerate(ids))
            self._touch(row)

    # ---------------------------------------------------------------- setup (issue 17; the setup editor)
    def get_chat_setup(self, chat_id: str) -> ChatSetup:
        """The chat's setup: character, persona, linked lorebooks with scopes, settings, SillyTavern setup.

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit(write=False) as session:
            row = self._chat_row(session, chat_id)
            links = [LorebookLink(lorebook_id=i, name=n, scope=sc)  # type: ignore[arg-type]
                     for i, n, sc in self._attached_links(session, chat_id)]
            return ChatSetup(
                chat_id=row.id, character_id=row.character_id, persona_id=row.persona_id, lorebooks=links,
                settings=ContextSettings.model_validate(row.settings or {}),
                sillytavern=SillyTavernSetup.model_validate(row.setup) if row.setup is not None else None)

    def save_chat_setup(self, chat_id: str, setup: SillyTavernSetup | None) -> None:
        """Replace the chat's SillyTavern setup (``None``: the chat is assembled by the stage template again).

        ``setup.lorebook_scopes`` is not stored (see :meth:`set_chat_lorebook_links`).

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            row.setup = setup.model_dump(mode="json", exclude=_SETUP_NOT_STORED) if setup is not None else None
            self._touch(row)

    def set_chat_lorebook_links(self, chat_id: str, links: Sequence[LorebookLink | tuple[str, str]]) -> None:
        """Replace the chat's linked lorebooks with ``(lorebook_id, scope)`` pairs.

        The order is kept and a repeated book dropped; scope is ``chat``, ``character`` or ``global``.

        Raises ``CHAT_NOT_FOUND``/``LOREBOOK_NOT_FOUND``; ``INVALID_SETTINGS`` for an unknown scope.
        """
        pairs: list[tuple[str, str]] = []
        for link in links:
            book_id, scope = (link.lorebook_id, link.scope) if isinstance(link, LorebookLink) else link
            if scope not in LOREBOOK_SCOPES:
                from ..errors import SettingsError

                raise SettingsError("INVALID_SETTINGS", f"unknown lorebook scope {scope!r} "
                                    f"(expected one of {', '.join(LOREBOOK_SCOPES)})", file=book_id)
            if all(b != book_id for b, _ in pairs):
                pairs.append((book_id, scope))
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            for book_id, _ in pairs:
                self._lorebook_row(session, book_id)
            session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == chat_id))
            session.add_all(orm.ChatLorebookRow(chat_id=chat_id, lorebook_id=b, position=i, scope=sc)
                            for i, (b, sc) in enumerate(pairs))
            self._touch(row)

    def source_key(self, kind: str, object_id: str) -> str | None:
        """The SillyTavern identity an object was imported under, or ``None``.

        The identity is its path relative to the user folder; ``kind`` is ``character``, ``lorebook``, ``persona`` or
        ``chat``.
        """
        with self._unit(write=False) as session:
            return session.scalars(select(orm.ImportSourceRow.key).where(
                orm.ImportSourceRow.kind == kind, orm.ImportSourceRow.object_id == object_id)).first()

    def get_character_avatar(self, character_id: str) -> bytes | None:
        """The card PNG as imported from a SillyTavern folder (image and chunks), or ``None``.

        Raises ``CHARACTER_NOT_FOUND``.
        """
        with self._unit(write=False) as session:
            row = session.get(orm.CharacterRow, character_id)
            if row is None:
                raise NotFoundError("CHARACTER_NOT_FOUND", "no character with that id in the library",
                                    file=character_id)
            return row.avatar

    def branch_chat(self, chat_id: str, at_index: int) -> str:
        """Fork the chat after message ``at_index`` (messages ``0..at_index`` are copied).

        The branch keeps the character, persona, lorebooks and settings, and links back
        (``parent_id``, ``branch_point``). Returns the new chat id.
        Raises ``CHAT_NOT_FOUND``, ``MESSAGE_NOT_FOUND`` (index out of range).
        """
        with self._unit() as session:
            row = self._chat_row(session, chat_id)
            stored = self._stored_chat(session, row)
            if not 0 <= at_index < len(stored.chat.messages):
                raise NotFoundError("MESSAGE_NOT_FOUND", f"the chat has no message {at_index}",
                                    file=chat_id, place=f"message {at_index}")
            chat = stored.chat.model_copy(update={"messages": stored.chat.messages[: at_index + 1]})
            chat = self._branch_compaction(chat, at_index)
            title = f"{stored.title} (branch at {at_index})" if stored.title else f"branch at {at_index}"
            return self._insert_chat(
                session, chat, title=title, character_id=row.character_id, persona_id=row.persona_id,
                lorebook_ids=stored.lorebook_ids, settings=stored.settings,
                parent_id=chat_id, branch_point=at_index,
                setup=stored.setup, scopes=stored.lorebook_scopes,
            )

    # ================================================================ messages
    def append_message(self, chat_id: str, message: ChatMessage) -> int:
        """Append a message to the chat; returns its index. Raises ``CHAT_NOT_FOUND``."""
        with self._unit() as session:
            row = self._chat_row(session, chat_id, lock=True)
            last = session.scalar(select(func.max(orm.MessageRow.idx)).where(orm.MessageRow.chat_id == chat_id))
            idx = 0 if last is None else int(last) + 1
            session.add(_message_row(chat_id, idx, message))
            self._touch(row)
            return idx

    def _message_at(self, session: Session, chat_id: str, index: int) -> orm.MessageRow:
        self._chat_row(session, chat_id)
        row = session.scalars(select(orm.MessageRow).where(
            orm.MessageRow.chat_id == chat_id, orm.MessageRow.idx == index)).first()
        if row is None:
            raise NotFoundError("MESSAGE_NOT_FOUND", f"the chat has no message {index}",
                                file=chat_id, place=f"message {index}")
        return row

    def update_message(self, chat_id: str, index: int, message: ChatMessage) -> None:
        """Replace message ``index`` (text edits, swipes). Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``."""
        with self._unit() as session:
            old = self._message_at(session, chat_id, index)
            new = _message_row(chat_id, index, message)
            for column in ("role", "name", "content", "tool_calls", "tool_result_id", "tool_result_key",
                           "pinned", "manual_excluded", "hidden", "swipes", "extra"):
                setattr(old, column, getattr(new, column))
            self._touch(self._chat_row(session, chat_id))

    def set_message_flags(
        self,
        chat_id: str,
        index: int,
        *,
        pinned: bool | None = None,
        manual_excluded: bool | None = None,
        hidden: bool | None = None,
    ) -> None:
        """Set the user flags of message ``index`` (``None`` leaves a flag as it is).

        Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``.
        """
        with self._unit() as session:
            row = self._message_at(session, chat_id, index)
            if pinned is not None:
                row.pinned = bool(pinned)
            if manual_excluded is not None:
                row.manual_excluded = bool(manual_excluded)
            if hidden is not None:
                row.hidden = bool(hidden)
            self._touch(self._chat_row(session, chat_id))

    def _shift_indices(self, session: Session, chat_id: str, start: int, step: int) -> None:
        """Add ``step`` (±1) to the index of every message at ``start`` or later.

        Two statements through negative indices, so the unique ``(chat_id, idx)`` constraint
        holds after every row on every backend (SQLite and PostgreSQL check it per row).
        """
        rows = (orm.MessageRow.chat_id == chat_id)
        session.execute(update(orm.MessageRow).where(rows, orm.MessageRow.idx >= start)
                        .values(idx=-orm.MessageRow.idx - 1))
        session.execute(update(orm.MessageRow).where(rows, orm.MessageRow.idx < 0)
                        .values(idx=-orm.MessageRow.idx - 1 + step))

    def delete_message(self, chat_id: str, index: int) -> None:
        """Delete message ``index``; later messages move up one place (undone by :meth:`insert_message`).

        Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``.
        """
        with self._unit() as session:
            row = self._message_at(session, chat_id, index)
            session.delete(row)
            session.flush()
            self._shift_indices(session, chat_id, index + 1, -1)
            self._touch(self._chat_row(session, chat_id))

    def insert_message(self, chat_id: str, index: int, message: ChatMessage) -> None:
        """Insert ``message`` at ``index`` (0 … number of messages); later messages move down one.

        Raises ``CHAT_NOT_FOUND``, ``MESSAGE_NOT_FOUND`` (index past the end).
        """
        with self._unit() as session:
            chat = self._chat_row(session, chat_id, lock=True)
            count = session.scalar(select(func.count()).select_from(orm.MessageRow)
                                   .where(orm.MessageRow.chat_id == chat_id)) or 0
            if not 0 <= index <= count:
                raise NotFoundError("MESSAGE_NOT_FOUND", f"cannot insert at message {index}: the chat has "
                                    f"{count} messages", file=chat_id, place=f"message {index}")
            self._shift_indices(session, chat_id, index, +1)
            session.add(_message_row(chat_id, index, message))
            self._touch(chat)

    def delete_messages_from(self, chat_id: str, index: int) -> None:
        """Delete message ``index`` and every later one (SillyTavern "delete up to here").

        Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``.
        """
        with self._unit() as session:
            self._message_at(session, chat_id, index)
            session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == chat_id,
                                                         orm.MessageRow.idx >= index))
            self._touch(self._chat_row(session, chat_id))

    # ================================================================ characters, personas
    def add_character(self, character: Character) -> str:
        """Store a character (its embedded book becomes a lorebook row); returns its id."""
        with self._unit() as session:
            return self._insert_character(session, character)

    def list_characters(self) -> list[CharacterSummary]:
        """Every character, by name."""
        with self._unit(write=False) as session:
            books = dict(session.execute(
                select(orm.LorebookRow.character_id, orm.LorebookRow.id)
                .where(orm.LorebookRow.character_id.is_not(None))).all())
            rows = session.scalars(select(orm.CharacterRow).order_by(orm.CharacterRow.name)).all()
            return [CharacterSummary(id=r.id, name=r.name, lorebook_id=books.get(r.id)) for r in rows]

    def get_character(self, character_id: str) -> Character:
        """The character with its embedded book. Raises ``CHARACTER_NOT_FOUND``."""
        with self._unit(write=False) as session:
            return self._load_character(session, character_id)[0]

    def add_persona(self, persona: Persona) -> str:
        """Store a persona; returns its id."""
        with self._unit() as session:
            return self._insert_persona(session, persona)

    def list_personas(self) -> list[PersonaSummary]:
        """Every persona, by name."""
        with self._unit(write=False) as session:
            rows = session.scalars(select(orm.PersonaRow).order_by(orm.PersonaRow.name)).all()
            return [PersonaSummary(id=r.id, name=r.name) for r in rows]

    # ================================================================ lorebooks
    def add_lorebook(self, book: Lorebook) -> str:
        """Store a standalone lorebook; returns its id."""
        with self._unit() as session:
            return self._insert_lorebook(session, book)

    def list_lorebooks(self, chat_id: str | None = None) -> list[LorebookSummary]:
        """Every lorebook, or (with ``chat_id``) those the chat uses: the card's book, then attached ones."""
        counts = (
            select(orm.LorebookEntryRow.lorebook_id, func.count(orm.LorebookEntryRow.id).label("n"))
            .group_by(orm.LorebookEntryRow.lorebook_id).subquery()
        )
        stmt = (select(orm.LorebookRow, counts.c.n)
                .outerjoin(counts, counts.c.lorebook_id == orm.LorebookRow.id))
        with self._unit(write=False) as session:
            rows: Sequence[Any]  # (LorebookRow, entry count) pairs
            if chat_id is None:
                rows = session.execute(stmt.order_by(orm.LorebookRow.name, orm.LorebookRow.id)).all()
            else:
                ids = self._chat_lorebook_ids(session, chat_id)
                found = {r.id: (r, n) for r, n in session.execute(
                    stmt.where(orm.LorebookRow.id.in_(ids))).all()}
                rows = [found[i] for i in ids if i in found]
            return [LorebookSummary(id=r.id, name=r.name, entries=int(n or 0), character_id=r.character_id)
                    for r, n in rows]

    def _chat_lorebook_ids(self, session: Session, chat_id: str) -> list[str]:
        row = self._chat_row(session, chat_id)
        ids: list[str] = []
        if row.character_id is not None:
            ids.extend(session.scalars(
                select(orm.LorebookRow.id).where(orm.LorebookRow.character_id == row.character_id)
                .order_by(orm.LorebookRow.created_at)).all()[:1])
        ids.extend(i for i in self._attached_ids(session, chat_id) if i not in ids)
        return ids

    def lorebook_ids_for_chat(self, chat_id: str) -> list[str]:
        """Ids of every book the chat's prompt uses: the card's own book first, then attached ones.

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit(write=False) as session:
            return self._chat_lorebook_ids(session, chat_id)

    def get_lorebook(self, lorebook_id: str) -> Lorebook:
        """The lorebook with its entries in book order. Raises ``LOREBOOK_NOT_FOUND``."""
        with self._unit(write=False) as session:
            return self._load_lorebook(session, self._lorebook_row(session, lorebook_id))

    def update_lorebook_entry(self, lorebook_id: str, entry: LorebookEntry) -> None:
        """Replace the entry whose ``uid`` equals ``entry.uid``; append it when no entry has that uid.

        Raises ``LOREBOOK_NOT_FOUND``.
        """
        with self._unit() as session:
            self._lorebook_row(session, lorebook_id)
            row = session.scalars(select(orm.LorebookEntryRow).where(
                orm.LorebookEntryRow.lorebook_id == lorebook_id,
                orm.LorebookEntryRow.uid == str(entry.uid))).first()
            if row is None:
                last = session.scalar(select(func.max(orm.LorebookEntryRow.position))
                                      .where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
                session.add(_entry_row(lorebook_id, 0 if last is None else int(last) + 1, entry))
                return
            new = _entry_row(lorebook_id, row.position, entry)
            for column in ("uid", "comment", "constant", "disable", "data"):
                setattr(row, column, getattr(new, column))

    def delete_lorebook_entry(self, lorebook_id: str, uid: int | str) -> None:
        """Remove the entry with that uid (no-op when absent). Raises ``LOREBOOK_NOT_FOUND``."""
        with self._unit() as session:
            self._lorebook_row(session, lorebook_id)
            session.execute(delete(orm.LorebookEntryRow).where(
                orm.LorebookEntryRow.lorebook_id == lorebook_id, orm.LorebookEntryRow.uid == str(uid)))

    def delete_lorebook(self, lorebook_id: str) -> None:
        """Delete a lorebook, its entries and its chat links. Raises ``LOREBOOK_NOT_FOUND``."""
        with self._unit() as session:
            self._lorebook_row(session, lorebook_id)
            self._delete_book_rows(session, lorebook_id)

    # ---------------------------------------------------------------- library editing (issue 18)
    def rename_character(self, character_id: str, name: str) -> None:
        """Set the character's name (the card's ``name`` too). Raises ``CHARACTER_NOT_FOUND``."""
        with self._unit() as session:
            row = session.get(orm.CharacterRow, character_id)
            if row is None:
                raise NotFoundError("CHARACTER_NOT_FOUND", "no character with that id in the library",
                                    file=character_id)
            row.name = name
            row.data = {**(row.data or {}), "name": name}

    def delete_character(self, character_id: str) -> None:
        """Delete a character and its embedded book.

        Chats that used it keep their messages and are left without a character. Its SillyTavern import identity is
        forgotten (a re-import adds it again). Raises ``CHARACTER_NOT_FOUND``.
        """
        with self._unit() as session:
            if session.get(orm.CharacterRow, character_id) is None:
                raise NotFoundError("CHARACTER_NOT_FOUND", "no character with that id in the library",
                                    file=character_id)
            for row in session.scalars(select(orm.ChatRow).where(orm.ChatRow.character_id == character_id)):
                row.character_id = None
            book_ids = list(session.scalars(select(orm.LorebookRow.id)
                                            .where(orm.LorebookRow.character_id == character_id)))
            for book_id in book_ids:
                self._delete_book_rows(session, book_id)
            self._forget_source(session, "character", character_id)
            session.execute(delete(orm.CharacterRow).where(orm.CharacterRow.id == character_id))

    def get_persona(self, persona_id: str) -> Persona:
        """The persona. Raises ``PERSONA_NOT_FOUND``."""
        with self._unit(write=False) as session:
            return Persona.model_validate(self._persona_row(session, persona_id).data or {})

    def update_persona(self, persona_id: str, persona: Persona) -> None:
        """Replace the persona's name and description (every chat using it sees the change).

        Raises ``PERSONA_NOT_FOUND``.
        """
        with self._unit() as session:
            row = self._persona_row(session, persona_id)
            row.name = persona.name
            row.data = persona.model_dump(mode="json")

    def rename_persona(self, persona_id: str, name: str) -> None:
        """Set the persona's name. Raises ``PERSONA_NOT_FOUND``."""
        self.update_persona(persona_id, self.get_persona(persona_id).model_copy(update={"name": name}))

    def delete_persona(self, persona_id: str) -> None:
        """Delete a persona; chats that used it are left without one. Raises ``PERSONA_NOT_FOUND``."""
        with self._unit() as session:
            self._persona_row(session, persona_id)
            for row in session.scalars(select(orm.ChatRow).where(orm.ChatRow.persona_id == persona_id)):
                row.persona_id = None
            self._forget_source(session, "persona", persona_id)
            session.execute(delete(orm.PersonaRow).where(orm.PersonaRow.id == persona_id))

    def rename_lorebook(self, lorebook_id: str, name: str) -> None:
        """Set the lorebook's name. Raises ``LOREBOOK_NOT_FOUND``."""
        with self._unit() as session:
            row = self._lorebook_row(session, lorebook_id)
            row.name = name
            row.data = {**(row.data or {}), "name": name}

    def where_used(self, kind: str, object_id: str) -> list[Usage]:
        """The chats that use a character, persona or lorebook (``kind``), by chat title.

        A lorebook is used by the chats that link it (``how`` = the link's scope) and by the
        chats of the character whose card embeds it (``how`` = ``card``; those chats are not
        SillyTavern chats, which never activate a card's embedded book).
        Raises ``INVALID_SETTINGS`` for an unknown ``kind``.
        """
        with self._unit(write=False) as session:
            out: list[Usage] = []
            if kind == "character":
                rows = session.scalars(select(orm.ChatRow).where(orm.ChatRow.character_id == object_id))
                out = [Usage(chat_id=r.id, title=r.title, how="character") for r in rows]
            elif kind == "persona":
                rows = session.scalars(select(orm.ChatRow).where(orm.ChatRow.persona_id == object_id))
                out = [Usage(chat_id=r.id, title=r.title, how="persona") for r in rows]
            elif kind == "lorebook":
                for chat_id, title, scope in session.execute(
                        select(orm.ChatRow.id, orm.ChatRow.title, orm.ChatLorebookRow.scope)
                        .join(orm.ChatLorebookRow, orm.ChatLorebookRow.chat_id == orm.ChatRow.id)
                        .where(orm.ChatLorebookRow.lorebook_id == object_id)).all():
                    out.append(Usage(chat_id=chat_id, title=title, how=str(scope or "chat")))
                book = session.get(orm.LorebookRow, object_id)
                if book is not None and book.character_id is not None:
                    for r in session.scalars(select(orm.ChatRow).where(
                            orm.ChatRow.character_id == book.character_id)):
                        if r.setup is None and all(u.chat_id != r.id for u in out):
                            out.append(Usage(chat_id=r.id, title=r.title, how="card"))
            else:
                from ..errors import SettingsError

                raise SettingsError("INVALID_SETTINGS", f"unknown library kind {kind!r} "
                                    "(expected character, persona or lorebook)")
            return sorted(out, key=lambda u: (u.title.lower(), u.chat_id))

    def new_chat_for_character(self, character_id: str, *, persona_id: str | None = None) -> str:
        """Start a chat with the character; returns the chat id.

        Its first message (``first_mes``) is the opening assistant message, the chat is titled after the character and
        its embedded book is active (the card book). Raises ``CHARACTER_NOT_FOUND``/``PERSONA_NOT_FOUND``.
        """
        with self._unit() as session:
            character, _ = self._load_character(session, character_id)
            if persona_id is not None:
                self._persona_row(session, persona_id)
            messages = ([ChatMessage(role="assistant", name=character.name or None, content=character.first_mes)]
                        if character.first_mes else [])
            chat = Chat(title=character.name or "New chat", messages=messages,
                        character_name=character.name or "")
            return self._insert_chat(session, chat, character_id=character_id, persona_id=persona_id)

    def _next_uid(self, session: Session, lorebook_id: str) -> int:
        uids = session.scalars(select(orm.LorebookEntryRow.uid)
                               .where(orm.LorebookEntryRow.lorebook_id == lorebook_id)).all()
        numbers = [int(u) for u in uids if str(u).lstrip("-").isdigit()]
        return max(numbers, default=-1) + 1

    def add_lorebook_entry(self, lorebook_id: str, entry: LorebookEntry | None = None) -> LorebookEntry:
        """Append a new entry (``entry`` or a blank one); returns the stored entry.

        The entry gets the next free numeric ``uid`` (one more than the largest, as SillyTavern's
        ``getFreeWorldEntryUid`` picks a free one). Raises ``LOREBOOK_NOT_FOUND``.
        """
        with self._unit() as session:
            self._lorebook_row(session, lorebook_id)
            new = (entry or LorebookEntry()).model_copy(update={"uid": self._next_uid(session, lorebook_id)})
            last = session.scalar(select(func.max(orm.LorebookEntryRow.position))
                                  .where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
            session.add(_entry_row(lorebook_id, 0 if last is None else int(last) + 1, new))
            return new

    def duplicate_lorebook_entry(self, lorebook_id: str, uid: int | str) -> LorebookEntry:
        """Copy entry ``uid`` under a new uid, right after it; returns the copy.

        Raises ``LOREBOOK_NOT_FOUND``; ``LOREBOOK_ENTRY_NOT_FOUND`` when the book has no such entry.
        """
        book = self.get_lorebook(lorebook_id)
        for i, e in enumerate(book.entries):
            if str(e.uid) == str(uid):
                with self._unit(write=False) as session:
                    new_uid = self._next_uid(session, lorebook_id)
                copy = e.model_copy(deep=True, update={"uid": new_uid})
                self.insert_lorebook_entry(lorebook_id, copy, i + 1)
                return copy
        raise NotFoundError("LOREBOOK_ENTRY_NOT_FOUND", f"the lorebook has no entry {uid}",
                            file=lorebook_id, place=f"entry {uid}")

    def insert_lorebook_entry(self, lorebook_id: str, entry: LorebookEntry, index: int) -> None:
        """Put ``entry`` at book position ``index`` (clamped).

        An entry with the same uid is replaced (undo of a delete puts an entry back where it was). Raises
        ``LOREBOOK_NOT_FOUND``.
        """
        with self._unit() as session:
            self._lorebook_row(session, lorebook_id)
            rows = session.scalars(select(orm.LorebookEntryRow).where(
                orm.LorebookEntryRow.lorebook_id == lorebook_id).order_by(orm.LorebookEntryRow.position)).all()
            kept = [LorebookEntry.model_validate(r.data) for r in rows if r.uid != str(entry.uid)]
            kept.insert(max(0, min(index, len(kept))), entry)
            session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
            session.flush()
            session.add_all(_entry_row(lorebook_id, i, e) for i, e in enumerate(kept))

    @staticmethod
    def _persona_row(session: Session, persona_id: str) -> orm.PersonaRow:
        row = session.get(orm.PersonaRow, persona_id)
        if row is None:
            raise NotFoundError("PERSONA_NOT_FOUND", "no persona with that id in the library", file=persona_id)
        return row

    @staticmethod
    def _forget_source(session: Session, kind: str, object_id: str) -> None:
        session.execute(delete(orm.ImportSourceRow).where(orm.ImportSourceRow.kind == kind,
                                                          orm.ImportSourceRow.object_id == object_id))

    def _delete_book_rows(self, session: Session, lorebook_id: str) -> None:
        session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
        session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.lorebook_id == lorebook_id))
        self._forget_source(session, "lorebook", lorebook_id)
        session.execute(delete(orm.LorebookRow).where(orm.LorebookRow.id == lorebook_id))

    # ================================================================ import
    def import_files(
        self,
        paths: Iterable[str | Path],
        *,
        on_warning: Callable[[str, str], None] | None = None,
        sources: list[str] | None = None,
        on_progress: Callable[[str, str, int, int], None] | None = None,
        as_new: bool = False,
    ) -> list[ImportRef]:
        """Parse every file, then store them all in ONE transaction.

        A file imported before (the same path) is updated in place, and a file whose object is
        already in the library (same kind, name and content) is not stored twice: ``status`` says
        ``added``, ``changed`` or ``unchanged`` (see :class:`_SameFile`); ``as_new`` keeps both.

        A character card's embedded book becomes a lorebook linked to it. A chat is linked to
        the character of the same name (imported earlier or in the same call), if any.

        Parameters
        ----------
        paths:
            Files in any format :func:`engine.importers.load_any` reads.
        on_warning:
            Called with ``(file, warning)`` for each importer warning.
        sources:
            If given, receives the file path of each returned ref, in the same order (a file
            holding several transcripts gives several refs).
        on_progress:
            Called with ``(stage, file, done, total)``: ``("read", file, i, n)`` before file
            ``i`` of ``n`` is read, ``("read", file, n, n)`` once all are read, and
            ``("store", file, stored, messages)`` as a chat's messages are stored (in batches).

        Returns
        -------
        list[ImportRef]
            In file order: ``kind``, new ``id``, ``name``; one per file, except that a file
            holding several chat transcripts gives one chat per transcript (numbered ``… #k`` when
            their titles would repeat).

        Raises
        ------
        LoomscopeImportError
            ``IMPORT_*`` for the first bad file (naming it); nothing is stored then.
        """
        items = _read_import_files(list(paths), on_warning, on_progress)
        refs: dict[int, ImportRef | list[ImportRef]] = {}
        with self._unit() as session:
            by_name: dict[str, str] = {}
            same = _SameFile(self, session, as_new, on_warning)
            # cards and books first, so a chat links to a card imported in the same call
            order = sorted(range(len(items)), key=lambda i: items[i][1].kind == "chat")
            for i in order:
                path, item = items[i]
                kind, value = item.kind, item.value
                if kind == "character" and isinstance(value, Character):
                    char_ref = same.store("character", path, value.name or path.stem, value,
                                          partial(self._insert_character, session, value))
                    by_name[value.name] = char_ref.id
                    refs[i] = char_ref
                elif kind == "lorebook" and isinstance(value, Lorebook):
                    book = value if value.name else value.model_copy(update={"name": path.stem})
                    refs[i] = same.store("lorebook", path, book.name, book,
                                         partial(self._insert_lorebook, session, book))
                elif kind == "chat":
                    refs[i] = self._insert_imported_chats(session, path, item, by_name, on_progress, same)
                else:  # pragma: no cover - load_any only returns the three kinds, each with its value type
                    raise StorageError("STORAGE_ERROR", f"cannot store an item of kind {kind!r}",
                                       file=str(path))
        out: list[ImportRef] = []
        for i in range(len(items)):
            ref = refs[i]
            these = ref if isinstance(ref, list) else [ref]
            out.extend(these)
            if sources is not None:
                sources.extend(str(items[i][0]) for _ in these)
        return out

    def _insert_imported_chats(self, session: Session, path: Path, item: Any, by_name: dict[str, str],
                               on_progress: Callable[[str, str, int, int], None] | None,
                               same: _SameFile | None = None) -> list[ImportRef]:
        """Every transcript of one imported chat file, linked to its character by name (this call's, else the newest)."""
        # a file may hold several transcripts (tau-bench, ToolBench): store them all
        transcripts = list(getattr(item, "chats", None) or [item.value])
        titles = [c.title or path.stem for c in transcripts]
        numbered = len(set(titles)) < len(titles)  # only when the titles repeat
        chat_refs: list[ImportRef] = []
        for k, chat in enumerate(transcripts):
            character_id = by_name.get(chat.character_name) if chat.character_name else None
            if character_id is None and chat.character_name:
                character_id = session.scalars(
                    select(orm.CharacterRow.id).where(orm.CharacterRow.name == chat.character_name)
                    .order_by(orm.CharacterRow.created_at.desc()).limit(1)).first()
            title = f"{titles[k]} #{k + 1}" if numbered else titles[k]
            progress = None if on_progress is None else (
                lambda done, total, _f=str(path): on_progress("store", _f, done, total))
            def insert(c: Chat = chat, t: str = title, ch: str | None = character_id,
                       pr: Callable[[int, int], None] | None = progress) -> str:
                return self._insert_chat(session, c, title=t, character_id=ch, on_progress=pr)

            if same is None:
                chat_refs.append(ImportRef(kind="chat", id=insert(), name=title))
            else:
                part = f"#{k}" if len(transcripts) > 1 else ""
                chat_refs.append(same.store("chat", path, title, chat.model_copy(update={"title": title}), insert,
                                            part=part))
        return chat_refs

    def _replace_imported(self, session: Session, kind: str, obj_id: str, value: Any) -> None:
        """Replace what ``obj_id`` holds with ``value`` read from the same file again (its links are kept)."""
        from types import SimpleNamespace

        if kind == "chat":
            row = session.get_one(orm.ChatRow, obj_id)
            row.title = value.title
            row.data = value.model_dump(mode="json", exclude={"messages", "title"})
            session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == obj_id))
            session.flush()
            session.add_all(_message_row(obj_id, i, m) for i, m in enumerate(value.messages))
            self._touch(row)
            return
        avatar = session.get_one(orm.CharacterRow, obj_id).avatar if kind == "character" else None
        self._st_update(session, SimpleNamespace(kind=kind, value=value, avatar=avatar, name=value.name), obj_id, {})

    def _load_value(self, session: Session, kind: str, obj_id: str) -> Any:
        """The library object ``obj_id`` of ``kind`` as a model (a chat: its :class:`Chat`)."""
        if kind == "character":
            return self._load_character(session, obj_id)[0]
        if kind == "lorebook":
            return self._load_lorebook(session, self._lorebook_row(session, obj_id))
        if kind == "persona":
            return Persona.model_validate(self._persona_row(session, obj_id).data)
        return self._stored_chat(session, self._chat_row(session, obj_id)).chat

    def import_st_folder(self, plan: Any, *, on_conflict: str = "ask",
                         on_progress: Callable[[int, int], object] | None = None) -> FolderImportReport:
        """Store a SillyTavern folder read by :func:`engine.importers.st_folder.read_st_folder`.

        One transaction: every character (with its card PNG and embedded book), world, persona
        and chat of ``plan``, in that order. Identity is the file's path relative to the user
        folder (``import_sources``): an object imported before is updated in place (``changed``)
        when what it becomes differs, else left alone (``unchanged``); never duplicated. Chats
        are linked to their character, persona and worlds (with scopes) and keep their
        :class:`~engine.schema.sillytavern.SillyTavernSetup` and context settings.

        An object that changed in the folder but was also edited in Loomscope since it was
        imported (:meth:`_locally_edited`) is a conflict (``report.conflicts``), handled by
        ``on_conflict``: ``ask`` keeps Loomscope's version and leaves the conflict open (reported
        again next time), ``keep-local`` keeps Loomscope's version and takes the folder's as seen,
        ``use-folder`` replaces Loomscope's version with the folder's.

        ``on_progress(items done, items in all)`` follows along (issue 25).

        Raises ``STORAGE_ERROR``; nothing is stored then.
        """
        added: list[ImportRef] = []
        changed: list[ImportRef] = []
        unchanged: list[ImportRef] = []
        conflicts: list[SyncConflict] = []
        row_cls = {"character": orm.CharacterRow, "lorebook": orm.LorebookRow,
                   "persona": orm.PersonaRow, "chat": orm.ChatRow}
        with self._unit() as session:
            ids: dict[str, str] = {}
            # the identities and the objects that exist looked up in a few queries, not two per item, and
            # the new identities in one INSERT: a 10,000-chat folder spent most of its import in those
            # lookups and flushes (issue 25 item 4)
            sources, existing = self._st_known(session, plan.items, row_cls)
            new_sources: dict[tuple[str, str], dict[str, Any]] = {}
            for done, item in enumerate(plan.items, start=1):
                if on_progress is not None:
                    on_progress(done, len(plan.items))
                src = sources.get((item.kind, item.key))
                known = ({"object_id": src.object_id, "digest": src.digest} if src is not None
                         else new_sources.get((item.kind, item.key)))
                obj_id = known["object_id"] if known is not None else None
                if obj_id is not None and obj_id not in existing[item.kind]:
                    obj_id = None  # deleted from the library since: import it again
                if obj_id is not None and known is not None and known["digest"] == item.digest:
                    ids[item.key] = obj_id
                    unchanged.append(ImportRef(kind=item.kind, id=obj_id, name=item.name, key=item.key))
                    continue
                if obj_id is None:
                    obj_id = self._st_insert(session, item, ids)
                    added.append(ImportRef(kind=item.kind, id=obj_id, name=item.name, key=item.key))
                elif src is not None and self._st_conflict(session, item, obj_id, src, on_conflict, conflicts):
                    ids[item.key] = obj_id
                    continue
                else:
                    self._st_update(session, item, obj_id, ids)
                    changed.append(ImportRef(kind=item.kind, id=obj_id, name=item.name, key=item.key))
                ids[item.key] = obj_id
                existing[item.kind].add(obj_id)
                if src is None:
                    new_sources[item.kind, item.key] = {"kind": item.kind, "key": item.key, "object_id": obj_id,
                                                        "digest": item.digest, "updated_at": _now()}
                else:
                    src.object_id, src.digest, src.updated_at = obj_id, item.digest, _now()
            if new_sources:
                session.connection().execute(insert(cast(Table, orm.ImportSourceRow.__table__)),
                                             list(new_sources.values()))
        warnings = [{"file": i.key, "message": w} for i in plan.items for w in i.warnings]
        return FolderImportReport(folder=str(plan.folder), user=plan.user, added=added, changed=changed,
                                  unchanged=unchanged, skipped=[x.as_dict() for x in plan.skipped],
                                  warnings=warnings, conflicts=conflicts, partial=bool(getattr(plan, "unreadable", ())),
                                  unreadable=[{"folder": f, "message": m} for f, m in getattr(plan, "unreadable", ())])

    @staticmethod
    def _st_known(session: Session, items: Sequence[Any], row_cls: Mapping[str, Any],
                  ) -> tuple[dict[tuple[str, str], orm.ImportSourceRow], dict[str, set[str]]]:
        """The import identities of ``items`` (by ``(kind, key)``) and which of their objects still exist (by kind).

        Only the plan's own keys are looked up (chunks of 500): a re-import of the one chat that changed
        does not load the whole library's identities (issue 30), a first import of 10,000 chats asks a
        few dozen queries (issue 25).
        """
        keys: dict[str, set[str]] = {}
        for item in items:
            keys.setdefault(item.kind, set()).add(item.key)
        src = orm.ImportSourceRow
        sources: dict[tuple[str, str], orm.ImportSourceRow] = {}
        for kind, wanted in keys.items():
            for chunk in _chunks(sorted(wanted), 500):
                sources.update(((r.kind, r.key), r) for r in session.scalars(
                    select(src).where(src.kind == kind, src.key.in_(chunk))))
        existing: dict[str, set[str]] = {kind: set() for kind in row_cls}
        for kind, cls in row_cls.items():
            ids = sorted({r.object_id for (k, _), r in sources.items() if k == kind})
            col = cls.__table__.c.id
            for chunk in _chunks(ids, 500):
                existing[kind].update(session.scalars(select(col).where(col.in_(chunk))))
        return sources, existing

    def _st_conflict(self, session: Session, item: Any, obj_id: str, src: orm.ImportSourceRow, on_conflict: str,
                     conflicts: list[SyncConflict]) -> bool:
        """Record a conflict when ``obj_id`` was edited locally; True when the folder's version must not be stored."""
        if not self._locally_edited(session, item.kind, obj_id, src):
            return False
        resolution = {"keep-local": "kept-local", "use-folder": "used-folder"}.get(on_conflict, "unresolved")
        conflicts.append(SyncConflict(kind=item.kind, id=obj_id, name=item.name, key=item.key,
                                      resolution=resolution))  # type: ignore[arg-type]
        if resolution == "kept-local":
            # the folder's version counts as seen; a later change in the folder is a conflict again
            src.digest, src.updated_at = item.digest, _now()
        return resolution != "used-folder"

    def _locally_edited(self, session: Session, kind: str, obj_id: str, src: orm.ImportSourceRow) -> bool:
        """Whether the object was edited in Loomscope since it was last imported from ``src``.

        A chat: changed after the import (every chat edit stamps ``updated_at``). A character,
        lorebook or persona: what it is now no longer has the content digest it was imported with
        (:func:`engine.importers.st_folder.content_digest`).
        """
        from ..importers.st_folder import content_digest  # lazy: the importers are a sibling package

        if kind == "chat":
            row = session.get(orm.ChatRow, obj_id)
            return row is not None and _utc(row.updated_at) > _utc(src.updated_at)
        value: Any
        if kind == "character":
            value = self._load_character(session, obj_id)[0]
        elif kind == "lorebook":
            value = self._load_lorebook(session, self._lorebook_row(session, obj_id))
        else:
            value = Persona.model_validate(self._persona_row(session, obj_id).data)
        return bool(content_digest(value) != src.digest)

    # ---------------------------------------------------------------- SillyTavern folder sync state (issue 30)
    @staticmethod
    def _sync_key(folder: str) -> str:
        import hashlib

        return "st-sync:" + hashlib.sha256(folder.encode("utf-8")).hexdigest()[:40]

    def get_folder_sync_state(self, folder: str) -> dict[str, Any] | None:
        """What the last import of SillyTavern user folder ``folder`` recorded (files and items), or ``None``."""
        import json

        with self._unit(write=False) as session:
            row = session.get(orm.LibraryMetaRow, self._sync_key(folder))
            if row is None:
                return None
            try:
                state = json.loads(row.value)
            except ValueError:
                return None  # unreadable: the next import reads the whole folder again
            return state if isinstance(state, dict) else None

    def folder_sync_states(self) -> list[dict[str, Any]]:
        """The recorded state of every SillyTavern folder imported into the library (see :meth:`get_folder_sync_state`)."""
        import json

        out: list[dict[str, Any]] = []
        with self._unit(write=False) as session:
            for value in session.scalars(select(orm.LibraryMetaRow.value).where(
                    orm.LibraryMetaRow.key.startswith("st-sync:"))).all():
                try:
                    state = json.loads(value)
                except ValueError:
                    continue
                if isinstance(state, dict):
                    out.append(state)
        return out

    def put_folder_sync_state(self, folder: str, state: dict[str, Any]) -> None:
        """Record ``state`` (JSON) as what the import of ``folder`` saw."""
        import json

        with self._unit() as session:
            session.merge(orm.LibraryMetaRow(key=self._sync_key(folder), value=json.dumps(state, ensure_ascii=False)))

    def mark_exported(self, exported: Sequence[tuple[str, str, str]]) -> list[str]:
        """Record that ``(kind, object_id, key)`` objects were written back into the folder they were imported from.

        For each whose import identity is ``(kind, key)`` and still names that object, Loomscope's
        version becomes the synced one (its edits so far are in the folder now): the next import of
        the folder updates it from the file without calling it a conflict. Returns the keys marked.
        """
        from ..importers.st_folder import content_digest  # lazy: the importers are a sibling package

        marked: list[str] = []
        with self._unit() as session:
            for kind, obj_id, key in exported:
                src = session.get(orm.ImportSourceRow, (kind, key))
                if src is None or src.object_id != obj_id:
                    continue
                # the baseline becomes Loomscope's version: a card, book or persona by its content digest;
                # a chat by time ("" is no digest: its file is stored again, no longer a local edit)
                src.digest = "" if kind == "chat" else content_digest(self._load_value(session, kind, obj_id))
                src.updated_at = _now()
                marked.append(key)
        return marked

    def imported_refs(self, items: Sequence[tuple[str, str, str]]) -> list[ImportRef] | None:
        """``ImportRef`` per ``(kind, key, name)`` imported before, or ``None`` when any is no longer in the library."""
        row_cls: dict[str, Any] = {"character": orm.CharacterRow, "lorebook": orm.LorebookRow,
                   "persona": orm.PersonaRow, "chat": orm.ChatRow}
        with self._unit(write=False) as session:
            sources = {(k, key): oid for k, key, oid in session.execute(
                select(orm.ImportSourceRow.kind, orm.ImportSourceRow.key, orm.ImportSourceRow.object_id)).all()}
            ids = [sources.get((kind, key)) for kind, key, _ in items]
            if any(i is None for i in ids):
                return None
            for kind, cls in row_cls.items():
                wanted = {i for (k, _, _), i in zip(items, ids) if k == kind}
                found = 0
                for chunk in _chunks(sorted(str(i) for i in wanted), 500):
                    found += int(session.scalar(select(func.count()).select_from(cls).where(cls.id.in_(chunk))) or 0)
                if found != len(wanted):
                    return None
            return [ImportRef(kind=kind, id=str(i), name=name, key=key)  # type: ignore[arg-type]
                    for (kind, key, name), i in zip(items, ids)]

    @staticmethod
    def _st_chat_refs(item: Any, ids: dict[str, str]) -> tuple[str | None, str | None, list[str], list[str]]:
        links = [(ids[k], sc) for k, sc in item.lorebook_links if k in ids]
        return (ids.get(item.character_key) if item.character_key else None,
                ids.get(item.persona_key) if item.persona_key else None,
                [b for b, _ in links], [sc for _, sc in links])

    def _st_insert(self, session: Session, item: Any, ids: dict[str, str]) -> str:
        if item.kind == "character":
            return self._insert_character(session, item.value, avatar=item.avatar)
        if item.kind == "lorebook":
            return self._insert_lorebook(session, item.value)
        if item.kind == "persona":
            return self._insert_persona(session, item.value)
        character_id, persona_id, books, scopes = self._st_chat_refs(item, ids)
        return self._insert_chat(session, item.value, title=item.name, character_id=character_id,
                                 persona_id=persona_id, lorebook_ids=books, scopes=scopes,
                                 settings=item.settings, setup=item.setup)

    def _st_update(self, session: Session, item: Any, obj_id: str, ids: dict[str, str]) -> None:
        # the rows exist: import_st_folder looked them up by their import identity just before
        if item.kind == "character":
            char_row = session.get_one(orm.CharacterRow, obj_id)
            char: Character = item.value
            char_row.name, char_row.avatar = char.name, item.avatar
            char_row.data = char.model_dump(mode="json", exclude={"character_book"})
            old_books = list(session.scalars(select(orm.LorebookRow.id).where(
                orm.LorebookRow.character_id == obj_id)).all())
            for book_id in old_books:
                session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == book_id))
                session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.lorebook_id == book_id))
                session.execute(delete(orm.LorebookRow).where(orm.LorebookRow.id == book_id))
            if char.character_book is not None:
                book = char.character_book
                if not book.name:
                    book = book.model_copy(update={"name": f"{char.name or 'Character'} (card)"})
                self._insert_lorebook(session, book, character_id=obj_id)
        elif item.kind == "lorebook":
            book_row = session.get_one(orm.LorebookRow, obj_id)
            lorebook: Lorebook = item.value
            book_row.name = lorebook.name
            book_row.data = lorebook.model_dump(mode="json", exclude={"entries"})
            session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == obj_id))
            session.flush()
            session.add_all(_entry_row(obj_id, i, e) for i, e in enumerate(lorebook.entries))
        elif item.kind == "persona":
            persona_row = session.get_one(orm.PersonaRow, obj_id)
            persona_row.name, persona_row.data = item.value.name, item.value.model_dump(mode="json")
        else:
            row = session.get_one(orm.ChatRow, obj_id)
            chat: Chat = item.value
            character_id, persona_id, books, scopes = self._st_chat_refs(item, ids)
            row.title, row.character_id, row.persona_id = item.name, character_id, persona_id
            row.settings = item.settings.model_dump(mode="json")
            row.data = chat.model_dump(mode="json", exclude={"messages", "title"})
            row.setup = item.setup.model_dump(mode="json", exclude=_SETUP_NOT_STORED)
            session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == obj_id))
            session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == obj_id))
            session.flush()
            session.add_all(_message_row(obj_id, i, m) for i, m in enumerate(chat.messages))
            session.add_all(orm.ChatLorebookRow(chat_id=obj_id, lorebook_id=b, position=i, scope=sc)
                            for i, (b, sc) in enumerate(zip(books, scopes)))
            self._touch(row)

    # ================================================================ audits
    def get_audit(self, chat_id: str) -> PromptContextAudit | None:
        """The chat's stored audit, or ``None``. Raises ``CHAT_NOT_FOUND``."""
        with self._unit(write=False) as session:
            self._chat_row(session, chat_id)
            row = session.get(orm.AuditRow, chat_id)
            return PromptContextAudit.model_validate(row.data) if row is not None else None

    def put_audit(self, audit: PromptContextAudit) -> None:
        """Store ``audit`` as its chat's one audit, replacing the previous one atomically.

        Delete-and-insert in one transaction: a crash before the commit leaves the previous
        audit intact (SQLite WAL/rollback journal, PostgreSQL MVCC).
        Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit() as session:
            self._replace_audit(session, audit)

    def record_generation(self, audit: PromptContextAudit, reply: ChatMessage | None, *,
                          user_message: ChatMessage | None = None,
                          timed_effects: dict[str, Any] | None = None,
                          compaction: Any = None) -> int | None:
        """Store the audit, then append ``user_message`` and the reply (each if given), in ONE transaction.

        Returns the reply's index. Raises ``CHAT_NOT_FOUND``.

        ``timed_effects`` (World Info sticky/cooldown state after a completed generation) is
        written to the chat's ``metadata["timedWorldInfo"]``, as SillyTavern keeps it in
        ``chat_metadata``; an empty state removes the key. ``compaction`` (a
        :class:`~engine.compaction.state.CompactionState`, whatever the status: a summary made
        before a failed request is still good) replaces the chat's compaction state.
        """
        with self._unit() as session:
            index = None
            if compaction is not None:
                self._write_compaction(session, audit.chat_id, compaction)
            if timed_effects is not None and audit.status == "completed":
                row = self._chat_row(session, audit.chat_id, lock=True)
                data = dict(row.data or {})
                metadata = dict(data.get("metadata") or {})
                if timed_effects:
                    metadata["timedWorldInfo"] = timed_effects
                else:
                    metadata.pop("timedWorldInfo", None)
                data["metadata"] = metadata
                row.data = data  # a new dict, so the JSON column is written
            new = [m for m in (user_message, reply) if m is not None]
            if new:
                from ..importers.chats import stamp_message_times  # lazy: the importers are a sibling package

                # SillyTavern's send_date / gen_started / gen_finished, so an export carries them
                new = [stamp_message_times(m, audit.created_at, audit.finished_at) for m in new]
                self._chat_row(session, audit.chat_id, lock=True)
                last = session.scalar(select(func.max(orm.MessageRow.idx))
                                      .where(orm.MessageRow.chat_id == audit.chat_id))
                index = 0 if last is None else int(last) + 1
                for k, m in enumerate(new):
                    session.add(_message_row(audit.chat_id, index + k, m))
                index += len(new) - 1
            self._replace_audit(session, audit)
            return index if reply is not None else None

    def _replace_audit(self, session: Session, audit: PromptContextAudit) -> None:
        chat = self._chat_row(session, audit.chat_id)
        session.execute(delete(orm.AuditRow).where(orm.AuditRow.chat_id == audit.chat_id))
        session.add(orm.AuditRow(
            chat_id=audit.chat_id, generation_id=audit.generation_id, status=audit.status,
            error_code=audit.error_code, created_at=audit.created_at, finished_at=audit.finished_at,
            data=audit.model_dump(mode="json"),
        ))
        self._touch(chat)
        session.flush()
        if self._after_audit_flush is not None:
            self._after_audit_flush()

    # ================================================================ compaction (chats.data)
    def _write_compaction(self, session: Session, chat_id: str, state: Any) -> None:
        from ..compaction.options import CHAT_KEY

        row = self._chat_row(session, chat_id, lock=True)
        data = dict(row.data or {})
        dumped = state.dump()
        if dumped == type(state)().dump():
            data.pop(CHAT_KEY, None)
        else:
            data[CHAT_KEY] = dumped
        row.data = data  # a new dict, so the JSON column is written
        self._touch(row)

    @staticmethod
    def _branch_compaction(chat: Chat, at_index: int) -> Chat:
        """A branch keeps the compaction summary only when it covers nothing after ``at_index``.

        A summary of messages the branch lacks would be stale; removed ones and the failure count stay behind.
        """
        from ..compaction.options import CHAT_KEY
        from ..compaction.state import CompactionState

        extra = chat.model_extra or {}
        if CHAT_KEY not in extra:
            return chat
        state = CompactionState.from_raw(extra[CHAT_KEY])
        keep = state.summary if state.summary is not None and state.summary.last <= at_index else None
        data = chat.model_dump(mode="python", exclude={"messages"})
        data.pop(CHAT_KEY, None)
        if keep is not None:
            data[CHAT_KEY] = CompactionState(summary=keep).dump()
        return Chat.model_validate({**data, "messages": chat.messages})

    def get_compaction(self, chat_id: str) -> Any:
        """The chat's :class:`~engine.compaction.state.CompactionState`.

        Empty when none; an unreadable stored value reads as empty. Raises ``CHAT_NOT_FOUND``.
        """
        from ..compaction.options import CHAT_KEY
        from ..compaction.state import CompactionState

        with self._unit(write=False) as session:
            row = self._chat_row(session, chat_id)
            return CompactionState.from_raw((row.data or {}).get(CHAT_KEY))

    def put_compaction(self, chat_id: str, state: Any) -> None:
        """Replace the chat's compaction state (stored in ``chats.data``).

        An empty state removes the key. Raises ``CHAT_NOT_FOUND``.
        """
        with self._unit() as session:
            self._write_compaction(session, chat_id, state)

    def remove_compaction_summary(self, chat_id: str) -> Any:
        """Remove the chat's active compaction summary and reset the failure count.

        Its messages are sent verbatim again. Returns the removed ``CompactionSummary`` (``None`` when there was none);
        it is kept for :meth:`restore_compaction_summary`. Raises ``CHAT_NOT_FOUND``.
        """
        from ..compaction.options import CHAT_KEY
        from ..compaction.state import CompactionState

        with self._unit() as session:
            row = self._chat_row(session, chat_id, lock=True)
            state = CompactionState.from_raw((row.data or {}).get(CHAT_KEY))
            if state.summary is None:
                return None
            removed = state.summary
            self._write_compaction(session, chat_id, state.with_summary_removed())
            return removed

    def restore_compaction_summary(self, chat_id: str, summary: Any) -> None:
        """Make ``summary`` the chat's active compaction summary again.

        Undo of a removal, or redo of a compaction. Raises ``CHAT_NOT_FOUND``.
        """
        from ..compaction.options import CHAT_KEY
        from ..compaction.state import CompactionState

        with self._unit() as session:
            row = self._chat_row(session, chat_id, lock=True)
            state = CompactionState.from_raw((row.data or {}).get(CHAT_KEY))
            removed = [s for s in state.removed if s.id != summary.id]
            self._write_compaction(session, chat_id, state.model_copy(
                update={"summary": summary, "removed": removed, "stall": None}))

    def reset_compaction_failures(self, chat_id: str) -> None:
        """Clear the failure count and the stall mark, so auto-compaction runs again. Raises ``CHAT_NOT_FOUND``."""
        state = self.get_compaction(chat_id)
        self.put_compaction(chat_id, state.model_copy(update={"failures": 0, "stall": None}))
