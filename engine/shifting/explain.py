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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema.blocks import Block

#: Reasons under which a history block was removed for room (the ones free tokens contradict).
ROOM_REASONS = frozenset({"HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED", "PRIORITY_LOWEST_FIRST",
                          "EXAMPLES_PUSHED_OUT"})


@dataclass(frozen=True)
class Explanation:
    """One block's specific reason: ``text`` in words, ``data`` the figures (tokens, indices)."""

    text: str
    data: dict[str, Any]


def _label(block: Block) -> str:
    if block.message_index is not None:
        return f"message {block.message_index}"
    return block.source


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
        ``block id → Explanation`` for the blocks that have one (others are absent). ``data``
        keys: ``free`` (tokens not used of ``budget``), ``blocked_by`` (block id),
        ``blocked_by_message`` (message index or ``None``), ``blocked_by_tokens``,
        ``held_by`` / ``held_by_message`` / ``held_because`` (``pinned``/``protected``),
        ``group``, ``budget`` / ``used`` / ``tokens`` (lorebook), ``room`` (too large).
    """
    out: dict[str, Explanation] = {}
    used = sum(tokens.get(b.id, 0) for b in blocks if status.get(b.id, ("excluded", ""))[0] != "excluded")
    units = _GroupTokens(blocks, tokens, group_of)
    _explain_history(blocks, status, units, budget, max(0, budget - used), out)
    _explain_held_groups(units.members, status, out)
    _explain_budget_drops(blocks, status, units, budget, lorebook_traces, protected_tokens, out)
    return out


class _GroupTokens:
    """Tool groups' members, and the tokens of a block's whole unit (its tool group, or itself)."""

    def __init__(self, blocks: Sequence[Block], tokens: Mapping[str, int], group_of: Mapping[str, str]) -> None:
        self.tokens, self.group_of = tokens, group_of
        self.members: dict[str, list[Block]] = {}
        for b in blocks:
            g = group_of.get(b.id)
            if g is not None:
                self.members.setdefault(g, []).append(b)

    def of(self, b: Block) -> int:
        g = self.group_of.get(b.id)
        if g is None:
            return self.tokens.get(b.id, 0)
        return sum(self.tokens.get(m.id, 0) for m in self.members[g])


def _explain_history(blocks: Sequence[Block], status: Mapping[str, tuple[str, str]], units: _GroupTokens,
                     budget: int, free: int, out: dict[str, Explanation]) -> None:
    """History removed for room: too big for what is free, or behind the newest unit that did not fit."""
    group_of = units.group_of
    room_dropped = [b for b in blocks if b.history and status.get(b.id, ("", ""))[0] == "excluded"
                    and status[b.id][1] in ROOM_REASONS]
    if not room_dropped:
        return
    # the newest history unit removed for room: everything older is out because of it
    boundary = room_dropped[-1]
    boundary_group = group_of.get(boundary.id)
    need = units.of(boundary)
    for b in room_dropped:
        own = units.of(b)
        same_unit = b.id == boundary.id or (boundary_group is not None and group_of.get(b.id) == boundary_group)
        if same_unit or own > free:
            what = "with its tool group " if group_of.get(b.id) else ""
            out[b.id] = Explanation(
                f"needs {own:,} tokens {what}but only {free:,} of the {budget:,}-token budget are free",
                {"free": free, "tokens": own, "group": group_of.get(b.id)})
        else:
            out[b.id] = Explanation(
                f"{own:,} tokens would fit in the {free:,} free, but history is kept contiguous: the newer "
                f"{_label(boundary)} ({need:,} tokens) did not fit, so nothing older is sent",
                {"free": free, "tokens": own, "blocked_by": boundary.id,
                 "blocked_by_message": boundary.message_index, "blocked_by_tokens": need,
                 "group": group_of.get(b.id)})


def _explain_held_groups(members: Mapping[str, list[Block]], status: Mapping[str, tuple[str, str]],
                         out: dict[str, Explanation]) -> None:
    """Kept tool-group members held by a pinned or protected member."""
    for g, group in members.items():
        holders = [m for m in group if m.pinned or m.protected]
        if not holders:
            continue
        holder = holders[0]
        because = "pinned" if holder.pinned else "protected"
        for b in group:
            if b.pinned or b.protected or status.get(b.id, ("", ""))[0] != "kept":
                continue
            out[b.id] = Explanation(
                f"kept with its tool group {g}: {_label(holder)} ({holder.kind.value.replace('_', ' ')}) "
                f"is {because}, and a tool group is sent whole or not at all",
                {"held_by": holder.id, "held_by_message": holder.message_index, "held_because": because,
                 "group": g})


def _explain_budget_drops(blocks: Sequence[Block], status: Mapping[str, tuple[str, str]], units: _GroupTokens,
                          budget: int, lorebook_traces: Mapping[str, Mapping[str, Any]] | None,
                          protected_tokens: int | None, out: dict[str, Explanation]) -> None:
    """Lorebook entries over the World Info budget, and blocks too large for any room left."""
    tokens = units.tokens
    for b in blocks:
        _st, reason = status.get(b.id, ("", ""))
        if reason == "LOREBOOK_BUDGET" and lorebook_traces:
            detail = (lorebook_traces.get(b.source) or {}).get("detail") or {}
            if all(isinstance(detail.get(k), int) for k in ("budget", "used", "tokens")):
                wb, wu, wt = detail["budget"], detail["used"], detail["tokens"]
                out[b.id] = Explanation(
                    f"costs {wt:,} tokens but the World Info budget is {wb:,} and earlier entries already "
                    f"used {wu:,} ({max(0, wb - wu):,} left)",
                    {"budget": wb, "used": wu, "tokens": wt})
        elif reason == "TOO_LARGE_FOR_BUDGET":
            if protected_tokens is None:
                protected_tokens = sum(tokens.get(x.id, 0) for x in blocks if (x.protected or x.pinned)
                                       and status.get(x.id, ("excluded", ""))[0] != "excluded")
            room = max(0, budget - protected_tokens)
            own = units.of(b)
            out[b.id] = Explanation(
                f"needs {own:,} tokens but the protected blocks leave only {room:,} of the {budget:,}-token budget",
                {"tokens": own, "room": room, "budget": budget})
