"""The fit map (engine.shifting.fitmap): smallest window per message, checked against shift_context."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.schema import Block, BlockKind, ChatMessage, ToolCall, ToolFunction
from engine.shifting import find_tool_groups, shift_context
from engine.shifting.fitmap import fit_windows, pipeline_shift_budget, window_for_budget


def _identity_budget(window: int) -> int:
    return window


@st.composite
def chats(draw):
    """Protected system + lore + history (some tool groups, pins, hidden) with message indices."""
    blocks: list[Block] = []
    sizes: dict[str, int] = {}

    def add(size, kind, msg, **kw):
        bid = f"b{len(blocks)}"
        blocks.append(Block(id=bid, kind=kind, role=msg.role, source=f"t:{bid}", message=msg, **kw))
        sizes[bid] = size

    add(draw(st.integers(0, 40)), BlockKind.SYSTEM, ChatMessage(role="system", content="s"), protected=True)
    for _ in range(draw(st.integers(0, 3))):
        add(draw(st.integers(1, 60)), BlockKind.LOREBOOK, ChatMessage(role="system", content="l"),
            priority=draw(st.integers(0, 3)))
    n = draw(st.integers(1, 14))
    mi = 0
    call = 0
    while mi < n:
        if draw(st.integers(0, 5)) == 0:
            call += 1
            cid = f"c{call}"
            add(draw(st.integers(1, 50)), BlockKind.TOOL_CALL,
                ChatMessage(role="assistant", tool_calls=[ToolCall(id=cid, function=ToolFunction(name="f", arguments="{}"))]),
                history=True, message_index=mi)
            mi += 1
            add(draw(st.integers(1, 50)), BlockKind.TOOL_RESULT, ChatMessage(role="tool", content="r", tool_call_id=cid),
                history=True, message_index=mi, pinned=draw(st.integers(0, 6)) == 0)
            mi += 1
            continue
        add(draw(st.integers(1, 120)), BlockKind.MESSAGE, ChatMessage(role="user", content="m"),
            history=True, message_index=mi, pinned=draw(st.integers(0, 9)) == 0,
            hidden=draw(st.integers(0, 12)) == 0)
        mi += 1
    return blocks, sizes


def _kept_messages(blocks, sizes, budget):
    res = shift_context(blocks, lambda b: sizes[b.id], budget)
    kept = set(res.kept)
    return {b.message_index for b in blocks if b.message_index is not None and b.id in kept}, res.error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chats())
def test_fit_window_is_where_the_message_stays_sent(chat):
    """Brute force over every budget: from the fit window on, shift_context always keeps the message,
    and one token less does not (None: no budget sends it)."""
    blocks, sizes = chat
    groups = find_tool_groups(blocks)
    group_of = {b.id: g for b, g in zip(blocks, groups.group_of) if g}
    fits = fit_windows(blocks, sizes, group_of, _identity_budget,
                       never_sent=frozenset(blocks[i].id for i in groups.orphans))
    total = sum(sizes.values())
    # TOKEN_BUDGET_EXCEEDED: nothing is sent at that budget
    kept_at = {budget: (set() if error else kept) for budget in range(0, total + 2)
               for kept, error in [_kept_messages(blocks, sizes, budget)]}
    for b in blocks:
        i = b.message_index
        if i is None:
            continue
        if fits[i] is None:
            assert all(i not in kept for kept in kept_at.values()), b
            continue
        assert all(i in kept_at[w] for w in range(fits[i], total + 2)), (b, fits[i])
        if fits[i] > 0:
            assert i not in kept_at[fits[i] - 1], (b, fits[i])


def test_a_large_newer_message_makes_sending_non_monotone():
    """A newer message too large for the room is removed first (TOO_LARGE_FOR_BUDGET), so a small older
    message is sent at a small window, dropped at a middle one, and sent again from the fit window on."""
    def m(i, size):
        return Block(id=f"b{i}", kind=BlockKind.MESSAGE, role="user", source=f"t{i}", history=True,
                     message=ChatMessage(role="user", content="x"), message_index=i), size

    pairs = [m(0, 10), m(1, 500), m(2, 10)]
    blocks = [b for b, _ in pairs]
    sizes = {b.id: s for b, s in pairs}
    fits = fit_windows(blocks, sizes, {}, _identity_budget)
    # from 520 on message 0 is always sent; at 20 it is sent too (message 1 can never fit there)
    assert fits == {2: 10, 1: 510, 0: 520}
    assert _kept_messages(blocks, sizes, 20)[0] == {0, 2}
    assert _kept_messages(blocks, sizes, 515)[0] == {1, 2}


def test_window_for_budget_inverts_a_percent_reserve_and_safety_margin():
    shift = pipeline_shift_budget(lambda w: int(w * 15 / 100), 5.0, True, 3)
    for need in (1, 100, 4096, 100_000):
        w = window_for_budget(need, shift)
        assert shift(w) >= need > shift(w - 1)


def test_manual_strategy_never_sends_a_hand_excluded_message():
    blocks = [Block(id="b0", kind=BlockKind.MESSAGE, role="user", source="t0", history=True, manual_excluded=True,
                    message=ChatMessage(role="user", content="x"), message_index=0)]
    assert fit_windows(blocks, {"b0": 5}, {}, _identity_budget, honor_manual=True) == {0: None}
    assert fit_windows(blocks, {"b0": 5}, {}, _identity_budget) == {0: 5}
