"""The issue's "cases that other tools get wrong", each as a test (zero-overhead counter)."""

from __future__ import annotations

from engine.shifting import check_shift_result, shift_context
from tests.engine.shifting.helpers import Builder


def _excluded(result):
    return {e.block_id: e.reason for e in result.excluded}


def test_tool_call_and_result_leave_together():
    b = Builder()
    s = b.sys(10); u1 = b.msg(10); c = b.call(5, "a"); r = b.result(5, "a")
    u2 = b.msg(15); a = b.msg(10, "assistant")
    res = shift_context(b.blocks, b.count, 40)
    assert res.kept == [s, u2, a]
    assert _excluded(res) == {u1: "HISTORY_OLDEST_FIRST", c: "TOOL_GROUP_DROPPED", r: "TOOL_GROUP_DROPPED"}
    assert res.total_tokens == 35 and res.error is None


def test_parallel_calls_leave_with_all_results():
    b = Builder()
    s = b.sys(5); u1 = b.msg(5); c = b.call(5, "a", "b"); ra = b.result(10, "a"); rb = b.result(10, "b")
    u2 = b.msg(5); a = b.msg(5, "assistant")
    res = shift_context(b.blocks, b.count, 30)
    assert res.kept == [s, u2, a]
    assert {c, ra, rb} <= set(_excluded(res))
    assert not check_shift_result(b.blocks, res)


def test_non_adjacent_result_is_one_group():
    b = Builder()
    s = b.sys(1); c = b.call(10, "a"); typed = b.msg(1); r = b.result(10, "a", key="callId")
    cur = b.msg(1, current=True)
    # budget forces one of call/result out: both go, the typed message stays
    res = shift_context(b.blocks, b.count, 15)
    ex = _excluded(res)
    assert c in ex and r in ex and typed not in ex
    assert res.kept == [s, typed, cur]


def test_protected_alone_over_budget_is_an_error():
    b = Builder()
    b.sys(105); u = b.msg(10)
    res = shift_context(b.blocks, b.count, 50)
    assert res.error == "TOKEN_BUDGET_EXCEEDED"
    assert _excluded(res)[u] == "OVER_BUDGET_PROTECTED"
    assert res.protected_tokens == 105


def test_huge_tool_group_excluded_as_unit_rest_kept():
    b = Builder()
    s = b.sys(100); u1 = b.msg(50); c = b.call(20, "c1"); r = b.result(5000, "c1")
    cur = b.msg(30, current=True)
    res = shift_context(b.blocks, b.count, 4000)
    assert res.kept == [s, u1, cur]
    assert _excluded(res) == {c: "TOO_LARGE_FOR_BUDGET", r: "TOO_LARGE_FOR_BUDGET"}
    assert res.total_tokens == 180


def test_character_kept_newest_nine_of_twelve():
    b = Builder()
    s = b.sys(100); ch = b.character(400)
    hist = [b.msg(150, "user" if i % 2 == 0 else "assistant") for i in range(12)]
    res = shift_context(b.blocks, b.count, 2048 - 198)
    assert res.kept == [s, ch, *hist[3:]]
    assert [e.block_id for e in res.excluded] == hist[:3]
    assert all(e.reason == "HISTORY_OLDEST_FIRST" for e in res.excluded)


def test_pinned_message_survives_and_group_protection_propagates():
    b = Builder()
    s = b.sys(5); old = b.msg(10, pinned=True); c = b.call(10, "x", pinned=True); r = b.result(10, "x")
    mid = b.msg(10); mid2 = b.msg(10); cur = b.msg(5, current=True)
    res = shift_context(b.blocks, b.count, 52)
    assert {old, c, r, mid2} <= set(res.kept)
    assert _excluded(res) == {mid: "HISTORY_OLDEST_FIRST"}
    # with no room left beside the protected blocks, a removable block can never fit
    res = shift_context(b.blocks, b.count, 42)
    assert _excluded(res) == {mid: "TOO_LARGE_FOR_BUDGET", mid2: "TOO_LARGE_FOR_BUDGET"}
    assert res.kept_reasons[old] == "PINNED"


def test_manual_exclusion_takes_its_group():
    b = Builder()
    s = b.sys(5); c = b.call(5, "q"); r = b.result(5, "q"); cur = b.msg(5, current=True)
    b.blocks[2] = b.blocks[2].model_copy(update={"manual_excluded": True})
    res = shift_context(b.blocks, b.count, 1000, honor_manual=True)
    assert _excluded(res) == {r: "MANUAL_EXCLUDED", c: "TOOL_GROUP_DROPPED"}
    res2 = shift_context(b.blocks, b.count, 1000, honor_manual=False)
    assert res2.excluded == []


