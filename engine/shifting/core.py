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

import numpy as np
from pydantic import TypeAdapter

from ..schema.blocks import Block, ExcludedBlock, ShiftResult
from .columns import SHIFT_REASONS, Array, BlockColumns, ColumnShift, arrays_of, removal_tier, running_sums
from .groups import ToolGroups, find_tool_groups

TOKEN_BUDGET_EXCEEDED = "TOKEN_BUDGET_EXCEEDED"
#: Reason of every member of an incomplete tool group (see ``engine.shifting.groups``).
TOOL_PAIR_INCOMPLETE = "TOOL_PAIR_INCOMPLETE"
#: Exclusion reasons that mean "never sendable", whatever the budget or protection.
UNSENDABLE_REASONS = frozenset({"HIDDEN", "TOOL_RESULT_ORPHANED", TOOL_PAIR_INCOMPLETE})
_EXCLUDED_LIST = TypeAdapter(list[ExcludedBlock])


#: Rule 5's exclusion reason of a lone unit by removal tier (0 interceptor, 1 examples, 2 history, 3 lore/memory).
_TIER_REASON = ("PRIORITY_LOWEST_FIRST", "EXAMPLES_PUSHED_OUT", "HISTORY_OLDEST_FIRST", "PRIORITY_LOWEST_FIRST")


def _tier(block: Block) -> int:
    """Rule 5's removal tier of ``block`` (:func:`removal_tier`)."""
    return removal_tier(block.origin, block.kind, block.history)


