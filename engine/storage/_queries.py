"""Session-level reads and writes shared by the repositories and the import service.

Each function works inside a unit of work the caller opened (:meth:`engine.storage.unit.Database.unit`)
and never commits; none hands an ORM row out of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.orm import Session

from ..compaction.options import CHAT_KEY
from ..compaction.state import CompactionState
from ..errors import NotFoundError
from ..schema import Character, Chat, ChatMessage, ContextSettings, Lorebook, Persona
from ..schema.sillytavern import GroupSetup, SillyTavernSetup
from . import _orm as orm
from ._rows import MESSAGE_BATCH, SETUP_NOT_STORED, entry_row, message_model, message_values, new_id, now, utc
from .models import StoredChat

#: ORM row class per library kind (import identities name objects by kind).
ROW_CLASSES: dict[str, Any] = {"character": orm.CharacterRow, "lorebook": orm.LorebookRow,
                               "persona": orm.PersonaRow, "chat": orm.ChatRow}


R = TypeVar("R")

# ---------------------------------------------------------------- rows by id (NotFoundError when absent)
def chat_row(session: Session, chat_id: str, *, lock: bool = False) -> orm.ChatRow:
    """The chat's row; ``lock``: ``SELECT ... FOR UPDATE`` on PostgreSQL. Raises ``CHAT_NOT_FOUND``."""
    # so concurrent appends number messages in turn
    row = session.get(orm.ChatRow, chat_id, with_for_update=lock or None)
    if row is None:
        raise NotFoundError("CHAT_NOT_FOUND", "no chat with that id in the library", file=chat_id)
    return row


def _row_or_missing(session: Session, model: type[R], row_id: str, code: str, what: str) -> R:
    """``session.get(model, row_id)``; raises ``NotFoundError(code)`` naming ``what`` when absent."""
    row = session.get(model, row_id)
    if row is None:
        raise NotFoundError(code, f"no {what} with that id in the library", file=row_id)
    return row


def lorebook_row(session: Session, lorebook_id: str) -> orm.LorebookRow:
    """The lorebook's row. Raises ``LOREBOOK_NOT_FOUND``."""
    return _row_or_missing(session, orm.LorebookRow, lorebook_id, "LOREBOOK_NOT_FOUND", "lorebook")


def character_row(session: Session, character_id: str) -> orm.CharacterRow:
    """The character's row. Raises ``CHARACTER_NOT_FOUND``."""
    return _row_or_missing(session, orm.CharacterRow, character_id, "CHARACTER_NOT_FOUND", "character")


def persona_row(session: Session, persona_id: str) -> orm.PersonaRow:
    """The persona's row. Raises ``PERSONA_NOT_FOUND``."""
    return _row_or_missing(session, orm.PersonaRow, persona_id, "PERSONA_NOT_FOUND", "persona")


def touch(row: orm.ChatRow) -> None:
    """Stamp the chat as changed now (a chat edit is what marks it edited since an import)."""
    row.updated_at = now()


# ---------------------------------------------------------------- inserts
def insert_lorebook(session: Session, book: Lorebook, *, character_id: str | None = None) -> str:
    """Add ``book`` and its entries (linked to a character's card when ``character_id``); returns its id."""
    book_id = new_id()
    session.add(orm.LorebookRow(
        id=book_id, name=book.name, character_id=character_id, created_at=now(),
        data=book.model_dump(mode="json", exclude={"entries"}),
    ))
    session.flush()  # parent row before its entries (PostgreSQL checks FKs per statement)
    session.add_all(entry_row(book_id, i, e) for i, e in enumerate(book.entries))
    return book_id


def insert_card_book(session: Session, character: Character, character_id: str) -> None:
    """Store the card's embedded book (if any) as a lorebook linked to ``character_id``."""
    if character.character_book is None:
        return
    book = character.character_book
    if not book.name:
        book = book.model_copy(update={"name": f"{character.name or 'Character'} (card)"})
    insert_lorebook(session, book, character_id=character_id)


def insert_character(session: Session, character: Character, *, avatar: bytes | None = None) -> str:
    """Add ``character`` (its embedded book becomes a linked lorebook); returns its id."""
    char_id = new_id()
    session.add(orm.CharacterRow(
        id=char_id, name=character.name, created_at=now(),
        data=character.model_dump(mode="json", exclude={"character_book"}), avatar=avatar,
    ))
    session.flush()
    insert_card_book(session, character, char_id)
    return char_id


