"""Concurrent previews through the engine API (issue 25 item 5).

Eight threads each run 200 previews over a mix of chats (tool groups, pins, exclusions, lorebooks, toggled
copies), and every result must equal the single-threaded one for the same request. Before the fix the shared
tool-group caches of :mod:`engine.incremental` were read without their lock and a reordering read on one thread
corrupted them for another (``KeyError``).

``LOOMSCOPE_STRESS=1`` runs a bigger round (16 threads × 1,000 previews).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import engine
from engine.cache import clear_caches
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
from engine.shifting.groups import remembered_groups

BIG = os.environ.get("LOOMSCOPE_STRESS") == "1"
THREADS = 16 if BIG else 8
PER_THREAD = 1000 if BIG else 200
#: Seconds the direct hammer test runs. The race is a few bytecodes wide: before the fix a 1.5 s run of 8 threads
#: failed about every second time, so 8 s fail with a probability of about 99 %.
HAMMER_S = 30.0 if BIG else 8.0


def _chat(seed: int, n: int) -> list[ChatMessage]:
    rnd = random.Random(seed)
    msgs = [ChatMessage(role="system", content="You narrate the voyage.")]
    for t in range(n):
        kind = rnd.choice(["msg", "msg", "call"])
        meta = MessageMeta(pinned=rnd.random() < 0.1, manualExcluded=rnd.random() < 0.1)
        if kind == "call":
            cid = f"c{seed}_{t}"
            msgs.append(ChatMessage(role="assistant", meta=meta, tool_calls=[
                ToolCall(id=cid, function=ToolFunction(name="look", arguments='{"q": 1}'))]))
            msgs.append(ChatMessage(role="tool", tool_call_id=cid, content="the storm grows " * rnd.randint(1, 9)))
        else:
            msgs.append(ChatMessage(role=rnd.choice(["user", "assistant"]), meta=meta,
                                    content=" ".join(rnd.choices(["harbor", "storm", "lantern", "sword", "river"],
                                                                 k=rnd.randint(3, 40)))))
    msgs.append(ChatMessage(role="user", content="What now?"))
    return msgs


def _toggled(msgs: list[ChatMessage], i: int) -> list[ChatMessage]:
    out = list(msgs)
    m = out[i]
    out[i] = m.model_copy(update={"meta": m.meta.model_copy(update={"pinned": not m.meta.pinned})})
    return out


def _requests() -> list[PreviewRequest]:
    book = Lorebook(name="World", entries=[
        LorebookEntry(uid=k, keys=[w], content=f"Lore of the {w}. " * 5)
        for k, w in enumerate(["storm", "harbor", "lantern"])])
    reqs = []
    # more block lists than the tool-group caches hold (16 lists, 8 lengths): they evict while read
    for seed, n in enumerate((12, 40, 40, 90, 25, 7, 15, 33, 51, 64, 18, 27)):
        base = _chat(seed, n)
        for variant in (base, _toggled(base, 3), _toggled(_toggled(base, 3), 5)):
            for limit in (300, 1200):
                reqs.append(PreviewRequest(
                    chat=Chat(messages=variant, user_name="Ann", character_name="Mira"), lorebooks=[book],
                    settings=ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=50,
                                             strategy="manual" if seed % 2 else "truncate")))
    return reqs


def test_eight_threads_previewing_at_once_equal_one_thread() -> None:
    reqs = _requests()
    # switch threads often (the default 5 ms lets one preview run almost alone)
    old = sys.getswitchinterval()
    clear_caches()
    expected = [engine.preview(r).model_dump_json() for r in reqs]
    clear_caches()
    errors: list[BaseException] = []
    mismatches = 0
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def worker(k: int) -> int:
        nonlocal mismatches
        rnd = random.Random(k)
        start.wait()
        done = 0
        for _ in range(PER_THREAD):
            i = rnd.randrange(len(reqs))
            try:
                got = engine.preview(reqs[i]).model_dump_json()
            except BaseException as exc:  # counted and shown below
                with lock:
                    errors.append(exc)
                continue
            if got != expected[i]:
                with lock:
                    mismatches += 1
            done += 1
        return done

    sys.setswitchinterval(1e-5)
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            done = sum(pool.map(worker, range(THREADS)))
    finally:
        sys.setswitchinterval(old)
    assert not errors, f"{len(errors)} errors, first: {errors[0]!r}"
    assert mismatches == 0
    assert done == THREADS * PER_THREAD


def test_remembered_groups_read_from_many_threads_at_once() -> None:
    """The cache itself, hammered: lists of several lengths, more than it holds, read and evicted at once."""

    clear_caches()  # a same-length list an earlier preview left would be reused (its shape is all this reads)
    lists = [[object() for _ in range(n % 12 + 1)] for n in range(48)]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    calls = [0] * 8

    def worker(k: int) -> None:
        rnd = random.Random(k)
        start.wait()
        deadline = time.monotonic() + HAMMER_S
        while time.monotonic() < deadline:
            for _ in range(1_000):
                blocks = lists[rnd.randrange(len(lists))]
                try:
                    got = remembered_groups(blocks, lambda b: 0, len)
                except BaseException as exc:  # counted below
                    errors.append(exc)
                    return
                assert got == len(blocks)
            calls[k] += 1_000

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(worker, range(8)))
    finally:
        sys.setswitchinterval(old)
        clear_caches()  # the cache holds lists of bare objects: a later preview of the same length must not see them
    assert not errors, f"{len(errors)} of 8 threads failed after {sum(calls):,} calls, first: {errors[0]!r}"
    assert sum(calls) > 0
