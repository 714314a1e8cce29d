"""Chats: their setup (character, persona, linked lorebooks, settings), branches and preview requests."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ...errors import NotFoundError, SettingsError
from ...schema import Chat, ChatMessage, ContextSettings, Lorebook, PreviewRequest
from ...schema.sillytavern import SillyTavernSetup
from .. import _orm as orm
from .. import _queries as q
from .._rows import LOREBOOK_SCOPES, SETUP_NOT_STORED, utc
from ..models import ChatSetup, ChatSummary, LorebookLink, StoredChat, Usage
from ..unit import Repository


def _request(session: Session, stored: StoredChat) -> PreviewRequest:
    """The preview request of ``stored`` (see :meth:`ChatRepository.build_request`)."""
    books: list[Lorebook] = []
    character = stored.character
    if stored.setup is not None:
        for book_id in stored.lorebook_ids:
            books.append(q.load_lorebook(session, q.lorebook_row(session, book_id)))
        setup = stored.setup.model_copy(update={"lorebook_scopes": list(stored.lorebook_scopes)})
        if setup.group is not None:  # issue 27 item 7: every member's card, for the speaker's prompt
            setup = setup.model_copy(update={"group": q.group_cards(session, setup.group)})
        return PreviewRequest(chat=stored.chat, character=character, persona=stored.persona,
                              lorebooks=books, settings=stored.settings, sillytavern=setup)
    if character is not None and character.character_book is not None:
        # the card's book is character lore (SillyTavern getCharacterLore; World Info
        # character_strategy ranks it against the global books)
        books.append(character.character_book.model_copy(update={"scope": "character"}))
        character = character.model_copy(update={"character_book": None})
    for book_id in stored.lorebook_ids:
        books.append(q.load_lorebook(session, q.lorebook_row(session, book_id)))
    return PreviewRequest(chat=stored.chat, character=character, persona=stored.persona,
                          lorebooks=books, settings=stored.settings)


def _book_usages(session: Session, lorebook_id: str) -> list[Usage]:
    out: list[Usage] = []
    for chat_id, title, scope in session.execute(
            select(orm.ChatRow.id, orm.ChatRow.title, orm.ChatLorebookRow.scope)
            .join(orm.ChatLorebookRow, orm.ChatLorebookRow.chat_id == orm.ChatRow.id)
            .where(orm.ChatLorebookRow.lorebook_id == lorebook_id)).all():
        out.append(Usage(chat_id=chat_id, title=title, how=str(scope or "chat")))
    book = session.get(orm.LorebookRow, lorebook_id)
    if book is not None and book.character_id is not None:
        for r in session.scalars(select(orm.ChatRow).where(orm.ChatRow.character_id == book.character_id)):
            if r.setup is None and all(u.chat_id != r.id for u in out):
                out.append(Usage(chat_id=r.id, title=r.title, how="card"))
    return out


def _link_pairs(links: Sequence[LorebookLink | tuple[str, str]]) -> list[tuple[str, str]]:
    """``(lorebook_id, scope)`` pairs in order, a repeated book dropped. Raises ``INVALID_SETTINGS``."""
    pairs: list[tuple[str, str]] = []
    for link in links:
        book_id, scope = (link.lorebook_id, link.scope) if isinstance(link, LorebookLink) else link
        if scope not in LOREBOOK_SCOPES:
            raise SettingsError("INVALID_SETTINGS", f"unknown lorebook scope {scope!r} "
                                f"(expected one of {', '.join(LOREBOOK_SCOPES)})", file=book_id)
        if all(b != book_id for b, _ in pairs):
            pairs.append((book_id, scope))
    return pairs


class ChatRepository(Repository):
    """The library's chats (``store.chats``); their messages are :class:`MessageRepository`'s."""

    def summaries(self) -> list[ChatSummary]:
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
        with self._db.unit(write=False) as session:
            return [
                ChatSummary(id=row.id, title=row.title, character=char_name, messages=int(n or 0),
                            has_audit=audit_id is not None, parent_id=row.parent_id,
                            branch_point=row.branch_point, updated_at=utc(row.updated_at))
                for row, char_name, n, audit_id in session.execute(stmt).all()
            ]

    def get(self, chat_id: str) -> StoredChat:
        """The chat with its character, persona, attached lorebook ids and settings.

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit(write=False) as session:
            return q.stored_chat(session, q.chat_row(session, chat_id))

    def build_request(self, chat_id: str) -> PreviewRequest:
        """Everything attached to the chat, ready for :func:`engine.pipeline.preview`.

        ``lorebooks`` holds the card's embedded book first (if any), then the attached books in
        order; the request's ``character.character_book`` is ``None`` so that no book is
        activated twice. A chat imported from a SillyTavern folder (one with a stored setup)
        gets ``request.sillytavern`` (with ``lorebook_scopes``, one per book) and only its linked
        worlds: SillyTavern never activates a card's embedded book by itself (it becomes a world
        on import, linked by ``extensions.world``). Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit(write=False) as session:
            return _request(session, q.stored_chat(session, q.chat_row(session, chat_id)))

    def add(
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
        with self._db.unit() as session:
            return q.insert_chat(session, chat, title=title, character_id=character_id,
                                 persona_id=persona_id, lorebook_ids=lorebook_ids, settings=settings)

    def new_for_character(self, character_id: str, *, persona_id: str | None = None) -> str:
        """Start a chat with the character; returns the chat id.

        Its first message (``first_mes``) is the opening assistant message, the chat is titled after the character and
        its embedded book is active (the card book). Raises ``CHARACTER_NOT_FOUND``/``PERSONA_NOT_FOUND``.
        """
        with self._db.unit() as session:
            character = q.load_character(session, character_id)
            if persona_id is not None:
                q.persona_row(session, persona_id)
            messages = ([ChatMessage(role="assistant", name=character.name or None, content=character.first_mes)]
                        if character.first_mes else [])
            chat = Chat(title=character.name or "New chat", messages=messages, character_name=character.name or "")
            return q.insert_chat(session, chat, character_id=character_id, persona_id=persona_id)

    def branch(self, chat_id: str, at_index: int) -> str:
        """Fork the chat after message ``at_index`` (messages ``0..at_index`` are copied).

        The branch keeps the character, persona, lorebooks and settings, and links back
        (``parent_id``, ``branch_point``). Returns the new chat id.
        Raises ``CHAT_NOT_FOUND``, ``MESSAGE_NOT_FOUND`` (index out of range).
        """
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id)
            stored = q.stored_chat(session, row)
            if not 0 <= at_index < len(stored.chat.messages):
                raise NotFoundError("MESSAGE_NOT_FOUND", f"the chat has no message {at_index}",
                                    file=chat_id, place=f"message {at_index}")
            chat = stored.chat.model_copy(update={"messages": stored.chat.messages[: at_index + 1]})
            chat = q.branch_compaction(chat, at_index)
            title = f"{stored.title} (branch at {at_index})" if stored.title else f"branch at {at_index}"
            return q.insert_chat(
                session, chat, title=title, character_id=row.character_id, persona_id=row.persona_id,
                lorebook_ids=stored.lorebook_ids, settings=stored.settings,
                parent_id=chat_id, branch_point=at_index,
                setup=stored.setup, scopes=stored.lorebook_scopes,
            )

    def rename(self, chat_id: str, title: str) -> None:
        """Set the chat's title. Raises ``CHAT_NOT_FOUND``."""
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id)
            row.title = title
            q.touch(row)

    def delete(self, chat_id: str) -> None:
        """Delete the chat, its messages, lorebook links and its audit. Raises ``CHAT_NOT_FOUND``."""
        with self._db.unit() as session:
            q.chat_row(session, chat_id)
            # Explicit deletes as well as ON DELETE CASCADE: correct even on a database
            # whose foreign keys are off (an SQLite file opened by another tool).
            session.execute(delete(orm.AuditRow).where(orm.AuditRow.chat_id == chat_id))
            session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == chat_id))
            session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == chat_id))
            session.execute(delete(orm.ChatRow).where(orm.ChatRow.id == chat_id))

    def save_settings(self, chat_id: str, settings: ContextSettings) -> None:
        """Replace the chat's context settings. Raises ``CHAT_NOT_FOUND``."""
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id)
            row.settings = settings.model_dump(mode="json")
            q.touch(row)

    def _attach(self, chat_id: str, column: str, row_cls: type, item_id: str | None, code: str,
                what: str) -> None:
        """Set ``chats.<column>`` to ``item_id`` (or none) after checking the item exists."""
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id)
            if item_id is not None and session.get(row_cls, item_id) is None:
                raise NotFoundError(code, f"no {what} with that id in the library", file=item_id)
            setattr(row, column, item_id)
            q.touch(row)

    def set_character(self, chat_id: str, character_id: str | None) -> None:
        """Give the chat a character (or none): a chat imported without its card gets one.

        Raises ``CHAT_NOT_FOUND``/``CHARACTER_NOT_FOUND``.
        """
        self._attach(chat_id, "character_id", orm.CharacterRow, character_id, "CHARACTER_NOT_FOUND", "character")

    def set_persona(self, chat_id: str, persona_id: str | None) -> None:
        """Attach a persona (or none). Raises ``CHAT_NOT_FOUND``/``PERSONA_NOT_FOUND``."""
        self._attach(chat_id, "persona_id", orm.PersonaRow, persona_id, "PERSONA_NOT_FOUND", "persona")

    def set_lorebooks(self, chat_id: str, lorebook_ids: Sequence[str]) -> None:
        """Replace the list of attached lorebooks (order kept, duplicates dropped, scope ``chat``).

        Raises ``CHAT_NOT_FOUND``/``LOREBOOK_NOT_FOUND``.
        """
        self._link(chat_id, [(b, "chat") for b in dict.fromkeys(lorebook_ids)])

    def set_lorebook_links(self, chat_id: str, links: Sequence[LorebookLink | tuple[str, str]]) -> None:
        """Replace the chat's linked lorebooks with ``(lorebook_id, scope)`` pairs.

        The order is kept and a repeated book dropped; scope is ``chat``, ``character`` or ``global``.

        Raises ``CHAT_NOT_FOUND``/``LOREBOOK_NOT_FOUND``; ``INVALID_SETTINGS`` for an unknown scope.
        """
        self._link(chat_id, _link_pairs(links))

    def _link(self, chat_id: str, pairs: Sequence[tuple[str, str]]) -> None:
        """Replace the chat's lorebook links with ``pairs`` (distinct books), checking each book exists."""
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id)
            for book_id, _ in pairs:
                q.lorebook_row(session, book_id)
            session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == chat_id))
            session.add_all(orm.ChatLorebookRow(chat_id=chat_id, lorebook_id=b, position=i, scope=sc)
                            for i, (b, sc) in enumerate(pairs))
            q.touch(row)

    # ---------------------------------------------------------------- setup (issue 17; the setup editor)
    def get_setup(self, chat_id: str) -> ChatSetup:
        """The chat's setup: character, persona, linked lorebooks with scopes, settings, SillyTavern setup.

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit(write=False) as session:
            row = q.chat_row(session, chat_id)
            links = [LorebookLink(lorebook_id=i, name=n, scope=sc)  # type: ignore[arg-type]
                     for i, n, sc in q.attached_links(session, chat_id)]
            return ChatSetup(
                chat_id=row.id, character_id=row.character_id, persona_id=row.persona_id, lorebooks=links,
                settings=ContextSettings.model_validate(row.settings or {}),
                sillytavern=SillyTavernSetup.model_validate(row.setup) if row.setup is not None else None)

    def save_setup(self, chat_id: str, setup: SillyTavernSetup | None) -> None:
        """Replace the chat's SillyTavern setup (``None``: the chat is assembled by the stage template again).

        ``setup.lorebook_scopes`` is not stored (see :meth:`set_lorebook_links`).

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id)
            row.setup = setup.model_dump(mode="json", exclude=SETUP_NOT_STORED) if setup is not None else None
            q.touch(row)

    def where_used(self, kind: str, object_id: str) -> list[Usage]:
        """The chats that use a character, persona or lorebook (``kind``), by chat title.

        A lorebook is used by the chats that link it (``how`` = the link's scope) and by the
        chats of the character whose card embeds it (``how`` = ``card``; those chats are not
        SillyTavern chats, which never activate a card's embedded book).
        Raises ``INVALID_SETTINGS`` for an unknown ``kind``.
        """
        if kind not in ("character", "persona", "lorebook"):
            raise SettingsError("INVALID_SETTINGS", f"unknown library kind {kind!r} "
                                "(expected character, persona or lorebook)")
        with self._db.unit(write=False) as session:
            if kind == "lorebook":
                out = _book_usages(session, object_id)
            else:
                column = orm.ChatRow.character_id if kind == "character" else orm.ChatRow.persona_id
                out = [Usage(chat_id=r.id, title=r.title, how=kind)
                       for r in session.scalars(select(orm.ChatRow).where(column == object_id))]
            return sorted(out, key=lambda u: (u.title.lower(), u.chat_id))