def insert_persona(session: Session, persona: Persona) -> str:
    """Add ``persona``; returns its id."""
    persona_id = new_id()
    session.add(orm.PersonaRow(id=persona_id, name=persona.name, created_at=now(),
                               data=persona.model_dump(mode="json")))
    return persona_id


def insert_chat(
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
    """Add ``chat`` with its messages and lorebook links (``scopes``: one per book); returns its id.

    Messages go in as bulk INSERTs of :data:`~engine.storage._rows.MESSAGE_BATCH`; ``on_progress(stored,
    total)`` follows along.
    """
    chat_id = new_id()
    stamp = now()
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
        setup=setup.model_dump(mode="json", exclude=SETUP_NOT_STORED) if setup is not None else None,
        created_at=stamp,
        updated_at=stamp,
    )])
    # a 99,000-message chat is stored in seconds
    total = len(chat.messages)
    for start in range(0, total, MESSAGE_BATCH):
        batch = chat.messages[start:start + MESSAGE_BATCH]
        conn.execute(insert(cast(Table, orm.MessageRow.__table__)),
                     [message_values(chat_id, start + k, m) for k, m in enumerate(batch)])
        if on_progress is not None:
            on_progress(start + len(batch), total)
    scope_of = dict(zip(lorebook_ids, scopes))
    links = [dict(chat_id=chat_id, lorebook_id=book_id, position=i, scope=scope_of.get(book_id, "chat"))
             for i, book_id in enumerate(dict.fromkeys(lorebook_ids))]
    if links:
        conn.execute(insert(cast(Table, orm.ChatLorebookRow.__table__)), links)
    return chat_id


# ---------------------------------------------------------------- reads
def load_lorebook(session: Session, row: orm.LorebookRow) -> Lorebook:
    """The lorebook of ``row`` with its entries in book order."""
    entries = session.scalars(
        select(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == row.id)
        .order_by(orm.LorebookEntryRow.position)
    ).all()
    return Lorebook.model_validate({**(row.data or {}), "name": row.name, "entries": [e.data for e in entries]})


def card_book_row(session: Session, character_id: str) -> orm.LorebookRow | None:
    """The row of the character's embedded book (its first), or ``None``."""
    return session.scalars(
        select(orm.LorebookRow).where(orm.LorebookRow.character_id == character_id)
        .order_by(orm.LorebookRow.created_at).limit(1)
    ).first()


def load_character(session: Session, char_id: str) -> Character:
    """The character with its embedded book. Raises ``CHARACTER_NOT_FOUND``."""
    row = character_row(session, char_id)
    book_row = card_book_row(session, char_id)
    book = load_lorebook(session, book_row) if book_row is not None else None
    return Character.model_validate({**(row.data or {}), "character_book": book})


def load_persona(session: Session, persona_id: str) -> Persona:
    """The persona. Raises ``PERSONA_NOT_FOUND``."""
    return Persona.model_validate(persona_row(session, persona_id).data or {})


def load_messages(session: Session, chat_id: str) -> list[ChatMessage]:
    """The chat's messages in order."""
    rows = session.scalars(
        select(orm.MessageRow).where(orm.MessageRow.chat_id == chat_id).order_by(orm.MessageRow.idx)
    ).all()
    return [message_model(r) for r in rows]


def attached_ids(session: Session, chat_id: str) -> list[str]:
    """Ids of the lorebooks linked to the chat, in order."""
    return list(session.scalars(
        select(orm.ChatLorebookRow.lorebook_id).where(orm.ChatLorebookRow.chat_id == chat_id)
        .order_by(orm.ChatLorebookRow.position)
    ).all())


def attached_links(session: Session, chat_id: str) -> list[tuple[str, str, str]]:
    """``(lorebook_id, name, scope)`` of the chat's attached books, in order."""
    rows = session.execute(
        select(orm.ChatLorebookRow.lorebook_id, orm.LorebookRow.name, orm.ChatLorebookRow.scope)
        .join(orm.LorebookRow, orm.LorebookRow.id == orm.ChatLorebookRow.lorebook_id)
        .where(orm.ChatLorebookRow.chat_id == chat_id).order_by(orm.ChatLorebookRow.position)
    ).all()
    return [(str(i), str(n), str(sc or "chat")) for i, n, sc in rows]