def shift_context(
    blocks: Sequence[Block],
    count_tokens: Callable[[Block], int],
    budget: int,
    *,
    honor_manual: bool = False,
) -> ShiftResult:
    """Fit ``blocks`` into ``budget`` tokens: a view of :func:`shift_columns` (SPEC §3).

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
    cols = BlockColumns.from_blocks(blocks, [int(count_tokens(b)) for b in blocks])
    shift = shift_columns(cols, budget, honor_manual=honor_manual)
    return shift_result(blocks, cols.tokens, shift, budget)


def shift_result(blocks: Sequence[Block], tokens: Sequence[int], shift: ColumnShift, budget: int) -> ShiftResult:
    """The :class:`ShiftResult` of ``blocks`` for the outcome ``shift`` of :func:`shift_columns` over them.

    Parameters
    ----------
    blocks, tokens:
        The blocks shifted and their tokens (the columns' ``tokens``).
    shift:
        The outcome, one reason per block.
    budget:
        The budget shifting had (tokens).
    """
    reasons = shift.reasons
    kept = [b for b, r in zip(blocks, reasons) if r is None]
    return ShiftResult(
        kept=[b.id for b in kept],
        excluded=_EXCLUDED_LIST.validate_python(
            [{"block_id": b.id, "reason": r, "tokens": t}
             for b, r, t in zip(blocks, reasons, tokens) if r is not None]),
        truncated=[],
        total_tokens=shift.total_tokens,
        budget=budget,
        protected_tokens=shift.protected_tokens,
        error=shift.error,
        diagnostics=list(shift.diagnostics),
        kept_reasons={b.id: ("PINNED" if b.pinned and not b.protected else b.reason) for b in kept},
    )


def shift_columns(cols: BlockColumns, budget: int, *, honor_manual: bool = False) -> ColumnShift:
    """SPEC §3 shifting over columns: each block's exclusion reason (the one implementation).

    Computed over the columns' numpy arrays (:func:`~engine.shifting.columns.arrays_of`): rules
    1–2 (hidden, orphaned, incomplete, writer-excluded) are array masks, plus one Python step per
    tool group that leaves; rule 3 merges each tool group into its first member (the unit's head,
    ``np.ufunc.reduceat`` over the groups); rules 4–5 order the removable units by tier once and
    cut the removal order at the first running sum that frees enough (``np.cumsum`` +
    ``np.searchsorted``): linear in the blocks, plus ``O(k log k)`` for the ``k`` lorebook /
    memory units.

    Parameters
    ----------
    cols:
        The blocks' columns (prompt order; ``tokens`` as the strategy counts them).
    budget:
        Tokens available for the prompt.
    honor_manual:
        Drop the blocks the writer excluded (``manual``), with their tool groups, even when
        pinned or protected (a diagnostic says so).

    Returns
    -------
    ColumnShift
        One reason code per position (``reasons``: as strings, ``None`` kept), the error,
        protected and kept tokens, diagnostics.

    Raises
    ------
    AssertionError
        If the kept blocks exceed ``budget`` without ``TOKEN_BUDGET_EXCEEDED`` (a bug).
    """
    units = _Units(cols, honor_manual)
    a, codes = units.arrays, units.codes
    live = (codes == 0) & a.layout.head  # live unit heads
    live_held = live & units.held
    protected_tokens = int(np.dot(units.tokens, live_held))
    removable_at = live & ~units.held
    removable = removable_at.nonzero()[0]
    error: str | None = None
    if protected_tokens > budget:  # rule 4
        error = TOKEN_BUDGET_EXCEEDED
        units.drop_all(removable, _CODE["OVER_BUDGET_PROTECTED"], _CODE["OVER_BUDGET_PROTECTED"])
    else:  # rule 5
        _drop_until_fits(units, removable, removable_at, int(np.dot(units.tokens, live)), budget - protected_tokens,
                         budget)
    kept_total = int(np.dot(a.tokens, codes == 0))
    if error is None and kept_total > budget:  # pragma: no cover - guarded by _drop_until_fits
        raise AssertionError("shift_columns left the prompt over budget")
    return ColumnShift(codes, error, protected_tokens, kept_total, [text for _, text in sorted(units.notes)])


_CODE = {r: k for k, r in enumerate(SHIFT_REASONS) if r is not None}
#: Rule 5's reason code of a lone unit by removal tier (0 interceptor, 1 examples, 2 history, 3 lore/memory).
_TIER_CODE = np.array([_CODE[r] for r in _TIER_REASON], dtype=np.int8)


class _Units:
    """Rules 1–3 over columns: the reason codes of unsendable blocks, and the removable units.

    A unit is a tool group (its figures on its first member, the head) or a block outside
    groups; ``tokens``/``held``/``tier`` hold each head's unit figures (arrays over positions),
    ``arrays.layout.head`` says which positions are heads.
    """

    def __init__(self, cols: BlockColumns, honor_manual: bool) -> None:
        a = self.arrays = arrays_of(cols)
        self.cols = cols
        self.codes = np.zeros(len(cols), dtype=np.int8)
        self.notes: list[tuple[int, str]] = []
        self.tokens, self.held, self.tier = a.units.tokens, a.units.held, a.units.tier  # read only
        self.layout = cols.layout
        self._singles(honor_manual)
        if self.layout.members:
            self._groups(honor_manual)

    def note(self, i: int, at: int) -> None:
        """A protected or pinned block ``i`` the writer excluded, reported at prompt position ``at``."""
        self.notes.append((at, f"{self.cols.ids[i]}: excluded by the writer although protected or pinned "
                               "(or in a tool group with a pinned message); not sent"))

    def _singles(self, honor_manual: bool) -> None:
        """Rules 1–2 for blocks outside tool groups."""
        a, codes = self.arrays, self.codes
        lone = a.layout.lone
        codes[a.hidden & lone] = _CODE["HIDDEN"]
        orphans = a.layout.orphans
        if len(orphans):
            orphans = orphans[lone[orphans] & (codes[orphans] == 0)]
            codes[orphans] = _CODE["TOOL_RESULT_ORPHANED"]
        if honor_manual:
            excluded = a.manual & lone & (codes == 0)
            for i in (excluded & self.held).nonzero()[0].tolist():
                self.note(i, i)
            codes[excluded] = _CODE["MANUAL_EXCLUDED"]

    def _groups(self, honor_manual: bool) -> None:
        """Rules 1–2 for the tool groups that leave (rule 3's units are the arrays' :class:`~.columns.Units`).

        A group with a hidden, orphaned or (honouring exclusions) writer-excluded member, or an
        incomplete one, goes through :meth:`_group` (it leaves whole); the figures set on its head
        before are never read, as its members all get a reason.
        """
        layout, a = self.layout, self.arrays
        la = a.layout
        leave = la.any_of(a.hidden)
        if honor_manual:
            leave |= la.any_of(a.manual)
        odd = {layout.group_of[i] for i in layout.orphans} | layout.incomplete
        ks = set(leave.nonzero()[0].tolist())
        if odd:
            ks.update(k for k, gid in enumerate(layout.ids) if gid in odd)
        for k in sorted(ks):
            self._group(layout.ids[k], layout.members[k], honor_manual)

    def _group(self, gid: str, ms: list[int], honor_manual: bool) -> None:
        """Rules 1–2 for one tool group that leaves whole (hidden, orphaned, incomplete or writer-excluded)."""
        cols = self.cols
        hid = [m for m in ms if cols.hidden[m]]
        if hid:
            self._leave(ms, "HIDDEN", hid)
            return
        if any(m in self.layout.orphans for m in ms):
            self._leave(ms, "TOOL_RESULT_ORPHANED", [])
            return
        if gid in self.layout.incomplete:
            self._leave(ms, TOOL_PAIR_INCOMPLETE, [])
            return
        man = [m for m in ms if cols.manual[m]] if honor_manual else []
        if man:
            # What the writer excluded is never sent, even when it (or a member of its tool
            # group) is pinned or protected: the exclusion is the later, explicit decision.
            if any(cols.protected[m] or cols.pinned[m] for m in ms):
                self.note(man[0], ms[0])
            self._leave(ms, "MANUAL_EXCLUDED", man)

    def _leave(self, ms: list[int], reason: str, flagged: list[int]) -> None:
        """Rules 1–2: the whole group ``ms`` leaves; ``flagged`` members (or all, when none) get ``reason``.

        The other members of a group of two or more get ``TOOL_GROUP_DROPPED``.
        """
        code, dropped = _CODE[reason], _CODE["TOOL_GROUP_DROPPED"]
        for m in ms:
            self.codes[m] = code if not flagged or m == flagged[0] or len(ms) == 1 else dropped
        for m in flagged:
            self.codes[m] = code

    def drop_all(self, heads: Array, codes: Array | int, group_code: int) -> None:
        """Exclude the units at ``heads`` (positions, or a mask over them): ``codes`` for a lone block, ``group_code`` for every member of a larger group."""
        self.codes[heads] = codes
        la = self.arrays.layout
        if len(heads) and len(la.heads):
            if heads.dtype == bool:
                mark = heads
            else:
                mark = np.zeros(len(self.codes), dtype=bool)
                mark[heads] = True
            hit = mark[la.heads]  # per group: its head is among ``heads``
            self.codes[la.members[hit[la.member_group] & la.member_multi]] = group_code


def _drop_until_fits(units: _Units, removable: Array, removable_at: Array, total: int, room: int,
                     budget: int) -> None:
    """Rule 5: remove units (heads ``removable``; ``removable_at`` the same as a mask, which this may change) in the module's order until ``total`` fits ``budget``.

    ``room`` is what the protected units leave; a unit larger than it can never fit and goes
    first, whatever its age: dropping an old small message to make room for it would be pointless.
    """
    if total <= budget:
        return
    sizes = units.tokens[removable]
    large = sizes > room
    if large.any():
        too_large = removable[large]
        units.drop_all(too_large, _CODE["TOO_LARGE_FOR_BUDGET"], _CODE["TOO_LARGE_FOR_BUDGET"])
        total -= int(sizes[large].sum())
        removable, sizes = removable[~large], sizes[~large]
        removable_at[too_large] = False
    tiers = units.tier[removable]
    history = bool((tiers == 2).all())
    if history:  # history only (the usual chat): oldest first as they stand
        order = removable
    else:
        lore = removable[tiers == 3]
        lore = lore[np.lexsort((-lore, units.arrays.priority[lore]))]
        order = np.concatenate([removable[tiers == 0], removable[tiers == 1], removable[tiers == 2], lore])
        sizes = units.tokens[order]
    if total <= budget or not len(order):
        return
    cum = running_sums(sizes)
    k = min(int(cum.searchsorted(total - budget, side="left")) + 1, len(order))
    if history:  # the oldest k: every removable unit up to the k-th, as a mask
        removable_at[int(order[k - 1]) + 1:] = False
        units.drop_all(removable_at, _TIER_CODE[2], _CODE["TOOL_GROUP_DROPPED"])
        return
    dropped = order[:k]
    units.drop_all(dropped, _TIER_CODE[units.tier[dropped]], _CODE["TOOL_GROUP_DROPPED"])


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
