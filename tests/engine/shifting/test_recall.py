"""``vector-recall``: lorebook/memory blocks least relevant to the recent conversation go first."""

from __future__ import annotations

from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, PreviewRequest
from engine.schema.request import MemoryItem
from engine.shifting import vector_recall_strategy
from engine.shifting.recall import bm25_scores

from .helpers import Builder


def _request(strategy: str, limit: int) -> PreviewRequest:
    # An old message activates the lighthouse entry (scan depth 50); the newest one names the
    # tax entry's key, but the talk is all about the lighthouse. The tax entry has the higher
    # order (priority), so `truncate` would drop the lighthouse entry first.
    old = ChatMessage(role="user", content="Tell me about the lighthouse on the northern cape.")
    talk = [ChatMessage(role="user" if i % 2 else "assistant",
                        content=f"The lighthouse keeper Mara trims the lamp wick, round {i}; the beacon "
                                "must burn through the fog so the fishing boats find the harbor.")
            for i in range(8)]
    recent = ChatMessage(role="user", content="Mara, is the lighthouse beacon ready for the fog tonight? "
                                              "Never mind the taxes.")
    book = Lorebook(name="Coast", entries=[
        LorebookEntry(uid=1, keys=["lighthouse"], order=10, scan_depth=50,
                      content="The northern lighthouse: its keeper Mara lights the beacon lamp every dusk; "
                              "in fog she burns a second wick so the fishing boats find the harbor."),
        LorebookEntry(uid=2, keys=["taxes"], order=90,
                      content="Royal tariff schedule: grain duty two pennies per bushel, wool duty by the "
                              "bale, salt levied at the city gate by the exchequer's clerks."),
    ])
    settings = ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=50, strategy=strategy,
                               world_info={"scan_depth": 50})
    return PreviewRequest(chat=Chat(messages=[old, *talk, recent]), lorebooks=[book], settings=settings)


def _lore(pv):
    return {b.trace["uid"]: b for b in pv.blocks if b.kind == "lorebook"}


def test_an_old_relevant_lorebook_entry_outlives_a_recent_irrelevant_one():
    full = preview(_request("vector-recall", 8000))
    need = full.prompt_tokens + full.reply_reserve
    tax_tokens = _lore(full)[2].tokens
    limit = need - tax_tokens + 5  # room for everything but one lorebook entry
    pv = preview(_request("vector-recall", limit))
    lore = _lore(pv)
    assert lore[1].status == "kept"
    assert lore[2].status == "excluded" and lore[2].reason == "LOW_RELEVANCE"
    assert lore[1].trace["relevance"] > lore[2].trace["relevance"]
    assert lore[1].trace["relevance_rank"] == 1 and lore[1].trace["relevance_backend"] == "bm25"
    assert pv.strategy_info["relevance"][lore[2].id] == lore[2].trace["relevance"]
    assert all(b.status == "kept" for b in pv.blocks if b.kind == "message")  # no history lost
    # truncate drops history before lore (and lore by priority): the irrelevant entry survives
    tr = preview(_request("truncate", limit))
    assert _lore(tr)[2].status == "kept"
    assert any(b.status == "excluded" for b in tr.blocks if b.kind == "message")


def test_scores_are_recorded_even_when_everything_fits():
    pv = preview(_request("vector-recall", 8000))
    assert all("relevance" in b.trace for b in pv.blocks if b.kind == "lorebook")


def test_lore_and_memory_go_before_history_then_history_oldest_first():
    b = Builder()
    s = b.sys(5)
    lo = b.lore(20, priority=1)
    m1 = b.msg(30)
    m2 = b.msg(30, "assistant")
    cur = b.msg(5, current=True)
    blocks = list(b.blocks)
    blocks[1] = blocks[1].model_copy(update={"message": ChatMessage(role="system", content="dragons hoard gold")})
    res = vector_recall_strategy(blocks, b.count, 55, {})
    ex = {e.block_id: e.reason for e in res.excluded}
    assert ex == {lo: "LOW_RELEVANCE", m1: "HISTORY_OLDEST_FIRST"}
    assert res.kept == [s, m2, cur]


def test_memory_items_are_ranked_too_and_embedding_path_without_model_falls_back():
    req = _request("vector-recall", 8000)
    req = req.model_copy(update={"memory": [MemoryItem(id="m1", content="Mara fears the fog at the lighthouse."),
                                            MemoryItem(id="m2", content="The baker owes three coins.")]})
    req.settings.strategy_options["embedding_model_path"] = "/nonexistent/model"
    pv = preview(req)
    mem = {b.source: b for b in pv.blocks if b.kind == "memory"}
    assert mem["memory:m1"].trace["relevance"] > mem["memory:m2"].trace["relevance"]
    assert any("embedding model" in d and "BM25" in d for d in pv.diagnostics)


def test_bm25_scores_zero_without_shared_terms():
    assert bm25_scores(["alpha beta", "gamma"], "delta") == [0.0, 0.0]
    assert bm25_scores([], "x") == []
    a, g = bm25_scores(["alpha beta", "gamma delta"], "alpha")
    assert a > 0 and g == 0
