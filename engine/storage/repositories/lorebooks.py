"""Lorebooks (World Info books) and their entries, in book order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ...errors import NotFoundError
from ...schema import Lorebook, LorebookEntry
from .. import _orm as orm
from .. import _queries as q
from .._rows import entry_row
from ..models import LorebookSummary
from ..unit import Repository


def _chat_lorebook_ids(session: Session, chat_id: str) -> list[str]:
    row = q.chat_row(session, chat_id)
    ids: list[str] = []
    if row.character_id is not None:
        ids.extend(session.scalars(
            select(orm.LorebookRow.id).where(orm.LorebookRow.character_id == row.character_id)
            .order_by(orm.LorebookRow.created_at)).all()[:1])
    ids.extend(i for i in q.attached_ids(session, chat_id) if i not in ids)
    return ids


def _next_uid(session: Session, lorebook_id: str) -> int:
    uids = session.scalars(select(orm.LorebookEntryRow.uid)
                           .where(orm.LorebookEntryRow.lorebook_id == lorebook_id)).all()
    numbers = [int(u) for u in uids if str(u).lstrip("-").isdigit()]
    return max(numbers, default=-1) + 1


def _next_position(session: Session, lorebook_id: str) -> int:
    last = session.scalar(select(func.max(orm.LorebookEntryRow.position))
                          .where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
    return 0 if last is None else int(last) + 1


def _put_entry_at(session: Session, lorebook_id: str, entry: LorebookEntry, index: int) -> None:
    rows = session.scalars(select(orm.LorebookEntryRow).where(
        orm.LorebookEntryRow.lorebook_id == lorebook_id).order_by(orm.LorebookEntryRow.position)).all()
    kept = [LorebookEntry.model_validate(r.data) for r in rows if r.uid != str(entry.uid)]
    kept.insert(max(0, min(index, len(kept))), entry)
    session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == lorebook_id))
    session.flush()
    session.add_all(entry_row(lorebook_id, i, e) for i, e in enumerate(kept))


class LorebookRepository(Repository):
    """The library's lorebooks and their entries (``store.lorebooks``)."""

    def add(self, book: Lorebook) -> str:
        """Store a standalone lorebook; returns its id."""
        with self._db.unit() as session:
            return q.insert_lorebook(session, book)

    def summaries(self, chat_id: str | None = None) -> list[LorebookSummary]:
        """Every lorebook by name, or (with ``chat_id``) those the chat uses: the card's book, then attached ones.

        Raises ``CHAT_NOT_FOUND`` (with ``chat_id``).
        """
        counts = (
            select(orm.LorebookEntryRow.lorebook_id, func.count(orm.LorebookEntryRow.id).label("n"))
            .group_by(orm.LorebookEntryRow.lorebook_id).subquery()
        )
        stmt = (select(orm.LorebookRow, counts.c.n)
                .outerjoin(counts, counts.c.lorebook_id == orm.LorebookRow.id))
        with self._db.unit(write=False) as session:
            rows: Sequence[Any]  # (LorebookRow, entry count) pairs
            if chat_id is None:
                rows = session.execute(stmt.order_by(orm.LorebookRow.name, orm.LorebookRow.id)).all()
            else:
                ids = _chat_lorebook_ids(session, chat_id)
                found = {r.id: (r, n) for r, n in session.execute(
                    stmt.where(orm.LorebookRow.id.in_(ids))).all()}
                rows = [found[i] for i in ids if i in found]
            return [LorebookSummary(id=r.id, name=r.name, entries=int(n or 0), character_id=r.character_id)
                    for r, n in rows]

    def ids_for_chat(self, chat_id: str) -> list[str]:
        """Ids of every book the chat's prompt uses: the card's own book first, then attached ones.

        Raises ``CHAT_NOT_FOUND``.
        """
        with self._db.unit(write=False) as session:
            return _chat_lorebook_ids(session, chat_id)

    def get(self, lorebook_id: str) -> Lorebook:
        """The lorebook with its entries in book order. Raises ``LOREBOOK_NOT_FOUND``."""
        with self._db.unit(write=False) as session:
            return q.load_lorebook(session, q.lorebook_row(session, lorebook_id))

    def rename(self, lorebook_id: str, name: str) -> None:
        """Set the lorebook's name. Raises ``LOREBOOK_NOT_FOUND``."""
        with self._db.unit() as session:
            row = q.lorebook_row(session, lorebook_id)
            row.name = name
            row.data = {**(row.data or {}), "name": name}

    def delete(self, lorebook_id: str) -> None:
        """Delete a lorebook, its entries and its chat links. Raises ``LOREBOOK_NOT_FOUND``."""
        with self._db.unit() as session:
            q.lorebook_row(session, lorebook_id)
            q.delete_book_rows(session, lorebook_id)

    # ---------------------------------------------------------------- entries
    def update_entry(self, lorebook_id: str, entry: LorebookEntry) -> None:
        """Replace the entry whose ``uid`` equals ``entry.uid``; append it when no entry has that uid.

        Raises ``LOREBOOK_NOT_FOUND``.
        """
        with self._db.unit() as session:
            q.lorebook_row(session, lorebook_id)
            row = session.scalars(select(orm.LorebookEntryRow).where(
                orm.LorebookEntryRow.lorebook_id == lorebook_id,
                orm.LorebookEntryRow.uid == str(entry.uid))).first()
            if row is None:
                session.add(entry_row(lorebook_id, _next_position(session, lorebook_id), entry))
                return
            new = entry_row(lorebook_id, row.position, entry)
            for column in ("uid", "comment", "constant", "disable", "data"):
                setattr(row, column, getattr(new, column))

    def delete_entry(self, lorebook_id: str, uid: int | str) -> None:
        """Remove the entry with that uid (no-op when absent). Raises ``LOREBOOK_NOT_FOUND``."""
        with self._db.unit() as session:
            q.lorebook_row(session, lorebook_id)
            session.execute(delete(orm.LorebookEntryRow).where(
                orm.LorebookEntryRow.lorebook_id == lorebook_id, orm.LorebookEntryRow.uid == str(uid)))

    def add_entry(self, lorebook_id: str, entry: LorebookEntry | None = None) -> LorebookEntry:
        """Append a new entry (``entry`` or a blank one); returns the stored entry.

        The entry gets the next free numeric ``uid`` (one more than the largest, as SillyTavern's
        ``getFreeWorldEntryUid`` picks a free one). Raises ``LOREBOOK_NOT_FOUND``.
        """
        with self._db.unit() as session:
            q.lorebook_row(session, lorebook_id)
            new = (entry or LorebookEntry()).model_copy(update={"uid": _next_uid(session, lorebook_id)})
            session.add(entry_row(lorebook_id, _next_position(session, lorebook_id), new))
            return new

    def duplicate_entry(self, lorebook_id: str, uid: int | str) -> LorebookEntry:
        """Copy entry ``uid`` under a new uid, right after it (one unit of work); returns the copy.

        Raises ``LOREBOOK_NOT_FOUND``; ``LOREBOOK_ENTRY_NOT_FOUND`` when the book has no such entry.
        """
        with self._db.unit() as session:
            book = q.load_lorebook(session, q.lorebook_row(session, lorebook_id))
            for i, e in enumerate(book.entries):
                if str(e.uid) == str(uid):
                    copy = e.model_copy(deep=True, update={"uid": _next_uid(session, lorebook_id)})
                    _put_entry_at(session, lorebook_id, copy, i + 1)
                    return copy
        raise NotFoundError("LOREBOOK_ENTRY_NOT_FOUND", f"the lorebook has no entry {uid}",
                            file=lorebook_id, place=f"entry {uid}")

    def insert_entry(self, lorebook_id: str, entry: LorebookEntry, index: int) -> None:
        """Put ``entry`` at book position ``index`` (clamped).

        An entry with the same uid is replaced (undo of a delete puts an entry back where it was). Raises
        ``LOREBOOK_NOT_FOUND``.
        """
        with self._db.unit() as session:
            q.lorebook_row(session, lorebook_id)
            _put_entry_at(session, lorebook_id, entry, index)
