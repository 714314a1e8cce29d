"""Specific reasons (engine.shifting.explain) on real shift_context / pipeline outcomes."""

from __future__ import annotations

from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, PreviewRequest
from engine.shifting import find_tool_groups, shift_context
from engine.shifting.explain import explain_blocks

from .helpers import Builder


def _status(blocks, result):
    st = {e.block_id: ("excluded", e.reason) for e in result.excluded}
    st.update({k: ("kept", result.kept_reasons.get(k, "FITS_BUDGET")) for k in result.kept})
    return st


def test_small_old_message_out_while_tokens_are_free_names_the_newer_one():
    b = Builder()
    b.sys(10)
    old = b.msg(5)
    big = b.msg(60, "assistant")
    b.msg(20)
    b.msg(10, current=True)
    budget = 80  # 10 + 20 + 10 = 40 protected/newest; 60 does not fit in the 40 left; 5 would
    res = shift_context(b.blocks, b.count, budget)
    status = _status(b.blocks, res)
    assert status[old] == ("excluded", "HISTORY_OLDEST_FIRST") and status[big][0] == "excluded"
    out = explain_blocks(b.blocks, status, b.sizes, budget, {})
    assert out[old].data["free"] == 40
    assert out[old].data["blocked_by"] == big and out[old].data["blocked_by_tokens"] == 60
    assert "contiguous" in out[old].text and "60 tokens" in out[old].text
    assert out[big].data == {"free": 40, "tokens": 60, "group": None}
    assert "only 40" in out[big].text


def test_tool_call_kept_because_its_result_is_pinned():
    b = Builder()
    b.sys(10)
    call = b.call(30, "c1")
    b.blocks[-1] = b.blocks[-1].model_copy(update={"message_index": 0})
    result = b.result(10, "c1")
    b.blocks[-1] = b.blocks[-1].model_copy(update={"pinned": True, "message_index": 1})
    b.msg(10, current=True)
    res = shift_context(b.blocks, b.count, 100)
    groups = find_tool_groups(b.blocks)
    group_of = {x.id: g for x, g in zip(b.blocks, groups.group_of) if g}
    out = explain_blocks(b.blocks, _status(b.blocks, res), b.sizes, 100, group_of)
    assert out[call].data["held_by"] == result and out[call].data["held_because"] == "pinned"
    assert "message 1" in out[call].text and "pinned" in out[call].text
    assert result not in out  # the pinned block's own reason (PINNED) says it all


def test_lorebook_entry_over_the_world_info_budget_gives_budget_used_and_cost():
    entries = [LorebookEntry(uid=i, keys=["lantern"], content=("lantern lore " * 40) + str(i), order=100 - i)
               for i in range(4)]
    request = PreviewRequest(
        chat=Chat(messages=[ChatMessage(role="user", content="the lantern is lit")]),
        lorebooks=[Lorebook(name="Town", entries=entries)],
        settings=ContextSettings(model="gpt-4o", context_limit=2048, reply_reserve=256,
                                 world_info={"budget_percent": 10}))
    pv = preview(request)
    over = [b for b in pv.blocks if b.reason == "LOREBOOK_BUDGET"]
    assert over, [b.reason for b in pv.blocks]
    for b in over:
        why = pv.reason_details[b.position]
        assert why is not None and set(why.data) == {"budget", "used", "tokens"}
        data = why.data
        assert data["used"] + data["tokens"] > data["budget"]
        assert f"{data['budget']:,}" in why.text and f"{data['tokens']:,}" in why.text


def test_pipeline_reports_details_and_fit_windows_for_history():
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=("word " * (285 if i == 8 else 5)))
            for i in range(12)]
    request = PreviewRequest(chat=Chat(messages=msgs),
                             settings=ContextSettings(model="gpt-4o", context_limit=400, reply_reserve=100,
                                                      strategy="truncate"))
    pv = preview(request)
    by_msg = {b.message_index: b for b in pv.blocks if b.message_index is not None}
    assert by_msg[8].status == "excluded"
    small_old = by_msg[2]
    why = pv.reason_details[small_old.position]
    assert small_old.status == "excluded" and why is not None and why.data["blocked_by_message"] == 8
    # the fit window agrees with the preview at the current window (no message here is too large
    # to ever fit, so sending is monotone)
    fit = {i: pv.fit_windows[b.position] for i, b in by_msg.items()}
    for i, b in by_msg.items():
        assert (fit[i] is not None and fit[i] <= pv.context_limit) == (b.status == "kept"), i
    assert fit[7] == fit[8] + by_msg[7].tokens
    assert pv.fit_method == "exact"
