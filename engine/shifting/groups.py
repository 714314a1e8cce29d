"""Tool groups: tool calls and their results as connected components (SPEC §1 "tool group").

Links: an assistant message's ``tool_calls[].id`` with every tool result carrying that id under
``tool_call_id`` / ``toolCallId`` / ``callId``; a result may answer calls of several
assistant messages only through ids, so a union-find over all id keys gives the components
(parallel calls, non-adjacent results). Legacy chats without ids (results carry only the
function ``name``, or OpenAI's old ``function_call`` / ``role: "function"``) are linked by
position: the id-less tool messages that follow an assistant's id-less calls answer them in
order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..schema.blocks import Block


@dataclass(frozen=True)
class ToolGroups:
    """Group ids per block position (``None`` = not a tool block) and orphaned results.

    ``group_of[i]`` is ``"g<k>"`` for every member of component ``k``; ``orphans`` are
    positions of tool results whose call is not among the blocks.
    """

    group_of: list[str | None]
    orphans: frozenset[int]


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
    id_owner: dict[str, int] = {}
    pending_anon: list[int] = []  # positions of assistant blocks with unanswered id-less calls (queue)
    anon_left: dict[int, int] = {}
    orphans: set[int] = set()
    results_by_id: dict[str, list[int]] = {}

    for i, block in enumerate(blocks):
        ids, anon = _calls(block)
        if ids or anon:
            member[i] = True
            for cid in ids:
                if cid in id_owner:
                    union(id_owner[cid], i)
                else:
                    id_owner[cid] = i
            if anon:
                pending_anon = [i]  # a new call turn supersedes unanswered older id-less calls
                anon_left = {i: anon}
            continue
        if _is_result(block):
            member[i] = True
            rid = block.message.result_id() if block.message else None
            if rid:
                results_by_id.setdefault(rid, []).append(i)
            elif pending_anon:
                owner = pending_anon[0]
                union(owner, i)
                anon_left[owner] -= 1
                if anon_left[owner] <= 0:
                    pending_anon.pop(0)
            else:
                orphans.add(i)

    for rid, positions in results_by_id.items():
        owner = id_owner.get(rid)
        if owner is None:
            # no call carries this id: link results sharing the id, but they are orphans
            for p in positions:
                orphans.add(p)
            for p in positions[1:]:
                union(positions[0], p)
            continue
        for p in positions:
            union(owner, p)

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
    return ToolGroups(group_of, frozenset(orphans))
