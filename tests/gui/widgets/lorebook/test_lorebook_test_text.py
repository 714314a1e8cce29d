"""gui.widgets.lorebook.test_text: the test box runs on a worker; only the latest result is shown."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QThreadPool

from engine.errors import LoomscopeError
from engine.lorebook import ActivationResult, TraceRecord
from engine.resolve import lorebook_budget, model_profile_and_limit
from engine.schema import ContextSettings
from gui.widgets.lorebook import TextTestRunner, run_text_test
from tests.gui.widgets.lorebook.lorebook_data import cell, make_request, make_tab, would_fire_uids


@pytest.fixture
def tab(qtbot):
    return make_tab(qtbot)


def test_test_text_box_marks_triggered_entries(tab, qtbot):
    tab.test_edit.setPlainText("The old wyrm sleeps under the castle.")
    with qtbot.waitSignal(tab.test_text_finished, timeout=5000):
        tab.run_test_text()
    assert would_fire_uids(tab) == {1, 3}  # wyrm → Dragon; constant Rules; Castle lacks its AND ALL secondary "ruined"
    assert cell(tab, 0, "test") == "✓ would fire"
    assert cell(tab, 1, "test") != "✓ would fire"
    assert "2 entries would fire" in tab.test_result.text()
    # issue 31: named by title, uid as a detail, and why in the Block inspector's words
    assert 'Dragon (World #1) — key "wyrm" in the test text' in tab.test_result.text()
    assert "Rules (World #3) — constant" in tab.test_result.text()
    marks = tab.test_edit.extraSelections()  # the matched word is highlighted
    assert len(marks) == 1 and marks[0].cursor.selectedText().lower() == "wyrm"

    tab.test_edit.setPlainText("A ruined castle.")
    with qtbot.waitSignal(tab.test_text_finished, timeout=5000):
        tab.run_test_text()
    assert would_fire_uids(tab) == {2, 3}


def test_test_text_debounced_while_typing(tab, qtbot):
    tab.test_edit.setPlainText("dragon")
    qtbot.waitUntil(lambda: 1 in would_fire_uids(tab), timeout=3000)


def test_empty_test_text_clears_the_marks_at_once(tab, qtbot):
    tab.test_edit.setPlainText("dragon")
    with qtbot.waitSignal(tab.test_text_finished, timeout=5000):
        tab.run_test_text()
    assert would_fire_uids(tab) == {1, 3}
    tab.test_edit.setPlainText("")
    assert tab.run_test_text() is None
    assert would_fire_uids(tab) == set() and tab.test_result.text() == ""
    assert cell(tab, 0, "test") == ""


def test_run_text_test_asks_the_engine():
    request = make_request()
    result = run_text_test(request, "a wyrm")
    assert isinstance(result, ActivationResult)
    assert all(isinstance(rec, TraceRecord) for rec in result.trace)
    assert {rec.uid for rec in result.trace if rec.activated} == {1, 3}
    # the budget the preview's World Info gets: a share of the prompt budget (context limit − reply reserve)
    resolved = model_profile_and_limit(request.settings)
    assert result.budget == lorebook_budget(request.settings, resolved.budget)
    # the chat's own message as test text fires what the preview fired, with the same tokens
    from engine.pipeline import preview

    same = run_text_test(request, request.chat.messages[-1].content)
    fired = {(r.book_index, r.uid, r.tokens) for r in same.trace if r.activated}
    assert fired == {(r.book_index, r.uid, r.tokens) for r in preview(request).lorebook_trace if r.activated}


def test_a_stale_tab_run_is_dropped_and_the_latest_shown(tab, qtbot):
    dropped: list[int] = []
    tab.test_runner.result_dropped.connect(dropped.append)
    tab.test_edit.blockSignals(True)  # no debounce timer: the two runs are the test's own
    tab.test_edit.setPlainText("dragon")
    first = tab.run_test_text()
    tab.test_edit.setPlainText("A ruined castle.")
    with qtbot.waitSignal(tab.test_text_finished, timeout=5000) as blocker:
        second = tab.run_test_text()
    assert blocker.args[0].generation == second
    qtbot.waitUntil(lambda: dropped == [first], timeout=3000)
    assert would_fire_uids(tab) == {2, 3}
    assert not tab.test_runner.is_busy()


def test_engine_error_is_shown_in_words(qtbot):
    from gui.widgets.lorebook import LorebookTab

    request = make_request().model_copy(update={"settings": ContextSettings(tokenizer="no-such-profile")})
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(request, None, ["book-1"])
    tab.test_edit.setPlainText("dragon")
    with qtbot.waitSignal(tab.test_text_finished, timeout=5000) as blocker:
        tab.run_test_text()
    assert blocker.args[0].error is not None and blocker.args[0].result is None
    assert tab.test_result.text().startswith("Test failed:")
    assert f"({blocker.args[0].error.code})" in tab.test_result.text()
    assert would_fire_uids(tab) == set()


class GatedCompute:
    """A fake worker function: each text waits until the test opens its gate."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.started: list[str] = []
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def gate(self, text: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(text, threading.Event())

    def __call__(self, request, text, tokenizers):
        with self.lock:
            self.started.append(text)
            self.threads.add(threading.get_ident())
        assert self.gate(text).wait(5)
        if text == "boom":
            raise LoomscopeError("boom")
        return ActivationResult(used_tokens=len(text))


def test_runner_delivers_on_the_main_thread_from_a_worker(qtbot):
    compute = GatedCompute()
    runner = TextTestRunner(compute)
    compute.gate("dragon").set()
    with qtbot.waitSignal(runner.finished, timeout=3000) as blocker:
        generation = runner.submit(make_request(), "dragon")
    outcome = blocker.args[0]
    assert outcome.generation == generation and outcome.text == "dragon"
    assert outcome.result.used_tokens == 6 and outcome.error is None
    assert threading.get_ident() not in compute.threads  # computed off the GUI thread
    runner.shutdown()


def test_runner_drops_a_stale_result(qtbot):
    compute = GatedCompute()
    pool = QThreadPool()
    pool.setMaxThreadCount(2)  # both run at once, so the old one can finish last
    runner = TextTestRunner(compute, pool=pool)
    finished: list = []
    runner.finished.connect(finished.append)
    g1 = runner.submit(make_request(), "old")
    qtbot.waitUntil(lambda: "old" in compute.started, timeout=3000)
    g2 = runner.submit(make_request(), "new")
    qtbot.waitUntil(lambda: "new" in compute.started, timeout=3000)
    compute.gate("new").set()
    qtbot.waitUntil(lambda: len(finished) == 1, timeout=3000)
    with qtbot.waitSignal(runner.result_dropped, timeout=3000) as blocker:
        compute.gate("old").set()
    assert blocker.args == [g1]
    assert [o.generation for o in finished] == [g2] and finished[0].text == "new"
    assert not runner.is_busy()
    pool.waitForDone(3000)


def test_runner_reports_errors_as_user_errors(qtbot):
    compute = GatedCompute()
    runner = TextTestRunner(compute)
    compute.gate("boom").set()
    with qtbot.waitSignal(runner.finished, timeout=3000) as blocker:
        runner.submit(make_request(), "boom")
    outcome = blocker.args[0]
    assert outcome.result is None and outcome.error is not None and outcome.error.code
    runner.shutdown()


def test_test_text_names_speakers_as_the_preview_does():
    """``{{char}}`` in a key is the name the engine substitutes: the nickname in the stage pipeline,
    SillyTavern's ``name2`` (the card's name, never its nickname) for a SillyTavern chat."""
    from engine.resolve import speaker_names
    from engine.schema import Character, Lorebook, LorebookEntry, SillyTavernSetup

    book = Lorebook(name="Names", entries=[LorebookEntry(uid=1, keys=["{{char}}"], content="About her.")])
    stage = make_request().model_copy(update={
        "lorebooks": [book], "character": Character(name="Lumine", nickname="Lumi")})
    st = stage.model_copy(update={"sillytavern": SillyTavernSetup(user_name="Aether")})
    assert speaker_names(stage).char == "Lumi" and speaker_names(st).char == "Lumine"
    for request, fires, misses in ((stage, "Lumi waves.", "Someone waves."), (st, "Lumine waves.", "Lumi waves.")):
        assert [r.uid for r in run_text_test(request, fires).trace if r.activated] == [1]
        assert [r.uid for r in run_text_test(request, misses).trace if r.activated] == []
