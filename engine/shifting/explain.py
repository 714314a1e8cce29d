"""Specific reasons: why *this* block was removed (or kept), in figures and in words.

A reason code says which rule applied (``HISTORY_OLDEST_FIRST``); a writer also needs the
figures behind it. :func:`explain_blocks` works on any strategy's final outcome, so plugin and
built-in strategies get the same explanations:

* A removed history message while tokens are free: history is sent as one contiguous stretch
  ending at the newest message (SPEC §3 rule 5, oldest first), so a small old message stays
  out when a *newer* removed message did not fit in what is free. The detail names that newer
  message, its tokens and the free tokens.
* A kept tool call or result that is neither protected nor pinned itself but shares a tool
  group with a pinned or protected member: kept because groups are all-or-nothing
  (``engine.shifting.groups``); the detail names the member that holds the group.
* A lorebook entry over the World Info budget (``LOREBOOK_BUDGET``): the budget, the tokens
  the earlier entries already used and the entry's own cost, from the activation trace
  (``engine.lorebook.activation``; SillyTavern ``checkWorldInfo``'s budget loop).
* ``TOO_LARGE_FOR_BUDGET``: the block's tokens and the room the protected blocks leave.

Cost: one pass over the blocks plus one per tool group, linear in the number of blocks.
:func:`explain_columns` is the one implementation; :func:`explain_blocks` its view over block objects.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq
from typing import Any, overload

import numpy as np

from ..schema.blocks import Block
from ..schema.preview import Explanation, ReasonDetails
from .columns import Array, BlockColumns, ToolLayout, arrays_of

#: Reasons under which a history block was removed for room (the ones free tokens contradict).
ROOM_REASONS = frozenset({"HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED", "PRIORITY_LOWEST_FIRST",
                          "EXAMPLES_PUSHED_OUT"})


def explain_blocks(
    blocks: Sequence[Block],
    status: Mapping[str, tuple[str, str]],
    tokens: Mapping[str, int],
    budget: int,
    group_of: Mapping[str, str],
    lorebook_traces: Mapping[str, Mapping[str, Any]] | None = None,
    protected_tokens: int | None = None,
) -> dict[str, Explanation]:
    """Explain the outcome of shifting for the blocks where the code alone would mislead.

    A view of :func:`explain_columns` over the blocks' columns.

    Parameters
    ----------
    blocks:
        Every block in prompt order (kept or not).
    status:
        ``block id → (status, reason code)`` with status ``kept``/``excluded``/``truncated``.
    tokens:
        ``block id → tokens`` (chat-format overhead included) as counted for shifting; for
        truncated blocks the remaining tokens.
    budget:
        The tokens shifting had (the same budget the strategy received).
    group_of:
        ``block id → tool group id`` for members of tool groups.
    lorebook_traces:
        ``block source → World Info trace record`` (its ``detail`` holds ``budget``, ``used``
        and ``tokens`` for ``LOREBOOK_BUDGET``).
    protected_tokens:
        Tokens of the protected blocks (for ``TOO_LARGE_FOR_BUDGET``); computed when ``None``.

    Returns
    -------
    dict
        ``block id → Explanation`` for the blocks that have one (others are absent), in prompt
        order. ``data`` keys: ``free`` (tokens not used of ``budget``), ``blocked_by`` (block id),
        ``blocked_by_message`` (message index or ``None``), ``blocked_by_tokens``,
        ``held_by`` / ``held_by_message`` / ``held_because`` (``pinned``/``protected``),
        ``group``, ``budget`` / ``used`` / ``tokens`` (lorebook), ``room`` (too large).
    """
    ids = [b.id for b in blocks]
    # a block without a status is not sent, with no reason to explain
    fates = [status.get(i, ("excluded", "")) for i in ids]
    cols = BlockColumns.from_blocks(blocks, [tokens.get(i, 0) for i in ids],
                                    ToolLayout.of([group_of.get(i) for i in ids]))
    out = explain_columns(cols, [f[0] for f in fates], [f[1] for f in fates], budget,
                          lorebook_traces=lorebook_traces, protected_tokens=protected_tokens)
    return {i: e for i, e in zip(ids, out.tolist()) if e is not None}


@dataclass(frozen=True)
class Fates:
    """The fates :func:`explain_columns` reads, as bool arrays over positions.

    ``excluded``: status ``excluded``; ``room``: excluded with one of :data:`ROOM_REASONS`;
    ``too_large``: reason ``TOO_LARGE_FOR_BUDGET``; ``lorebook``: whether any reason is
    ``LOREBOOK_BUDGET``. A caller that holds its reasons as codes (the pipeline's column path)
    builds them from those; :meth:`of` from lists.
    """

    excluded: Array
    room: Array
    too_large: Array
    lorebook: bool

    @classmethod
    def of(cls, status: Sequence[str], reasons: Sequence[str | None]) -> Fates:
        """The arrays of per-position ``status`` and reason lists."""
        n = len(status)
        excluded = np.fromiter(map(eq, status, repeat("excluded")), dtype=bool, count=n)
        return cls(excluded, excluded & np.fromiter(map(ROOM_REASONS.__contains__, reasons), dtype=bool, count=n),
                   np.fromiter(map(eq, reasons, repeat("TOO_LARGE_FOR_BUDGET")), dtype=bool, count=n),
                   "LOREBOOK_BUDGET" in reasons)


def explain_columns(cols: BlockColumns, status: Sequence[str], reasons: Sequence[str | None], budget: int, *,
                    lorebook_traces: Mapping[str, Mapping[str, Any]] | None = None,
                    protected_tokens: int | None = None,
                    fates: Fates | None = None) -> ReasonDetails:
    """Each block's specific reason, over columns (the one implementation; see the module docstring).

    Parameters
    ----------
    cols:
        Every block in prompt order (kept or not); ``tokens`` are the tokens shown (for
        truncated blocks the remaining tokens), ``layout`` the tool groups.
    status:
        Per position: ``kept``, ``excluded`` or ``truncated`` (what is not ``excluded`` counts
        as used tokens).
    reasons:
        Per position: the reason code (the kept reason, or the exclusion reason).
    budget:
        The tokens shifting had.
    lorebook_traces:
        ``block source → World Info trace record`` (for ``LOREBOOK_BUDGET``).
    protected_tokens:
        Tokens of the protected blocks (for ``TOO_LARGE_FOR_BUDGET``); computed when ``None``.
    fates:
        ``status`` and ``reasons`` as arrays (:class:`Fates`); ``None``: made from the lists.

    Returns
    -------
    ReasonDetails
        Per position: its :class:`Explanation`, ``None`` where the reason code says it all.
        Explanations with the same figures are one shared object; the column holds each once
        and per position an index into them (no list entry per position is made).
    """
    n = len(cols)
    out = _Column(n)
    f = fates if fates is not None else Fates.of(status, reasons)
    a = arrays_of(cols)
    la = a.layout
    used = int(np.dot(a.tokens, ~f.excluded))
    group_tokens = np.add.reduceat(a.tokens[la.members], la.starts) if len(la.starts) else a.tokens[:0]
    _explain_history(cols, f, budget, max(0, budget - used), group_tokens, out)
    _explain_held_groups(cols, status, out)
    if f.lorebook:
        _explain_lorebook(cols, reasons, lorebook_traces, out)
    if f.too_large.any():
        if protected_tokens is None:
            protected_tokens = int(np.dot(a.tokens, a.held & ~f.excluded))
        room = max(0, budget - protected_tokens)
        for i in f.too_large.nonzero()[0].tolist():
            g = la.group[i]
            own = int(group_tokens[g]) if g >= 0 else cols.tokens[i]
            out[i] = Explanation(
                f"needs {own:,} tokens but the protected blocks leave only {room:,} of the {budget:,}-token budget",
                {"tokens": own, "room": room, "budget": budget})
    return out.result()


class _Column:
    """:func:`explain_columns`' result being made: per position an index into the explanations (``-1``: none).

    ``table`` holds an entry per code: an explanation, a :data:`_Recipe`, or ``None`` for a code
    of a segment (:meth:`spread`) whose entry is made from its value when first read
    (``segments``: each one's first code and maker, in code order).
    """

    def __init__(self, n: int) -> None:
        self.codes = np.full(n, -1, dtype=np.int32)
        self.table: list[Explanation | _Recipe | None] = []
        self.segments: list[tuple[int, Callable[[int], _Recipe]]] = []

    def __setitem__(self, i: int, e: Explanation | _Recipe) -> None:
        self.codes[i] = len(self.table)
        self.table.append(e)

    def spread(self, rows: Array, values: Array, make: Callable[[int], _Recipe]) -> None:
        """The ``k``-th of ``rows`` (positions, or a mask over them) gets the entry ``make(values[k])`` (``values``: ints ≥ 0), made when that code is first read.

        The codes are the values themselves past the table's end (one numpy pass, no search for
        the distinct values); a segment spans ``0..max(values)``, or the distinct values
        (:func:`distinct_values`) when the largest value is far above the number of rows.
        """
        if not len(values):
            return
        top = int(values.max())
        at = len(self.table)
        if top < 4 * len(values) + 4096:  # (a segment past that: mostly codes no row has)
            self.codes[rows] = values + at
            self.table += [None] * (top + 1)
            self.segments.append((at, make))
            return
        distinct, inverse = distinct_values(values)
        self.codes[rows] = inverse + at
        self.table.extend(map(make, distinct))

    def result(self) -> ReasonDetails:
        return ReasonDetails(self.codes, _Table(self.table, self.segments))


#: A room explanation not made yet: ``(own tokens, tool group, short, call figures)`` (:class:`_RoomExplanation`'s arguments).
_Recipe = tuple[int, "str | None", bool, "_Room"]


class _Table(Sequence[Explanation]):
    """The explanations of one :func:`explain_columns` call by code; a room explanation is made when first read.

    A toggle at 10,000 messages moves the free tokens every history message removed for room
    is explained with: a few hundred new explanations (one per token count), of which a writer
    reads a few. A code of a segment (:meth:`_Column.spread`) has no entry until read; then its
    maker gives the figures (a :data:`_Recipe`) and the explanation is written when its words
    are read (:class:`_RoomExplanation`). Read-only for its readers; two threads reading one row
    may make two equal objects.
    """

    __slots__ = ("_items", "_makers", "_starts")

    def __init__(self, items: list[Explanation | _Recipe | None],
                 segments: Sequence[tuple[int, Callable[[int], _Recipe]]] = ()) -> None:
        self._items = items
        self._starts = [at for at, _ in segments]
        self._makers = [make for _, make in segments]

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, k: int) -> Explanation: ...

    @overload
    def __getitem__(self, k: slice) -> list[Explanation]: ...

    def __getitem__(self, k: int | slice) -> Explanation | list[Explanation]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self._items)))]
        if k < 0:
            k += len(self._items)
        if not 0 <= k < len(self._items):
            raise IndexError("explanation code out of range")
        item = self._items[k]
        if item is None:  # a segment's code: its figures from the value it stands for
            s = bisect_right(self._starts, k) - 1
            item = self._makers[s](k - self._starts[s])
        if type(item) is tuple:
            item = self._items[k] = _RoomExplanation(*item)
        return item  # type: ignore[return-value]


def distinct_values(values: Array) -> tuple[list[int], Array]:
    """The distinct values of ``values`` (nonnegative ints, ascending) and each one's index among them.

    Small values: a lookup table over ``0..max`` (``np.bincount``); else ``np.unique``.
    """
    if not len(values):
        return [], np.zeros(0, dtype=np.int32)
    top = int(values.max())
    if top < 4 * len(values) + 65536:
        distinct = np.bincount(values, minlength=top + 1).nonzero()[0]
        lookup = np.zeros(top + 1, dtype=np.int32)
        lookup[distinct] = np.arange(len(distinct), dtype=np.int32)
        return distinct.tolist(), lookup[values]
    found, inverse = np.unique(values, return_inverse=True)
    return found.tolist(), inverse.astype(np.int32)


def _explain_history(cols: BlockColumns, f: Fates, budget: int, free: int, group_tokens: Array, out: _Column) -> None:
    """History removed for room: too big for what is free, or behind the newest unit that did not fit.

    SPEC §3 rule 5 removes history oldest first, so what is sent is one contiguous stretch
    ending at the newest message: the newest history unit removed for room (the boundary)
    keeps everything older out. One explanation per distinct figures (token count, group),
    each made when first read (:class:`_Table`).
    """
    a = arrays_of(cols)
    room = f.room & a.history  # a mask over positions: no list of the thousands of positions is made
    if not room.any():
        return
    la, tokens = a.layout, a.tokens
    boundary = len(room) - 1 - int(room[::-1].argmax())  # the newest
    bnumber = int(la.group[boundary])
    bgroup = cols.layout.group_of[boundary]
    need = int(group_tokens[bnumber]) if bnumber >= 0 else cols.tokens[boundary]
    figures = _Room(free, budget, cols.labels[boundary], need, cols.ids[boundary], cols.message_index[boundary])
    # messages outside tool groups: one explanation per distinct token count ("short": more than is free)
    singles = room & la.lone
    out.spread(singles, tokens[singles], lambda own: (own, None, free < own, figures))
    grouped = room & ~la.lone
    if grouped.any():  # tool-group members: one explanation per group ("short" for the boundary's)
        ids = cols.layout.ids

        def per_group(g: int) -> _Recipe:
            own = int(group_tokens[g])
            return own, ids[g], own > free or g == bnumber, figures

        out.spread(grouped, la.group[grouped], per_group)
    if bgroup is None:
        out[boundary] = (cols.tokens[boundary], None, True, figures)


#: The first item of a room explanation's figures: too big for what is free, or behind the boundary.
_SHORT, _BEHIND = "short", "behind"


class _Room:
    """The figures every room explanation of one :func:`explain_columns` call shares."""

    __slots__ = (
        "_tails",
        "behind_at",
        "boundary_id",
        "boundary_message",
        "budget",
        "free",
        "label",
        "need",
        "short_at",
    )

    def __init__(self, free: int, budget: int, label: str, need: int, boundary_id: str,
                 boundary_message: int | None) -> None:
        self.free, self.budget, self.label, self.need = free, budget, label, need
        self.boundary_id, self.boundary_message = boundary_id, boundary_message
        self.short_at = (_SHORT, free, budget)  # the figures a short / behind explanation is written from
        self.behind_at = (_BEHIND, free, label, need, boundary_id, boundary_message)
        self._tails: tuple[str, str] | None = None

    def tails(self) -> tuple[str, str]:
        """The words after a block's own count: too big for what is free, and behind the boundary (written once)."""
        if self._tails is None:
            self._tails = (f"but only {self.free:,} of the {self.budget:,}-token budget are free",
                           f" tokens would fit in the {self.free:,} free, but history is kept contiguous: the newer "
                           f"{self.label} ({self.need:,} tokens) did not fit, so nothing older is sent")
        return self._tails


class _RoomExplanation(Explanation):
    """A history block removed for room, written when first read (a toggle makes hundreds; a writer reads a few).

    Too big for what is free (``short``): "needs N tokens [with its tool group ]but only F of the
    B-token budget are free"; else behind the boundary: "N tokens would fit in the F free, but
    history is kept contiguous: the newer <label> (M tokens) did not fit, so nothing older is
    sent". Compared by the figures it is written from (:meth:`_key`).
    """

    __slots__ = ("_group", "_own", "_room", "_short")

    def __init__(self, own: int, group: str | None, short: bool, room: _Room) -> None:
        self._text = self._data = None
        self._own, self._group, self._short, self._room = own, group, short, room

    def _key(self) -> tuple[object, ...]:
        r = self._room
        return (r.short_at if self._short else r.behind_at), self._own, self._group

    def _write(self) -> None:
        own, g, r = self._own, self._group, self._room
        count = str(own) if -1000 < own < 1000 else f"{own:,}"  # below 1,000 there is no comma to write
        short_tail, behind_tail = r.tails()
        if self._short:
            self._data = {"free": r.free, "tokens": own, "group": g}
            self._text = f"needs {count} tokens {'with its tool group ' if g else ''}{short_tail}"
        else:
            self._data = {"free": r.free, "tokens": own, "blocked_by": r.boundary_id,
                          "blocked_by_message": r.boundary_message, "blocked_by_tokens": r.need, "group": g}
            self._text = f"{count}{behind_tail}"


def _explain_held_groups(cols: BlockColumns, status: Sequence[str], out: _Column) -> None:
    """Kept tool-group members held by a pinned or protected member (a group is sent whole or not at all)."""
    pinned, protected = cols.pinned, cols.protected
    la = arrays_of(cols).layout
    if not len(la.heads):
        return
    for k in la.any_of(arrays_of(cols).held).nonzero()[0].tolist():
        gid, ms = cols.layout.ids[k], cols.layout.members[k]
        h = next(m for m in ms if pinned[m] or protected[m])
        because = "pinned" if pinned[h] else "protected"
        for i in ms:
            if pinned[i] or protected[i] or status[i] != "kept":
                continue
            out[i] = Explanation(
                f"kept with its tool group {gid}: {cols.labels[h]} ({cols.kinds[h].replace('_', ' ')}) "
                f"is {because}, and a tool group is sent whole or not at all",
                {"held_by": cols.ids[h], "held_by_message": cols.message_index[h], "held_because": because,
                 "group": gid})


def _explain_lorebook(cols: BlockColumns, reasons: Sequence[str | None],
                      lorebook_traces: Mapping[str, Mapping[str, Any]] | None, out: _Column) -> None:
    """Lorebook entries over the World Info budget (SillyTavern ``checkWorldInfo``'s budget loop)."""
    if not lorebook_traces:
        return
    for i in compress(range(len(cols)), map(eq, reasons, repeat("LOREBOOK_BUDGET"))):
        detail = (lorebook_traces.get(cols.sources[i]) or {}).get("detail") or {}
        if all(isinstance(detail.get(k), int) for k in ("budget", "used", "tokens")):
            wb, wu, wt = detail["budget"], detail["used"], detail["tokens"]
            out[i] = Explanation(
                f"costs {wt:,} tokens but the World Info budget is {wb:,} and earlier entries already "
                f"used {wu:,} ({max(0, wb - wu):,} left)",
                {"budget": wb, "used": wu, "tokens": wt})
