"""The app's one garbage-collector policy (issue 29 item 5): ``gui.gc_policy``.

Hold the collector while a chat loads, freeze once its first preview is applied, then keep
automatic collection off and tidy (collect the young generations, freeze) after each later
preview, on the main thread; nothing leaks over 500 pin / exclude toggles through the real
window and document.
"""

from __future__ import annotations

import gc
import threading
import tracemalloc
import weakref
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt

from engine.schema import Chat, ChatMessage, ContextSettings
from gui.app import build_context
from gui.gc_policy import COLLECT_EVERY_HOLDS, CollectorPolicy
from gui.main_window import MainWindow
from gui.models.blocks_model import BlockColumn

#: Messages of the generated chats.
MESSAGES = 60
#: Toggles of the leak test, and what they may leave behind at most. A preview of the test chat
#: is ~60 blocks of several objects each: one preview (or a toggle's undo command with its
#: messages) kept per toggle would add tens of thousands of objects and megabytes over the run.
TOGGLES = 500
MAX_OBJECT_GROWTH = 1_500  # objects (3 per toggle)
MAX_MEMORY_GROWTH = 1_000_000  # bytes (2 KB per toggle)
#: Chat switches of the heap test (after a warm-up), and what they may leave behind at most: one
#: of the test's chats with its preview is ~8,000 objects, so one chat kept per switch (or
#: cycles never collected) would exceed it within a cycle.
SWITCH_WARM_UP = 24  # measured: the caches are full after ~20 loads
SWITCHES = 3 * COLLECT_EVERY_HOLDS
MAX_SWITCH_OBJECT_GROWTH = 500  # objects, peak of the last 8 switches over the first 8's
MAX_SWITCH_MEMORY_GROWTH = 200_000  # bytes, likewise
MAX_SWITCH_SAWTOOTH = 4_000  # objects between two due collections (measured ~1,400: 178 cycles per switch)


def _chat(n: int, seed: str = "") -> Chat:
    words = ["lantern", "harbor", "courier", "parcel", "quay", "storm", "archive", "bell"]
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                        content=f"{seed}Message {i}: " + " ".join(words[(i + k) % len(words)] for k in range(12 + i % 9)))
            for i in range(n)]
    return Chat(title=f"Generated {n}", messages=msgs, user_name="Wren", character_name="Marisol")


