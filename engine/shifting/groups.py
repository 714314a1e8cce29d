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

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any, TypeVar

from ..cache import lru
from ..schema.blocks import Block

T = TypeVar("T")


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

    Inside a pipeline run (:func:`blocks_frozen`) the result is remembered
    per list of block objects, and reused when only blocks with the same tool shape changed
    (a pin or exclude toggle): a 10,000-message chat is not re-linked on every click.

    Returns
    -------
    ToolGroups
        One group id per block position; components are numbered by first member.
    """
    if not blocks_frozen():
        return _compute_tool_groups(blocks)
    return remembered_groups(blocks, _tool_shape, _compute_tool_groups)


def _tool_shape(block: Block) -> tuple[Any, ...]:
    """What of a block decides its tool group: role, call ids, id-less calls, the result id."""
    msg = block.message
    if msg is None:
        return ()
    ids, anon = _calls(block)
    return (msg.role, tuple(ids), anon, msg.result_id() if _is_result(block) else None)


class _Links:
    """Union-find over block positions, with the bookkeeping of the linking pass."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.member = [False] * n
        self.id_owner: dict[str, int] = {}  # call id → the latest call block that issued it so far
        self.reused: set[str] = set()
        self.pending_anon: list[int] = []  # assistant blocks with unanswered id-less calls (queue)
        self.anon_left: dict[int, int] = {}
        self.anon_total: dict[int, int] = {}
        self.orphans: set[int] = set()
        self.answered: dict[int, set[str]] = {}  # call block → ids its linked results answer

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def call(self, i: int, ids: list[str], anon: int) -> None:
        self.member[i] = True
        for cid in ids:
            owner = self.id_owner.get(cid)
            if owner is not None and owner != i:
                self.reused.add(cid)  # another turn reuses the id: later results pair with this turn
            self.id_owner[cid] = i
        if anon:
            self.pending_anon = [i]  # a new call turn supersedes unanswered older id-less calls
            self.anon_left[i] = anon
            self.anon_total[i] = anon

    def result(self, i: int, rid: str | None) -> None:
        self.member[i] = True
        if rid:
            owner = self.id_owner.get(rid)
            if owner is None:
                self.orphans.add(i)  # no earlier call carries this id
            else:
                self.union(owner, i)  # the nearest earlier call with this id
                self.answered.setdefault(owner, set()).add(rid)
        elif self.pending_anon:
            owner = self.pending_anon[0]
            self.union(owner, i)
            self.anon_left[owner] -= 1
            if self.anon_left[owner] <= 0:
                self.pending_anon.pop(0)
        else:
            self.orphans.add(i)


def tool_positions(blocks: Sequence[Block]) -> list[int]:
    """Positions of the blocks that may take part in a tool group, ascending (one C-level pass per field).

    Every tool call or tool result is among them: messages with the role ``tool`` or
    ``function``, with ``tool_calls``, or with extra fields (a legacy ``function_call``). A long
    chat has a few hundred of them among thousands of messages, so the linking works on these only.
    """
    n = len(blocks)
    messages = list(map(_MESSAGE, blocks))
    found = {*compress(range(n), map(_RESULT_ROLES.__contains__, map(getattr, messages, repeat("role"), repeat(None)))),
             *compress(range(n), map(getattr, messages, repeat("tool_calls"), repeat(None))),
             *compress(range(n), map(getattr, messages, repeat("__pydantic_extra__"), repeat(None)))}
    return sorted(found)


_MESSAGE = attrgetter("message")
_RESULT_ROLES = frozenset(("tool", "function"))


def _compute_tool_groups(blocks: Sequence[Block]) -> ToolGroups:
    n = len(blocks)
    links = _Links(n)
    candidates = tool_positions(blocks)
    for i in candidates:
        block = blocks[i]
        ids, anon = _calls(block)
        if ids or anon:
            links.call(i, ids, anon)
        elif _is_result(block):
            links.result(i, block.message.result_id())  # type: ignore[union-attr]
    members = [i for i in candidates if links.member[i]]
    calls = [i for i in members if not _is_result(blocks[i])]
    problems = _incomplete_calls(blocks, links, calls)
    labels: dict[int, str] = {}
    group_of: list[str | None] = [None] * n
    for i in members:
        root = links.find(i)
        if root not in labels:
            labels[root] = f"g{len(labels)}"
        group_of[i] = labels[root]
    # a result linked (by id or position) to a real call is not an orphan
    with_calls = {group_of[j] for j in calls}
    orphans = {i for i in links.orphans if group_of[i] not in with_calls}
    incomplete: dict[str, tuple[str, ...]] = {}
    for call, what in problems.items():
        gid = group_of[call]
        if gid is not None:
            incomplete[gid] = (*incomplete.get(gid, ()), *what)
    return ToolGroups(group_of, frozenset(orphans), frozenset(links.reused), incomplete)