def stored_chat(session: Session, row: orm.ChatRow) -> StoredChat:
    """The chat of ``row`` with its character, persona, linked books and settings."""
    chat = Chat.model_validate({**(row.data or {}), "title": row.title,
                                "messages": load_messages(session, row.id)})
    character = load_character(session, row.character_id) if row.character_id is not None else None
    persona = None
    if row.persona_id is not None:
        prow = session.get(orm.PersonaRow, row.persona_id)
        persona = Persona.model_validate(prow.data) if prow is not None else None
    links = attached_links(session, row.id)
    return StoredChat(
        id=row.id, title=row.title, chat=chat,
        character_id=row.character_id, character=character,
        persona_id=row.persona_id, persona=persona,
        lorebook_ids=[i for i, _, _ in links], lorebook_scopes=[sc for _, _, sc in links],
        settings=ContextSettings.model_validate(row.settings or {}),
        setup=SillyTavernSetup.model_validate(row.setup) if row.setup is not None else None,
        parent_id=row.parent_id, branch_point=row.branch_point,
        created_at=utc(row.created_at), updated_at=utc(row.updated_at),
    )


def group_cards(session: Session, group: GroupSetup) -> GroupSetup:
    """``group`` with each member's card from the library (found by its import key; ``None`` when gone)."""
    members = []
    for m in group.members:
        card = None
        src = session.get(orm.ImportSourceRow, ("character", m.key)) if m.key else None
        if src is not None and session.get(orm.CharacterRow, src.object_id) is not None:
            card = load_character(session, src.object_id)
        members.append(m.model_copy(update={"character": card}))
    return group.model_copy(update={"members": members})


def load_value(session: Session, kind: str, obj_id: str) -> Any:
    """The library object ``obj_id`` of ``kind`` as a model (a chat: its :class:`Chat`)."""
    if kind == "character":
        return load_character(session, obj_id)
    if kind == "lorebook":
        return load_lorebook(session, lorebook_row(session, obj_id))
    if kind == "persona":
        return load_persona(session, obj_id)
    return stored_chat(session, chat_row(session, obj_id)).chat


# ---------------------------------------------------------------- deletes
def forget_source(session: Session, kind: str, object_id: str) -> None:
    """Drop the import identity of ``object_id`` (a re-import adds the object again)."""
    session.execute(delete(orm.ImportSourceRow).where(orm.ImportSourceRow.kind == kind,
                                                      orm.ImportSourceRow.object_id == object_id))


def delete_book_rows(session: Session, lorebook_id: str, *, forget: bool = True) -> None:
    """Delete a lorebook, its entries, its chat links and (``forget``) its import identity."""
    session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
    session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.lorebook_id == lorebook_id))
    if forget:
        forget_source(session, "lorebook", lorebook_id)
    session.execute(delete(orm.LorebookRow).where(orm.LorebookRow.id == lorebook_id))


# ---------------------------------------------------------------- compaction state (chats.data)
def read_compaction(row: orm.ChatRow) -> CompactionState:
    """The compaction state stored in the chat's ``data`` (empty when none or unreadable)."""
    return CompactionState.from_raw((row.data or {}).get(CHAT_KEY))


def write_compaction(session: Session, chat_id: str, state: CompactionState) -> None:
    """Replace the chat's compaction state; an empty state removes the key. Raises ``CHAT_NOT_FOUND``."""
    row = chat_row(session, chat_id, lock=True)
    data = dict(row.data or {})
    dumped = state.dump()
    if dumped == type(state)().dump():
        data.pop(CHAT_KEY, None)
    else:
        data[CHAT_KEY] = dumped
    row.data = data  # a new dict, so the JSON column is written
    touch(row)


def branch_compaction(chat: Chat, at_index: int) -> Chat:
    """A branch keeps the compaction summary only when it covers nothing after ``at_index``.

    A summary of messages the branch lacks would be stale; removed ones and the failure count stay behind.
    """
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
