"""Audits: the one stored :class:`PromptContextAudit` per chat, and a generation stored in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from ...compaction.state import CompactionState
from ...importers.chats import stamp_message_times
from ...schema import ChatMessage
from ...schema.audit import PromptContextAudit
from .. import _orm as orm
from .. import _queries as q
from .._rows import message_row
from ..unit import Database, Repository
from .messages import next_index


def _write_timed_effects(session: Session, chat_id: str, timed_effects: dict[str, Any]) -> None:
    """World Info sticky/cooldown state into ``metadata["timedWorldInfo"]`` (an empty state removes it)."""
    row = q.chat_row(session, chat_id, lock=True)
    data = dict(row.data or {})
    metadata = dict(data.get("metadata") or {})
    if timed_effects:
        metadata["timedWorldInfo"] = timed_effects
    else:
        metadata.pop("timedWorldInfo", None)
    data["metadata"] = metadata
    row.data = data  # a new dict, so the JSON column is written


def _append(session: Session, audit: PromptContextAudit, new: list[ChatMessage]) -> int:
    """Append ``new`` stamped with the generation's times; returns the index of the last one."""
    # SillyTavern's send_date / gen_started / gen_finished, so an export carries them
    new = [stamp_message_times(m, audit.created_at, audit.finished_at) for m in new]
    q.chat_row(session, audit.chat_id, lock=True)
    index = next_index(session, audit.chat_id)
    for k, m in enumerate(new):
        session.add(message_row(audit.chat_id, index + k, m))
    return index + len(new) - 1


class AuditRepository(Repository):
    """The chats' audits (``store.audits``)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        #: Test hook: called inside :meth:`put`'s transaction after the new row is flushed
        #: and before the commit (the crash-safety test kills the process there).
        self.after_flush: Callable[[], None] | None = None

    def get(self, chat_id: str) -> PromptContextAudit | None:
        """The chat's stored audit, or ``None``. Raises ``CHAT_NOT_FOUND``."""
        with self._db.unit(write=False) as session:
            q.chat_row(session, chat_id)
            row = session.get(orm.AuditRow, chat_id)
            return PromptContextAudit.model_validate(row.data) if row is not None else None

    def put(self, audit: PromptContextAudit) -> None:
        """Store ``audit`` as its chat's one audit, replacing the previous one atomically.

        Delete-and-insert in one transaction: a crash before the commit leaves the previous
        audit intact (SQLite WAL/rollback journal, PostgreSQL MVCC).
        Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit() as session:
            self._replace(session, audit)

    def record_generation(self, audit: PromptContextAudit, reply: ChatMessage | None, *,
                          user_message: ChatMessage | None = None,
                          timed_effects: dict[str, Any] | None = None,
                          compaction: CompactionState | None = None) -> int | None:
        """Store the audit, then append ``user_message`` and the reply (each if given), in ONE transaction.

        ``timed_effects`` (World Info sticky/cooldown state after a completed generation) is
        written to the chat's ``metadata["timedWorldInfo"]``, as SillyTavern keeps it in
        ``chat_metadata``; an empty state removes the key. ``compaction`` (whatever the status: a
        summary made before a failed request is still good) replaces the chat's compaction state.

        Returns
        -------
        int or None
            The reply's message index; ``None`` without a reply.

        Raises
        ------
        NotFoundError
            ``CHAT_NOT_FOUND``; nothing is stored then.
        """
        with self._db.unit() as session:
            index = None
            if compaction is not None:
                q.write_compaction(session, audit.chat_id, compaction)
            if timed_effects is not None and audit.status == "completed":
                _write_timed_effects(session, audit.chat_id, timed_effects)
            new = [m for m in (user_message, reply) if m is not None]
            if new:
                index = _append(session, audit, new)
            self._replace(session, audit)
            return index if reply is not None else None

    def _replace(self, session: Session, audit: PromptContextAudit) -> None:
        chat = q.chat_row(session, audit.chat_id)
        session.execute(delete(orm.AuditRow).where(orm.AuditRow.chat_id == audit.chat_id))
        session.add(orm.AuditRow(
            chat_id=audit.chat_id, generation_id=audit.generation_id, status=audit.status,
            error_code=audit.error_code, created_at=audit.created_at, finished_at=audit.finished_at,
            data=audit.model_dump(mode="json"),
        ))
        q.touch(chat)
        session.flush()
        if self.after_flush is not None:
            self.after_flush()
