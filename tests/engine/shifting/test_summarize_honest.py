"""``summarize`` is honest (issue 31 item 7, issue 28 item 3).

A summary never costs more tokens than the messages it stands for, its header names exactly
those messages, the newest messages are never dropped while older ones stay (verbatim or in the
summary), and every exclusion reason is the one truncation gives.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest

#: A C5-like chat: seven short turns of a trip plan, ending on the user's input.
C5 = [
    ("user", "Hi, I need help planning a trip to Lisbon in May for four days."),
    ("assistant", "Sure. Lisbon in May is warm; plan Alfama, Belem and a day trip to Sintra."),
    ("user", "Great. What about food, any must-try dishes near the river?"),
    ("assistant", "Try pasteis de nata in Belem and grilled sardines at Time Out Market."),
    ("user", "Which day should be Sintra?"),
    ("assistant", "Day three, leave early by train from Rossio."),
    ("user", "Thanks! Book me something for day two."),
]
_HISTORY_CUTS = ("HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED")


def _pv(msgs, limit, reserve=0, **opts):
    settings = ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=reserve, strategy="summarize",
                               strategy_options=opts)
    return preview(PreviewRequest(chat=Chat(messages=msgs), settings=settings))


def _check_honest(pv) -> None:
    """The invariants of the module docstring, on one preview."""
    assert pv.error is None and pv.prompt_tokens <= pv.budget
    msgs = [b for b in pv.blocks if b.kind != "summary" and b.message_index is not None]
    summaries = [b for b in pv.blocks if b.kind == "summary"]
    folded = [b for b in msgs if b.status == "truncated"]
    if summaries:
        [summary] = summaries
        assert summary.tokens <= sum(pv_tokens(pv, b) for b in folded), "the summary costs more than it replaced"
        named = {int(n) for n in re.findall(r"^- #(\d+) ", summary.text, flags=re.M)}
        assert named == {b.message_index for b in folded}  # a line for every message it says it covers
        header = summary.text.splitlines()[0]
        for b in folded:
            assert f"#{b.message_index}" in header or re.search(r"#(\d+)–#(\d+)", header)
        # story order: the summary sits before every kept history message
        order = [b.id for b in pv.blocks if b.status == "kept"]
        kept_hist = [b for b in msgs if b.status == "kept" and b.reason != "CURRENT_INPUT" and b.message_index > 0]
        assert all(order.index(summary.id) < order.index(b.id) for b in kept_hist)
    else:
        assert not folded
    # the newest messages stay: nothing cut for age is newer than a kept history message
    kept_idx = [b.message_index for b in msgs if b.status == "kept" and b.reason != "SYSTEM_PROMPT"]
    cut_idx = [b.message_index for b in msgs if b.status != "kept" and b.reason in (*_HISTORY_CUTS, "SUMMARIZED")]
    if kept_idx and cut_idx:
        assert max(cut_idx) < min(kept_idx), (cut_idx, kept_idx)


def pv_tokens(pv, block) -> int:
    """Tokens the block had before it was folded (a truncated block shows 0 remaining)."""
    return block.original_tokens if block.original_tokens is not None else block.tokens


def test_c5_at_a_tight_budget_keeps_the_newest_reply_and_never_grows_the_history():
    """Before: a summary of 88 tokens stood for 60, and the newest reply went as TOO_LARGE_FOR_BUDGET."""
    msgs = [ChatMessage(role=r, content=t) for r, t in C5]
    for limit in (100, 110, 120, 130):
        pv = _pv(msgs, limit)
        _check_honest(pv)
        by_source = {b.source: b for b in pv.blocks}
        assert by_source["message:5"].status == "kept", limit  # the newest reply
        assert by_source["message:6"].status == "kept"
        # never less verbatim history than plain truncation keeps
        plain = preview(PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
            model="gpt-4o", context_limit=limit, reply_reserve=0, strategy="truncate")))
        plain_kept = {b.source for b in plain.blocks if b.status == "kept"}
        assert plain_kept <= {b.source for b in pv.blocks if b.status == "kept"} | {
            b.source for b in pv.blocks if b.status == "truncated"}
        assert {b.reason for b in pv.blocks if b.status == "excluded"} <= {"HISTORY_OLDEST_FIRST"}
    # no honest summary fits here: the preview says so instead of making one
    pv = _pv(msgs, 110)
    assert pv.strategy_info.get("fallback") == "truncation"
    assert any(d.startswith("summarize: no summary") for d in pv.diagnostics)


def test_long_messages_are_summarized_for_less_than_they_cost():
    story = ("Mara the keeper climbed the lighthouse stairs at dusk. She logged the ship Aster entering the bay. "
             "The lamp oil ran low, so she wrote to the harbor office. Nobody answered her letter for a week. ")
    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"Day {i}. " + story * 2)
             for i in range(12)]
    msgs.append(ChatMessage(role="user", content="What happened on the last day?"))
    pv = _pv(msgs, 900, reserve=100)
    _check_honest(pv)
    [summary] = [b for b in pv.blocks if b.kind == "summary"]
    assert pv.strategy_info["summary"]["tokens"] <= pv.strategy_info["summary"]["replaced_tokens"]
    assert pv.strategy_info["summary"]["covers"] == [b.message_index for b in pv.blocks if b.status == "truncated"]
    assert {b.source: b.status for b in pv.blocks}[f"message:{len(msgs) - 2}"] == "kept"
    assert summary.text.startswith("[Summary of messages #")


_WORDS = ["lamp", "ship", "harbor", "letter", "keeper", "storm", "oil", "bay", "dawn", "log", "stairs", "office"]


@st.composite
def _chats(draw):
    n = draw(st.integers(2, 14))
    msgs = []
    if draw(st.booleans()):
        msgs.append(ChatMessage(role="system", content="You narrate the lighthouse story."))
    for i in range(n):
        sentences = draw(st.lists(st.lists(st.sampled_from(_WORDS), min_size=2, max_size=14), min_size=1, max_size=6))
        text = " ".join(" ".join(ws).capitalize() + "." for ws in sentences)
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=text))
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=_chats(), limit=st.integers(60, 900), cap=st.integers(20, 400))
def test_property_summary_never_costs_more_and_the_newest_messages_stay(msgs, limit, cap):
    pv = _pv(msgs, limit, summary_cap_tokens=cap)
    if pv.error is not None:
        return
    _check_honest(pv)
    summaries = [b for b in pv.blocks if b.kind == "summary"]
    if summaries:
        assert summaries[0].tokens <= cap


def test_a_too_large_message_newer_than_kept_history_is_not_folded():
    """Found by the property above: truncation drops a too-large message (#3) whatever its age and
    keeps an older one (#2); folding #3 into the summary put a summary of #3 before #2 and called a
    newer message summarized while an older one stayed. Only what is older than every kept history
    message is folded; #3 stays out as truncation left it."""
    msgs = [ChatMessage(role="system", content="You narrate the lighthouse story."),
            ChatMessage(role="user", content="Lamp lamp."), ChatMessage(role="assistant", content="Lamp lamp."),
            ChatMessage(role="user", content="Lamp lamp. Lamp lamp. Lamp lamp lamp lamp lamp lamp. " * 4),
            ChatMessage(role="assistant", content="Lamp lamp.")]
    pv = _pv(msgs, 60, summary_cap_tokens=26)
    _check_honest(pv)
    by_source = {b.source: b for b in pv.blocks}
    assert by_source["message:3"].reason == "TOO_LARGE_FOR_BUDGET" and by_source["message:3"].status == "excluded"
    assert by_source["message:2"].status == "kept" and by_source["message:4"].status == "kept"
