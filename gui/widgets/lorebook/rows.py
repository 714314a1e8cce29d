"""The Lorebook tab's rows: one :class:`EntryRow` per entry of every book a chat's World Info uses.

Each row holds the entry, where it lives (book index and name, library id) and what the current
preview's ``lorebook_trace`` and the test text said about it (typed
:class:`engine.lorebook.TraceRecord` values, matched to the entry by ``(book_index, str(uid))``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.lorebook import TraceRecord
from engine.schema import Lorebook, LorebookEntry

#: A trace record's key: ``(book_index, str(uid))``.
TraceKey = tuple[int, str]


def trace_key(book_index: int, uid: int | str) -> TraceKey:
    """Key matching a trace record to an entry: ``(book_index, str(uid))``."""
    return int(book_index), str(uid)


@dataclass(frozen=True)
class EntryRow:
    """One table row: an entry, where it lives, and what the preview and test said about it.

    Attributes
    ----------
    book_index:
        Index of the entry's book in the chat's lorebooks (``engine.resolve.chat_lorebooks``);
        the trace's ``book_index``.
    book_name, lorebook_id:
        The book's name and library id (``""``: not in the library, the row is read-only).
    entry:
        The entry itself.
    trace, test:
        The entry's trace record in the current preview and in the test-text run (``None``: no
        preview yet / no test text).
    budget:
        The lorebook budget in tokens (0 when unknown).
    embedded:
        The card's own book (not in ``request.lorebooks``).
    """

    book_index: int
    book_name: str
    lorebook_id: str
    entry: LorebookEntry
    trace: TraceRecord | None = None
    test: TraceRecord | None = None
    budget: int = 0
    embedded: bool = False

    @property
    def key(self) -> TraceKey:
        """``(book_index, str(entry.uid))``, the key of the entry's trace records."""
        return trace_key(self.book_index, self.entry.uid)

    @property
    def editable(self) -> bool:
        """Whether edits can be saved (the book has a library id)."""
        return bool(self.lorebook_id)

    @property
    def tokens(self) -> int | None:
        """Tokens of the entry's content in the preview (``None``: not counted)."""
        return None if self.trace is None else self.trace.tokens

    @property
    def share(self) -> float | None:
        """:attr:`tokens` as a fraction of :attr:`budget` (``None`` when either is unknown)."""
        tokens = self.tokens
        if tokens is None or self.budget <= 0:
            return None
        return tokens / self.budget


def index_trace(records: Iterable[TraceRecord]) -> dict[TraceKey, TraceRecord]:
    """Trace records by ``(book_index, str(uid))``; an activated record wins over others."""
    out: dict[TraceKey, TraceRecord] = {}
    for rec in records:
        key = trace_key(rec.book_index, rec.uid)
        if key in out and out[key].activated and not rec.activated:
            continue
        out[key] = rec
    return out


def build_rows(books: Sequence[Lorebook], *, listed: int, lorebook_ids: Sequence[str],
               trace: dict[TraceKey, TraceRecord] | None, test: dict[TraceKey, TraceRecord] | None,
               budget: int) -> list[EntryRow]:
    """One row per entry of ``books``, book order then entry order.

    Parameters
    ----------
    books:
        The chat's lorebooks as the trace indexes them (``engine.resolve.chat_lorebooks``).
    listed:
        How many of ``books`` are the request's own ``lorebooks``; the others are embedded in
        the card (read-only, :attr:`EntryRow.embedded`).
    lorebook_ids:
        Library ids parallel to the listed books; ignored unless exactly ``listed`` long (rows
        are then read-only).
    trace, test:
        :func:`index_trace` of the preview's and of the test text's records (``None``: none yet).
    budget:
        The lorebook budget in tokens.
    """
    ids = list(lorebook_ids) if len(lorebook_ids) == listed else []
    rows: list[EntryRow] = []
    for bi, book in enumerate(books):
        book_id = ids[bi] if bi < len(ids) else ""
        for entry in book.entries:
            key = trace_key(bi, entry.uid)
            rows.append(EntryRow(
                book_index=bi, book_name=book.name, lorebook_id=book_id, entry=entry,
                trace=trace.get(key) if trace is not None else None,
                test=test.get(key) if test is not None else None,
                budget=budget, embedded=bi >= listed,
            ))
    return rows
