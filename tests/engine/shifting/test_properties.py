"""Property tests for shift_context's invariants (hypothesis, 500 examples each)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.schema import Block, BlockKind, ChatMessage, ToolCall, ToolFunction
from engine.shifting import shift_context

SETTINGS = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ("tool_call_id", "toolCallId", "callId")


@st.composite
def chats(draw):
    """(blocks, sizes, truth_group, budget): truth_group maps block id → generator's group label."""
    blocks: list[Block] = []
    sizes: dict[str, int] = {}
    truth: dict[str, str] = {}

    def add(size, kind, msg, group=None, **kw):
        bid = f"b{len(blocks)}"
        blocks.append(Block(id=bid, kind=kind, role=msg.role, source=f"t:{bid}", message=msg, **kw))
        sizes[bid] = size
        if group:
            truth[bid] = group

    add(draw(st.integers(0, 60)), BlockKind.SYSTEM, ChatMessage(role="system", content="s"),
        protected=True, reason="SYSTEM_PROMPT")
    for k in range(draw(st.integers(0, 3))):
        add(draw(st.integers(1, 40)), BlockKind.LOREBOOK, ChatMessage(role="system", content="l"),
            protected=draw(st.booleans()), priority=draw(st.integers(0, 3)))
    n_turns = draw(st.integers(0, 12))
    pending: list[tuple[str, str]] = []  # (call id, group) results not yet emitted
    for t in range(n_turns):
        choice = draw(st.sampled_from(["msg", "msg", "tool", "result"]))
        if choice == "tool":
            ids = [f"c{t}_{j}" for j in range(draw(st.integers(1, 3)))]
            add(draw(st.integers(1, 40)), BlockKind.TOOL_CALL,
                ChatMessage(role="assistant", tool_calls=[ToolCall(id=i, function=ToolFunction(name="f"))
                                                          for i in ids]),
                group=f"g{t}", history=True, pinned=draw(st.booleans()) and draw(st.booleans()))
            pending += [(i, f"g{t}") for i in ids]
        elif choice == "result" and pending:
            cid, g = pending.pop(draw(st.integers(0, len(pending) - 1)))
            key = draw(st.sampled_from(KEYS))
            add(draw(st.integers(1, 60)), BlockKind.TOOL_RESULT, ChatMessage(role="tool", content="r", **{key: cid}),
                group=g, history=True)
        else:
            add(draw(st.integers(1, 40)), BlockKind.MESSAGE,
                ChatMessage(role=draw(st.sampled_from(["user", "assistant"])), content="m"),
                history=True, pinned=draw(st.integers(0, 9)) == 0,
                manual_excluded=draw(st.integers(0, 5)) == 0)
    for cid, g in pending:  # every call gets its results (possibly late, non-adjacent)
        add(draw(st.integers(1, 60)), BlockKind.TOOL_RESULT, ChatMessage(role="tool", content="r", tool_call_id=cid),
            group=g, history=True)
    if draw(st.booleans()):
        add(draw(st.integers(1, 30)), BlockKind.MESSAGE, ChatMessage(role="user", content="now"),
            protected=True, reason="CURRENT_INPUT")
    total = sum(sizes.values())
    budget = draw(st.integers(0, max(total + 10, 1)))
    return blocks, sizes, truth, budget


def _run(data, manual=False):
    blocks, sizes, _truth, budget = data
    return shift_context(blocks, lambda b: sizes[b.id], budget, honor_manual=manual)


def _protected_ids(blocks, truth, manual=False):
    """Protected blocks, with protection propagated through the generator's groups.

    With ``manual``, what the writer excluded (and its whole group) is not protected: an
    exclusion is never sent, even of a pinned message (issue 9).
    """
    prot = {b.id for b in blocks if b.protected or b.pinned}
    groups_prot = {truth[b] for b in prot if b in truth}
    prot |= {b for b, g in truth.items() if g in groups_prot}
    if manual:
        excl = {b.id for b in blocks if b.manual_excluded}
        groups_excl = {truth[b] for b in excl if b in truth}
        prot -= excl | {b for b, g in truth.items() if g in groups_excl}
    return prot


@SETTINGS
@given(chats(), st.booleans())
def test_partition_and_order(data, manual):
    blocks, *_ = data
    res = _run(data, manual)
    ids = [b.id for b in blocks]
    out = res.kept + [e.block_id for e in res.excluded] + [t.block_id for t in res.truncated]
    assert sorted(out) == sorted(ids) and len(out) == len(set(out))
    assert res.kept == [i for i in ids if i in set(res.kept)]


@SETTINGS
@given(chats(), st.booleans())
def test_protected_never_removed(data, manual):
    blocks, _sizes, truth, _budget = data
    res = _run(data, manual)
    gone = {e.block_id for e in res.excluded}
    assert not (_protected_ids(blocks, truth, manual) & gone)


@SETTINGS
@given(chats(), st.booleans())
def test_tool_groups_all_or_nothing(data, manual):
    _blocks, _sizes, truth, _budget = data
    res = _run(data, manual)
    kept = set(res.kept)
    by_group: dict[str, set[bool]] = {}
    for bid, g in truth.items():
        by_group.setdefault(g, set()).add(bid in kept)
    assert all(len(v) == 1 for v in by_group.values())


@SETTINGS
@given(chats(), st.booleans())
def test_budget_or_error(data, manual):
    blocks, sizes, truth, budget = data
    res = _run(data, manual)
    protected_total = sum(sizes[b] for b in _protected_ids(blocks, truth, manual))
    assert res.total_tokens == sum(sizes[k] for k in res.kept)
    if protected_total > budget:
        assert res.error == "TOKEN_BUDGET_EXCEEDED"
    else:
        assert res.error is None
        assert res.total_tokens <= budget


@SETTINGS
@given(chats())
def test_truncate_drops_oldest_history_first(data):
    blocks, _sizes, truth, _budget = data
    res = _run(data, manual=False)
    if res.error:
        return
    pos = {b.id: i for i, b in enumerate(blocks)}
    first_of_group: dict[str, int] = {}
    for bid, g in truth.items():
        first_of_group[g] = min(first_of_group.get(g, pos[bid]), pos[bid])

    def age(bid):
        return first_of_group[truth[bid]] if bid in truth else pos[bid]

    history = {b.id for b in blocks if b.history}
    protected = _protected_ids(blocks, truth)
    dropped = [e.block_id for e in res.excluded
               if e.block_id in history and e.reason in ("HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED")]
    kept_removable = [k for k in res.kept if k in history and k not in protected]
    if dropped and kept_removable:
        assert max(age(d) for d in dropped) < min(age(k) for k in kept_removable)


@SETTINGS
@given(chats())
def test_summarize_partition_budget_and_protection(data):
    from engine.shifting import summarize_strategy

    blocks, sizes, truth, budget = data

    def count(b):
        return sizes[b.id] if b.id in sizes else max(1, len(b.text()) // 4)

    res = summarize_strategy(blocks, count, budget, {})
    ids = [b.id for b in blocks]
    out = res.kept + [e.block_id for e in res.excluded] + [t.block_id for t in res.truncated]
    assert sorted(out) == sorted(ids) and len(out) == len(set(out))
    assert not (_protected_ids(blocks, truth, manual=True) & ({e.block_id for e in res.excluded} | {t.block_id for t in res.truncated}))
    if res.error is None:
        total = sum(sizes[k] for k in res.kept) + sum(count(a) for a in res.added)
        assert total <= budget
    kept = set(res.kept)
    for g in set(truth.values()):
        members = [b for b, gg in truth.items() if gg == g]
        assert len({m in kept for m in members}) == 1
