"""Shifting invariants for every built-in strategy and a deliberately misbehaving plugin.

Block level: ``truncate``, ``manual``, ``summarize``, ``vector-recall`` and ``compact`` (with a
fake summarizer: the strategy's plan is summarized by a stand-in and the strategy run again
with the stored summary, as a generation does) each keep SPEC §3's guarantees. Pipeline level:
a plugin strategy that misbehaves in every way is rejected by the host checks and the final
prompt still fits. ``LOOMSCOPE_LONG_PROPERTIES=1`` runs 10× more examples.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.compaction.state import CompactionState, make_summary
from engine.pipeline import default_registries, preview
from engine.schema import (
    Block,
    BlockKind,
    Chat,
    ChatMessage,
    ContextSettings,
    PreviewRequest,
    ShiftResult,
    ToolCall,
    ToolFunction,
)
from engine.schema.blocks import ExcludedBlock

from .test_properties import _protected_ids, chats

N = 60 * (10 if os.environ.get("LOOMSCOPE_LONG_PROPERTIES") else 1)
SETTINGS = settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BUILTINS = ("truncate", "manual", "summarize", "vector-recall", "compact")
REGISTRY = default_registries().strategies


def _indexed(blocks: list[Block]) -> list[Block]:
    """Message blocks get message indices in chat order (as assembly gives them)."""
    out, k = [], 0
    for b in blocks:
        if b.history or b.reason == "CURRENT_INPUT":
            b = b.model_copy(update={"message_index": k})
            k += 1
        out.append(b)
    return out


def fake_summarizer(messages: list[ChatMessage]) -> str:
    """Stands in for the LLM: one short line per message."""
    return "\n".join(f"- {m.role}: {m.text()[:10]}" for m in messages)


def run(name: str, blocks: list[Block], count, budget: int, limit: int) -> ShiftResult:
    fn = REGISTRY.get(name).fn
    if name != "compact":
        return fn(blocks, count, budget, {})
    host = {"context_limit": limit, "prompt_overhead": 0, "compaction": None}
    opts = {"_host": host, "keep_recent": 2, "summary_cap_tokens": 30}
    first = fn(blocks, count, budget, opts)
    if not first.info.get("fire"):
        return first
    by_id = {b.id: b for b in blocks}
    covered = {by_id[bid].message_index: by_id[bid].message for bid in first.info["candidate_block_ids"]}
    summary = make_summary(fake_summarizer(list(covered.values())), covered)
    host["compaction"] = CompactionState(summary=summary).dump()
    return fn(blocks, count, budget, opts)


def _counter(sizes):
    return lambda b: sizes[b.id] if b.id in sizes else max(1, len(b.text()) // 4)


@SETTINGS
@pytest.mark.parametrize("name", BUILTINS)
@given(data=chats(), reserve=st.integers(0, 200))
def test_every_builtin_keeps_the_shifting_invariants(name, data, reserve):
    blocks, sizes, truth, budget = data
    blocks = _indexed(blocks)
    count = _counter(sizes)
    res = run(name, blocks, count, budget, budget + reserve)
    ids = [b.id for b in blocks]
    out = res.kept + [e.block_id for e in res.excluded] + [t.block_id for t in res.truncated]
    assert sorted(out) == sorted(ids) and len(out) == len(set(out)), "partition"
    assert res.kept == [i for i in ids if i in set(res.kept)], "order"
    removed = {e.block_id for e in res.excluded} | {t.block_id for t in res.truncated}
    # every built-in but truncate honours exclusions, which win over pins (issue 9)
    protected = _protected_ids(blocks, truth, manual=name != "truncate")
    assert not (protected & removed), "protected removed"
    kept = set(res.kept)
    for g in set(truth.values()):
        assert len({bid in kept for bid, gg in truth.items() if gg == g}) == 1, "tool group split"
    protected_total = sum(sizes[b] for b in protected)
    total = sum(sizes[k] for k in res.kept) + sum(count(a) for a in res.added)
    if protected_total > budget:
        assert res.error == "TOKEN_BUDGET_EXCEEDED"
    else:
        assert res.error is None and total <= budget, (total, budget)
    for t in res.truncated:
        assert t.summary_id in {a.id for a in res.added}


# ---------------------------------------------------------------- misbehaving plugin, pipeline level

def misbehaving(blocks, count, budget, options):
    """Every sin at once, chosen by the number of blocks: removes protected blocks, splits tool
    groups, returns blocks over budget, adds a huge block, raises, or returns garbage."""
    mode = len(blocks) % 6
    ids = [b.id for b in blocks]
    if mode == 0:
        return ShiftResult(kept=[], excluded=[ExcludedBlock(block_id=i, reason="X", tokens=1) for i in ids])
    if mode == 1:
        return ShiftResult(kept=ids)  # everything, whatever the budget
    if mode == 2:
        huge = Block(id="s-evil", kind=BlockKind.SUMMARY, source="summary:evil",
                     message=ChatMessage(role="system", content="spam " * 5000))
        return ShiftResult(kept=ids, added=[huge], added_before={"s-evil": None})
    if mode == 3:
        raise RuntimeError("plugin bug")
    if mode == 4:
        return "not a result"  # type: ignore[return-value]
    calls = [b.id for b in blocks if b.kind == BlockKind.TOOL_CALL]
    return ShiftResult(kept=[i for i in ids if i not in calls],
                       excluded=[ExcludedBlock(block_id=i, reason="X", tokens=1) for i in calls])


@st.composite
def requests(draw):
    msgs = [ChatMessage(role="system", content="You are terse.")]
    for t in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "tool"]))
        words = " ".join(draw(st.lists(st.sampled_from(["salt", "road", "lamp", "fog", "x" * 30]), max_size=40)))
        if kind == "tool":
            msgs.append(ChatMessage(role="assistant", tool_calls=[
                ToolCall(id=f"c{t}", function=ToolFunction(name="look", arguments="{}"))]))
            msgs.append(ChatMessage(role="tool", tool_call_id=f"c{t}", content=words or "ok"))
        else:
            m = ChatMessage(role=kind, content=words or "hm")
            if draw(st.integers(0, 8)) == 0:
                m.meta.pinned = True
            msgs.append(m)
    if draw(st.booleans()):
        msgs.append(ChatMessage(role="user", content="now what"))
    limit = draw(st.integers(60, 1500))
    return msgs, limit


@settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize("name", (*BUILTINS, "misbehaving"))
@given(data=requests())
def test_host_checks_hold_for_builtins_and_a_misbehaving_plugin(name, data):
    msgs, limit = data
    regs = default_registries()
    regs.strategies.register("misbehaving", misbehaving, "breaks every rule")
    req = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=limit, reply_reserve=20, strategy=name))
    pv = preview(req, registries=regs)
    if pv.error is not None:
        assert pv.error.code == "TOKEN_BUDGET_EXCEEDED"
        return
    assert pv.prompt_tokens <= pv.budget - pv.safety_margin
    for b in pv.blocks:
        if b.protected or b.pinned:
            assert b.status == "kept", b
    groups: dict[str, set[str]] = {}
    for b in pv.blocks:
        if b.group:
            groups.setdefault(b.group, set()).add(b.status == "kept")
    assert all(len(v) == 1 for v in groups.values())
    if name == "misbehaving" and len(pv.blocks) % 6 in (0, 3, 4):  # removed protected / raised / garbage
        assert any("'misbehaving' rejected" in d for d in pv.diagnostics), pv.diagnostics
