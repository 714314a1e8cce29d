"""A chat's compaction state (issue 28), kept in ``chats.data`` under :data:`engine.compaction.options.CHAT_KEY`."""

from __future__ import annotations

from ...compaction.state import CompactionState, CompactionSummary
from .. import _queries as q
from ..unit import Repository


class CompactionRepository(Repository):
    """The chats' compaction states (``store.compaction``)."""

    def get(self, chat_id: str) -> CompactionState:
        """The chat's compaction state.

        Empty when none; an unreadable stored value reads as empty. Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit(write=False) as session:
            return q.read_compaction(q.chat_row(session, chat_id))

    def put(self, chat_id: str, state: CompactionState) -> None:
        """Replace the chat's compaction state (stored in ``chats.data``).

        An empty state removes the key. Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit() as session:
            q.write_compaction(session, chat_id, state)

    def remove_summary(self, chat_id: str) -> CompactionSummary | None:
        """Remove the chat's active compaction summary and reset the failure count.

        Its messages are sent verbatim again. Returns the removed summary (``None`` when there was none);
        it is kept for :meth:`restore_summary`. Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit() as session:
            state = q.read_compaction(q.chat_row(session, chat_id, lock=True))
            if state.summary is None:
                return None
            removed = state.summary
            q.write_compaction(session, chat_id, state.with_summary_removed())
            return removed

    def restore_summary(self, chat_id: str, summary: CompactionSummary) -> None:
        """Make ``summary`` the chat's active compaction summary again.

        Undo of a removal, or redo of a compaction. Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit() as session:
            state = q.read_compaction(q.chat_row(session, chat_id, lock=True))
            removed = [s for s in state.removed if s.id != summary.id]
            q.write_compaction(session, chat_id, state.model_copy(
                update={"summary": summary, "removed": removed, "stall": None}))

    def reset_failures(self, chat_id: str) -> None:
        """Clear the failure count and the stall mark, so auto-compaction runs again (one unit of work).

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit() as session:
            state = q.read_compaction(q.chat_row(session, chat_id, lock=True))
            q.write_compaction(session, chat_id, state.model_copy(update={"failures": 0, "stall": None}))