def test_hidden_and_orphans_never_sent():
    b = Builder()
    s = b.sys(5); h = b.msg(5, hidden=True); o = b.result(5, "nobody"); cur = b.msg(5, current=True)
    res = shift_context(b.blocks, b.count, 1000)
    assert _excluded(res) == {h: "HIDDEN", o: "TOOL_RESULT_ORPHANED"}


def test_legacy_results_link_by_position():
    b = Builder()
    s = b.sys(1); c = b.call(5)  # no ids
    b.blocks[-1].message.tool_calls.append(  # two id-less calls
        b.blocks[-1].message.tool_calls[0].model_copy()) if b.blocks[-1].message.tool_calls else None
    r1 = b.result(5, None); r2 = b.result(5, None); u = b.msg(5); cur = b.msg(1, current=True)
    from engine.schema import ToolCall, ToolFunction
    b.blocks[1] = b.blocks[1].model_copy(update={"message": b.blocks[1].message.model_copy(update={
        "tool_calls": [ToolCall(function=ToolFunction(name="f")), ToolCall(function=ToolFunction(name="g"))]})})
    res = shift_context(b.blocks, b.count, 12)
    assert set(_excluded(res)) == {c, r1, r2}
    assert res.kept == [s, u, cur]


def test_examples_go_first_then_history_then_low_priority_lore():
    b = Builder()
    s = b.sys(5); ex = b.example(10); lo = b.lore(10, priority=50); hi = b.lore(10, priority=200)
    k = b.lore(10, priority=1, constant=True); m1 = b.msg(10); cur = b.msg(5, current=True)
    res = shift_context(b.blocks, b.count, 30)
    ex_map = _excluded(res)
    assert ex_map[ex] == "EXAMPLES_PUSHED_OUT"
    assert ex_map[m1] == "HISTORY_OLDEST_FIRST"
    assert ex_map[lo] == "PRIORITY_LOWEST_FIRST"
    assert hi in res.kept and k in res.kept


def test_summarize_folds_removed_history_into_a_summary_in_story_order():
    """Issue 31 item 7: the summary sits where the folded history was; the newest messages go last."""
    from engine.pipeline import preview
    from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest

    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                         content=f"Event {i} happened at the harbor. Then many details followed " + "x " * 40)
             for i in range(30)]
    msgs.append(ChatMessage(role="user", content="What now?"))
    settings = ContextSettings(model="gpt-4o", context_limit=1200, reply_reserve=100, strategy="summarize")
    pv = preview(PreviewRequest(chat=Chat(messages=msgs), settings=settings))
    summary = next(b for b in pv.blocks if b.kind == "summary")
    assert summary.status == "kept" and summary.reason == "SUMMARY"
    folded = [b for b in pv.blocks if b.status == "truncated"]
    assert folded and all(b.reason == "SUMMARIZED" and b.summary_id == summary.id for b in folded)
    assert all(b.original_tokens and b.original_tokens > 0 for b in folded)
    assert "Event 0 happened at the harbor." in summary.text or "Event" in summary.text
    order = [b.source for b in pv.blocks if b.status == "kept"]
    assert order[:2] == ["message:0", "summary:auto"]
    assert order[-2:] == [f"message:{len(msgs) - 2}", f"message:{len(msgs) - 1}"]
    assert pv.prompt_tokens <= pv.budget
    assert pv.messages[1]["content"].startswith("[Summary of messages #")


def test_reused_call_id_pairs_with_the_nearest_earlier_call():
    from engine.shifting import find_tool_groups

    b = Builder()
    s = b.sys(1); c1 = b.call(5, "dup"); r1 = b.result(5, "dup"); u = b.msg(5)
    c2 = b.call(5, "dup"); r2 = b.result(5, "dup"); cur = b.msg(1, current=True)
    groups = find_tool_groups(b.blocks)
    g = dict(zip([x.id for x in b.blocks], groups.group_of))
    assert g[c1] == g[r1] and g[c2] == g[r2] and g[c1] != g[c2]
    assert groups.reused_ids == {"dup"}
    res = shift_context(b.blocks, b.count, 17)
    assert set(_excluded(res)) == {c1, r1}  # the old turn goes; the recent one stays whole
    assert res.kept == [s, u, c2, r2, cur]


def test_result_before_its_call_takes_the_call_along():
    # Issue 9: sending the call without its result would be half a pair (a provider rejects
    # it), so the early result and the call leave together.
    from engine.shifting import find_tool_groups

    b = Builder()
    s = b.sys(1); early = b.result(5, "x"); c = b.call(5, "x"); cur = b.msg(1, current=True)
    res = shift_context(b.blocks, b.count, 100)
    assert _excluded(res) == {early: "TOOL_PAIR_INCOMPLETE", c: "TOOL_PAIR_INCOMPLETE"}
    assert res.kept == [s, cur]
    groups = find_tool_groups(b.blocks)
    assert list(groups.incomplete.values()) == [("x: result before its call",)]
    assert not groups.orphans


