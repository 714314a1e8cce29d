"""Compaction from the window: the progress row, the summary in the chat view, undo and removal.

Against the real HTTP server on 127.0.0.1 (tests/fake_provider.py). Set
``LOOMSCOPE_SCREENSHOT_DIR`` to save what the window showed.
"""

from __future__ import annotations

import os

import pytest

from gui.widgets.provider_dialog import ProviderSettings, save_provider_settings
from tests.fake_provider import DEFAULT_SUMMARY, FakeProviderServer


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch) -> None:
    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")


def _compact(window, qtbot, **opts) -> None:
    doc = window.ctx.document
    settings = doc.request.settings.model_copy(update={
        "context_limit": 1000, "reply_reserve": 100, "strategy": "compact",
        "strategy_options": {"retry_delay_s": 0.05, **opts}})
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        doc.set_settings(settings)
    assert window.preview.strategy_info["fire"]


def _shot(window, name: str) -> None:
    folder = os.environ.get("LOOMSCOPE_SCREENSHOT_DIR")
    if folder:
        window.grab().save(os.path.join(folder, name))


def test_compaction_row_summary_band_undo_and_remove(qtbot, window, library) -> None:
    store, chat_id, _ = library
    _compact(window, qtbot)
    seen = []
    window.generation.progress.connect(seen.append)
    with FakeProviderServer("answer", reply_text="The lanterns are counted.") as server:
        save_provider_settings(window.ctx.settings, ProviderSettings(server.base_url, "gpt-4o", 10.0, False))
        with qtbot.waitSignal(window.preview_applied, timeout=30000):
            with qtbot.waitSignal(window.generation.finished, timeout=30000) as blocker:
                assert window.generate()
    audit = blocker.args[0].audit
    assert audit.status == "completed" and audit.compaction["status"] in ("compacted", "compacted_then_truncated")
    assert [r["kind"] for r in server.requests] == ["summary", "chat"]
    comp = [e for e in seen if e.step == "compaction"]
    assert comp[0].state == "running" and comp[0].label == "Compacting context…"
    assert comp[-1].state == "done" and comp[-1].label == "Compacting context… done"
    # the finished compaction row stays in the chat until the next generation
    rows = window.chat_view.model.progress_events()
    assert [e.label for e in rows] == ["Compacting context… done"]
    # the summary is stored and shown in the chat view on the message it is sent before
    summary = store.compaction.get(chat_id).summary
    assert summary is not None and summary.text.startswith(DEFAULT_SUMMARY)
    model = window.chat_view.model
    row = model.summary_row()
    assert row == summary.last + 1
    assert DEFAULT_SUMMARY in model.summary_block().text
    assert model.fate(summary.first).status != "kept"
    window.select_tab("chat")
    window.chat_view.scroll_to_message(row - 1)
    qtbot.wait(100)
    _shot(window, "compaction-done.png")
    # undoable: Ctrl+Z removes it, Ctrl+Y brings it back
    stack = window.ctx.undo_stack
    assert stack.undoText() == f"Compact messages #{summary.first}–#{summary.last}"
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        stack.undo()
    assert store.compaction.get(chat_id).summary is None and model.summary_row() is None
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        stack.redo()
    assert store.compaction.get(chat_id).summary.id == summary.id and model.summary_row() == row
    # removable from the chat view (context menu action), and that is undoable too
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        window.chat_view.summary_remove_requested.emit()
    assert store.compaction.get(chat_id).summary is None
    assert not any(b.kind == "summary" for b in window.preview.blocks)
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        stack.undo()
    assert store.compaction.get(chat_id).summary.id == summary.id


def test_fallback_row_and_the_window_stays_usable_while_compacting(qtbot, window, library) -> None:
    store, chat_id, _ = library
    _compact(window, qtbot)
    with FakeProviderServer("answer", reply_text="Fine.", stall_s=20) as server:
        server.script.extend(["stall", "429"])  # the summary request hangs, then fails; the retry fails too
        save_provider_settings(window.ctx.settings, ProviderSettings(server.base_url, "gpt-4o", 10.0, False))
        with qtbot.waitSignal(window.generation.finished, timeout=40000) as blocker:
            assert window.generate()
            qtbot.waitUntil(lambda: any(e.step == "compaction" and e.state == "running"
                                        for e in window.chat_view.model.progress_events()), timeout=10000)
            # the window answers while the summary request hangs
            window.chat_view.composer.setPlainText("still typing")
            assert window.select_tab("blocks") and window.select_tab("chat")
            window.chat_view.list.scrollToBottom()
            assert window.chat_view.composer.toPlainText() == "still typing"
            _shot(window, "compaction-running.png")
            server.release.set()  # the stalled request is dropped: a network error
    audit = blocker.args[0].audit
    assert audit.status == "completed" and audit.compaction["status"] == "fell_back"
    assert [r["kind"] for r in server.requests] == ["summary", "summary", "chat"]
    rows = window.chat_view.model.progress_events()
    assert [e.label for e in rows] == ["Compacting context… fell back to truncation"]
    assert store.compaction.get(chat_id).summary is None and window.chat_view.model.summary_row() is None
    _shot(window, "compaction-fell-back.png")


def test_after_three_failures_the_chat_view_offers_a_retry(qtbot, window, library) -> None:
    from engine.compaction.state import CompactionState

    store, chat_id, _ = library
    store.compaction.put(chat_id, CompactionState(failures=3))
    window.ctx.document.reload()
    doc = window.ctx.document
    settings = doc.request.settings.model_copy(update={"context_limit": 1000, "reply_reserve": 100,
                                                       "strategy": "compact"})
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        doc.set_settings(settings)
    assert window.preview.strategy_info["reason"] == "disabled"
    assert any("auto-compaction stopped" in w for w in window.preview.warnings)
    assert window.chat_view.model.compaction_stopped
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        window.chat_view.compaction_reset_requested.emit()
    assert store.compaction.get(chat_id).failures == 0
    assert window.preview.strategy_info["fire"] and not window.chat_view.model.compaction_stopped
