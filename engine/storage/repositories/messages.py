"""A chat's messages: appends, edits, user flags, inserts and deletes that keep indices dense."""

from __future__ import annotations

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from ...errors import NotFoundError
from ...schema import ChatMessage
from .. import _orm as orm
from .. import _queries as q
from .._rows import message_row
from ..unit import Repository

_MESSAGE_COLUMNS = ("role", "name", "content", "tool_calls", "tool_result_id", "tool_result_key",
                    "pinned", "manual_excluded", "hidden", "swipes", "extra")


def _message_at(session: Session, chat_id: str, index: int) -> orm.MessageRow:
    q.chat_row(session, chat_id)
    row = session.scalars(select(orm.MessageRow).where(
        orm.MessageRow.chat_id == chat_id, orm.MessageRow.idx == index)).first()
    if row is None:
        raise NotFoundError("MESSAGE_NOT_FOUND", f"the chat has no message {index}",
                            file=chat_id, place=f"message {index}")
    return row


def _shift_indices(session: Session, chat_id: str, start: int, step: int) -> None:
    """Add ``step`` (±1) to the index of every message at ``start`` or later.

    Two statements through negative indices, so the unique ``(chat_id, idx)`` constraint
    holds after every row on every backend (SQLite and PostgreSQL check it per row).
    """
    rows = (orm.MessageRow.chat_id == chat_id)
    session.execute(update(orm.MessageRow).where(rows, orm.MessageRow.idx >= start)
                    .values(idx=-orm.MessageRow.idx - 1))
    session.execute(update(orm.MessageRow).where(rows, orm.MessageRow.idx < 0)
                    .values(idx=-orm.MessageRow.idx - 1 + step))


def next_index(session: Session, chat_id: str) -> int:
    """The index the chat's next appended message gets (0 for an empty chat)."""
    last = session.scalar(select(func.max(orm.MessageRow.idx)).where(orm.MessageRow.chat_id == chat_id))
    return 0 if last is None else int(last) + 1


class MessageRepository(Repository):
    """The messages of the library's chats, by chat id and index (``store.messages``)."""

    def append(self, chat_id: str, message: ChatMessage) -> int:
        """Append a message to the chat; returns its index. Raises ``CHAT_NOT_FOUND``."""
        with self._db.unit() as session:
            row = q.chat_row(session, chat_id, lock=True)
            idx = next_index(session, chat_id)
            session.add(message_row(chat_id, idx, message))
            q.touch(row)
            return idx

    def update(self, chat_id: str, index: int, message: ChatMessage) -> None:
        """Replace message ``index`` (text edits, swipes). Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``."""
        with self._db.unit() as session:
            old = _message_at(session, chat_id, index)
            new = message_row(chat_id, index, message)
            for column in _MESSAGE_COLUMNS:
                setattr(old, column, getattr(new, column))
            q.touch(q.chat_row(session, chat_id))

    def set_flags(
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
        with self._db.unit() as session:
            row = _message_at(session, chat_id, index)
            if pinned is not None:
                row.pinned = bool(pinned)
            if manual_excluded is not None:
                row.manual_excluded = bool(manual_excluded)
            if hidden is not None:
                row.hidden = bool(hidden)
            q.touch(q.chat_row(session, chat_id))

    def delete(self, chat_id: str, index: int) -> None:
        """Delete message ``index``; later messages move up one place (undone by :meth:`insert`).

        Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``.
        """
        with self._db.unit() as session:
            row = _message_at(session, chat_id, index)
            session.delete(row)
            session.flush()
            _shift_indices(session, chat_id, index + 1, -1)
            q.touch(q.chat_row(session, chat_id))

    def insert(self, chat_id: str, index: int, message: ChatMessage) -> None:
        """Insert ``message`` at ``index`` (0 … number of messages); later messages move down one.

        Raises ``CHAT_NOT_FOUND``, ``MESSAGE_NOT_FOUND`` (index past the end).
        """
        with self._db.unit() as session:
            chat = q.chat_row(session, chat_id, lock=True)
            count = session.scalar(select(func.count()).select_from(orm.MessageRow)
                                   .where(orm.MessageRow.chat_id == chat_id)) or 0
            if not 0 <= index <= count:
                raise NotFoundError("MESSAGE_NOT_FOUND", f"cannot insert at message {index}: the chat has "
                                    f"{count} messages", file=chat_id, place=f"message {index}")
            _shift_indices(session, chat_id, index, +1)
            session.add(message_row(chat_id, index, message))
            q.touch(chat)

    def delete_from(self, chat_id: str, index: int) -> None:
        """Delete message ``index`` and every later one (SillyTavern "delete up to here").

        Raises ``CHAT_NOT_FOUND``/``MESSAGE_NOT_FOUND``.
        """
        with self._db.unit() as session:
            _message_at(session, chat_id, index)
            session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == chat_id,
                                                         orm.MessageRow.idx >= index))
            q.touch(q.chat_row(session, chat_id))
