"""``summarize``: where the summary goes when the chat has no current user input."""

from __future__ import annotations

from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.shifting import summarize_strategy

from .helpers import Builder


def test_without_current_input_the_summary_replaces_the_folded_history_in_place() -> None:
    b = Builder()
    b.sys(10)
    old = [b.msg(60, "user"), b.msg(60, "assistant")]
    newer = [b.msg(20, "user"), b.msg(20, "assistant")]  # the chat ends on the assistant: no input
    text = ChatMessage(role="user", content="The keeper logged a ship entering the bay at dawn.")
    b.blocks = [blk.model_copy(update={"message": text}) if blk.history else blk for blk in b.blocks]
    res = summarize_strategy(b.blocks, lambda blk: b.sizes.get(blk.id, 5), 150, {})  # 170 > 150
    # only the history truncation removes is folded: its 40 free tokens hold a summary of it, so
    # no kept message is folded to make more room (issue 31 item 7)
    assert {t.block_id for t in res.truncated} == {old[0]}
    [summary] = res.added
    assert res.added_before[summary.id] == old[1]  # in story order, before the newer history
    assert res.kept == [b.blocks[0].id, old[1], *newer]
    assert res.total_tokens == 10 + 60 + 40 + 5


def test_pipeline_puts_the_summary_before_newer_messages_when_the_chat_ends_on_the_assistant() -> None:
    from engine.pipeline import preview

    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                         content=f"Event {i} happened at the harbor. Then many details followed " + "x " * 40)
             for i in range(30)]
    assert msgs[-1].role == "assistant"
    settings = ContextSettings(model="gpt-4o", context_limit=1200, reply_reserve=100, strategy="summarize")
    pv = preview(PreviewRequest(chat=Chat(messages=msgs), settings=settings))
    assert pv.error is None and pv.prompt_tokens <= pv.budget
    order = [b.source for b in pv.blocks if b.status == "kept"]
    at = order.index("summary:auto")
    assert order[at - 1] == "message:0"  # the system prompt, then the summary of the oldest history
    assert order[-1] == f"message:{len(msgs) - 1}"  # the newest message stays last
    assert pv.messages[1]["content"].startswith("[Summary of")
