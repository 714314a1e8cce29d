"""``summarize``: fold only the oldest history that must go, use the budget, name every source."""

from __future__ import annotations

import re

from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.shifting import summarize_strategy
from engine.shifting.summarize import score_sentences, split_sentences

from .helpers import Builder

FILLER = "The weather stayed grey and the tea went cold while they talked about nothing much. "


def _pv(msgs, limit, reserve=100, **opts):
    settings = ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=reserve, strategy="summarize",
                               strategy_options=opts)
    return preview(PreviewRequest(chat=Chat(messages=msgs), settings=settings))


def _summary(pv):
    return next(b for b in pv.blocks if b.kind == "summary")


def test_one_large_old_message_with_room_to_spare_is_folded_and_the_newest_stays_verbatim():
    # "Cases that other tools get wrong": the old message is larger than half the free room (and
    # than all of it), so truncate drops it as TOO_LARGE_FOR_BUDGET; summarize folds it instead.
    big = " ".join(f"Chapter {i}: the lighthouse keeper Mara logged ship {i} entering the bay at dawn."
                   for i in range(80))
    msgs = [ChatMessage(role="system", content="You narrate."),
            ChatMessage(role="user", content=big),
            ChatMessage(role="assistant", content="Noted, the log is long."),
            ChatMessage(role="user", content="What did Mara see last?")]
    pv = _pv(msgs, limit=900, reserve=100)
    assert pv.error is None and pv.prompt_tokens <= pv.budget
    summary = _summary(pv)
    assert summary.status == "kept"
    by_source = {b.source: b for b in pv.blocks}
    assert by_source["message:1"].status == "truncated" and by_source["message:1"].reason == "SUMMARIZED"
    assert by_source["message:2"].status == "kept"  # the newest message stays verbatim
    assert by_source["message:3"].status == "kept" and by_source["message:3"].reason == "CURRENT_INPUT"
    assert "#1 user:" in summary.text and "lighthouse keeper Mara" in summary.text
    # the truncate strategy would only drop it
    plain = preview(PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=900, reply_reserve=100, strategy="truncate")))
    assert {b.source: b.reason for b in plain.blocks}["message:1"] == "TOO_LARGE_FOR_BUDGET"


def test_only_the_oldest_history_is_folded_and_the_budget_is_used():
    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                         content=f"Turn {i}: the caravan reached well {i} and traded salt for figs. " * 3)
             for i in range(40)]
    msgs.append(ChatMessage(role="user", content="Where next?"))
    pv = _pv(msgs, limit=1500, reserve=100)
    assert pv.error is None
    hist = [b for b in pv.blocks if b.source.startswith("message:") and b.source not in ("message:0",)
            and b.kind != "summary"]
    gone = [b for b in hist if b.status != "kept"]
    kept = [b for b in hist if b.status == "kept"]
    # folded/dropped history is a prefix: every removed message is older than every kept one
    assert max(b.message_index for b in gone) < min(b.message_index for b in kept)
    assert kept[-2].source == f"message:{len(msgs) - 2}"  # newest message verbatim
    # the freed room is refilled: less than one kept message (~45 tokens) stays unused
    assert pv.headroom < 60, pv.headroom
    assert _summary(pv).tokens <= 400


def test_a_message_is_summarized_only_if_a_line_of_it_is_in_the_summary():
    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                         content=f"Note {i} about the salt road. " + FILLER * 4) for i in range(30)]
    msgs.append(ChatMessage(role="user", content="Go on."))
    pv = _pv(msgs, limit=1200, reserve=100, summary_cap_tokens=80)
    summary = _summary(pv)
    assert summary.tokens <= 80
    lines = summary.text.splitlines()[1:]
    assert lines and all(re.match(r"^- #\d+ (user|assistant): ", ln) for ln in lines)
    named = {int(re.match(r"^- #(\d+)", ln).group(1)) for ln in lines}
    truncated = {b.message_index for b in pv.blocks if b.status == "truncated"}
    assert truncated == named
    folded_but_unnamed = [b for b in pv.blocks if b.status == "excluded" and b.message_index not in named]
    assert folded_but_unnamed and all(b.reason == "HISTORY_OLDEST_FIRST" for b in folded_but_unnamed)


def test_sentences_with_paths_errors_and_traces_are_preferred():
    b = Builder()
    b.sys(5)
    for i in range(6):
        b.msg(50, "user" if i % 2 == 0 else "assistant")
    blocks = list(b.blocks)
    texts = [FILLER * 2,
             "I opened /home/u/proj-fix-123/apps/api/mapper.py and ran the tests. " + FILLER,
             FILLER * 2,
             "It failed with KeyError: 'id' in map_row. " + FILLER,
             FILLER, FILLER]
    for k, t in enumerate(texts):
        blk = blocks[k + 1]
        blocks[k + 1] = blk.model_copy(update={"message": ChatMessage(role=blk.role, content=t), "message_index": k})
    cur = b.msg(5, current=True)
    blocks.append(b.blocks[-1])
    sizes = dict(b.sizes)

    def count(blk):
        return sizes.get(blk.id) or max(1, len(blk.text()) // 4)

    res = summarize_strategy(blocks, count, 5 + 50 + 50 + 5 + 60, {"summary_cap_tokens": 60})
    [summary] = res.added
    assert "/home/u/proj-fix-123/apps/api/mapper.py" in summary.text()
    assert cur in res.kept


def test_summary_is_deterministic_and_splits_with_pysbd():
    assert split_sentences("Dr. Smith went home. He slept.") == ["Dr. Smith went home.", "He slept."]
    s = ["the salt road is long", "figs and salt on the road", "Hi!"]
    assert score_sentences(s) == score_sentences(s)
    assert score_sentences(s)[2] < score_sentences(s)[1]
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"Line {i}. " + FILLER * 3)
            for i in range(20)]
    assert _pv(msgs, 800).model_dump() == _pv(msgs, 800).model_dump()


def test_a_tool_group_is_folded_whole_or_not_at_all():
    b = Builder()
    b.sys(5)
    c = b.call(40, "x1")
    r = b.result(200, "x1")
    m = b.msg(30, "assistant")
    cur = b.msg(5, current=True)
    res = summarize_strategy(b.blocks, lambda blk: b.sizes.get(blk.id) or max(1, len(blk.text()) // 4), 150, {})
    gone = {t.block_id for t in res.truncated} | {e.block_id for e in res.excluded}
    assert {c, r} <= gone and m in res.kept and cur in res.kept
    assert res.total_tokens <= 150
