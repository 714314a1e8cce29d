"""Shifting, explanations and the fit map over plain arrays (issue 12 item 1).

The preview re-runs on every click over chats of 10,000+ messages. :func:`shift_context`,
:func:`~engine.shifting.explain.explain_blocks` and :func:`~engine.shifting.fitmap.fit_windows`
take block objects and build one Python object per block; the incremental pipeline
(:mod:`engine.incremental`) keeps per-block figures in parallel lists instead and calls the
functions here, which give the same outcome (the same reasons, diagnostics, explanations and
windows; ``tests/engine/test_incremental.py`` checks it against the object versions on random
chats) with passes over integer lists (``itertools.compress``/``accumulate``, ``bisect``,
``map``) and Python work only per tool group and per distinct token count.

Positions index the lists; a tool group is given as its member positions (ascending).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import add, and_, eq, gt, is_, is_not, le, not_, or_
from typing import Any

from .core import TOKEN_BUDGET_EXCEEDED, TOOL_PAIR_INCOMPLETE
from .explain import ROOM_REASONS, Explanation
from .fitmap import _EXACT_SCAN_DEPTH, _EXACT_SCANS, _inverse, _least_room, _rooms_fenwick, _Units

#: Reason of a dropped unit by removal tier (0 interceptor, 1 examples, 2 history, 3 lore/memory).
_TIER_REASON = {0: "PRIORITY_LOWEST_FIRST", 1: "EXAMPLES_PUSHED_OUT", 2: "HISTORY_OLDEST_FIRST", 3: "PRIORITY_LOWEST_FIRST"}


@dataclass
class ArrayShift:
    """The outcome of :func:`shift_arrays`.

    ``reasons[i]`` is the exclusion reason of position ``i`` (``None``: kept);
    ``error``, ``protected_tokens``, ``total_tokens`` and ``diagnostics`` as in
    :class:`~engine.schema.blocks.ShiftResult`. ``codes`` (from :func:`shift_arrays_np` only):
    the same reasons as a numpy ``int8`` array of indices into ``_CODES`` (0: kept), so that two
    runs can be compared in one vector operation.
    """

    reasons: list[str | None]
    error: str | None
    protected_tokens: int
    total_tokens: int
    diagnostics: list[str]
    codes: Any = field(default=None, compare=False, repr=False)


def shift_arrays(tokens: Sequence[int], hidden: Sequence[bool], protected: Sequence[bool],
                 manual: Sequence[bool], tier: Sequence[int], priority: Sequence[float],
                 groups: Sequence[Sequence[int]], group_ids: Sequence[str], group_of: Sequence[str | None],
                 orphans: frozenset[int], incomplete: Mapping[str, Any], budget: int, *,
                 honor_manual: bool, ids: Sequence[str]) -> ArrayShift:
    """:func:`~engine.shifting.core.shift_context` over per-position lists.

    Parameters
    ----------
    tokens, hidden, manual, tier, priority:
        Per position: tokens, ``hidden``, ``manual_excluded``, removal tier (0 interceptor,
        1 example, 2 history, 3 other) and ``priority``.
    protected:
        Per position: ``protected or pinned``.
    groups, group_ids, group_of:
        The member positions of every tool group (ascending, groups ordered by first member),
        their ids, and each position's group id (``None`` outside groups).
    orphans, incomplete:
        :class:`~engine.shifting.groups.ToolGroups` ``orphans`` and ``incomplete``.
    budget, honor_manual:
        As for ``shift_context``.
    ids:
        Block ids (for the diagnostic of a protected block the writer excluded).
    """
    n = len(tokens)
    reasons: list[str | None] = [None] * n
    notes: list[tuple[int, str]] = []

    def note(i: int, at: int) -> None:
        notes.append((at, f"{ids[i]}: excluded by the writer although protected or pinned "
                         "(or in a tool group with a pinned message); not sent"))

    # singles (not in a tool group) that are never sent
    for i in compress(range(n), hidden):
        if group_of[i] is None:
            reasons[i] = "HIDDEN"
    if honor_manual:
        for i in compress(range(n), manual):
            if group_of[i] is None and reasons[i] is None:
                if protected[i]:
                    note(i, i)
                reasons[i] = "MANUAL_EXCLUDED"
    unit_tokens = list(tokens)
    unit_protected = list(protected)
    unit_tier = list(tier)
    head = [True] * n
    for gid, ms in zip(group_ids, groups):
        first = ms[0]
        for m in ms[1:]:
            head[m] = False
        is_group = len(ms) > 1
        hid = [m for m in ms if hidden[m]]
        if hid:
            for m in ms:
                reasons[m] = "HIDDEN" if m == hid[0] or not is_group else "TOOL_GROUP_DROPPED"
            for m in hid:
                reasons[m] = "HIDDEN"
            continue
        if any(m in orphans for m in ms):
            for m in ms:
                reasons[m] = "TOOL_RESULT_ORPHANED"
            continue
        if gid in incomplete:
            for m in ms:
                reasons[m] = TOOL_PAIR_INCOMPLETE
            continue
        prot = any(protected[m] for m in ms)
        man = [m for m in ms if manual[m]]
        if honor_manual and man:
            if prot:
                note(man[0], first)
            for m in ms:
                reasons[m] = "MANUAL_EXCLUDED" if m == man[0] or not is_group else "TOOL_GROUP_DROPPED"
            for m in man:
                reasons[m] = "MANUAL_EXCLUDED"
            continue
        unit_tokens[first] = sum(tokens[m] for m in ms)
        unit_protected[first] = prot
        unit_tier[first] = min(tier[m] for m in ms)
    notes.sort()
    diagnostics = [text for _, text in notes]

    live = list(map(and_, map(not_, map(bool, reasons)), head))  # live unit heads
    live_prot = list(map(and_, live, unit_protected))
    protected_tokens = sum(compress(unit_tokens, live_prot))
    total = sum(compress(unit_tokens, live))
    removable = list(compress(range(n), map(gt, live, live_prot)))
    error: str | None = None
    member_of = dict(zip((ms[0] for ms in groups), groups))

    def drop(first: int, reason: str, group_reason: str) -> None:
        ms = member_of.get(first)
        if ms is None or len(ms) == 1:
            reasons[first] = reason
        else:
            for m in ms:
                reasons[m] = group_reason

    if protected_tokens > budget:
        error = TOKEN_BUDGET_EXCEEDED
        for i in removable:
            drop(i, "OVER_BUDGET_PROTECTED", "OVER_BUDGET_PROTECTED")
        total = protected_tokens
    elif total > budget:
        room = budget - protected_tokens
        size_of = unit_tokens.__getitem__
        sizes = list(map(size_of, removable))
        too_large = list(compress(removable, map(gt, sizes, repeat(room))))
        for i in too_large:
            drop(i, "TOO_LARGE_FOR_BUDGET", "TOO_LARGE_FOR_BUDGET")
            total -= unit_tokens[i]
        rest = [i for i in removable if reasons[i] is None] if too_large else removable
        tiers = list(map(unit_tier.__getitem__, rest))
        order: list[int]
        if tiers.count(2) == len(tiers):  # history only (the usual chat): oldest first as they stand
            order = rest
        else:
            order = []
            for t in (0, 1, 2):
                order += compress(rest, map(eq, tiers, repeat(t)))
            order += sorted(compress(rest, map(eq, tiers, repeat(3))), key=lambda i: (priority[i], -i))
        if total > budget and order:
            cum = list(accumulate(map(size_of, order)))
            k = min(bisect_left(cum, total - budget) + 1, len(order))
            total -= cum[k - 1]
            dropped = order[:k]
            in_group = list(map(member_of.__contains__, dropped)) if member_of else None
            singles = list(compress(dropped, map(not_, in_group))) if in_group is not None else dropped
            _assign(reasons, singles, map(_TIER_REASON.__getitem__, map(unit_tier.__getitem__, singles)))
            if in_group is not None:
                for i in compress(dropped, in_group):
                    unit = member_of[i]
                    if len(unit) == 1:
                        reasons[i] = _TIER_REASON[unit_tier[i]]
                    else:
                        for m in unit:
                            reasons[m] = "TOOL_GROUP_DROPPED"
    kept_total = sum(compress(tokens, map(not_, map(bool, reasons))))
    if error is None and kept_total > budget:  # pragma: no cover - guarded above
        raise AssertionError("shift_arrays left the prompt over budget")
    return ArrayShift(reasons, error, protected_tokens, kept_total, diagnostics)


def explain_arrays(ids: Sequence[str], labels: Sequence[str], message_index: Sequence[int | None],
                   kinds: Sequence[str], history: Sequence[bool], pinned: Sequence[bool],
                   protected: Sequence[bool], sources: Sequence[str], excluded: Sequence[bool],
                   reasons: Sequence[str], kept: Sequence[bool], tokens: Sequence[int], budget: int,
                   groups: Sequence[Sequence[int]], group_ids: Sequence[str], group_of: Sequence[str | None],
                   lorebook_traces: Mapping[str, Mapping[str, Any]] | None,
                   previous: Mapping[str, Explanation] | None = None,
                   current: dict[str, Explanation] | None = None,
                   arrays: Mapping[str, Any] | None = None) -> list[Explanation | None]:
    """:func:`~engine.shifting.explain.explain_blocks` over per-position lists.

    ``excluded``/``kept`` say each position's status, ``reasons`` its reason code, ``labels``
    how the explanation names a block (``message <i>`` or its source), ``kinds`` its kind value;
    ``protected`` is the block's own flag (not the pin). Groups as for :func:`shift_arrays`, in
    positions of these lists. Returns each position's ``Explanation`` (``None``: the reason code
    says it all), one entry per position; the explanations of blocks with
    the same figures are one shared object, and the very object of ``previous`` (``text →
    Explanation`` of an earlier call, as collected in ``current``) when equal to it, so callers
    can tell unchanged explanations by identity.

    ``arrays`` (the warm preview, every block sendable): the same figures as numpy arrays, so
    that the per-position passes are vector operations — ``codes`` (:func:`shift_arrays_np`'s
    reason codes), ``tokens``, ``history`` (bool), ``group_index`` (each position's group number,
    ``-1`` for none), ``group_tokens`` (``group id → tokens``), ``held_groups`` (numbers of the
    groups with a pinned or protected member). The result is the same when every block is
    sendable, which is when the caller has these arrays: reasons then come from the codes only
    (``LOREBOOK_BUDGET`` is a reason of blocks shown but never sent, so it cannot occur).
    """
    if arrays is not None:
        return _explain_np(ids, labels, message_index, kinds, pinned, protected, reasons, kept, tokens, budget,
                           groups, group_ids, group_of, previous, current, arrays)
    out: list[Explanation | None] = [None] * len(ids)
    used = sum(compress(tokens, map(not_, excluded)))
    free = max(0, budget - used)
    group_tokens = {gid: sum(tokens[m] for m in ms) for gid, ms in zip(group_ids, groups)}

    room = list(compress(range(len(ids)), map(and_, map(and_, history, excluded), map(ROOM_REASONS.__contains__, reasons))))
    if room:
        boundary = room[-1]
        bgroup = group_of[boundary]
        need = group_tokens[bgroup] if bgroup is not None else tokens[boundary]
        label = labels[boundary]
        explanation = _room_explainer(free, budget, label, need, ids[boundary], message_index[boundary],
                                      previous, current)

        # messages outside tool groups: one explanation per distinct token count (a C-level lookup each)
        singles = list(compress(room, map(is_, map(group_of.__getitem__, room), repeat(None))))
        owns = list(map(tokens.__getitem__, singles))
        table = {own: explanation(own, None, own > free) for own in set(owns)}
        _assign(out, singles, map(table.__getitem__, owns))
        if len(singles) != len(room):
            for i in compress(room, map(is_not, map(group_of.__getitem__, room), repeat(None))):
                g = group_of[i]
                assert g is not None
                own = group_tokens[g]
                out[i] = explanation(own, g, (bgroup is not None and g == bgroup) or own > free)
        if bgroup is None:
            out[boundary] = explanation(tokens[boundary], None, True)

    _held_by_group(out, zip(group_ids, groups), ids, labels, message_index, kinds, pinned, protected, kept)

    special = [i for i, r in enumerate(reasons) if r == "LOREBOOK_BUDGET" or r == "TOO_LARGE_FOR_BUDGET"] \
        if "LOREBOOK_BUDGET" in reasons or "TOO_LARGE_FOR_BUDGET" in reasons else []
    prot_tokens: int | None = None
    for i in special:
        if reasons[i] == "LOREBOOK_BUDGET":
            if not lorebook_traces:
                continue
            rec = lorebook_traces.get(sources[i]) or {}
            detail = rec.get("detail") or {}
            if all(isinstance(detail.get(k), int) for k in ("budget", "used", "tokens")):
                wb, wu, wt = detail["budget"], detail["used"], detail["tokens"]
                out[i] = Explanation(
                    f"costs {wt:,} tokens but the World Info budget is {wb:,} and earlier entries already "
                    f"used {wu:,} ({max(0, wb - wu):,} left)",
                    {"budget": wb, "used": wu, "tokens": wt})
        else:
            if prot_tokens is None:
                prot_tokens = sum(compress(tokens, map(and_, map(or_, pinned, protected), map(not_, excluded))))
            free_room = max(0, budget - prot_tokens)
            g = group_of[i]
            own = group_tokens[g] if g is not None else tokens[i]
            out[i] = Explanation(
                f"needs {own:,} tokens but the protected blocks leave only {free_room:,} of the {budget:,}-token budget",
                {"tokens": own, "room": free_room, "budget": budget})
    return out


def _room_explainer(free: int, budget: int, label: str, need: int, boundary_id: str, boundary_message: int | None,
                    previous: Mapping[str, Explanation] | None,
                    current: dict[str, Explanation] | None) -> Callable[[int, str | None, bool], Explanation]:
    """``explanation(own, group, short)`` of a history block removed for room, one shared object per figures."""
    shared: dict[tuple[int, str | None, bool], Explanation] = {}

    def explanation(own: int, g: str | None, short: bool) -> Explanation:
        key = (own, g, short)
        e = shared.get(key)
        if e is None:
            if short:
                what = "with its tool group " if g else ""
                e = Explanation(
                    f"needs {own:,} tokens {what}but only {free:,} of the {budget:,}-token budget are free",
                    {"free": free, "tokens": own, "group": g})
            else:
                e = Explanation(
                    f"{own:,} tokens would fit in the {free:,} free, but history is kept contiguous: the newer "
                    f"{label} ({need:,} tokens) did not fit, so nothing older is sent",
                    {"free": free, "tokens": own, "blocked_by": boundary_id,
                     "blocked_by_message": boundary_message, "blocked_by_tokens": need, "group": g})
            if previous is not None:
                old = previous.get(e.text)
                if old is not None and old.data == e.data:
                    e = old
            if current is not None:
                current[e.text] = e
            shared[key] = e
        return e

    return explanation


def _held_by_group(out: Any, groups: Iterable[tuple[str, Sequence[int]]], ids: Sequence[str], labels: Sequence[str],
                   message_index: Sequence[int | None], kinds: Sequence[str], pinned: Sequence[bool],
                   protected: Sequence[bool], kept: Sequence[bool]) -> None:
    """``out[i]`` for the kept members of tool groups held by a pinned or protected member."""
    for gid, ms in groups:
        holders = [m for m in ms if pinned[m] or protected[m]]
        if not holders:
            continue
        h = holders[0]
        because = "pinned" if pinned[h] else "protected"
        for i in ms:
            if pinned[i] or protected[i] or not kept[i]:
                continue
            out[i] = Explanation(
                f"kept with its tool group {gid}: {labels[h]} ({kinds[h].replace('_', ' ')}) "
                f"is {because}, and a tool group is sent whole or not at all",
                {"held_by": ids[h], "held_by_message": message_index[h], "held_because": because, "group": gid})


def _explain_np(ids: Sequence[str], labels: Sequence[str], message_index: Sequence[int | None],
                kinds: Sequence[str], pinned: Sequence[bool], protected: Sequence[bool], reasons: Sequence[str],
                kept: Sequence[bool], tokens: Sequence[int], budget: int, groups: Sequence[Sequence[int]],
                group_ids: Sequence[str], group_of: Sequence[str | None],
                previous: Mapping[str, Explanation] | None, current: dict[str, Explanation] | None,
                a: Mapping[str, Any]) -> list[Explanation | None]:
    """:func:`explain_arrays` with its per-position passes over numpy arrays (``a``; every block sendable)."""
    import numpy as np

    n = len(ids)
    codes, tok, gindex = a["codes"], a["tokens"], a["group_index"]
    assert len(codes) == len(tok) == n, "the numpy path needs every block sendable"
    out = np.full(n, None, dtype=object)
    used = int(tok[codes == 0].sum())
    free = max(0, budget - used)
    group_tokens = a["group_tokens"]
    room = np.flatnonzero(a["history"] & np.isin(codes, _ROOM_CODES))
    if len(room):
        boundary = int(room[-1])
        bgroup = group_of[boundary]
        need = group_tokens[bgroup] if bgroup is not None else tokens[boundary]
        explanation = _room_explainer(free, budget, labels[boundary], need, ids[boundary], message_index[boundary],
                                      previous, current)
        single = gindex[room] < 0
        singles = room[single]
        owns = tok[singles]
        distinct, where = np.unique(owns, return_inverse=True)
        table = np.empty(len(distinct), dtype=object)
        table[:] = [explanation(own, None, own > free) for own in distinct.tolist()]
        out[singles] = table[where]
        for i in room[~single].tolist():
            g = group_of[i]
            own = group_tokens[g]
            out[i] = explanation(own, g, (bgroup is not None and g == bgroup) or own > free)
        if bgroup is None:
            out[boundary] = explanation(tokens[boundary], None, True)
    _held_by_group(out, ((group_ids[g], groups[g]) for g in a["held_groups"]), ids, labels, message_index, kinds,
                   pinned, protected, kept)
    too_large = np.flatnonzero(codes == _CODE["TOO_LARGE_FOR_BUDGET"]).tolist()
    if too_large:
        prot_tokens = sum(compress(tokens, map(and_, map(or_, pinned, protected), kept)))
        free_room = max(0, budget - prot_tokens)
        for i in too_large:
            g = group_of[i]
            own = group_tokens[g] if g is not None else tokens[i]
            out[i] = Explanation(
                f"needs {own:,} tokens but the protected blocks leave only {free_room:,} of the {budget:,}-token budget",
                {"tokens": own, "room": free_room, "budget": budget})
    values: list[Explanation | None] = out.tolist()
    return values


def fit_arrays(tokens: Sequence[int], hidden: Sequence[bool], protected: Sequence[bool], manual: Sequence[bool],
               tier: Sequence[int], message_index: Sequence[int | None], groups: Sequence[Sequence[int]],
               never_sent: frozenset[int], honor_manual: bool,
               shift_budget_of: Callable[[int], int]) -> list[int | None]:
    """:func:`~engine.shifting.fitmap.fit_windows` over per-position lists: the window of each position.

    Positions whose ``message_index`` is ``None`` get ``None`` (the caller reads windows of chat
    messages only). ``never_sent``: positions no window sends (orphaned tool results).
    """
    n = len(tokens)
    # per position first (every position its own unit), then each tool group merged into its head
    dead = list(hidden)
    for i in never_sent:
        dead[i] = True
    if honor_manual:
        dead = list(map(or_, dead, map(and_, manual, map(not_, protected))))
    prot = list(protected)
    size = list(tokens)
    tiers = list(tier)
    for ms in groups:
        first = ms[0]
        p = any(protected[m] for m in ms)
        prot[first] = p
        dead[first] = (any(hidden[m] or m in never_sent for m in ms)
                       or (honor_manual and not p and any(manual[m] for m in ms)))
        size[first] = sum(tokens[m] for m in ms)
        tiers[first] = min(tier[m] for m in ms)
        for m in ms[1:]:
            dead[m] = True  # not a unit of its own: takes its head's window below
    u = _Units()
    u.dead, u.protected, u.size, u.tier = dead, prot, size, tiers
    hist, rooms = _rooms_fast(u)
    live = list(map(not_, dead))
    p_tokens = sum(compress(size, map(and_, live, prot)))
    total_removable = sum(compress(size, map(gt, live, prot)))
    window = _inverse(shift_budget_of)
    protected_window = window(p_tokens)
    everything = window(p_tokens + total_removable)
    linear = getattr(shift_budget_of, "linear_offset", None)
    out: list[int | None] = [everything] * n
    for k in compress(range(n), prot):
        out[k] = protected_window
    if isinstance(linear, int):
        base = p_tokens + linear
        values = map(add, rooms, repeat(base)) if base >= 1 else (max(1, base + r) for r in rooms)
    else:
        values = (window(p_tokens + r) for r in rooms)  # newest first, as fit_windows asks
    _assign(out, hist, values)
    for k in compress(range(n), dead):
        out[k] = None
    for ms in groups:
        v = out[ms[0]]
        for m in ms[1:]:
            out[m] = v
    if None not in message_index:
        return out
    return [None if mi is None else v for v, mi in zip(out, message_index)]


def numpy_vectors(tokens: Sequence[int], hidden: Sequence[bool], protected: Sequence[bool], manual: Sequence[bool],
                tier: Sequence[int], message_index: Sequence[int | None], groups: Sequence[Sequence[int]],
                never_sent: frozenset[int]) -> dict[str, Any]:
    """The inputs of :func:`fit_arrays_np` and :func:`shift_arrays_np` as numpy arrays.

    Built once per run (from the lists :func:`fit_arrays` takes), patched per toggle.
    ``tokens``/``hidden``/``protected``/``manual``/``tier``: one entry per position; the group
    layout (``g_flat`` members, ``g_starts`` offsets into it, ``g_first`` heads, ``g_rest`` the
    other members and ``g_rest_head`` their heads, ``g_size`` member counts, ``g_of_flat`` the
    group of each ``g_flat`` entry, ``grouped`` the positions in a group), ``never`` (the
    ``never_sent`` positions) and ``no_message`` (positions whose ``message_index`` is ``None``)
    as masks and index arrays.
    """
    import numpy as np

    n = len(tokens)
    never = np.zeros(n, dtype=bool)
    if never_sent:
        never[list(never_sent)] = True
    flat = [m for ms in groups for m in ms]
    starts = list(accumulate((len(ms) for ms in groups[:-1]), initial=0)) if groups else []
    rest = [m for ms in groups for m in ms[1:]]
    rest_head = [ms[0] for ms in groups for _ in ms[1:]]
    sizes = [len(ms) for ms in groups]
    grouped = np.zeros(n, dtype=bool)
    grouped[flat] = True
    return {"tokens": np.array(tokens, dtype=np.int64), "hidden": np.array(hidden, dtype=bool),
            "grouped": grouped, "g_size": np.array(sizes, dtype=np.intp),
            "g_of_flat": np.repeat(np.arange(len(groups), dtype=np.intp), sizes),
            "prot": np.array(protected, dtype=bool), "manual": np.array(manual, dtype=bool),
            "tier": np.array(tier, dtype=np.int64), "never": never,
            "no_message": np.array([mi is None for mi in message_index], dtype=bool),
            "g_flat": np.array(flat, dtype=np.intp), "g_starts": np.array(starts, dtype=np.intp),
            "g_first": np.array([ms[0] for ms in groups], dtype=np.intp),
            "g_rest": np.array(rest, dtype=np.intp), "g_rest_head": np.array(rest_head, dtype=np.intp)}


def fit_arrays_np(v: Mapping[str, Any], honor_manual: bool, linear_offset: int,
                  arrays: dict[str, Any] | None = None) -> list[int | None] | None:
    """:func:`fit_arrays` over the numpy arrays of :func:`numpy_vectors`, for a linear shift budget.

    ``linear_offset``: ``window − shifting budget`` (the budget callable's ``linear_offset``).
    Returns the same windows as :func:`fit_arrays`, or ``None`` when more than a few history
    units need the exact scan (units at least as large as all the newer ones together): the
    caller then calls :func:`fit_arrays`, whose Fenwick scan answers for all. When ``arrays``
    is given, ``arrays["fit"]`` receives the windows as an ``int64`` array (``-1`` for ``None``),
    so that two runs can be compared in one vector operation (left unset when ``None`` is
    returned).
    """
    import numpy as np

    tokens, hidden, protected, manual, tier, never = (
        v["tokens"], v["hidden"], v["prot"], v["manual"], v["tier"], v["never"])
    dead = hidden | never
    if honor_manual:
        dead |= manual & ~protected
    prot, size, tiers = protected.copy(), tokens.copy(), tier.copy()
    first, rest = v["g_first"], v["g_rest"]
    if len(first):
        flat, starts = v["g_flat"], v["g_starts"]
        p = np.logical_or.reduceat(protected[flat], starts)
        prot[first] = p
        d = np.logical_or.reduceat(hidden[flat] | never[flat], starts)
        if honor_manual:
            d |= ~p & np.logical_or.reduceat(manual[flat], starts)
        dead[first] = d
        size[first] = np.add.reduceat(tokens[flat], starts)
        tiers[first] = np.minimum.reduceat(tier[flat], starts)
        dead[rest] = True
    removable = ~dead & ~prot
    lore = size[removable & (tiers == 3)]
    lore_max = int(lore.max(initial=0))
    hist = np.flatnonzero(removable & (tiers == 2))[::-1]  # newest first, as _rooms_fast
    sizes = size[hist]
    sums = np.cumsum(sizes) + int(lore.sum())
    largest = max(lore_max, int(sizes.max(initial=0)))
    prefix = int(np.searchsorted(sums, largest, side="right"))
    if prefix:
        tops = np.maximum.accumulate(np.concatenate(([lore_max], sizes[:prefix])))[1:]
        slow = np.flatnonzero(sums[:prefix] <= tops).tolist()
        if len(slow) > _EXACT_SCANS or (slow and slow[-1] >= _EXACT_SCAN_DEPTH):
            return None  # the Fenwick scan: the list version does it
        if slow:
            lore_l, sizes_l = lore.tolist(), sizes[: slow[-1] + 1].tolist()
            for j in slow:  # as _rooms_fast: the exact least room of these few units
                sums[j] = _least_room(sorted([*lore_l, *sizes_l[: j + 1]]), sizes_l[j])
    p_tokens = int(size[~dead & prot].sum())
    base = p_tokens + linear_offset
    out = np.full(len(tokens), max(1, base + int(size[removable].sum())), dtype=np.int64)
    out[prot] = max(1, base)
    out[hist] = np.maximum(sums + base, 1)
    res = out.astype(object)
    res[dead] = None
    if len(rest):
        res[rest] = res[v["g_rest_head"]]
    res[v["no_message"]] = None
    values: list[int | None] = res.tolist()
    if arrays is not None:
        out[dead] = -1
        if len(rest):
            out[rest] = out[v["g_rest_head"]]
        out[v["no_message"]] = -1
        arrays["fit"] = out
    return values


#: Reason codes of :func:`shift_arrays_np` (0: kept).
_CODES: tuple[str | None, ...] = (None, "HIDDEN", "MANUAL_EXCLUDED", "TOOL_GROUP_DROPPED", "TOOL_RESULT_ORPHANED",
                                  TOOL_PAIR_INCOMPLETE, "OVER_BUDGET_PROTECTED", "TOO_LARGE_FOR_BUDGET",
                                  "PRIORITY_LOWEST_FIRST", "EXAMPLES_PUSHED_OUT", "HISTORY_OLDEST_FIRST")
_CODE = {r: k for k, r in enumerate(_CODES)}
_ROOM_CODES = tuple(k for k, r in enumerate(_CODES) if r in ROOM_REASONS)
_TIER_CODE = (_CODE["PRIORITY_LOWEST_FIRST"], _CODE["EXAMPLES_PUSHED_OUT"], _CODE["HISTORY_OLDEST_FIRST"],
              _CODE["PRIORITY_LOWEST_FIRST"])


def shift_arrays_np(v: Mapping[str, Any], hidden: Sequence[bool], protected: Sequence[bool],
                    manual: Sequence[bool], priority: Sequence[float], groups: Sequence[Sequence[int]],
                    group_ids: Sequence[str], orphans: frozenset[int], incomplete: Mapping[str, Any],
                    budget: int, *, honor_manual: bool, ids: Sequence[str]) -> ArrayShift:
    """:func:`shift_arrays` over the numpy arrays of :func:`numpy_vectors` (the same outcome).

    ``v`` holds the per-position arrays (``tokens``, ``hidden``, ``prot``, ``manual``, ``tier``
    and the group layout); the lists are the same figures as :func:`shift_arrays` takes, read
    only for the few tool groups with a hidden, orphaned, incomplete or hand-excluded member and
    for lorebook / memory blocks (sorted by priority).
    """
    import numpy as np

    tokens, hid_a, prot_a, man_a, tier = v["tokens"], v["hidden"], v["prot"], v["manual"], v["tier"]
    grouped, never = v["grouped"], v["never"]
    codes = np.zeros(len(tokens), dtype=np.int8)
    notes: list[tuple[int, str]] = []

    def note(i: int, at: int) -> None:
        notes.append((at, f"{ids[i]}: excluded by the writer although protected or pinned "
                         "(or in a tool group with a pinned message); not sent"))

    codes[hid_a & ~grouped] = _CODE["HIDDEN"]
    if honor_manual:
        single_manual = man_a & ~grouped & (codes == 0)
        for i in np.flatnonzero(single_manual & prot_a).tolist():
            note(i, i)
        codes[single_manual] = _CODE["MANUAL_EXCLUDED"]
    unit_tokens, unit_prot, unit_tier = tokens.copy(), prot_a.copy(), tier.copy()
    head = np.ones(len(tokens), dtype=bool)
    first, gsize = v["g_first"], v["g_size"]
    multi = np.zeros(len(tokens), dtype=bool)  # heads of groups of two or more
    if len(first):
        flat, starts = v["g_flat"], v["g_starts"]
        head[v["g_rest"]] = False
        multi[first[gsize > 1]] = True
        special = np.logical_or.reduceat(hid_a[flat] | never[flat], starts)
        if incomplete:
            special |= np.array([gid in incomplete for gid in group_ids], dtype=bool)
        if honor_manual:
            special |= np.logical_or.reduceat(man_a[flat], starts)
        unit_tokens[first] = np.add.reduceat(tokens[flat], starts)
        unit_prot[first] = np.logical_or.reduceat(prot_a[flat], starts)
        unit_tier[first] = np.minimum.reduceat(tier[flat], starts)
        for g in np.flatnonzero(special).tolist():  # as shift_arrays, group by group
            gid, ms = group_ids[g], groups[g]
            is_group = len(ms) > 1
            hid = [m for m in ms if hidden[m]]
            if hid:
                for m in ms:
                    codes[m] = _CODE["HIDDEN" if m == hid[0] or not is_group else "TOOL_GROUP_DROPPED"]
                for m in hid:
                    codes[m] = _CODE["HIDDEN"]
                continue
            if any(m in orphans for m in ms):
                codes[ms] = _CODE["TOOL_RESULT_ORPHANED"]
                continue
            if gid in incomplete:
                codes[ms] = _CODE[TOOL_PAIR_INCOMPLETE]
                continue
            man = [m for m in ms if manual[m]]
            if any(protected[m] for m in ms):
                note(man[0], ms[0])
            for m in ms:
                codes[m] = _CODE["MANUAL_EXCLUDED" if m == man[0] or not is_group else "TOOL_GROUP_DROPPED"]
            for m in man:
                codes[m] = _CODE["MANUAL_EXCLUDED"]
    notes.sort()
    diagnostics = [text for _, text in notes]

    def drop(heads: Any, head_codes: Any, group_code: int) -> None:
        codes[heads] = head_codes
        in_multi = heads[multi[heads]]
        if len(in_multi):
            hit = np.zeros(len(tokens), dtype=bool)
            hit[in_multi] = True
            members = v["g_flat"][hit[first][v["g_of_flat"]]]
            codes[members] = group_code

    live = (codes == 0) & head
    protected_tokens = int(unit_tokens[live & unit_prot].sum())
    total = int(unit_tokens[live].sum())
    removable = np.flatnonzero(live & ~unit_prot)
    error: str | None = None
    if protected_tokens > budget:
        error = TOKEN_BUDGET_EXCEEDED
        drop(removable, _CODE["OVER_BUDGET_PROTECTED"], _CODE["OVER_BUDGET_PROTECTED"])
        total = protected_tokens
    elif total > budget:
        room = budget - protected_tokens
        sizes = unit_tokens[removable]
        large = sizes > room
        if large.any():
            too_large = removable[large]
            drop(too_large, _CODE["TOO_LARGE_FOR_BUDGET"], _CODE["TOO_LARGE_FOR_BUDGET"])
            total -= int(sizes[large].sum())
            rest = removable[~large]
        else:
            rest = removable
        tiers = unit_tier[rest]
        if bool((tiers == 2).all()):  # history only (the usual chat): oldest first as they stand
            order = rest
        else:
            lore = sorted(rest[tiers == 3].tolist(), key=lambda i: (priority[i], -i))
            order = np.concatenate([rest[tiers == 0], rest[tiers == 1], rest[tiers == 2],
                                    np.array(lore, dtype=np.intp)])
        if total > budget and len(order):
            cum = np.cumsum(unit_tokens[order])
            k = min(int(np.searchsorted(cum, total - budget, side="left")) + 1, len(order))
            total -= int(cum[k - 1])
            dropped = order[:k]
            drop(dropped, np.array(_TIER_CODE, dtype=np.int8)[unit_tier[dropped]], _CODE["TOOL_GROUP_DROPPED"])
    kept_total = int(tokens[codes == 0].sum())
    if error is None and kept_total > budget:  # pragma: no cover - guarded above
        raise AssertionError("shift_arrays_np left the prompt over budget")
    reasons: list[str | None] = np.array(_CODES, dtype=object)[codes].tolist()
    return ArrayShift(reasons, error, protected_tokens, kept_total, diagnostics, codes)


def _assign(target: list[Any], positions: Iterable[int], values: Iterable[Any]) -> None:
    """``target[p] = v`` for each position and value, in one C-level pass."""
    deque(map(target.__setitem__, positions, values), maxlen=0)


def _rooms_fast(u: _Units) -> tuple[list[int], list[int]]:
    """:func:`~engine.shifting.fitmap._rooms` (the same rooms) as parallel lists, newest unit first."""
    n = len(u.dead)
    removable = list(map(gt, map(not_, u.dead), u.protected))  # live and not protected
    lore = list(compress(u.size, map(and_, removable, map(eq, u.tier, repeat(3)))))
    hist_mask = list(map(and_, removable, map(eq, u.tier, repeat(2))))
    hist = list(compress(range(n), hist_mask))[::-1]
    sizes = list(compress(u.size, hist_mask))[::-1]
    sums = list(accumulate(sizes, initial=sum(lore)))[1:]
    # a running sum above the largest size stays above every running maximum: only the prefix up
    # to there can hold units where the sum does not exceed the largest size so far
    largest = max(max(lore, default=0), max(sizes, default=0))
    prefix = bisect_right(sums, largest)
    tops = list(accumulate(sizes[:prefix], max, initial=max(lore, default=0)))[1:]
    slow = list(compress(range(prefix), map(le, sums, tops)))
    if len(slow) > _EXACT_SCANS or (slow and slow[-1] >= _EXACT_SCAN_DEPTH):
        rooms = _rooms_fenwick(u)
        return hist, [rooms[k] for k in hist]
    for j in slow:
        sums[j] = _least_room(sorted([*lore, *sizes[: j + 1]]), sizes[j])
    return hist, sums


__all__ = ["ArrayShift", "explain_arrays", "fit_arrays", "fit_arrays_np", "numpy_vectors", "shift_arrays", "shift_arrays_np"]
