"""``shift_context``: fit blocks into a token budget (SPEC §3).

Rules, in order:

1. Hidden blocks (SillyTavern ``is_system``) are never sent (``HIDDEN``, with their whole tool
   group: ``TOOL_GROUP_DROPPED`` for the other members, pinned or not); tool results whose
   call is not in the chat are dropped (``TOOL_RESULT_ORPHANED``: a provider rejects them);
   an incomplete tool group (a call without its result, a result before its call) leaves
   whole (``TOOL_PAIR_INCOMPLETE``): a provider rejects half pairs too.
2. With ``honor_manual`` (strategy ``manual``), messages the user excluded go first
   (``MANUAL_EXCLUDED``), with their whole tool group (``TOOL_GROUP_DROPPED``) — even when
   pinned or protected: what the writer excluded is never sent.
3. Tool groups (``engine.shifting.groups``) are units: all members stay or all go; a group with
   any protected member is protected.
4. If the protected units alone exceed the budget, the result carries
   ``error="TOKEN_BUDGET_EXCEEDED"`` and every removable unit is excluded
   (``OVER_BUDGET_PROTECTED``): never a silent over-budget result.
5. Otherwise, while the running total exceeds the budget, removable units go in this order:
   a unit larger than all the room the protected blocks leave can never fit and goes first
   (``TOO_LARGE_FOR_BUDGET``); then interceptor-added blocks; then example dialogue
   (``EXAMPLES_PUSHED_OUT``); then history, oldest unit first (``HISTORY_OLDEST_FIRST``, or
   ``TOOL_GROUP_DROPPED`` for every member of a multi-message tool group); then lorebook and
   memory blocks, lowest priority first, later prompt position first among equals
   (``PRIORITY_LOWEST_FIRST``).

Each block is counted once (``count_tokens`` is called once per block); removal updates a
running total, and the final total is one recount over the kept blocks, so the cost is
linear in the number of blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import TypeAdapter

from ..schema.blocks import Block, BlockKind, BlockOrigin, ExcludedBlock, ShiftResult
from .groups import ToolGroups, find_tool_groups

TOKEN_BUDGET_EXCEEDED = "TOKEN_BUDGET_EXCEEDED"
#: Reason of every member of an incomplete tool group (see ``engine.shifting.groups``).
TOOL_PAIR_INCOMPLETE = "TOOL_PAIR_INCOMPLETE"
#: Exclusion reasons that mean "never sendable", whatever the budget or protection.
UNSENDABLE_REASONS = frozenset({"HIDDEN", "TOOL_RESULT_ORPHANED", TOOL_PAIR_INCOMPLETE})
_EXCLUDED_LIST = TypeAdapter(list[ExcludedBlock])


@dataclass
class _Unit:
    members: list[int]
    tokens: int = 0
    protected: bool = False
    tier: int = 3
    priority: float = 0.0
    first: int = 0
    is_group: bool = False
    reasons: dict[int, str] = field(default_factory=dict)


#: Rule 5's exclusion reason of a lone block by removal tier (interceptor-added, examples, history).
_TIER_REASON = {0: "PRIORITY_LOWEST_FIRST", 1: "EXAMPLES_PUSHED_OUT", 2: "HISTORY_OLDEST_FIRST"}


def _tier(block: Block) -> int:
    """Rule 5's removal tier of ``block`` (:func:`removal_tier`)."""
    return removal_tier(block.origin, block.kind, block.history)


def removal_tier(origin: BlockOrigin, kind: BlockKind, history: bool) -> int:
    """Rule 5's removal tier: 0 interceptor-added, 1 example dialogue, 2 history, 3 the rest (by priority).

    Takes a block's ``origin``, ``kind`` and ``history`` flag so that per-block lists can be mapped
    over it (:mod:`engine.incremental`).
    """
    if origin is BlockOrigin.INTERCEPTOR:
        return 0
    if kind == BlockKind.EXAMPLE:
        return 1
    if history:
        return 2
    return 3


