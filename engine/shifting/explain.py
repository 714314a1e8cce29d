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

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from operator import and_, eq, is_, is_not, ne, not_
from typing import Any

from ..schema.blocks import Block
from ..schema.preview import Explanation
from .columns import BlockColumns, ToolLayout

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
    return {i: e for i, e in zip(ids, out) if e is not None}


def explain_columns(cols: BlockColumns, status: Sequence[str], reasons: Sequence[str | None], budget: int, *,
                    lorebook_traces: Mapping[str, Mapping[str, Any]] | None = None,
                    protected_tokens: int | None = None,
                    previous: Mapping[str, Explanation] | None = None,
                    current: dict[str, Explanation] | None = None) -> list[Explanation | None]:
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
    previous, current:
        ``text → Explanation`` of an earlier call, and the dict this call collects its own in:
        an explanation equal to an earlier one is that very object (callers tell unchanged
        explanations by identity).

    Returns
    -------
    list
        Per position: its :class:`Explanation`, ``None`` where the reason code says it all.
        Explanations with the same figures are one shared object.
    """
    out: list[Explanation | None] = [None] * len(cols)
    excluded = list(map(eq, status, repeat("excluded")))
    used = sum(compress(cols.tokens, map(ne, status, repeat("excluded"))))
    layout = cols.layout
    group_tokens = {gid: sum(map(cols.tokens.__getitem__, ms)) for gid, ms in zip(layout.ids, layout.members)}
    _explain_history(cols, excluded, reasons, budget, max(0, budget - used), group_tokens, (previous, current), out)
    _explain_held_groups(cols, status, out)
    if "LOREBOOK_BUDGET" in reasons:
        _explain_lorebook(cols, reasons, lorebook_traces, out)
    if "TOO_LARGE_FOR_BUDGET" in reasons:
        if protected_tokens is None:
            protected_tokens = sum(compress(cols.tokens, map(and_, cols.held, map(not_, excluded))))
        room = max(0, budget - protected_tokens)
        for i in compress(range(len(cols)), map(eq, reasons, repeat("TOO_LARGE_FOR_BUDGET"))):
            g = layout.group_of[i]
            own = group_tokens[g] if g is not None else cols.tokens[i]
            out[i] = Explanation(
                f"needs {own:,} tokens but the protected blocks leave only {room:,} of the {budget:,}-token budget",
                {"tokens": own, "room": room, "budget": budget})
    return out


def _explain_history(cols: BlockColumns, excluded: list[bool], reasons: Sequence[str | None], budget: int,
                     free: int, group_tokens: Mapping[str, int],
                     memo: tuple[Mapping[str, Explanation] | None, dict[str, Explanation] | None],
                     out: list[Explanation | None]) -> None:
    """History removed for room: too big for what is free, or behind the newest unit that did not fit.

    SPEC §3 rule 5 removes history oldest first, so what is sent is one contiguous stretch
    ending at the newest message: the newest history unit removed for room (the boundary)
    keeps everything older out. One explanation per distinct figures (token count, group).
    """
    room = list(compress(range(len(cols)), map(and_, map(and_, cols.history, excluded),
                                                  map(ROOM_REASONS.__contains__, reasons))))
    if not room:
        return
    group_of, tokens = cols.layout.group_of, cols.tokens
    boundary = room[-1]
    bgroup = group_of[boundary]
    need = group_tokens[bgroup] if bgroup is not None else tokens[boundary]
    explanation = _room_explainer(free, budget, cols.labels[boundary], need, cols.ids[boundary],
                                  cols.message_index[boundary], *memo)
    # messages outside tool groups: one explanation per distinct token count
    singles = list(compress(room, map(is_, map(group_of.__getitem__, room), repeat(None))))
    owns = list(map(tokens.__getitem__, singles))
    table = {own: explanation(own, None, own > free) for own in set(owns)}
    deque(map(out.__setitem__, singles, map(table.__getitem__, owns)), maxlen=0)
    if len(singles) != len(room):
        for i in compress(room, map(is_not, map(group_of.__getitem__, room), repeat(None))):
            g = group_of[i]
            assert g is not None
            own = group_tokens[g]
            out[i] = explanation(own, g, g == bgroup or own > free)
    if bgroup is None:
        out[boundary] = explanation(tokens[boundary], None, True)


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


def _explain_held_groups(cols: BlockColumns, status: Sequence[str], out: list[Explanation | None]) -> None:
    """Kept tool-group members held by a pinned or protected member (a group is sent whole or not at all)."""
    pinned, protected = cols.pinned, cols.protected
    for gid, ms in zip(cols.layout.ids, cols.layout.members):
        holders = [m for m in ms if pinned[m] or protected[m]]
        if not holders:
            continue
        h = holders[0]
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
                      lorebook_traces: Mapping[str, Mapping[str, Any]] | None, out: list[Explanation | None]) -> None:
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
