"""What changed between two previews of the same chat, found once per apply and shared by the views.

After a pin / exclude click on a 10,000-message chat the engine hands back a new preview with the
same rows: only the toggled row and the rows whose fate moved are new objects, and the chat-wide
figures (fit windows; on thousands of rows the free tokens of the specific reason) are new columns
of the preview (``ContextPreview.fit_windows`` / ``reason_details``), but only a few rows *show*
differently.
:func:`diff_previews` takes the engine's typed change set (:func:`engine.schema.preview_changes`)
and names, in a few C-level passes, the rows that show differently: the rows whose shown fields
moved, and the rows whose Reason cell reads differently (compared as text only where the data
makes a cell specific, against the cells of the shown preview kept from the last comparison). It
never reads a row the change set does not name and builds no per-row key of the whole preview.
The blocks table signals those rows as ranges (a repaint costs about a millisecond per visible
row: rows whose cells read the same are not signalled), and the chat list, the budget bar and the
tokens chart update only the rows whose shown fields moved. In the app the comparison runs on the
preview worker right after the computation
(:meth:`gui.preview.controller.PreviewController.set_derive`), while the UI thread waits.

A delta holds what the next comparison and the views need and nothing more: the new preview (the
one shown after it), the row lists, the fit windows and Reason cells of the new preview, and only
a weak reference to the preview it started from (a view asks :meth:`PreviewDelta.follows` whether
it shows that one; the delta never keeps it alive).

Only the rows' identity (``source``, ``message_index``) decides whether two previews have "the
same rows": when it differs the views rebuild from scratch (:func:`diff_previews` returns ``None``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import contains
from typing import Any, cast

from engine.schema import ContextPreview, FitWindows, preview_changes
from engine.vocabulary import words

from ..words import reason_cell

#: ``reason_data`` keys that make the Reason cell read differently (:func:`gui.words.reason_cell`).
_CELL_KEYS = ("blocked_by_tokens", "held_by", "used")


def shaped_cells(preview: ContextPreview, rows: list[int] | None = None) -> dict[int, str]:
    """``{row: Reason cell}`` for the rows whose ``reason_data`` has a key the Reason cell reads
    (``blocked_by_tokens``, ``held_by``, ``used``: :func:`gui.words.reason_cell`); every other row's
    cell is its reason code's words. Finding the rows takes C-level passes only.

    ``rows``: the rows to look at (default: every block, in order). The data is each row's
    specific reason's figures (``preview.reason_details``).
    """
    blocks = preview.blocks
    if rows is None:
        rows = list(range(len(blocks)))
    details = preview.reason_details if len(preview.reason_details) == len(blocks) else [None] * len(blocks)
    data: list[dict[str, Any] | None] = [None if e is None else e.data for e in map(details.__getitem__, rows)]
    with_data = list(compress(range(len(data)), data))
    dicts = cast("list[dict[str, Any]]", list(map(data.__getitem__, with_data)))  # the non-empty ones
    found: set[int] = set()
    for key in _CELL_KEYS:
        found.update(compress(with_data, map(contains, dicts, repeat(key))))
    at = sorted(found)
    reasons = [blocks[rows[k]].reason for k in at]
    return {rows[k]: reason_cell(code, data[k]) for k, code in zip(at, reasons, strict=True)}


def _unique_sorted(first: list[int], *more: list[int]) -> list[int]:
    """The sorted union of lists of rows (C-level set union and sort)."""
    return sorted(set(first).union(*more))


@dataclass(frozen=True, eq=False)
class PreviewDelta:
    """How ``new`` differs from the preview before it, two previews with the same rows in the same order.

    Attributes
    ----------
    new:
        The preview compared to (the one shown once the delta is applied).
    rows:
        Sorted rows (indices into ``new.blocks``) that show differently in the blocks table:
        :attr:`key_rows` plus the rows whose Reason cell alone reads differently.
    key_rows:
        Sorted rows where a row field differs (status,
        reason code, tokens, flags, text, ...): all a chat row's fate or a budget bar segment
        depends on.
    reason_cells:
        ``{row: new Reason cell}`` for the rows in :attr:`rows` but not in :attr:`key_rows`: the
        texts the Reason column may need room for.
    fits:
        The fit window of each of ``new``'s blocks (``new.fit_windows``, the tokens chart's), or
        ``None`` when nothing moved.
    shaped:
        :func:`shaped_cells` of ``new`` (the Reason cells its data makes specific), kept for the
        next comparison.
    """

    _old: weakref.ref[ContextPreview] = field(repr=False)
    new: ContextPreview
    rows: list[int]
    key_rows: list[int]
    reason_cells: dict[int, str] = field(default_factory=dict)
    fits: FitWindows | None = field(default=None, repr=False)
    shaped: dict[int, str] = field(default_factory=dict, repr=False)

    @property
    def old(self) -> ContextPreview | None:
        """The preview compared from, while something else keeps it alive (a view showing it), else ``None``."""
        return self._old()

    def follows(self, shown: ContextPreview | None) -> bool:
        """Whether the delta starts from ``shown`` (a view showing ``shown`` may apply it)."""
        return shown is not None and self._old() is shown

    def message_indices(self, rows: Sequence[int] | None = None) -> list[int]:
        """The chat message indices of ``rows`` (default :attr:`key_rows`), blocks of no message left out."""
        blocks = self.new.blocks
        return [i for r in (self.key_rows if rows is None else rows) if (i := blocks[r].message_index) is not None]


def diff_previews(old: ContextPreview, new: ContextPreview, base: PreviewDelta | None = None) -> PreviewDelta | None:
    """Compare two previews row by row; ``None`` when their rows differ (another row set or order).

    Works from the engine's typed change set (:func:`engine.schema.preview_changes`): only the rows
    it names are read, and only for their Reason data (the fit windows are the preview's column). Cost at 10,000 rows after a
    toggle: the change set, then a few C-level passes; Python code runs per row only for the Reason
    cells whose data makes them specific.

    Parameters
    ----------
    old, new:
        The preview shown and the one to show.
    base:
        The delta that led to ``old`` (its ``new`` is ``old``), when at hand: its Reason cells and
        fit windows describe ``old`` and are patched rather than read again.
    """
    changes = preview_changes(old, new)
    if changes is None:
        return None
    ref = weakref.ref(old)
    if base is not None and base.new is old:
        old_shaped, base_fits = base.shaped, base.fits
    else:
        old_shaped, base_fits = shaped_cells(old), None
    if not (changes.rows or changes.reason_detail or changes.fit_window):
        return PreviewDelta(ref, new, [], [], {}, base_fits, old_shaped)
    key_rows = _unique_sorted(changes.block, changes.status, changes.reason)
    fits = FitWindows.column(new.fit_windows, len(new.blocks))
    cells, shaped = _reason_cells(new, changes.reason_detail, key_rows, old_shaped)
    rows = _unique_sorted(key_rows, list(cells)) if cells else key_rows
    return PreviewDelta(ref, new, rows, key_rows, cells, fits, shaped)


def _reason_cells(preview: ContextPreview, data_rows: list[int], key_rows: list[int],
                  old_shaped: dict[int, str]) -> tuple[dict[int, str], dict[int, str]]:
    """The Reason cells that read differently on rows where only the Reason data moved, and the
    new preview's :func:`shaped_cells` (the old ones patched where the data or a key field moved).

    A row whose data shapes its cell neither before nor after shows its reason code's words, and
    the code is a key field: only rows shaped on one side are compared, by their text.
    """
    blocks = preview.blocks
    moved = set(data_rows).union(key_rows)
    new_cells = shaped_cells(preview, rows=sorted(moved))
    shaped = {r: cell for r, cell in old_shaped.items() if r not in moved} if moved else dict(old_shaped)
    shaped.update(new_cells)
    compare = set(new_cells).union(moved.intersection(old_shaped)).difference(key_rows)
    cells: dict[int, str] = {}
    for r in compare:
        was, now = old_shaped.get(r), new_cells.get(r)
        if was is None or now is None:
            plain = words(blocks[r].reason)  # not a key row: the same code before and after
            was, now = was or plain, now or plain
        if was != now:
            cells[r] = now
    return cells, shaped
