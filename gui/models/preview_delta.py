"""What changed between two previews of the same chat, found once per apply and shared by the views.

After a pin / exclude click on a 10,000-message chat the engine hands back a new preview with the
same rows; only a few of them *show* differently (a status, a flag, a Reason cell), although nearly
every block is a new object (its ``fit_window`` and the free tokens in its ``reason_detail`` and
``reason_data`` moved). :func:`diff_previews` finds those rows with a few C-level passes over the
blocks (when the engine reused most blocks, ``old is new``, only the others are read) and returns a
:class:`PreviewDelta`; the blocks table, the chat list, the budget bar and the tokens chart then
update only what those rows touch instead of each walking all 10,000 blocks again. In the app the
comparison runs on the preview worker right after the computation
(:meth:`gui.preview.controller.PreviewController.set_derive`), while the UI thread waits anyway.

Only the rows' identity (``source``, ``message_index``) decides whether two previews have "the
same rows": when it differs the views rebuild from scratch (:func:`diff_previews` returns ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import contains, itemgetter
from typing import Any, cast

from engine.schema import ContextPreview, PreviewBlock, PreviewChanges, preview_changes
from engine.vocabulary import words

from ..words import reason_cell

#: Per block: its identity (``source``, ``message_index``: the first two items) and every field
#: the views show from it, ``reason_data`` apart (see :func:`diff_previews`). Not here: ``fit_window``
#: (the tokens chart reads it for every row), ``reason_detail`` and ``trace`` (tooltips and the
#: inspector, read when shown). Read from the instance ``__dict__`` (``itemgetter`` over ``vars``):
#: a third of ``getattr``'s cost.
_KEY_FIELDS = ("source", "message_index", "position", "kind", "role", "name", "text", "tokens", "original_tokens",
               "status", "reason", "protected", "pinned", "manual_excluded", "group")
_ROW_KEY = itemgetter(*_KEY_FIELDS)
_FIT = itemgetter("fit_window")
_IDENTITY = slice(0, 2)
#: ``reason_data`` keys that make the Reason cell read differently (:func:`gui.words.reason_cell`).
_CELL_KEYS = ("blocked_by_tokens", "held_by", "used")
_REASON = 10
#: Where :func:`row_keys` puts ``status`` and ``group`` (the table counts kept rows and group members).
STATUS_FIELD, GROUP_FIELD = 9, 14
_REASON_DATA = itemgetter("reason_data")


def row_keys(blocks: Sequence[PreviewBlock]) -> list[tuple[Any, ...]]:
    """Per block, its identity and shown fields (what :func:`diff_previews` compares)."""
    return list(map(_ROW_KEY, map(vars, blocks)))


def shaped_cells(blocks: Sequence[PreviewBlock], data: list[dict[str, Any] | None] | None = None,
                 rows: list[int] | None = None) -> dict[int, str]:
    """``{row: Reason cell}`` for the rows whose ``reason_data`` has a key the Reason cell reads
    (``blocked_by_tokens``, ``held_by``, ``used``: :func:`gui.words.reason_cell`); every other row's
    cell is its reason code's words. Finding the rows takes C-level passes only.

    ``data``: the blocks' ``reason_data`` when already read, one per row of ``rows`` (default:
    every block, in order).
    """
    if rows is None:
        rows = list(range(len(blocks)))
    if data is None:
        data = list(map(_REASON_DATA, map(vars, map(blocks.__getitem__, rows))))
    with_data = list(compress(range(len(data)), data))
    dicts = cast("list[dict[str, Any]]", list(map(data.__getitem__, with_data)))  # the non-empty ones
    found: set[int] = set()
    for key in _CELL_KEYS:
        found.update(compress(with_data, map(contains, dicts, repeat(key))))
    at = sorted(found)
    reasons = [blocks[rows[k]].reason for k in at]
    return {rows[k]: reason_cell(code, data[k]) for k, code in zip(at, reasons, strict=True)}


def reason_text(b: PreviewBlock) -> str:
    """The Reason cell of block ``b`` (:func:`gui.words.reason_cell`; the bare code when it has no data)."""
    return reason_cell(b.reason, b.reason_data) if b.reason_data else b.reason


@dataclass(frozen=True)
class PreviewDelta:
    """How ``new`` differs from ``old``, two previews with the same rows in the same order.

    Attributes
    ----------
    old, new:
        The previews compared.
    rows:
        Sorted rows (indices into ``blocks``) that show differently: :attr:`key_rows` plus the rows
        whose Reason cell alone reads differently.
    key_rows:
        Sorted rows whose shown fields other than the Reason cell's data differ (status, reason
        code, tokens, flags, text, ...): all a chat row's fate or a budget bar segment depends on.
    reason_cells:
        ``{row: new Reason cell}`` for the rows in :attr:`rows` but not in :attr:`key_rows`.
    keys, shaped:
        :func:`row_keys` and :func:`shaped_cells` of ``new`` (kept for the next comparison).
    fits:
        ``fit_window`` of each of ``new``'s blocks (the tokens chart's), or ``None`` when every
        block is ``old``'s own (nothing moved).
    old_keys:
        :func:`row_keys` of ``old``.
    """

    old: ContextPreview
    new: ContextPreview
    rows: list[int]
    key_rows: list[int]
    reason_cells: dict[int, str] = field(default_factory=dict)
    keys: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
    shaped: dict[int, str] | None = field(default=None, repr=False)
    fits: list[int | None] | None = field(default=None, repr=False)
    old_keys: list[tuple[Any, ...]] = field(default_factory=list, repr=False)

    def message_indices(self, rows: Sequence[int] | None = None) -> list[int]:
        """The chat message indices of ``rows`` (default :attr:`key_rows`), blocks of no message left out."""
        blocks = self.new.blocks
        return [i for r in (self.key_rows if rows is None else rows) if (i := blocks[r].message_index) is not None]


def diff_previews(old: ContextPreview, new: ContextPreview, base: PreviewDelta | None = None) -> PreviewDelta | None:
    """Compare two previews row by row; ``None`` when their rows differ (another row set or order).

    Works from the engine's typed change set (:func:`engine.schema.preview_changes`: the rows that
    are new objects, and per fate field where it moved): only the rows it names are read. Cost at
    10,000 rows after a toggle: a few C-level passes; Python code runs per row only where a row's
    shown fields or its Reason cell's data moved.

    Parameters
    ----------
    old, new:
        The preview shown and the one to show.
    base:
        The delta that led to ``old`` (its ``new`` is ``old``), when at hand: its keys, cells and
        fits describe ``old`` and are not read again.
    """
    changes = preview_changes(old, new)
    if changes is None:
        return None
    if base is not None and (base.new is not old or base.shaped is None or base.fits is None):
        base = None
    ob = old.blocks
    old_keys = base.keys if base is not None else row_keys(ob)
    old_shaped = base.shaped if base is not None and base.shaped is not None else shaped_cells(ob)
    if not changes.rows:
        return PreviewDelta(old, new, [], [], {}, old_keys, old_shaped, base.fits if base is not None else None,
                            old_keys)
    return _apply_changes(old, new, changes, base, old_keys, old_shaped)


def _apply_changes(old: ContextPreview, new: ContextPreview, changes: PreviewChanges, base: PreviewDelta | None,
                   old_keys: list[tuple[Any, ...]], old_shaped: dict[int, str]) -> PreviewDelta | None:
    """The delta from the engine's change set: keys of the rows whose shown fields moved, their cells, the fits."""
    nb = new.blocks
    candidates = sorted(set(changes.block).union(changes.status, changes.reason))
    keys = list(old_keys)
    for r in candidates:
        keys[r] = _ROW_KEY(vars(nb[r]))
    key_rows = [r for r in candidates if old_keys[r] != keys[r]]
    if base is not None and base.fits is not None:
        fits = list(base.fits)
        for r in changes.fit_window:
            fits[r] = nb[r].fit_window
    else:
        fits = list(map(_FIT, map(vars, nb)))
    data_rows = sorted(set(changes.reason_detail).union(candidates))
    moved = set(data_rows)
    shaped = {r: cell for r, cell in old_shaped.items() if r not in moved}
    shaped.update(shaped_cells(nb, rows=data_rows))
    return _finish(old, new, old_keys, old_shaped, keys, shaped, fits, key_rows)


def _finish(old: ContextPreview, new: ContextPreview, old_keys: list[tuple[Any, ...]], old_shaped: dict[int, str],
            keys: list[tuple[Any, ...]], shaped: dict[int, str], fits: list[int | None],
            key_rows: list[int]) -> PreviewDelta | None:
    """The :class:`PreviewDelta` from the compared keys and cells (``None``: a row's identity moved)."""
    for r in key_rows:
        if old_keys[r][_IDENTITY] != keys[r][_IDENTITY]:
            return None
    # the Reason cell reads reason_data; most of it (the free tokens) never shows, so compare the
    # cells themselves, and only on rows whose data shapes a cell before or after: elsewhere the
    # cell is the reason code's words, and the code is in the keys
    in_keys = set(key_rows)
    cells: dict[int, str] = {}
    for r in old_shaped.keys() | shaped.keys():
        if r in in_keys:
            continue
        was, now = old_shaped.get(r), shaped.get(r)
        if was is None or now is None:
            plain = words(keys[r][_REASON])
            was, now = was or plain, now or plain
        if was != now:
            cells[r] = now
    rows = sorted(in_keys.union(cells)) if cells else key_rows
    return PreviewDelta(old, new, rows, key_rows, cells, keys, shaped, fits, old_keys)
