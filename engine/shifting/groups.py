"""Tool groups: tool calls and their results as connected components (SPEC §1 "tool group").

Links: an assistant message's ``tool_calls[].id`` with every later tool result carrying that id
under ``tool_call_id`` / ``toolCallId`` / ``callId``; a union-find over those links gives the
components (parallel calls, non-adjacent results). When a later turn reuses an id (tau-bench
transcripts do), a result pairs with the nearest earlier call with its id, so an old turn and a
recent one are not merged into one group. Legacy chats without ids (results carry only the
function ``name``, or OpenAI's old ``function_call`` / ``role: "function"``) are linked by
position: the id-less tool messages that follow an assistant's id-less calls answer them in
order.

A group is *incomplete* when a provider would reject it even whole: a call whose result never
follows it, or a result that comes before its call (the result is then linked to that later
call, which it was meant to answer, so that both leave together). Incomplete groups are never
sent (``TOOL_PAIR_INCOMPLETE``, see ``engine.shifting.core``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..schema.blocks import Block


@dataclass(frozen=True)
class ToolGroups:
    """Group ids per block position (``None`` = not a tool block) and orphaned results.

    ``group_of[i]`` is ``"g<k>"`` for every member of component ``k``; ``orphans`` are
    positions of tool results whose call is not in the blocks at all; ``reused_ids``
    are call ids that more than one assistant turn issued (each result then pairs with the
    nearest earlier call carrying its id).
    """

    group_of: list[str | None]
    orphans: frozenset[int]
    reused_ids: frozenset[str] = frozenset()
    #: group id → the call ids that make it incomplete, each with what is wrong
    #: (``"w2: no result"``, ``"w1: result before its call"``); id-less calls are named
    #: ``"#<n>"`` (their position among the call message's calls).
    incomplete: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def incomplete_positions(self) -> frozenset[int]:
        """Positions of every member of an incomplete group."""
        return frozenset(i for i, g in enumerate(self.group_of) if g is not None and g in self.incomplete)


def _calls(block: Block) -> tuple[list[str], int]:
    """(ids of calls, number of id-less calls) an assistant block makes."""
    msg = block.message
    if msg is None or msg.role != "assistant":
        return [], 0
    ids: list[str] = []
    anon = 0
    for call in msg.tool_calls or []:
        if call.id:
            ids.append(call.id)
        else:
            anon += 1
    if msg.model_extra and msg.model_extra.get("function_call"):
        anon += 1
    return ids, anon


def _is_result(block: Block) -> bool:
    return block.message is not None and block.message.role in ("tool", "function")


def find_tool_groups(blocks: Sequence[Block]) -> ToolGroups:
    """Compute tool groups over ``blocks`` (any order of kinds; only message blocks link).

    Returns
    -------
    ToolGroups
        One group id per block position; components are numbered by first member.
    """
    n = len(blocks)
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    member = [False] * n
    id_owner: dict[str, int] = {}  # call id → the latest call block that issued it so far
    reused: set[str] = set()
    pending_anon: list[int] = []  # positions of assistant blocks with unanswered id-less calls (queue)
    anon_left: dict[int, int] = {}
    orphans: set[int] = set()
    answered: dict[int, set[str]] = {}  # call block → ids its linked results answer
    anon_total: dict[int, int] = {}

    for i, block in enumerate(blocks):
        ids, anon = _calls(block)
        if ids or anon:
            member[i] = True
            for cid in ids:
                owner = id_owner.get(cid)
                if owner is not None and owner != i:
                    reused.add(cid)  # another turn reuses the id: later results pair with this turn
                id_owner[cid] = i
            if anon:
                pending_anon = [i]  # a new call turn supersedes unanswered older id-less calls
                anon_left[i] = anon
                anon_total[i] = anon
            continue
        if _is_result(block):
            member[i] = True
            rid = block.message.result_id() if block.message else None
            if rid:
                owner = id_owner.get(rid)
                if owner is None:
                    orphans.add(i)  # no earlier call carries this id
                else:
                    union(owner, i)  # the nearest earlier call with this id
                    answered.setdefault(owner, set()).add(rid)
            elif pending_anon:
                owner = pending_anon[0]
                union(owner, i)
                anon_left[owner] -= 1
                if anon_left[owner] <= 0:
                    pending_anon.pop(0)
            else:
                orphans.add(i)

    # What makes a call incomplete: an id no later result answers (a result placed before the
    # call is linked to it, so both leave together), or id-less calls left unanswered.
    problems: dict[int, list[str]] = {}
    early: dict[int, list[int]] = {}  # call block → orphan results that came before it
    orphan_by_id: dict[str, list[int]] = {}
    for j in sorted(orphans):
        rid = blocks[j].message.result_id() if blocks[j].message else None
        if rid:
            orphan_by_id.setdefault(rid, []).append(j)
    for i, block in enumerate(blocks):
        ids, _ = _calls(block)
        for cid in dict.fromkeys(ids):
            if cid in answered.get(i, set()):
                continue
            waiting = orphan_by_id.get(cid, [])
            before = [j for j in waiting if j < i]
            if before:
                orphan_by_id[cid] = [j for j in waiting if j > i]  # each early result links once
                early.setdefault(i, []).extend(before)
                problems.setdefault(i, []).append(f"{cid}: result before its call")
            else:
                problems.setdefault(i, []).append(f"{cid}: no result")
        left = anon_left.get(i, 0)
        if left > 0:
            first = anon_total[i] - left + 1
            problems.setdefault(i, []).extend(f"#{k}: no result" for k in range(first, anon_total[i] + 1))
    for call, results in early.items():
        for j in results:
            union(call, j)
            orphans.discard(j)

    labels: dict[int, str] = {}
    group_of: list[str | None] = [None] * n
    for i in range(n):
        if member[i]:
            root = find(i)
            if root not in labels:
                labels[root] = f"g{len(labels)}"
            group_of[i] = labels[root]
    # a result linked (by id or position) to a real call is not an orphan
    with_calls = {group_of[j] for j in range(n) if member[j] and not _is_result(blocks[j])}
    orphans = {i for i in orphans if group_of[i] not in with_calls}
    incomplete: dict[str, tuple[str, ...]] = {}
    for call, what in problems.items():
        gid = group_of[call]
        if gid is not None:
            incomplete[gid] = (*incomplete.get(gid, ()), *what)
    return ToolGroups(group_of, frozenset(orphans), frozenset(reused), incomplete)


def tool_sequence_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """What a provider would reject in the tool-call shape of ``messages`` (OpenAI chat shape).

    OpenAI's rule ("Create chat completion"): an assistant message with ``tool_calls`` is
    followed directly by one ``tool`` message per call id (any order), and a ``tool`` message
    only ever appears in such a run. Calls without ids are answered by as many id-less results;
    a legacy ``function_call`` by the ``function`` message right after it. Returns one line per
    problem (empty when the shape is sound). The pipeline uses it to refuse an interceptor's
    output that would split a tool batch.
    """
    problems: list[str] = []
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        role = m.get("role")
        calls = m.get("tool_calls") or []
        if role == "assistant" and calls:
            ids = [c.get("id") for c in calls if isinstance(c, dict) and c.get("id")]
            anon = len(calls) - len(ids)
            j = i + 1
            got: list[str] = []
            anon_got = 0
            while j < n and messages[j].get("role") == "tool":
                rid = messages[j].get("tool_call_id")
                if rid:
                    got.append(str(rid))
                else:
                    anon_got += 1
                j += 1
            if sorted(got) != sorted(ids) or anon_got != anon:
                problems.append(f"message {i}: tool calls {ids or anon} are followed by results {got or anon_got}")
            i = j
            continue
        if role == "assistant" and isinstance(m.get("function_call"), dict):
            if i + 1 >= n or messages[i + 1].get("role") != "function":
                problems.append(f"message {i}: function_call not followed by its result")
                i += 1
            else:
                i += 2
            continue
        if role in ("tool", "function"):
            problems.append(f"message {i}: tool result outside its call's batch")
        i += 1
    return problems
