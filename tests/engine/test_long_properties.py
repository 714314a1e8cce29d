"""Long property runs (issue 29 item 7): large generated chats across the warm path's thresholds.

The everyday property tests draw chats of up to ~30 messages, so they never reach the limits the
warm path switches on: :data:`engine.incremental.WARM_MAX_CHANGED` (64 changed messages: above it
the pipeline runs in full) and the tool-group reuse limit (256 changed blocks), nor the fit map's
exact scan depth (256 rows). This module draws chats of 257–700 messages and changes 1 to ~300 of
them at once, around those limits, and checks that every warm preview equals the reference path's
preview of the same request byte for byte (fresh registries: no cache of an earlier run).

It runs only with ``LOOMSCOPE_LONG_PROPERTIES=1`` (``.ci/run`` runs it after the normal tests, with
``tests/engine/test_incremental.py`` at 500 examples per strategy); ``LOOMSCOPE_LONG_EXAMPLES``
sets the examples per strategy (default 12).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.pipeline import default_registries, prepare, preview
from engine.schema import (
    Chat,
    ChatMessage,
    ContextSettings,
    Lorebook,
    LorebookEntry,
    MessageMeta,
    PreviewRequest,
    ToolCall,
    ToolFunction,
)

#: The reference: a cold run of the one pipeline on fresh registries (no remembered run to reuse).
reference_path = contextlib.nullcontext

pytestmark = pytest.mark.skipif(os.environ.get("LOOMSCOPE_LONG_PROPERTIES") != "1",
                                reason="long property runs: set LOOMSCOPE_LONG_PROPERTIES=1 (.ci/run does)")

EXAMPLES = int(os.environ.get("LOOMSCOPE_LONG_EXAMPLES", "12"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STRATEGIES = ("truncate", "manual", "summarize", "vector-recall", "compact")
WORDS = ("harbor", "storm", "lantern", "sword", "the", "quiet", "river", "castle", "{{char}}", "<USER>")
#: Messages changed at once: on both sides of 64 (warm or full) and of 256 (tool groups reused or not).
BATCH_SIZES = (1, 2, 63, 64, 65, 255, 256, 257, 300)


@st.composite
def large_requests(draw: st.DrawFn) -> PreviewRequest:
    """A chat of 257–700 messages (plain turns, tool exchanges, pins, exclusions, hidden ones) and a small window."""
    msgs: list[ChatMessage] = [ChatMessage(role="system", content="You narrate.")]
    pending: list[str] = []
    n = draw(st.integers(257, 700))
    rnd = draw(st.randoms(use_true_random=False))
    for t in range(n):
        meta = MessageMeta(pinned=rnd.random() < 0.05, manualExcluded=rnd.random() < 0.08, hidden=rnd.random() < 0.03)
        roll = rnd.random()
        if roll < 0.06:
            ids = [f"c{t}_{j}" for j in range(rnd.randint(1, 2))]
            msgs.append(ChatMessage(role="assistant", meta=meta, tool_calls=[
                ToolCall(id=i, function=ToolFunction(name="look", arguments='{"q": 1}')) for i in ids]))
            pending += ids
        elif roll < 0.12:
            cid = pending.pop(0) if pending and rnd.random() < 0.8 else f"lost{t}"
            msgs.append(ChatMessage(role="tool", tool_call_id=cid, meta=meta, content=" ".join(
                rnd.choices(WORDS, k=rnd.randint(1, 12)))))
        else:
            msgs.append(ChatMessage(role=rnd.choice(["user", "assistant"]), meta=meta,
                                    content=" ".join(rnd.choices(WORDS, k=rnd.randint(0, 40)))))
    msgs.append(ChatMessage(role="user", content="What now?"))
    books = []
    if draw(st.booleans()):
        books.append(Lorebook(name="World", entries=[
            LorebookEntry(uid=k, keys=[rnd.choice(WORDS[:8])], content=f"Lore {k}: " + "sea " * rnd.randint(1, 40),
                          constant=rnd.random() < 0.2, order=rnd.randint(0, 3), position=rnd.choice([0, 1, 4]),
                          depth=rnd.randint(0, 5))
            for k in range(rnd.randint(1, 4))]))
    # windows from a few rows to most of the chat: the fit map's scan passes 256 rows in the large ones
    limit = draw(st.sampled_from([300, 2_000, 6_000, 20_000]))
    return PreviewRequest(
        chat=Chat(messages=msgs, user_name="Ann", character_name="Mira"), lorebooks=books,
        settings=ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=draw(st.integers(0, 60))))


def _flip(what: str) -> Callable[[ChatMessage], ChatMessage]:
    """The change ``what`` (pin, exclude or edit) applied to one message."""
    def apply(m: ChatMessage) -> ChatMessage:
        if what == "pin":
            return m.model_copy(update={"meta": m.meta.model_copy(update={"pinned": not m.meta.pinned})})
        if what == "exclude":
            return m.model_copy(update={"meta": m.meta.model_copy(update={"manualExcluded": not m.meta.manualExcluded})})
        if isinstance(m.content, str) and not m.tool_calls:
            return m.model_copy(update={"content": m.content + " storm"})
        return m
    return apply


def _batch(request: PreviewRequest, what: str, positions: list[int]) -> PreviewRequest:
    """``request`` with ``what`` applied to the messages at ``positions`` at once."""
    msgs = list(request.chat.messages)
    change = _flip(what)
    for i in positions:
        msgs[i] = change(msgs[i])
    return request.model_copy(update={"chat": request.chat.model_copy(update={"messages": msgs})})


def _reference(request: PreviewRequest) -> Any:
    with reference_path():
        return prepare(request, registries=default_registries())


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(request=large_requests(), data=st.data())
def test_warm_previews_of_large_chats_equal_the_reference(strategy: str, request: PreviewRequest,
                                                          data: st.DataObject) -> None:
    """Batches of 1–300 changes to a 257–700 message chat: each warm preview equals the reference."""
    request = request.model_copy(update={"settings": request.settings.model_copy(update={"strategy": strategy})})
    regs = default_registries()
    assert preview(request, registries=regs).model_dump_json() == _reference(request).preview.model_dump_json()
    n = len(request.chat.messages)
    steps = data.draw(st.lists(st.tuples(st.sampled_from(["pin", "exclude", "exclude", "edit"]),
                                         st.sampled_from(BATCH_SIZES)), min_size=2, max_size=4))
    for what, size in steps:
        positions = sorted(data.draw(st.randoms(use_true_random=False)).sample(range(n), min(size, n)))
        request = _batch(request, what, positions)
        warm = prepare(request, registries=regs)
        ref = _reference(request)
        assert warm.preview.model_dump_json() == ref.preview.model_dump_json(), (what, size)
        assert warm.messages == ref.messages and warm.budget_ok == ref.budget_ok, (what, size)
