"""The fit map: for each chat message, the smallest context window that would send it.

"At 8k the story starts at message 340, at 32k at 120": the per-message token chart shows,
for every message, the smallest context window (in tokens) at which the message would be sent
under the chat's current settings and strategy, with the prompt as assembled now.

What "fits" means: the smallest window ``W`` such that this window *and every larger one*
send the message ("from 8k on the story starts at message 340"). Shifting is not monotone in
rare cases (a newer message too large for a small window is removed first and lets older small
ones in), so a smaller window may send the message too; the fit window is where it stays sent.

How it is computed (cumulative counts, SPEC §3 removal order of ``shift_context``)
-------------------------------------------------------------------------------------
Shifting removes, while over the budget: units larger than all the room the protected blocks
leave (``TOO_LARGE_FOR_BUDGET``), then interceptor blocks and example dialogue, then history
units oldest first, then lorebook/memory blocks. A history unit ``u`` (a message, or a whole
tool group) is therefore sent at shifting budget ``B`` exactly when, with ``P`` the protected
tokens and room ``R = B − P``::

    u ≤ R   and   F(R) = Σ { v ∈ S(u) : v ≤ R } ≤ R

where ``S(u)`` holds ``u``, every newer removable history unit and every removable
lorebook/memory unit (those go after history; units larger than ``R`` are removed first and
do not count). ``F`` is a nondecreasing step function with steps at the unit sizes ``v``; it
violates ``F(R) ≤ R`` on ``[v, F(v))`` for each size with ``F(v) > v``. So the room from which
on the unit is always sent is ``max(u, F(v*))`` with ``v*`` the largest size where
``F(v*) > v*``. Messages are processed newest first, so ``S`` grows by one unit per step.
While the running sum of ``S`` exceeds its largest size (in a chat: from the newest few units
on), ``v*`` is that size and ``F(v*)`` the whole sum, so the rooms are one ``np.cumsum`` over
the units' sizes; the few units where it does not are scanned exactly, and past a few of them
``F`` is a prefix-sum query on a Fenwick tree over the distinct sizes (the scan for ``v*``
starts at the largest size present). Every figure per unit is a numpy array over the block
positions (:class:`~engine.shifting.columns.ColumnArrays`).

The shifting budget is turned back into a context window by inverting the pipeline's budget
(``window − reply reserve − safety margin − reply priming``; the reserve may be a percentage of
the window, the margin a percentage of the budget), see :func:`window_for_budget`.

Protected and pinned messages need the window that fits the protected blocks alone. Hidden,
hand-excluded (``manual`` strategy) and orphaned messages are never sent: ``None``.

Limits (documented, not hidden): lorebook activation is held as it is now (a different window
gives World Info a different budget); strategies other than ``truncate``/``manual`` are read
by the same removal order (``summarize`` sends a message verbatim from the same window; what it
folds below that is summarized, not sent verbatim). ``method`` in :func:`fit_windows`' result
says which.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate

import numpy as np

from ..schema.blocks import Block
from ..schema.preview import FitWindows
from .columns import Array, BlockColumns, ColumnArrays, ToolLayout, arrays_of, running_sums

#: Strategies whose removal order is exactly ``shift_context``'s (the fit map is exact for them).
TRUNCATE_LIKE = frozenset({"truncate", "manual"})


class _Fenwick:
    """Prefix sums over value slots (1-based internally)."""

    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, i: int, value: int) -> None:
        i += 1
        while i < len(self.tree):
            self.tree[i] += value
            i += i & -i

    def prefix(self, i: int) -> int:
        """Sum of slots ``0..i-1``."""
        s = 0
        while i > 0:
            s += self.tree[i]
            i -= i & -i
        return s


def window_for_budget(need: int, shift_budget_of: Callable[[int], int], lo: int = 1) -> int:
    """The smallest context window ``W ≥ lo`` whose shifting budget is at least ``need`` tokens.

    ``shift_budget_of(W)`` must be nondecreasing in ``W`` (the pipeline's budget is:
    ``W − reserve(W) − safety − priming``). Exponential then binary search: ``O(log W)`` calls.
    """
    hi = max(lo, need)
    while shift_budget_of(hi) < need:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if shift_budget_of(mid) >= need:
            hi = mid
        else:
            lo = mid + 1
    return lo


def fit_windows(
    blocks: Sequence[Block],
    tokens: Mapping[str, int],
    group_of: Mapping[str, str],
    shift_budget_of: Callable[[int], int],
    *,
    never_sent: frozenset[str] | set[str] = frozenset(),
    honor_manual: bool = False,
) -> dict[int, int | None]:
    """``message index → smallest context window (tokens) that sends it`` (``None``: never).

    A view of :func:`fit_columns` over the blocks' columns.

    Parameters
    ----------
    blocks:
        The sendable blocks in prompt order (as the strategy received them).
    tokens:
        ``block id → tokens`` with chat-format overhead (the counts shifting used).
    group_of:
        ``block id → tool group id``; a group is one unit (all or nothing).
    shift_budget_of:
        ``window → shifting budget`` in tokens, nondecreasing (see :func:`window_for_budget`).
        A callable with an integer ``linear_offset`` attribute promises
        ``shift_budget_of(W) == W - linear_offset`` for every ``W`` (see
        :func:`pipeline_shift_budget`): windows are then read off without a search.
    never_sent:
        Block ids that no window sends (orphaned tool results).
    honor_manual:
        The ``manual`` strategy: hand-excluded messages are never sent.

    Returns
    -------
    dict
        One entry per chat message among ``blocks`` (by ``message_index``), newest unit first.
    """
    ids = [b.id for b in blocks]
    layout = ToolLayout.of([group_of.get(i) for i in ids])
    cols = BlockColumns.from_blocks(blocks, [int(tokens.get(i, 0)) for i in ids], layout)
    never = frozenset(k for k, i in enumerate(ids) if i in never_sent)
    fits = fit_columns(cols, shift_budget_of, honor_manual=honor_manual, never_sent=never).tolist()
    member_of = {ms[0]: ms for ms in layout.members}
    out: dict[int, int | None] = {}
    for k in reversed(range(len(ids))):  # newest unit first, its members in prompt order
        if layout.group_of[k] is not None and k not in member_of:
            continue
        for m in member_of.get(k, (k,)):
            mi = cols.message_index[m]
            if mi is not None:
                out[mi] = fits[m]
    return out


def fit_columns(cols: BlockColumns, shift_budget_of: Callable[[int], int], *, honor_manual: bool = False,
                never_sent: frozenset[int] | None = None) -> FitWindows:
    """The fit map over columns: per position, the smallest context window that sends it (the one implementation).

    SPEC §3's removal order read backwards (see the module docstring): protected units need
    the window of the protected tokens; a removable history unit the window of the protected
    tokens plus its least room ``max(u, F(v*))``; any other removable unit the window that fits
    everything.

    Parameters
    ----------
    cols:
        The sendable blocks (as the strategy received them); ``tokens`` as shifting counted them.
    shift_budget_of:
        ``window → shifting budget`` in tokens, nondecreasing (``linear_offset`` as for
        :func:`fit_windows`).
    honor_manual:
        The ``manual`` strategy: hand-excluded blocks (not protected) are never sent.
    never_sent:
        Positions no window sends; ``None``: the layout's orphaned tool results.

    Returns
    -------
    FitWindows
        Per position: the window in tokens, ``None`` when no window sends it or when the
        block is not a chat message (``message_index`` is ``None``). Every member of a tool
        group has its group's window. One ``int64`` array (``0``: none), made without a Python
        int per position.
    """
    u = _fit_units(cols, cols.layout.orphans if never_sent is None else never_sent, honor_manual)
    hist, rooms = _rooms(u)
    live = ~u.dead
    p_tokens = int(np.dot(u.size, live & u.protected))
    window = _inverse(shift_budget_of)
    out = np.full(len(cols), window(p_tokens + int(np.dot(u.size, live & ~u.protected))), dtype=np.int64)
    out[u.protected] = window(p_tokens)
    linear = getattr(shift_budget_of, "linear_offset", None)
    if isinstance(linear, int):
        offset = p_tokens + linear
        fwd, r = hist[::-1], rooms[::-1]  # oldest first: ascending positions (the rooms are read newest first)
        out[fwd] = r + offset if offset >= 1 else np.maximum(r + offset, 1)  # a room is at least 0
    else:  # newest first: the inverse guesses from the last answer
        out[hist] = [window(p_tokens + r) for r in rooms.tolist()]
    la = u.arrays.layout
    none = u.dead.copy()
    if len(la.tails):  # every other group member takes its head's window
        heads = la.unit[la.tails]
        out[la.tails], none[la.tails] = out[heads], u.dead[heads]
    out[none | ~u.arrays.message] = 0  # no window sends it, or not a chat message
    out.flags.writeable = False
    return FitWindows(out)


class _Units:
    """Shifting units (tool groups merged into their first member, as shifting builds them) as arrays over positions.

    Per position: ``dead`` (never sent, or a group member other than the first), ``protected``,
    ``size`` (tokens of the whole unit) and ``tier``; ``arrays`` the columns' arrays.
    """

    def __init__(self, arrays: ColumnArrays, dead: Array, protected: Array, size: Array, tier: Array) -> None:
        self.arrays, self.dead, self.protected, self.size, self.tier = arrays, dead, protected, size, tier

    def live(self) -> list[int]:
        return (~self.dead).nonzero()[0].tolist()


def _fit_units(cols: BlockColumns, never_sent: frozenset[int], honor_manual: bool) -> _Units:
    """The units of ``cols`` (the arrays' :class:`~engine.shifting.columns.Units`) and which of them are never sent."""
    a = arrays_of(cols)
    held, la, units = a.held, a.layout, a.units
    dead = a.hidden.copy()
    never = np.fromiter(never_sent, dtype=np.intp, count=len(never_sent))
    dead[never] = True
    if honor_manual:
        dead |= a.manual & ~held
    if len(la.heads):  # a group is never sent with any hidden, never-sent or (none held) excluded member
        gone = la.any_of(a.hidden)
        groups = la.group[never]
        gone[groups[groups >= 0]] = True
        if honor_manual:
            gone |= la.any_of(a.manual) & ~units.held[la.heads]  # excluded, none held
        dead[la.heads] = gone
        dead[la.tails] = True  # not units: take their head's window
    return _Units(a, dead, units.held, units.tokens, units.tier)


def _rooms(u: _Units) -> tuple[Array, Array]:
    """The removable history units (newest first) and each one's least room (``max(own, F(v*))``).

    Newest first, ``S`` grows by one unit per step. While the running sum of ``S`` exceeds its
    largest size, ``v*`` is that largest size and ``F(v*)`` the whole sum: the room is read off
    running sums (``np.cumsum``, no tree). Units where it does not (a unit at least as large as
    all the others together) are scanned exactly; past a few of them the Fenwick scan
    (:func:`_rooms_fenwick`) answers for all.
    """
    removable = ~u.dead & ~u.protected  # live and not protected
    lore = u.size[removable & (u.tier == 3)]
    oldest_first = (removable & (u.tier == 2)).nonzero()[0]
    hist, sizes = oldest_first[::-1], u.size[oldest_first][::-1]
    lore_sum, lore_max = int(lore.sum()), int(lore.max(initial=0))
    sums = running_sums(sizes)
    sums += lore_sum
    # a running sum above the largest size stays above every running maximum: only the prefix up
    # to there can hold units where the sum does not exceed the largest size so far
    largest = max(lore_max, int(sizes.max(initial=0)))
    prefix = int(sums.searchsorted(largest, side="right"))
    tops = np.maximum.accumulate(np.maximum(sizes[:prefix], lore_max))
    slow = (sums[:prefix] <= tops).nonzero()[0].tolist()
    if len(slow) > _EXACT_SCANS or (slow and slow[-1] >= _EXACT_SCAN_DEPTH):
        rooms = _rooms_fenwick(u)
        return hist, np.array([rooms[k] for k in hist.tolist()], dtype=np.int64)
    lore_list, size_list = lore.tolist(), sizes[:prefix].tolist()
    for j in slow:
        sums[j] = _least_room(sorted([*lore_list, *size_list[: j + 1]]), size_list[j])
    return hist, sums


#: Units scanned exactly before the Fenwick scan takes over, and how deep (newest first) they may lie.
_EXACT_SCANS = 16
_EXACT_SCAN_DEPTH = 256


def _least_room(values: list[int], own: int) -> int:
    """``max(own, F(v*))`` for the ascending multiset ``values`` (``F(v)``: sum of values ≤ v)."""
    prefix = list(accumulate(values))
    k = len(values) - 1
    while k >= 0:
        v = values[k]
        while k > 0 and values[k - 1] == v:
            k -= 1
        hi = bisect_right(values, v) - 1
        if prefix[hi] > v:
            return max(own, prefix[hi])
        k -= 1
    return own


def _rooms_fenwick(u: _Units) -> dict[int, int]:
    """The rooms of :func:`_rooms`, by a Fenwick tree over the distinct sizes (any input)."""
    live = u.live()
    size, protected, tier = u.size.tolist(), u.protected.tolist(), u.tier.tolist()
    values = sorted({size[k] for k in live if not protected[k]})
    slot = {v: i for i, v in enumerate(values)}
    tree = _Fenwick(len(values))
    present: list[int] = []  # distinct sizes in S, ascending
    seen: set[int] = set()

    def add(k: int) -> None:
        v = size[k]
        if v not in seen:
            seen.add(v)
            insort(present, v)
        tree.add(slot[v], v)

    def least_room(own: int) -> int:
        for v in reversed(present):
            fv = tree.prefix(slot[v] + 1)
            if fv > v:
                return max(own, fv)
        return own

    for k in live:  # lorebook / memory units are removed after history: always in S
        if not protected[k] and tier[k] == 3:
            add(k)
    rooms: dict[int, int] = {}
    for k in reversed(live):
        if not protected[k] and tier[k] == 2:
            add(k)
            rooms[k] = least_room(size[k])
    return rooms


def _inverse(shift_budget_of: Callable[[int], int]) -> Callable[[int], int]:
    """``need → smallest window whose shifting budget is at least need`` (remembered per need)."""
    linear = getattr(shift_budget_of, "linear_offset", None)
    if isinstance(linear, int):
        return lambda need: max(1, need + linear)
    cache: dict[int, int] = {}
    offset = [0]  # window − shift budget at the last answer: exact for an absolute reply reserve

    def window(need: int) -> int:
        w = cache.get(need)
        if w is None:
            # guess from the last answer's offset and verify with two calls (the search is the
            # fallback); the verified guess is the same smallest window the search would return
            guess = need + offset[0]
            if guess > 1 and shift_budget_of(guess) >= need > shift_budget_of(guess - 1):
                w = guess
            else:
                w = window_for_budget(need, shift_budget_of)
            cache[need] = w
            offset[0] = w - need
        return w

    return window


class _ShiftBudget:
    """The pipeline's ``window → shifting budget``; ``linear_offset`` when it is ``W − constant``."""

    def __init__(self, reserve_of: Callable[[int], int], safety_percent: float, approximate: bool,
                 priming: int, fixed_reserve: int | None) -> None:
        self.reserve_of = reserve_of
        self.safety_percent = safety_percent
        self.approximate = approximate
        self.priming = priming
        no_safety = not approximate or safety_percent == 0
        self.linear_offset = fixed_reserve + priming if fixed_reserve is not None and no_safety else None

    def __call__(self, window: int) -> int:
        budget = window - self.reserve_of(window)
        safety = math.ceil(budget * self.safety_percent / 100) if self.approximate else 0
        return budget - safety - self.priming


def pipeline_shift_budget(reserve_of: Callable[[int], int], safety_percent: float, approximate: bool,
                          priming: int, *, fixed_reserve: int | None = None) -> Callable[[int], int]:
    """The pipeline's ``window → shifting budget``: ``W − reserve(W) − safety − priming``.

    ``safety = ceil(budget × safety_percent / 100)`` for approximate tokenizers, else 0
    (``engine.pipeline`` step 2). ``fixed_reserve``: the reserve in tokens when it does not
    depend on the window (then, without a safety margin, the budget is ``W − constant`` and the
    returned callable says so in ``linear_offset``, which :func:`fit_windows` reads).
    """
    return _ShiftBudget(reserve_of, safety_percent, approximate, priming, fixed_reserve)
