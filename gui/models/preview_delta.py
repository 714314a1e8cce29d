"""What changed between two previews of the same chat, found once per apply and shared by the views.

After a pin / exclude click on a 10,000-message chat the engine hands back a new preview with the
same rows; only a few of them *show* differently (a status, a flag, a Reason cell), although nearly
every block is a new object (its ``fit_window`` and the free tokens in its ``reason_detail`` and
``reason_data`` moved). :func:`diff_previews` finds those rows with a few C-level passes over the
blocks (blocks the engine reused, ``old is new``, are skipped outright) and returns a
:class:`PreviewDelta`; the blocks table, the chat list, the budget bar and the tokens chart then
update only what those rows touch instead of each walking all 10,000 blocks again.

Only the rows' identity (``source``, ``message_index``) decides whether two previews have "the
same rows": when it differs the views rebuild from scratch (:func:`diff_previews` returns ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import contains, is_, itemgetter, ne
from typing import Any

from engine.schema import ContextPreview, PreviewBlock
from engine.vocabulary import words

from ..words import reason_cell

#: Per block: its identity (``source``, ``message_index``: the first two items) and every field
#: the views show from it, ``reason_data`` apart (see :func:`diff_previews`). Not here: ``fit_window``
#: (the tokens chart reads it for every row), ``reason_detail`` and ``trace`` (tooltips and the
#: inspector, read when shown). Read from the instance ``__dict__`` (``itemgetter`` over ``vars``):
#: a third of ``getattr``'s cost.
_ROW_KEY = itemgetter("source", "message_index", "position", "kind", "role", "name", "text", "tokens",
                      "original_tokens", "status", "reason", "protected", "pinned", "manual_excluded", "group")
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


def shaped_cells(blocks: Sequence[PreviewBlock]) -> dict[int, str]:
    """``{row: Reason cell}`` for the rows whose ``reason_data`` has a key the Reason cell reads
    (``blocked_by_tokens``, ``held_by``, ``used``: :func:`gui.words.reason_cell`); every other row's
    cell is its reason code's words. Finding the rows takes C-level passes only."""
    data = list(map(_REASON_DATA, map(vars, blocks)))
    with_data = list(compress(range(len(data)), data))
    dicts = list(map(data.__getitem__, with_data))
    rows: set[int] = set()
    for key in _CELL_KEYS:
        rows.update(compress(with_data, map(contains, dicts, repeat(key))))
    return {r: reason_cell(blocks[r].reason, data[r]) for r in sorted(rows)}


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
    """

    old: ContextPreview
    new: ContextPreview
    rows: list[int]
    key_rows: list[int]
    reason_cells: dict[int, str] = field(default_factory=dict)
    keys: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
    shaped: dict[int, str] | None = field(default=None, repr=False)

    def message_indices(self, rows: Sequence[int] | None = None) -> list[int]:
        """The chat message indices of ``rows`` (default :attr:`key_rows`), blocks of no message left out."""
        blocks = self.new.blocks
        return [i for r in (self.key_rows if rows is None else rows) if (i := blocks[r].message_index) is not None]


def diff_previews(old: ContextPreview, new: ContextPreview, old_keys: list[tuple[Any, ...]] | None = None,
                  old_shaped: dict[int, str] | None = None) -> PreviewDelta | None:
    """Compare two previews row by row; ``None`` when their rows differ (another row set or order).

    Cost at 10,000 rows: a few milliseconds in C-level passes (``map`` over ``itemgetter`` and
    ``operator``); Python code runs only for the blocks the engine did not reuse whose
    ``reason_data`` moved, and only they can change a Reason cell.

    Parameters
    ----------
    old, new:
        The preview shown and the one to show.
    old_keys, old_shaped:
        :func:`row_keys` and :func:`shaped_cells` of ``old`` when at hand (the previous
        delta's :attr:`PreviewDelta.keys` and :attr:`PreviewDelta.shaped`).
    """
    ob, nb = old.blocks, new.blocks
    n = len(nb)
    if len(ob) != n:
        return None
    if old_keys is None or len(old_keys) != n:
        old_keys = row_keys(ob)
    reused = list(map(is_, ob, nb))
    n_reused = sum(reused)
    if n_reused == n:
        return PreviewDelta(old, new, [], [], {}, old_keys, old_shaped)
    if n_reused * 2 > n:  # mostly the engine's own objects again: read only the new ones
        keys = [k if same else _ROW_KEY(vars(b)) for k, same, b in zip(old_keys, reused, nb, strict=True)]
    else:
        keys = row_keys(nb)
    key_rows = list(compress(range(n), map(ne, old_keys, keys)))
    for r in key_rows:
        if old_keys[r][_IDENTITY] != keys[r][_IDENTITY]:
            return None
    # the Reason cell reads reason_data; most of it (the free tokens) never shows, so compare the
    # cells themselves, and only on rows whose data shapes a cell before or after: elsewhere the
    # cell is the reason code's words, and the code is in the keys
    shaped = shaped_cells(nb)
    if old_shaped is None:
        old_shaped = shaped_cells(ob)
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
    return PreviewDelta(old, new, rows, key_rows, cells, keys, shaped)