def shift_context(
    blocks: Sequence[Block],
    count_tokens: Callable[[Block], int],
    budget: int,
    *,
    honor_manual: bool = False,
) -> ShiftResult:
    """Fit ``blocks`` into ``budget`` tokens.

    Parameters
    ----------
    blocks:
        Prompt blocks in prompt order, with ``protected``/``pinned``/``hidden``/
        ``manual_excluded``/``history`` already set by assembly.
    count_tokens:
        Tokens of one block, chat-format overhead included (called once per block).
    budget:
        Tokens available for the prompt (context limit − reply reserve − fixed overheads).
    honor_manual:
        Drop ``manual_excluded`` blocks first (the ``manual`` strategy).

    Returns
    -------
    ShiftResult
        ``kept`` ids in original order, ``excluded`` with reasons and tokens, an empty
        ``truncated`` (this strategy never compresses); ``error`` is
        ``"TOKEN_BUDGET_EXCEEDED"`` exactly when the protected blocks alone exceed ``budget``.
    """
    tokens = [int(count_tokens(b)) for b in blocks]
    groups = find_tool_groups(blocks)
    units = _units(blocks, tokens, groups)  # rule 3
    excluded: dict[int, str] = {}
    diagnostics: list[str] = []
    live = _drop_unsendable(units, blocks, groups, honor_manual, excluded, diagnostics)  # rules 1–2
    protected_tokens = sum(u.tokens for u in live if u.protected)
    removable = [u for u in live if not u.protected]
    error: str | None = None
    if protected_tokens > budget:  # rule 4
        error = TOKEN_BUDGET_EXCEEDED
        for unit in removable:
            _drop(excluded, unit, "OVER_BUDGET_PROTECTED", group_reason="OVER_BUDGET_PROTECTED")
    else:  # rule 5
        _drop_until_fits(removable, sum(u.tokens for u in live), budget - protected_tokens, budget, excluded)
    return _shift_result(blocks, tokens, excluded, budget, protected_tokens, error, diagnostics)


def _units(blocks: Sequence[Block], tokens: list[int], groups: ToolGroups) -> list[_Unit]:
    """The removable units in prompt order: one per tool group, one per other block, with their tokens."""
    units: list[_Unit] = []
    unit_of_group: dict[str, _Unit] = {}
    for i, block in enumerate(blocks):
        gid = groups.group_of[i]
        tier = _tier(block)
        if gid is not None and gid in unit_of_group:
            unit = unit_of_group[gid]
            unit.members.append(i)
            unit.is_group = True
            unit.tier = min(unit.tier, tier)
        else:
            unit = _Unit(members=[i], first=i, tier=tier, priority=block.priority)
            units.append(unit)
            if gid is not None:
                unit_of_group[gid] = unit
        unit.tokens += tokens[i]
    return units


def _drop(excluded: dict[int, str], unit: _Unit, reason: str, cause: int | None = None,
          group_reason: str = "TOOL_GROUP_DROPPED") -> None:
    """Exclude every member of ``unit``: ``reason`` for ``cause`` (or a lone block), ``group_reason`` for the rest."""
    for m in unit.members:
        if m == cause or not unit.is_group:
            excluded[m] = reason
        else:
            excluded[m] = group_reason


def _drop_unsendable(units: list[_Unit], blocks: Sequence[Block], groups: ToolGroups, honor_manual: bool,
                     excluded: dict[int, str], diagnostics: list[str]) -> list[_Unit]:
    """Rules 1–2: hidden, orphaned, incomplete and (with ``honor_manual``) writer-excluded units go.

    Returns the units left (``protected`` set on each).
    """
    live: list[_Unit] = []
    orphans, incomplete = groups.orphans, groups.incomplete
    for unit in units:
        hidden = [m for m in unit.members if blocks[m].hidden]
        if hidden:
            _drop(excluded, unit, "HIDDEN", hidden[0])
            for m in hidden:
                excluded[m] = "HIDDEN"
            continue
        if any(m in orphans for m in unit.members):
            for m in unit.members:
                excluded[m] = "TOOL_RESULT_ORPHANED"
            continue
        gid = groups.group_of[unit.members[0]]
        if gid is not None and gid in incomplete:
            for m in unit.members:
                excluded[m] = TOOL_PAIR_INCOMPLETE
            continue
        unit.protected = any(blocks[m].protected or blocks[m].pinned for m in unit.members)
        manual = [m for m in unit.members if blocks[m].manual_excluded]
        if honor_manual and manual:
            # What the writer excluded is never sent, even when it (or a member of its tool
            # group) is pinned or protected: the exclusion is the later, explicit decision.
            if unit.protected:
                diagnostics.append(
                    f"{blocks[manual[0]].id}: excluded by the writer although protected or pinned "
                    "(or in a tool group with a pinned message); not sent")
            _drop(excluded, unit, "MANUAL_EXCLUDED", manual[0])
            for m in manual:
                excluded[m] = "MANUAL_EXCLUDED"
            continue
        live.append(unit)
    return live


def _drop_until_fits(removable: list[_Unit], total: int, room: int, budget: int, excluded: dict[int, str]) -> None:
    """Rule 5: remove units in the module's order until ``total`` fits ``budget`` (tokens).

    ``room`` is what the protected units leave; a unit larger than it can never fit and goes
    first, whatever its age: dropping an old small message to make room for it would be pointless.
    """
    if total <= budget:
        return
    for unit in removable:
        if unit.tokens > room:
            _drop(excluded, unit, "TOO_LARGE_FOR_BUDGET", group_reason="TOO_LARGE_FOR_BUDGET")
            total -= unit.tokens
    order = sorted(
        (u for u in removable if u.members[0] not in excluded),
        key=lambda u: (u.tier, u.first) if u.tier < 3 else (u.tier, u.priority, -u.first),
    )
    for unit in order:
        if total <= budget:
            break
        _drop(excluded, unit, _TIER_REASON.get(unit.tier, "PRIORITY_LOWEST_FIRST"),
              unit.members[0] if not unit.is_group else None)
        total -= unit.tokens


