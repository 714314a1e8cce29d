"""The compaction progress row (issue 28 item 5): in the chat while the summary is asked for, then its outcome.

Against a real HTTP stand-in on 127.0.0.1 whose summary answer is slow (``summary_delay_s``).
Set ``LOOMSCOPE_SCREENSHOT_DIR`` to save what the window showed during and after.
"""

from __future__ import annotations

import os

import pytest

from engine.schema import ProgressEvent
from gui.widgets.compaction_row import compaction_row_text
from gui.widgets.provider_dialog import ProviderSettings, save_provider_settings
from tests.fake_provider import FakeProviderServer


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch) -> None:
    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")


def _compact(window, qtbot) -> None:
    window.show()  # the chat list lays its rows out only while shown
    qtbot.waitExposed(window)
    window.select_tab("chat")
    doc = window.ctx.document
    settings = doc.request.settings.model_copy(update={
        "context_limit": 1000, "reply_reserve": 100, "strategy": "compact",
        "strategy_options": {"retry_delay_s": 0.05}})
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        doc.set_settings(settings)
    assert window.preview.strategy_info["fire"]


def _shot(window, name: str) -> None:
    folder = os.environ.get("LOOMSCOPE_SCREENSHOT_DIR")
    if folder:
        window.grab().save(os.path.join(folder, name))


def _row(window) -> tuple[str, str, ProgressEvent]:
    [event] = [e for e in window.chat_view.model.progress_events() if e.step == "compaction"]
    head, detail = compaction_row_text(event)
    return head, detail, event


def test_row_while_a_slow_summary_is_requested_and_after(qtbot, window) -> None:
    _compact(window, qtbot)
    n = len(window.preview.strategy_info["candidates"])
    with FakeProviderServer("answer", reply_text="The lanterns are counted.", summary_delay_s=20) as server:
        save_provider_settings(window.ctx.settings, ProviderSettings(server.base_url, "gpt-4o", 30.0, False))
        with qtbot.waitSignal(window.generation.finished, timeout=40000) as blocker:
            assert window.generate()
            qtbot.waitUntil(lambda: any(e.step == "compaction" for e in window.chat_view.model.progress_events()),
                            timeout=10000)
            head, detail, event = _row(window)
            assert event.state == "running"
            assert head == f"Compacting context… summarizing {n} older messages"
            assert "at or above the trigger" in detail
            window.select_tab("chat")
            window.chat_view.list.scrollToBottom()
            qtbot.wait(300)  # the summary is still being asked for: the stand-in waits
            assert not server.release.is_set() and window.generation.running
            _shot(window, "issue28-compaction-running.png")
            server.release.set()  # the stand-in answers now
    audit = blocker.args[0].audit
    assert audit.compaction["status"] in ("compacted", "compacted_then_truncated")
    head, detail, event = _row(window)
    covered = audit.compaction["covered"]
    assert event.state == "done" and head == f"Compacted {len(covered)} messages"
    assert detail.startswith(f"compacted {len(covered)} messages (#{covered[0]}–")
    assert f"{audit.compaction['summary_tokens']:,}-token summary" in detail
    qtbot.wait(300)  # the batched layout of the new reply's row
    window.chat_view.list.scrollToBottom()
    qtbot.wait(200)
    _shot(window, "issue28-compaction-done.png")


def test_row_says_why_it_fell_back(qtbot, window) -> None:
    _compact(window, qtbot)
    with FakeProviderServer("500", reply_text="Fine.") as server:
        server.script.extend(["500", "500", "answer"])
        save_provider_settings(window.ctx.settings, ProviderSettings(server.base_url, "gpt-4o", 10.0, False))
        with qtbot.waitSignal(window.generation.finished, timeout=40000):
            assert window.generate()
    head, detail, event = _row(window)
    assert event.state == "failed"
    assert head == "Fell back to truncation: the summary request failed"
    assert detail == "PROVIDER_SERVER_ERROR · the oldest history was truncated instead; the chat is unchanged"
    assert event.text.startswith("fell back to truncation: the summary request failed (PROVIDER_SERVER_ERROR)")
    window.select_tab("chat")
    qtbot.wait(300)
    window.chat_view.list.scrollToBottom()
    qtbot.wait(200)
    _shot(window, "issue28-compaction-fell-back.png")


def test_words_of_each_state() -> None:
    run = ProgressEvent(step_id="compaction:g", step="compaction", label="Compacting context…", state="running",
                        detail={"messages": 12, "model": "gpt-4o", "prompt_tokens": 1200, "trigger": 736})
    assert compaction_row_text(run) == ("Compacting context… summarizing 12 older messages",
                                        "asking gpt-4o for a summary: the prompt is 1,200 tokens, at or above "
                                        "the trigger of 736")
    done = run.model_copy(update={"state": "done", "detail": {"messages": 1}, "text": "compacted 1 message …"})
    assert compaction_row_text(done) == ("Compacted 1 message", "compacted 1 message …")
