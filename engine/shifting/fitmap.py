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
``F(v*) > v*``. Messages are processed newest first, so ``S`` grows by one unit per step;
``F`` is a prefix-sum query on a Fenwick tree over the distinct sizes, and the scan for
``v*`` starts at the largest size present (in a chat it almost always stops there):
``O(n log n)`` for ``n`` blocks in practice.

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
from operator import gt

from ..schema.blocks import Block, BlockKind, BlockOrigin

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
        One entry per chat message among ``blocks`` (by ``message_index``).
    """
    units = _fit_units(blocks, tokens, group_of, never_sent, honor_manual)
    return _windows(units, _rooms(units), shift_budget_of)


class _Units:
    """Shifting units (tool groups merged, as ``shift_context`` builds them) as parallel lists."""

    def __init__(self) -> None:
        self.indices: list[list[int]] = []  # message indices of each unit's members
        self.dead: list[bool] = []
        self.protected: list[bool] = []
        self.size: list[int] = []
        self.tier: list[int] = []

    def live(self) -> list[int]:
        return [k for k, d in enumerate(self.dead) if not d]


def _fit_units(blocks: Sequence[Block], tokens: Mapping[str, int], group_of: Mapping[str, str],
               never_sent: frozenset[str] | set[str], honor_manual: bool) -> _Units:
    members: list[list[Block]] = []
    unit_of_group: dict[str, int] = {}
    for b in blocks:
        g = group_of.get(b.id)
        if g is not None and g in unit_of_group:
            members[unit_of_group[g]].append(b)
            continue
        if g is not None:
            unit_of_group[g] = len(members)
        members.append([b])
    u = _Units()
    for ms in members:
        protected = any(b.protected or b.pinned for b in ms)
        u.dead.append(any(b.hidden or b.id in never_sent for b in ms)
                      or (honor_manual and not protected and any(b.manual_excluded for b in ms)))
        u.protected.append(protected)
        u.size.append(sum(int(tokens.get(b.id, 0)) for b in ms))
        t = 3
        for b in ms:
            if b.origin is BlockOrigin.INTERCEPTOR:
                t = min(t, 0)
            elif b.kind == BlockKind.EXAMPLE:
                t = min(t, 1)
            elif b.history:
                t = min(t, 2)
        u.tier.append(t)
        u.indices.append([b.message_index for b in ms if b.message_index is not None])
    return u


def _rooms(u: _Units) -> dict[int, int]:
    """``unit → least room`` (``max(own, F(v*))``, module docstring) for removable history units.

    Newest first, ``S`` grows by one unit per step. While the running sum of ``S`` exceeds its
    largest size, ``v*`` is that largest size and ``F(v*)`` the whole sum: the room is read off
    running sums (``itertools.accumulate``, no tree). Units where it does not (a unit at least
    as large as all the others together) are scanned exactly; past a few of them the Fenwick
    scan (:func:`_rooms_fenwick`) answers for all.
    """
    live = u.live()
    lore = [u.size[k] for k in live if not u.protected[k] and u.tier[k] == 3]
    hist = [k for k in reversed(live) if not u.protected[k] and u.tier[k] == 2]
    sizes = [u.size[k] for k in hist]
    sums = list(accumulate(sizes, initial=sum(lore)))[1:]
    tops = list(accumulate(sizes, max, initial=max(lore, default=0)))[1:]
    slow = [j for j, ok in enumerate(map(gt, sums, tops)) if not ok]
    if len(slow) > _EXACT_SCANS or (slow and slow[-1] >= _EXACT_SCAN_DEPTH):
        return _rooms_fenwick(u)
    rooms = dict(zip(hist, sums))
    for j in slow:
        rooms[hist[j]] = _least_room(sorted([*lore, *sizes[: j + 1]]), sizes[j])
    return rooms


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
    values = sorted({u.size[k] for k in live if not u.protected[k]})
    slot = {v: i for i, v in enumerate(values)}
    tree = _Fenwick(len(values))
    present: list[int] = []  # distinct sizes in S, ascending
    seen: set[int] = set()

    def add(k: int) -> None:
        v = u.size[k]
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
        if not u.protected[k] and u.tier[k] == 3:
            add(k)
    rooms: dict[int, int] = {}
    for k in reversed(live):
        if not u.protected[k] and u.tier[k] == 2:
            add(k)
            rooms[k] = least_room(u.size[k])
    return rooms


def _windows(u: _Units, rooms: Mapping[int, int], shift_budget_of: Callable[[int], int]) -> dict[int, int | None]:
    live = u.live()
    p_tokens = sum(u.size[k] for k in live if u.protected[k])
    total_removable = sum(u.size[k] for k in live if not u.protected[k])
    window = _inverse(shift_budget_of)
    protected_window = window(p_tokens)
    out: dict[int, int | None] = {}
    for k in reversed(range(len(u.size))):  # newest first
        indices = u.indices[k]
        if not indices:
            continue
        if u.dead[k]:
            value: int | None = None
        elif u.protected[k]:
            value = protected_window
        elif u.tier[k] == 2:
            value = window(p_tokens + rooms[k])
        else:
            # a message outside history (rare): sent for certain once everything fits
            value = window(p_tokens + total_removable)
        for i in indices:
            out[i] = value
    return out


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