def test_result_before_a_call_whose_id_is_answered_later_stays_an_orphan():
    b = Builder()
    s = b.sys(1); early = b.result(5, "x"); c = b.call(5, "x"); r = b.result(5, "x")
    cur = b.msg(1, current=True)
    res = shift_context(b.blocks, b.count, 100)
    assert _excluded(res) == {early: "TOOL_RESULT_ORPHANED"}
    assert res.kept == [s, c, r, cur]


def test_call_with_a_missing_result_leaves_whole_even_when_pinned():
    from engine.shifting import check_shift_result, find_tool_groups

    b = Builder()
    s = b.sys(1); c = b.call(5, "w1", "w2", pinned=True); r1 = b.result(5, "w1"); u = b.msg(5)
    cur = b.msg(1, current=True)
    res = shift_context(b.blocks, b.count, 100, honor_manual=True)
    assert _excluded(res) == {c: "TOOL_PAIR_INCOMPLETE", r1: "TOOL_PAIR_INCOMPLETE"}
    assert res.kept == [s, u, cur]
    assert find_tool_groups(b.blocks).incomplete == {"g0": ("w2: no result",)}
    assert check_shift_result(b.blocks, res) == []


def test_id_less_calls_without_enough_results_are_incomplete():
    from engine.schema import ToolCall, ToolFunction

    b = Builder()
    s = b.sys(1); c = b.call(5); r1 = b.result(5, None); cur = b.msg(1, current=True)
    b.blocks[1] = b.blocks[1].model_copy(update={"message": b.blocks[1].message.model_copy(update={
        "tool_calls": [ToolCall(function=ToolFunction(name="f")), ToolCall(function=ToolFunction(name="g"))]})})
    res = shift_context(b.blocks, b.count, 100)
    assert _excluded(res) == {c: "TOOL_PAIR_INCOMPLETE", r1: "TOOL_PAIR_INCOMPLETE"}


def test_hidden_call_with_pinned_result_passes_the_host_check():
    # Issue 9 case 2: the correct result (the group leaves: the call is hidden) must not be
    # rejected as "protected block removed".
    from engine.shifting import check_shift_result

    b = Builder()
    s = b.sys(1); c = b.call(5, "k"); r = b.result(5, "k"); u = b.msg(5, manual=True)
    cur = b.msg(1, current=True)
    b.blocks[1] = b.blocks[1].model_copy(update={"hidden": True})
    b.blocks[2] = b.blocks[2].model_copy(update={"pinned": True})
    res = shift_context(b.blocks, b.count, 100, honor_manual=True)
    assert _excluded(res) == {c: "HIDDEN", r: "TOOL_GROUP_DROPPED", u: "MANUAL_EXCLUDED"}
    assert check_shift_result(b.blocks, res, honor_manual=True) == []
    # a result that keeps the excluded message, or the hidden call, is caught
    bad = res.model_copy(update={"kept": [s, u, cur], "excluded": [e for e in res.excluded if e.block_id != u]})
    assert any("writer excluded" in p for p in check_shift_result(b.blocks, bad, honor_manual=True))
    leaky = shift_context(b.blocks, b.count, 100).model_copy()
    assert check_shift_result(b.blocks, leaky) == []  # truncate: exclusions are not its promise
    kept_hidden = res.model_copy(update={"kept": [s, c, r, cur],
                                         "excluded": [e for e in res.excluded if e.block_id == u]})
    assert any(p.startswith("hidden") for p in check_shift_result(b.blocks, kept_hidden))


def test_exclusion_wins_over_a_pin_in_the_same_tool_group():
    # "A manual exclusion is never sent": a pinned call whose result the writer excluded leaves
    # with it (sending the call alone would be half a pair).
    from engine.shifting import check_shift_result

    b = Builder()
    s = b.sys(1); c = b.call(5, "k", pinned=True); r = b.result(5, "k"); cur = b.msg(1, current=True)
    b.blocks[2] = b.blocks[2].model_copy(update={"manual_excluded": True})
    res = shift_context(b.blocks, b.count, 100, honor_manual=True)
    assert _excluded(res) == {c: "TOOL_GROUP_DROPPED", r: "MANUAL_EXCLUDED"}
    assert any("excluded by the writer" in d for d in res.diagnostics)
    assert check_shift_result(b.blocks, res, honor_manual=True) == []
