"""The one implementation of each rule against small, obviously-correct reference rules (issue 29 item 1).

``shift_columns``, ``explain_columns`` and ``fit_columns`` (engine.shifting) are checked on random
column sets — tool groups (some orphaned or incomplete), hidden / pinned / protected / hand-excluded
rows, every removal tier, many zero-token rows (which send the fit map to its exact scans and, past
16 of them or 256 rows deep, to the Fenwick scan) — against the rules written out here plainly:

* shifting: SPEC §3 rules 1-5 unit by unit, dropping one unit at a time while over budget;
* the fit map: its definition, by brute force — shift at every budget from 0 to the total and take
  the smallest budget from which the row is always sent;
* explanations: each block's text from the module docstring of ``engine.shifting.explain``.

The object views (``shift_context``, ``explain_blocks``, ``fit_windows``) are checked against the same
references over blocks. ``LOOMSCOPE_LONG_PROPERTIES=1`` runs 10× the examples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.schema import Block, BlockKind, ChatMessage, ToolCall, ToolFunction
from engine.shifting import (
    BlockColumns,
    ToolLayout,
    explain_blocks,
    explain_columns,
    find_tool_groups,
    fit_columns,
    fit_windows,
    shift_columns,
    shift_context,
)
from engine.shifting.fitmap import pipeline_shift_budget

LONG = os.environ.get("LOOMSCOPE_LONG_PROPERTIES") == "1"
SMALL = settings(max_examples=2000 if LONG else 150, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
LARGE = settings(max_examples=60 if LONG else 6, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TIER_REASON = {0: "PRIORITY_LOWEST_FIRST", 1: "EXAMPLES_PUSHED_OUT", 2: "HISTORY_OLDEST_FIRST", 3: "PRIORITY_LOWEST_FIRST"}


# --------------------------------------------------------------------------------------------
# random columns


@st.composite
def columns(draw: st.DrawFn, min_rows: int = 0, max_rows: int = 40, lore: bool = True,
            zero_tail: int = 0) -> BlockColumns:
    """Random columns: history rows (tier 2) carry message indices; groups of 1-3 history rows, some far apart.

    ``lore``: rows of tier 3 may occur; ``zero_tail``: the newest rows cost 0 tokens (each such history
    unit is at least as large as all newer ones together: the fit map's exact scans).
    """
    n = draw(st.integers(min_rows, max_rows))
    sizes = st.sampled_from([0, 0, 0, 1, 1, 2, 3, 5, 8]) if n > 64 else st.integers(0, 12)
    group_of: list[str | None] = [None] * n
    free = list(range(n))
    for g in range(draw(st.integers(0, max(0, n // 4)))):
        k = draw(st.integers(1, 3))
        if len(free) < k:
            break
        picks = sorted(draw(st.lists(st.sampled_from(free), min_size=k, max_size=k, unique=True)))
        for p in picks:
            group_of[p] = f"g{g}"
            free.remove(p)
    gids = sorted({g for g in group_of if g is not None})
    incomplete = frozenset(g for g in gids if draw(st.integers(0, 7)) == 0)
    singles_in_groups = [i for i, g in enumerate(group_of) if g is not None and group_of.count(g) == 1]
    orphans = frozenset(i for i in singles_in_groups if draw(st.integers(0, 4)) == 0)
    tiers = [0, 1, 2, 2, 2, 2, 3, 3] if lore else [0, 1, 2, 2, 2, 2]
    tier = [2 if group_of[i] is not None else draw(st.sampled_from(tiers)) for i in range(n)]
    protected = [draw(st.integers(0, 9)) == 0 for _ in range(n)]
    pinned = [draw(st.integers(0, 11)) == 0 for _ in range(n)]
    history = [t == 2 for t in tier]
    mindex = [i if (history[i] or protected[i] or pinned[i]) else None for i in range(n)]
    return BlockColumns(
        ids=[f"b{i}" for i in range(n)],
        labels=[f"message {i}" if mindex[i] is not None else f"src{i}" for i in range(n)],
        message_index=mindex,
        kinds=[draw(st.sampled_from(["message", "tool_call", "lorebook"])) for _ in range(n)],
        sources=[f"src{i}" for i in range(n)],
        tokens=[0 if i >= n - zero_tail else draw(sizes) for i in range(n)],
        hidden=[draw(st.integers(0, 14)) == 0 for _ in range(n)],
        protected=protected, pinned=pinned,
        manual=[draw(st.integers(0, 7)) == 0 for _ in range(n)],
        history=history, tier=tier,
        priority=[float(draw(st.integers(0, 3))) for _ in range(n)],
        layout=ToolLayout.of(group_of, orphans, incomplete))


# --------------------------------------------------------------------------------------------
# the reference rules


@dataclass
class Unit:
    members: list[int]
    reasons: dict[int, str] = field(default_factory=dict)


def units_of(cols: BlockColumns) -> list[Unit]:
    """One unit per tool group (at its first member), one per other row, in prompt order."""
    out: list[Unit] = []
    seen: dict[str, Unit] = {}
    for i, g in enumerate(cols.layout.group_of):
        if g is not None and g in seen:
            seen[g].members.append(i)
            continue
        unit = Unit([i])
        out.append(unit)
        if g is not None:
            seen[g] = unit
    return out


def reference_shift(cols: BlockColumns, budget: int, honor_manual: bool) -> tuple[list[str | None], str | None, int,
                                                                                    list[str]]:
    """SPEC §3 written plainly: (reasons, error, protected tokens, diagnostics)."""
    reasons: list[str | None] = [None] * len(cols)
    notes: list[str] = []
    live: list[Unit] = []
    lay = cols.layout

    def leave(u: Unit, reason: str, first: int | None) -> None:
        for m in u.members:
            reasons[m] = reason if m == first or len(u.members) == 1 else "TOOL_GROUP_DROPPED"

    for u in units_of(cols):
        ms = u.members
        gid = lay.group_of[ms[0]]
        held = any(cols.protected[m] or cols.pinned[m] for m in ms)
        hid = [m for m in ms if cols.hidden[m]]
        man = [m for m in ms if cols.manual[m]]
        if hid:
            leave(u, "HIDDEN", hid[0])
            for m in hid:
                reasons[m] = "HIDDEN"
        elif any(m in lay.orphans for m in ms):
            for m in ms:
                reasons[m] = "TOOL_RESULT_ORPHANED"
        elif gid is not None and gid in lay.incomplete:
            for m in ms:
                reasons[m] = "TOOL_PAIR_INCOMPLETE"
        elif honor_manual and man:
            if held:
                notes.append(f"{cols.ids[man[0]]}: excluded by the writer although protected or pinned "
                             "(or in a tool group with a pinned message); not sent")
            leave(u, "MANUAL_EXCLUDED", man[0])
            for m in man:
                reasons[m] = "MANUAL_EXCLUDED"
        else:
            live.append(u)

    def size(u: Unit) -> int:
        return sum(cols.tokens[m] for m in u.members)

    def held(u: Unit) -> bool:
        return any(cols.protected[m] or cols.pinned[m] for m in u.members)

    protected_tokens = sum(size(u) for u in live if held(u))
    removable = [u for u in live if not held(u)]
    total = sum(size(u) for u in live)
    if protected_tokens > budget:
        for u in removable:
            for m in u.members:
                reasons[m] = "OVER_BUDGET_PROTECTED"
        return reasons, "TOKEN_BUDGET_EXCEEDED", protected_tokens, notes
    if total <= budget:
        return reasons, None, protected_tokens, notes
    room = budget - protected_tokens
    for u in removable:
        if size(u) > room:
            for m in u.members:
                reasons[m] = "TOO_LARGE_FOR_BUDGET"
            total -= size(u)

    def tier(u: Unit) -> int:
        return min(cols.tier[m] for m in u.members)

    def key(u: Unit) -> tuple[float, ...]:
        first = u.members[0]
        return (tier(u), first) if tier(u) < 3 else (3, cols.priority[first], -first)

    for u in sorted((u for u in removable if reasons[u.members[0]] is None), key=key):
        if total <= budget:
            break
        leave(u, TIER_REASON[tier(u)], None)
        total -= size(u)
    return reasons, None, protected_tokens, notes


def reference_fit(cols: BlockColumns, offset: int, honor_manual: bool) -> list[int | None]:
    """The fit map by its definition: the smallest window from which the row is sent at every larger one."""
    total = sum(cols.tokens)
    sent_from: list[int | None] = [None] * len(cols)
    for b in range(total, -1, -1):  # a budget of the total sends every sendable row
        reasons, error, _p, _d = reference_shift(cols, b, honor_manual)
        for i, r in enumerate(reasons):
            sent = r is None and error is None
            if b == total:
                sent_from[i] = b if sent else None
            elif sent and sent_from[i] == b + 1:
                sent_from[i] = b
    return [None if s is None or mi is None else max(1, s + offset)
            for s, mi in zip(sent_from, cols.message_index)]


def reference_explain(cols: BlockColumns, status: list[str], reasons: list[str], budget: int) -> list[Any]:
    """Each row's explanation as the module docstring of engine.shifting.explain states it (text, data)."""
    out: list[Any] = [None] * len(cols)
    gof = cols.layout.group_of
    used = sum(t for t, s in zip(cols.tokens, status) if s != "excluded")
    free = max(0, budget - used)

    def own(i: int) -> int:
        return cols.tokens[i] if gof[i] is None else sum(t for t, g in zip(cols.tokens, gof) if g == gof[i])

    room_rows = [i for i in range(len(cols)) if cols.history[i] and status[i] == "excluded" and reasons[i] in (
        "HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED", "PRIORITY_LOWEST_FIRST", "EXAMPLES_PUSHED_OUT")]
    if room_rows:
        bnd = room_rows[-1]
        for i in room_rows:
            if i == bnd or (gof[bnd] is not None and gof[i] == gof[bnd]) or own(i) > free:
                what = "with its tool group " if gof[i] else ""
                out[i] = (f"needs {own(i):,} tokens {what}but only {free:,} of the {budget:,}-token budget are free",
                          {"free": free, "tokens": own(i), "group": gof[i]})
            else:
                out[i] = (f"{own(i):,} tokens would fit in the {free:,} free, but history is kept contiguous: the "
                          f"newer {cols.labels[bnd]} ({own(bnd):,} tokens) did not fit, so nothing older is sent",
                          {"free": free, "tokens": own(i), "blocked_by": cols.ids[bnd],
                           "blocked_by_message": cols.message_index[bnd], "blocked_by_tokens": own(bnd),
                           "group": gof[i]})
    for gid, ms in zip(cols.layout.ids, cols.layout.members):
        holders = [m for m in ms if cols.pinned[m] or cols.protected[m]]
        for i in ms if holders else []:
            h = holders[0]
            because = "pinned" if cols.pinned[h] else "protected"
            if not (cols.pinned[i] or cols.protected[i]) and status[i] == "kept":
                out[i] = (f"kept with its tool group {gid}: {cols.labels[h]} ({cols.kinds[h].replace('_', ' ')}) "
                          f"is {because}, and a tool group is sent whole or not at all",
                          {"held_by": cols.ids[h], "held_by_message": cols.message_index[h],
                           "held_because": because, "group": gid})
    prot = sum(t for i, t in enumerate(cols.tokens) if (cols.protected[i] or cols.pinned[i]) and status[i] != "excluded")
    for i in range(len(cols)):
        if reasons[i] == "TOO_LARGE_FOR_BUDGET":
            out[i] = (f"needs {own(i):,} tokens but the protected blocks leave only {max(0, budget - prot):,} of the "
                      f"{budget:,}-token budget", {"tokens": own(i), "room": max(0, budget - prot), "budget": budget})
    return out


# --------------------------------------------------------------------------------------------
# the single implementation against the references


def _check_shift(cols: BlockColumns, budget: int, honor: bool) -> list[str | None]:
    got = shift_columns(cols, budget, honor_manual=honor)
    reasons, error, prot, notes = reference_shift(cols, budget, honor)
    assert got.reasons == reasons
    assert (got.error, got.protected_tokens, got.diagnostics) == (error, prot, notes)
    assert got.total_tokens == sum(t for t, r in zip(cols.tokens, reasons) if r is None)
    assert got.kept == [r is None for r in reasons]
    return got.reasons


def _check_explain(cols: BlockColumns, reasons: list[str | None], budget: int) -> None:
    status = ["kept" if r is None else "excluded" for r in reasons]
    shown = [r if r is not None else "FITS_BUDGET" for r in reasons]
    got = explain_columns(cols, status, shown, budget)
    assert [None if e is None else (e.text, e.data) for e in got] == reference_explain(cols, status, shown, budget)


def _fit_inputs(cols: BlockColumns) -> tuple[BlockColumns, frozenset[int]]:
    """The columns without hand-exclusions in held units, and the rows no window sends.

    The fit map reads a held unit with a hand-excluded member as sent from the protected window
    (and counts it in the protected tokens) where the ``manual`` strategy drops it: a known
    difference, kept as it is (bit-identical previews), so the definition is checked without it.
    Incomplete groups are passed as never sent (the pipeline passes only orphans).
    """
    lay = cols.layout
    held_rows = set()
    for i, g in enumerate(lay.group_of):
        ms = lay.members[lay.ids.index(g)] if g is not None else [i]
        if any(cols.protected[m] or cols.pinned[m] for m in ms):
            held_rows.add(i)
    manual = [m and i not in held_rows for i, m in enumerate(cols.manual)]
    never = lay.orphans | {m for g, ms in zip(lay.ids, lay.members) if g in lay.incomplete for m in ms}
    return replace(cols, manual=manual), frozenset(never)


@SMALL
@given(cols=columns(), budget=st.integers(0, 200), honor=st.booleans())
def test_shift_and_explain_equal_the_reference_rules(cols: BlockColumns, budget: int, honor: bool) -> None:
    reasons = _check_shift(cols, budget, honor)
    _check_explain(cols, reasons, budget)


@SMALL
@given(cols=columns(max_rows=24), honor=st.booleans(), offset=st.integers(-5, 50))
def test_fit_map_is_its_definition(cols: BlockColumns, honor: bool, offset: int) -> None:
    """fit_columns against the brute force over every budget (incomplete groups passed as never sent)."""
    cols, never = _fit_inputs(cols)
    sbo = pipeline_shift_budget(lambda w: 0, 0, False, offset, fixed_reserve=0)
    got = fit_columns(cols, sbo, honor_manual=honor, never_sent=never)
    assert got == reference_fit(cols, offset, honor)
    # a window that is not ``W − constant`` is inverted by search: the same windows
    searched = fit_columns(cols, lambda w: w - offset, honor_manual=honor, never_sent=never)
    assert searched == got


@LARGE
@given(cols=columns(min_rows=257, max_rows=300), honor=st.booleans(), data=st.data())
def test_large_column_sets_cross_the_row_thresholds(cols: BlockColumns, honor: bool, data: st.DataObject) -> None:
    """Past 64 / 256 rows (and past 16 exact scans: many zero-token rows): the same as the references."""
    assert len(cols) > 256
    for budget in data.draw(st.lists(st.integers(0, sum(cols.tokens) + 5), min_size=2, max_size=4)):
        _check_explain(cols, _check_shift(cols, budget, honor), budget)
    cols, never = _fit_inputs(cols)
    sbo = pipeline_shift_budget(lambda w: 0, 0, False, 3, fixed_reserve=0)
    assert fit_columns(cols, sbo, honor_manual=honor, never_sent=never) == reference_fit(cols, 3, honor)


@LARGE
@given(cols=columns(min_rows=257, max_rows=280, lore=False, zero_tail=270), honor=st.booleans())
def test_many_exact_scans_take_the_fenwick_scan(cols: BlockColumns, honor: bool) -> None:
    """Over 16 history units at least as large as all newer ones (zero-token rows, 256+ deep): the Fenwick scan."""
    from unittest import mock

    from engine.shifting import fitmap

    sbo = pipeline_shift_budget(lambda w: 0, 0, False, 3, fixed_reserve=0)
    cols, never = _fit_inputs(cols)
    with mock.patch.object(fitmap, "_rooms_fenwick", wraps=fitmap._rooms_fenwick) as fenwick:
        got = fit_columns(cols, sbo, honor_manual=honor, never_sent=never)
    history_units = sum(1 for i, g in enumerate(cols.layout.group_of) if cols.tier[i] == 2 and (
        g is None or cols.layout.members[cols.layout.ids.index(g)][0] == i))
    assert fenwick.called or history_units <= 16
    assert got == reference_fit(cols, 3, honor)


def test_the_references_can_fail() -> None:
    """A deliberately wrong outcome is caught: the comparisons above are not vacuous."""
    cols = BlockColumns(["a", "b", "c"], ["message 0", "message 1", "message 2"], [0, 1, 2], ["message"] * 3,
                        ["s0", "s1", "s2"], [5, 5, 5], [False] * 3, [False] * 3, [False] * 3, [False] * 3,
                        [True] * 3, [2, 2, 2], [0.0] * 3, ToolLayout.of([None] * 3))
    reasons, error, _p, _d = reference_shift(cols, 10, False)
    assert reasons == ["HISTORY_OLDEST_FIRST", None, None] and error is None
    assert shift_columns(cols, 10).reasons == reasons
    assert reference_fit(cols, 0, False) == fit_columns(cols, lambda w: w) == [15, 10, 5]
    assert reference_fit(cols, 0, False) != [15, 10, 4]


# --------------------------------------------------------------------------------------------
# the object views over blocks


@st.composite
def blocks(draw: st.DrawFn) -> tuple[list[Block], list[int]]:
    """Random blocks (messages, tool calls and results by id, lorebook entries) and their tokens."""
    out: list[Block] = []
    for k in range(draw(st.integers(0, 16))):
        kind = draw(st.sampled_from(["msg", "msg", "call", "result", "lore"]))
        flags = {"pinned": draw(st.integers(0, 6)) == 0, "manual_excluded": draw(st.integers(0, 5)) == 0,
                 "hidden": draw(st.integers(0, 9)) == 0}
        if kind == "call":
            msg = ChatMessage(role="assistant", tool_calls=[ToolCall(id=f"c{draw(st.integers(0, 4))}",
                                                                    function=ToolFunction(name="f"))])
            out.append(Block(id=f"b{k}", kind=BlockKind.TOOL_CALL, role="assistant", source=f"message:{k}",
                             message=msg, history=True, message_index=k, **flags))
        elif kind == "result":
            msg = ChatMessage(role="tool", content="r", tool_call_id=f"c{draw(st.integers(0, 4))}")
            out.append(Block(id=f"b{k}", kind=BlockKind.TOOL_RESULT, role="tool", source=f"message:{k}",
                             message=msg, history=True, message_index=k, **flags))
        elif kind == "lore":
            out.append(Block(id=f"b{k}", kind=BlockKind.LOREBOOK, source=f"lorebook:w:{k}",
                             message=ChatMessage(role="system", content="l"), priority=draw(st.integers(0, 3)),
                             protected=draw(st.integers(0, 5)) == 0))
        else:
            out.append(Block(id=f"b{k}", kind=BlockKind.MESSAGE, role="user", source=f"message:{k}",
                             message=ChatMessage(role="user", content="m"), history=True, message_index=k, **flags))
    return out, [draw(st.integers(0, 20)) for _ in out]


def _plain_columns(bs: list[Block], tokens: list[int]) -> BlockColumns:
    """Columns written out field by field (not through BlockColumns.from_blocks)."""
    groups = find_tool_groups(bs)
    tiers = [2 if b.history else 3 for b in bs]
    return BlockColumns([b.id for b in bs], [f"message {b.message_index}" if b.message_index is not None else b.source
                                             for b in bs], [b.message_index for b in bs], [b.kind.value for b in bs],
                        [b.source for b in bs], tokens, [b.hidden for b in bs], [b.protected for b in bs],
                        [b.pinned for b in bs], [b.manual_excluded for b in bs], [b.history for b in bs], tiers,
                        [b.priority for b in bs], ToolLayout.of(groups.group_of, groups.orphans, groups.incomplete))


@SMALL
@given(data=blocks(), budget=st.integers(0, 120), honor=st.booleans())
def test_object_views_equal_the_rules_over_columns(data: tuple[list[Block], list[int]], budget: int,
                                                   honor: bool) -> None:
    bs, tokens = data
    size = {b.id: t for b, t in zip(bs, tokens)}
    cols = _plain_columns(bs, tokens)
    reasons, error, prot, notes = reference_shift(cols, budget, honor)
    res = shift_context(bs, lambda b: size[b.id], budget, honor_manual=honor)
    assert res.kept == [b.id for b, r in zip(bs, reasons) if r is None]
    assert [(e.block_id, e.reason, e.tokens) for e in res.excluded] == [
        (b.id, r, t) for b, r, t in zip(bs, reasons, tokens) if r is not None]
    assert (res.error, res.protected_tokens, res.diagnostics) == (error, prot, notes)
    assert res.kept_reasons == {b.id: "PINNED" if b.pinned and not b.protected else b.reason
                                for b, r in zip(bs, reasons) if r is None}
    status = {b.id: ("kept", "FITS_BUDGET") if r is None else ("excluded", r) for b, r in zip(bs, reasons)}
    group_of = {b.id: g for b, g in zip(bs, cols.layout.group_of) if g is not None}
    ref = reference_explain(cols, [status[b.id][0] for b in bs], [status[b.id][1] for b in bs], budget)
    got = explain_blocks(bs, status, size, budget, group_of)
    assert {k: (e.text, e.data) for k, e in got.items()} == {b.id: r for b, r in zip(bs, ref) if r is not None}
    sbo = pipeline_shift_budget(lambda w: 0, 0, False, 4, fixed_reserve=0)
    fits = fit_windows(bs, size, group_of, sbo, never_sent={bs[i].id for i in cols.layout.orphans},
                       honor_manual=honor)
    per_row = fit_columns(cols, sbo, honor_manual=honor)
    assert fits == {b.message_index: f for b, f in zip(bs, per_row) if b.message_index is not None}