def _incomplete_calls(blocks: Sequence[Block], links: _Links, call_positions: list[int]) -> dict[int, list[str]]:
    """What makes each call incomplete; links results placed before their call to it.

    A call is incomplete when one of its ids has no later result (a result placed before the
    call is linked to it, so that both leave together), or id-less calls are left unanswered.
    ``call_positions``: the calls' positions, ascending.
    """
    problems: dict[int, list[str]] = {}
    early: dict[int, list[int]] = {}  # call block → orphan results that came before it
    orphan_by_id: dict[str, list[int]] = {}
    for j in sorted(links.orphans):
        msg = blocks[j].message
        rid = msg.result_id() if msg is not None else None
        if rid:
            orphan_by_id.setdefault(rid, []).append(j)
    for i in call_positions:
        ids, _ = _calls(blocks[i])
        for cid in dict.fromkeys(ids):
            if cid in links.answered.get(i, set()):
                continue
            waiting = orphan_by_id.get(cid, [])
            before = [j for j in waiting if j < i]
            if before:
                orphan_by_id[cid] = [j for j in waiting if j > i]  # each early result links once
                early.setdefault(i, []).extend(before)
                problems.setdefault(i, []).append(f"{cid}: result before its call")
            else:
                problems.setdefault(i, []).append(f"{cid}: no result")
        left = links.anon_left.get(i, 0)
        if left > 0:
            first = links.anon_total[i] - left + 1
            problems.setdefault(i, []).extend(f"#{k}: no result" for k in range(first, links.anon_total[i] + 1))
    for call, results in early.items():
        for j in results:
            links.union(call, j)
            links.orphans.discard(j)
    return problems


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
            ids: list[Any] = [c.get("id") for c in calls if isinstance(c, dict) and c.get("id")]  # JSON values
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


# --------------------------------------------------------------------------------------------
# Tool groups remembered within pipeline runs (the blocks of a run are immutable once built)

_FROZEN: ContextVar[bool] = ContextVar("loomscope_blocks_frozen", default=False)

#: Tool groups per exact list of block objects, and the latest per list length (for reuse
#: across a toggle: same length, a few blocks replaced). Each entry holds its blocks, so as few as
#: the pipeline's remembered runs (engine.incremental, four): a chat switch must not keep 16
#: chats' blocks alive (issue 29, found by the app's GC policy measurements).
_GROUPS = lru(4)
_GROUPS_BY_LENGTH = lru(4)
_GROUPS_LOCK = threading.Lock()
#: Changed blocks above which tool groups are recomputed rather than compared shape by shape.
_REUSE_MAX_CHANGED = 256


@contextmanager
def frozen_blocks() -> Iterator[None]:
    """Mark the current pipeline run: blocks are not mutated once built, so they may be remembered."""
    token = _FROZEN.set(True)
    try:
        yield
    finally:
        _FROZEN.reset(token)


def blocks_frozen() -> bool:
    """Whether the caller runs inside :func:`frozen_blocks` (a pipeline run)."""
    return _FROZEN.get()


def changed_positions(new: Sequence[object], old: Sequence[object]) -> list[int]:
    """Positions ``i < min(len)`` where ``new[i] is not old[i]`` (one C-level pass)."""
    return list(compress(range(min(len(new), len(old))), map(is_not, new, old)))


def remembered_groups(blocks: Sequence[Block], shape: Callable[[Block], object],
                      compute: Callable[[Sequence[Block]], T]) -> T:
    """``compute(blocks)``, remembered per list of block objects.

    A list seen before gives the remembered result. A list of the same length as the latest
    one, whose replaced blocks all have the same ``shape`` as the blocks they replace, gives the
    latest result too (tool groups depend on shapes and positions only).
    """
    key = tuple(map(id, blocks))
    # every read under the lock too: an LRU read reorders the cache, and two threads reordering
    # at once corrupt it (KeyError, issue 25 item 5)
    with _GROUPS_LOCK:
        hit = _GROUPS.get(key)
        prev = _GROUPS_BY_LENGTH.get(len(blocks)) if hit is None else None
    if hit is not None:
        return hit[1]
    result: T | None = None
    if prev is not None:
        changed = changed_positions(blocks, prev[0])
        if len(changed) <= _REUSE_MAX_CHANGED and all(shape(blocks[i]) == shape(prev[0][i]) for i in changed):
            result = prev[1]
    if result is None:
        result = compute(blocks)
    entry = (tuple(blocks), result)  # holds the blocks: their ids stay unique while remembered
    with _GROUPS_LOCK:
        _GROUPS[key] = entry
        _GROUPS_BY_LENGTH[len(blocks)] = entry
    return result