def _shift_result(blocks: Sequence[Block], tokens: list[int], excluded: dict[int, str], budget: int,
                  protected_tokens: int, error: str | None, diagnostics: list[str]) -> ShiftResult:
    """The :class:`ShiftResult`, after one full recount of the kept blocks."""
    n = len(blocks)
    kept_pos = [i for i in range(n) if i not in excluded]
    final_total = sum(tokens[i] for i in kept_pos)  # final full recount
    if error is None and final_total > budget:  # pragma: no cover - guarded by _drop_until_fits
        raise AssertionError("shift_context left the prompt over budget")
    return ShiftResult(
        kept=[blocks[i].id for i in kept_pos],
        excluded=_EXCLUDED_LIST.validate_python(
            [{"block_id": blocks[i].id, "reason": excluded[i], "tokens": tokens[i]}
             for i in range(n) if i in excluded]),
        truncated=[],
        total_tokens=final_total,
        budget=budget,
        protected_tokens=protected_tokens,
        error=error,
        diagnostics=diagnostics,
        kept_reasons={blocks[i].id: ("PINNED" if blocks[i].pinned and not blocks[i].protected
                                     else blocks[i].reason) for i in kept_pos},
    )


def unsendable_positions(blocks: Sequence[Block], groups: ToolGroups | None = None, *,
                         honor_manual: bool = False) -> frozenset[int]:
    """Positions of blocks that may never be sent, whatever the budget or protection.

    Hidden blocks, every member of a tool group with a hidden member (a group leaves whole),
    orphaned tool results, and every member of an incomplete tool group; with
    ``honor_manual`` also the blocks the writer excluded, with their tool groups.
    """
    groups = groups or find_tool_groups(blocks)
    flagged = [i for i, b in enumerate(blocks) if b.hidden or (honor_manual and b.manual_excluded)]
    flagged_groups = {groups.group_of[i] for i in flagged} - {None}
    out = set(flagged)
    out |= {i for i, g in enumerate(groups.group_of) if g is not None and g in flagged_groups}
    out |= groups.orphans | groups.incomplete_positions()
    return frozenset(out)


def check_shift_result(blocks: Sequence[Block], result: ShiftResult,
                       groups: ToolGroups | None = None, *, honor_manual: bool = False) -> list[str]:
    """Host checks on any strategy's result (SPEC §2 step 6); returns problems, empty if sound.

    Checks: kept/excluded/truncated partition the input; kept ids keep their original order;
    tool groups are all-or-nothing; nothing unsendable (:func:`unsendable_positions`: hidden
    messages and their tool groups, orphaned results, incomplete tool groups) is kept; no
    protected or pinned block was removed, unless it is unsendable. With ``honor_manual``
    (strategies that honour the writer's exclusions), the blocks the writer excluded and
    their tool groups count as unsendable too.
    """
    problems: list[str] = []
    ids = [b.id for b in blocks]
    seen: dict[str, int] = {}
    for bid in [*result.kept, *(e.block_id for e in result.excluded),
                *(t.block_id for t in result.truncated)]:
        seen[bid] = seen.get(bid, 0) + 1
    if set(seen) != set(ids) or any(c != 1 for c in seen.values()):
        problems.append("kept, excluded and truncated do not partition the blocks")
    pos = {b: i for i, b in enumerate(ids)}
    kept_positions = [pos.get(k, -1) for k in result.kept]
    if kept_positions != sorted(kept_positions):
        problems.append("kept blocks are not in their original order")
    groups = groups or find_tool_groups(blocks)
    never = unsendable_positions(blocks, groups, honor_manual=honor_manual)
    sent = set(result.kept) | {t.block_id for t in result.truncated if t.remaining_tokens > 0}
    gone = {e.block_id: e.reason for e in result.excluded}
    for i, b in enumerate(blocks):
        if i in never:
            if b.id in sent:
                what = ("hidden" if b.hidden else "the writer excluded this" if b.manual_excluded
                        else "unsendable (hidden, excluded, orphaned or incomplete tool group)")
                problems.append(f"{what}: block {b.id} was kept")
            continue
        if (b.protected or b.pinned) and b.id in gone:
            problems.append(f"protected block {b.id} was removed ({gone[b.id]})")
    state: dict[str, set[bool]] = {}
    kept_set = set(result.kept)
    for b, g in zip(blocks, groups.group_of):
        if g is not None:
            state.setdefault(g, set()).add(b.id in kept_set)
    for g, states in state.items():
        if len(states) > 1:
            problems.append(f"tool group {g} was split")
    return problems