@pytest.fixture
def app_on_chats(qtbot, tmp_path: Path):
    """A real window on a library with two generated chats; yields ``(window, ctx, chat_ids)``."""
    from engine.storage import open_store

    store = open_store(f"sqlite:///{tmp_path / 'library.sqlite3'}", seed=False)
    ids = [store.chats.add(_chat(MESSAGES, seed), title=f"chat {seed}", settings=ContextSettings(model="gpt-4o"))
           for seed in ("a", "b")]
    ctx = build_context(store, settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    win = MainWindow(ctx)
    qtbot.addWidget(win)
    win.resize(1280, 800)
    yield win, ctx, ids
    win.generation.wait(5000)
    ctx.preview.shutdown()
    assert ctx.gc_policy is not None
    ctx.gc_policy.release()
    store.close()


def _open(qtbot, win: MainWindow, chat_id: str, policy: CollectorPolicy) -> None:
    settled = policy.settles
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        win.open_chat(chat_id)
    qtbot.waitUntil(lambda: policy.settles > settled, timeout=5000)


def _toggle(qtbot, win: MainWindow, message: int, column: BlockColumn) -> None:
    model = win.blocks_panel.model
    row = model.row_of_message(message)
    assert row is not None
    index = model.index(row, column)
    checked = model.data(index, Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        assert model.setData(index, Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked,
                             Qt.ItemDataRole.CheckStateRole)


def test_holds_the_collector_while_a_chat_loads_and_freezes_without_collecting(qtbot, app_on_chats) -> None:
    win, ctx, (first, second) = app_on_chats
    policy = ctx.gc_policy
    assert isinstance(policy, CollectorPolicy)
    gc.unfreeze()
    during: list[bool] = []
    ctx.document.chat_loaded.connect(lambda _id: during.append(gc.isenabled()))
    _open(qtbot, win, first, policy)
    assert during and not any(during)  # paused from the load's start to its first preview
    assert policy.settles == 1 and policy.frozen and policy.quiet and not gc.isenabled() and not policy.held
    assert gc.get_freeze_count() > 10_000  # the chat, its preview, the views (and the app's modules)
    tidies = policy.tidies
    for message in (MESSAGES - 10, MESSAGES - 9):  # toggles settle nothing: each preview is tidied
        _toggle(qtbot, win, message, BlockColumn.PIN)
    qtbot.waitUntil(lambda: policy.tidies >= tidies + 2, timeout=5000)
    assert policy.settles == 1 and not gc.isenabled()
    collected = policy.collections
    _open(qtbot, win, second, policy)
    assert policy.settles == 2 and policy.frozen and policy.quiet and not gc.isenabled()
    assert policy.collections == collected  # no collection at this load: not due yet
    win.open_chat(None)  # closing the chat ends the quiet: CPython collects as usual
    assert not policy.quiet and gc.isenabled()


class _Cycle:
    """A node of a reference cycle (freed only by a collection)."""

    def __init__(self) -> None:
        self.me = self


def test_tidy_frees_young_cycles_and_freezes_the_rest(qtbot, app_on_chats) -> None:
    """After each preview (and on its timer) the young generations are collected: cyclic garbage made
    while the chat is open is freed; what survives is frozen, so no later collection walks it."""
    win, ctx, (first, _second) = app_on_chats
    policy = ctx.gc_policy
    assert policy is not None
    _open(qtbot, win, first, policy)
    garbage = weakref.ref(_Cycle())
    kept = [object() for _ in range(50)]
    frozen = gc.get_freeze_count()
    tidies = policy.tidies
    _toggle(qtbot, win, MESSAGES - 10, BlockColumn.EXCLUDE)
    qtbot.waitUntil(lambda: policy.tidies > tidies, timeout=5000)
    assert garbage() is None and kept
    assert gc.get_freeze_count() > frozen and gc.get_count()[0] < 700
    assert policy.last_tidy_s > 0 and not gc.isenabled()
    policy._timer.setInterval(20)  # the timed tidy: no preview needed
    policy._timer.start()
    tidies = policy.tidies
    qtbot.waitUntil(lambda: policy.tidies > tidies, timeout=5000)


def test_a_failed_or_cancelled_load_turns_the_collector_back_on(qtbot, app_on_chats) -> None:
    win, ctx, (first, _second) = app_on_chats
    policy = ctx.gc_policy
    assert policy is not None
    win.open_chat(first)
    assert policy.held and not gc.isenabled()
    win.open_chat(None)  # closed before it arrived
    assert not policy.held and gc.isenabled()
    assert win.chat_loader is not None
    with qtbot.waitSignal(win.chat_loader.failed, timeout=20000):
        win.open_chat("no-such-chat")
    assert not policy.held and gc.isenabled()


def test_switching_chats_keeps_the_heap_bounded(qtbot, app_on_chats) -> None:
    """Chats A, B, A, B ...: what a switch leaves behind (the replaced chat's cycles frozen with
    the next one until a due collection, anything kept per load) must not pile up: after the
    warm-up, the tracked objects (frozen included) and the traced memory saw-tooth between the
    policy's due collections, and the last cycle's peak is no higher than the first one's."""
    win, ctx, (first, second) = app_on_chats
    policy = ctx.gc_policy
    assert policy is not None
    tracemalloc.start()  # before the warm-up: the bounded caches are then full of traced entries
    try:
        for k in range(SWITCH_WARM_UP):  # the engine's and the views' bounded caches fill up
            _open(qtbot, win, (first, second)[k % 2], policy)
        collected = policy.collections
        seen: list[tuple[int, int, int]] = []
        for k in range(SWITCHES):
            _open(qtbot, win, (first, second)[k % 2], policy)
            assert policy.quiet and not gc.isenabled() and not policy.held
            seen.append((sum(gc.get_count()), len(gc.get_objects()) + gc.get_freeze_count(),
                         tracemalloc.get_traced_memory()[0]))
    finally:
        tracemalloc.stop()
    assert policy.collections - collected == SWITCHES // COLLECT_EVERY_HOLDS
    cycle = COLLECT_EVERY_HOLDS
    first_peak = (max(c[1] for c in seen[:cycle]), max(c[2] for c in seen[:cycle]))
    last_peak = (max(c[1] for c in seen[-cycle:]), max(c[2] for c in seen[-cycle:]))
    assert last_peak[0] - first_peak[0] < MAX_SWITCH_OBJECT_GROWTH, f"objects pile up over {SWITCHES} switches: {seen}"
    assert last_peak[1] - first_peak[1] < MAX_SWITCH_MEMORY_GROWTH, f"memory piles up over {SWITCHES} switches: {seen}"
    assert max(c[1] for c in seen) - min(c[1] for c in seen) < MAX_SWITCH_SAWTOOTH, f"{seen}"


def test_disabled_it_leaves_the_collector_alone(qtbot, app_on_chats) -> None:
    win, ctx, (first, _second) = app_on_chats
    policy = ctx.gc_policy
    assert policy is not None
    policy.enabled = False
    gc.unfreeze()
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        win.open_chat(first)
    qtbot.wait(50)
    assert policy.settles == 0 and gc.get_freeze_count() == 0 and gc.isenabled()


def test_only_the_main_thread_may_settle(qtbot, app_on_chats) -> None:
    _win, ctx, _ids = app_on_chats
    policy = ctx.gc_policy
    assert policy is not None
    errors: list[BaseException] = []

    def worker() -> None:
        for step in (policy.settle, policy.tidy):
            try:
                step()
            except RuntimeError as exc:
                errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(errors) == 2 and all("main thread" in str(e) for e in errors)
    assert policy.settles == 0 and gc.get_freeze_count() == 0


def _live_objects() -> int:
    gc.collect()
    return len(gc.get_objects()) + gc.get_freeze_count()


def test_nothing_leaks_over_500_toggles(qtbot, app_on_chats) -> None:
    """500 pin / exclude clicks through the real window (the blocks table's check boxes, the undo
    stack, the document, the library, the preview worker and the views): the tracked objects and
    the traced memory come back to where they were (the undo history, which keeps every click on
    purpose, is cleared at both ends)."""
    win, ctx, (first, _second) = app_on_chats
    policy = ctx.gc_policy
    assert policy is not None
    _open(qtbot, win, first, policy)
    messages = list(range(MESSAGES - 40, MESSAGES))
    columns = (BlockColumn.PIN, BlockColumn.EXCLUDE)

    def click(k: int) -> None:
        _toggle(qtbot, win, messages[(k // 4) % len(messages)], columns[(k // 2) % 2])

    for k in range(40):  # warm-up: caches, lazily built widgets, the first exclusion's strategy switch
        click(k)
    win.commands.forget_history()
    tracemalloc.start()
    try:
        before_objects = _live_objects()
        before_memory = tracemalloc.get_traced_memory()[0]
        for k in range(TOGGLES):
            click(k)  # an even count per message and column: every flag ends as it began
        win.commands.forget_history()
        grown_objects = _live_objects() - before_objects
        grown_memory = tracemalloc.get_traced_memory()[0] - before_memory
    finally:
        tracemalloc.stop()
    assert grown_objects < MAX_OBJECT_GROWTH, f"{grown_objects} more objects after {TOGGLES} toggles"
    assert grown_memory < MAX_MEMORY_GROWTH, f"{grown_memory} more bytes after {TOGGLES} toggles"
