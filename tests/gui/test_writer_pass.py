"""Issue 16: legible at a glance, safe to edit (items 1–5 and 7) on the real pipeline and library."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QPoint, Qt
from PySide6.QtGui import QFont, QFontMetrics

from engine.pipeline import preview as engine_preview
from engine.schema import Chat, ChatMessage, ContextSettings, LorebookEntry, PreviewRequest
from gui.models.blocks_model import BlockColumn
from gui.widgets.blocks_panel import REASON_MIN_W, TEXT_MIN_W
from tests.gui.test_main_window import block_of, rerun

ROOT = Path(__file__).resolve().parents[2]


def _show(qtbot, window, w: int, h: int) -> None:
    window.resize(w, h)
    window.window_state.splitter_shown = False
    window.show()
    qtbot.waitExposed(window)
    window.splitter.setSizes(window.default_splitter_sizes(w))
    for _ in range(3):
        QCoreApplication.processEvents()


def _long_preview(n: int, limit: int = 6000):
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                        content=f"Message {i}: the courier counts lanterns. " * (1 + i % 4)) for i in range(n)]
    return engine_preview(PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=limit, reply_reserve=500, strategy="truncate")))


def _cell_fits(table, row: int, col: int) -> bool:
    index = table.model().index(row, col)
    text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
    font = index.data(Qt.ItemDataRole.FontRole) or table.font()
    needed = QFontMetrics(QFont(font)).horizontalAdvance(text) + 8
    return needed <= table.columnWidth(col)


# ---------------------------------------------------------------------------- item 1
@pytest.mark.parametrize("size", [(1280, 800), (1440, 900)])
def test_status_reason_and_digits_are_readable_at_writer_screen_sizes(qtbot, window, size) -> None:
    _show(qtbot, window, *size)
    pv = _long_preview(1200)  # four-digit positions, history cut: long reasons
    window.apply_preview(pv)
    QCoreApplication.processEvents()
    table = window.blocks_panel.table
    table.fit_columns()
    # the inspector yielded first: the centre keeps its preferred width (minus the splitter handles)
    sizes = window.splitter.sizes()
    assert sizes[1] >= 700, sizes
    rows = table.model().rowCount()
    sample = [*list(range(0, rows, max(1, rows // 60))), rows - 1]
    for r in sample:
        for col in (BlockColumn.POSITION, BlockColumn.STATUS, BlockColumn.REASON, BlockColumn.TOKENS):
            assert _cell_fits(table, r, col), (size, r, col, table.model().index(r, col).data())
    assert table.columnWidth(BlockColumn.REASON) >= REASON_MIN_W
    assert table.columnWidth(BlockColumn.TEXT) >= TEXT_MIN_W - 20  # Text stretches: far more than 8 characters
    header = table.horizontalHeader()
    right = header.sectionViewportPosition(BlockColumn.EXCLUDE) + header.sectionSize(BlockColumn.EXCLUDE)
    assert right <= table.viewport().width() + 1  # no sideways scrolling
    # "#" is sized to its digits, not a fixed guess
    four = QFontMetrics(table.font()).horizontalAdvance("8888")
    assert four < table.columnWidth(BlockColumn.POSITION) <= four + 40


# ---------------------------------------------------------------------------- item 2
def test_specific_reasons_reach_the_table_and_the_inspector(qtbot, window) -> None:
    _show(qtbot, window, 1440, 900)
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=("word " * (285 if i == 8 else 5)))
            for i in range(12)]
    pv = engine_preview(PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=400, reply_reserve=100, strategy="truncate")))
    window.apply_preview(pv)
    small = block_of(pv, 2)
    why = pv.reason_details[small.position]
    assert small.status == "excluded" and why is not None and why.data["blocked_by_message"] == 8
    model = window.blocks_panel.model
    row = model.row_of_message(2)
    cell = model.data(model.index(row, BlockColumn.REASON))
    assert cell == "newer message 8 did not fit"
    tip = model.data(model.index(row, BlockColumn.REASON), Qt.ItemDataRole.ToolTipRole)
    assert "contiguous" in tip and f"{why.data['free']} free" in tip
    window.blocks_panel.select_message(2)
    QCoreApplication.processEvents()
    from PySide6.QtWidgets import QLabel

    reason_label = window.block_inspector.findChild(QLabel, "block_reason")
    assert reason_label is not None and "contiguous" in reason_label.text()


# ---------------------------------------------------------------------------- item 3
def test_library_search_filters_without_opening_another_chat(qtbot, window, library) -> None:
    store, chat_id, _ = library
    other = store.chats.add(Chat(title="Harbour night", messages=[ChatMessage(role="user", content="hi")]),
                           title="Harbour night")
    window.refresh_library()
    window.set_pinned(3, True)  # something to undo
    assert window.ctx.undo_stack.count() == 1
    opened: list = []
    window.library.chat_selected.connect(opened.append)
    window.library.search.setText("harb")
    window.library.search.setText("zzz")
    window.library.search.setText("")
    assert opened == [] and window.ctx.document.chat_id == chat_id
    assert window.ctx.undo_stack.count() == 1  # typing never wiped the undo history
    assert window.library.current_chat_id() == chat_id
    window.library.search.setText("zzz")
    assert window.library.empty_label.isVisibleTo(window.library) and "zzz" in window.library.empty_label.text()
    window.library.search.setText("")
    assert other in window.library.chat_ids()


def test_undo_survives_switching_chats_and_reopens_the_chat(qtbot, window, library) -> None:
    store, chat_id, book_id = library
    other = store.chats.add(Chat(title="Other", messages=[ChatMessage(role="user", content=f"m{i}") for i in range(4)]),
                           title="Other", lorebook_ids=[book_id])
    window.refresh_library()
    rerun(qtbot, window, lambda: window.set_pinned(4, True))
    entry = store.lorebooks.get(book_id).entries[0]
    rerun(qtbot, window, lambda: window.edit_lorebook_entry(book_id, entry, entry.model_copy(update={"content": "New."})))
    rerun(qtbot, window, lambda: window.open_chat(other))
    assert window.ctx.undo_stack.count() == 2
    # the lorebook is shared: its edit undoes right here, in the other chat
    rerun(qtbot, window, window.undo_action.trigger)
    assert store.lorebooks.get(book_id).entries[0].content == entry.content
    assert window.ctx.document.chat_id == other
    # the pin was made in the first chat: undoing it brings that chat back
    rerun(qtbot, window, window.undo_action.trigger)
    assert window.ctx.document.chat_id == chat_id
    assert not store.chats.get(chat_id).chat.messages[4].meta.pinned
    assert window.library.current_chat_id() == chat_id


def test_settings_edits_are_undoable_as_one_step(qtbot, window, library) -> None:
    store, chat_id, _ = library
    old = window.ctx.document.request.settings
    panel = window.settings_panel
    rerun(qtbot, window, lambda: [panel.wi_percent.setValue(v) for v in (30, 35, 40)])
    assert store.chats.get(chat_id).settings.world_info.budget_percent == 40
    assert window.ctx.undo_stack.count() == 1  # a burst of spin-box steps is one step
    rerun(qtbot, window, window.undo_action.trigger)
    assert store.chats.get(chat_id).settings == old
    assert panel.wi_percent.value() == old.world_info.budget_percent


def test_messages_edit_delete_and_hide_undoably(qtbot, window, library) -> None:
    store, chat_id, _ = library
    original = [m.text() for m in store.chats.get(chat_id).chat.messages]
    window.ask_text = lambda _title, _text: "Rewritten by the writer."
    pv = rerun(qtbot, window, lambda: window.edit_message(2))
    assert block_of(pv, 2).text == "Rewritten by the writer."
    assert store.chats.get(chat_id).chat.messages[2].text() == "Rewritten by the writer."
    pv = rerun(qtbot, window, lambda: window.set_hidden(3, True))
    assert block_of(pv, 3).reason == "HIDDEN"
    pv = rerun(qtbot, window, lambda: window.delete_message(5))
    assert len(store.chats.get(chat_id).chat.messages) == 19
    for _ in range(3):
        pv = rerun(qtbot, window, window.undo_action.trigger)
    restored = store.chats.get(chat_id).chat.messages
    assert [m.text() for m in restored] == original
    assert not restored[3].meta.hidden
    assert block_of(pv, 3).status == "kept"


def test_stray_typing_in_the_table_never_toggles_a_row(qtbot, window) -> None:
    _show(qtbot, window, 1440, 900)
    panel = window.blocks_panel
    panel.select_message(3)  # chosen for the user (a fresh chat, a click in the chart)
    panel.table.setFocus()
    toggles: list = []
    panel.model.exclude_toggled.connect(lambda *a: toggles.append(a))
    panel.model.pin_toggled.connect(lambda *a: toggles.append(a))
    qtbot.keyClicks(panel.table, "a happy p")  # typing meant for a search box
    assert toggles == []
    assert panel.search.text() == "a happy p" and panel.search.hasFocus()
    # a row clicked on purpose toggles with Space
    panel.search.clear()
    index = panel.proxy.mapFromSource(panel.model.index(panel.model.row_of_message(3), BlockColumn.TEXT))
    rect = panel.table.visualRect(index)
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.keyClick(panel.table, Qt.Key.Key_Space)
    assert toggles == [(3, True)]


def test_a_newly_opened_chat_selects_its_newest_message_and_the_chat_opens_at_the_bottom(
        qtbot, window, library) -> None:
    store, _chat_id, _ = library
    other = store.chats.add(Chat(title="Long", messages=[ChatMessage(role="user", content=f"line {i} " * 30)
                                                        for i in range(60)]), title="Long")
    window.refresh_library()
    _show(qtbot, window, 1440, 900)
    window.blocks_panel.select_message(2)
    window.select_tab("chat")
    pv = rerun(qtbot, window, lambda: window.open_chat(other))
    assert window.blocks_panel.current_block().message_index == 59
    assert window.title_label.text() == "Long" and pv.blocks[-1].text.startswith("line 59")
    QCoreApplication.processEvents()
    bar = window.chat_view.list.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()


def test_no_other_chats_blocks_under_a_new_title(qtbot, window, library) -> None:
    store, _chat_id, _ = library
    other = store.chats.add(Chat(title="Second", messages=[ChatMessage(role="user", content="x")]), title="Second")
    window.refresh_library()
    window.open_chat(other)  # the preview for "Second" is not computed yet
    assert window.title_label.text() == "Second"
    assert window.blocks_panel.model.rowCount() == 0  # the first chat's blocks are gone at once
    qtbot.waitUntil(lambda: window.preview is not None, timeout=20000)


# ---------------------------------------------------------------------------- item 4
def test_honest_chrome(qtbot, window, library) -> None:
    from gui.labels import plain
    from gui.main_window import IMPORT_FILTER, dedupe_lines
    from gui.widgets.budget_bar import compaction_mark_tooltip, compaction_marks
    from gui.widgets.library_panel import BRANCH_MARK
    from gui.words import describe_detail
    from tests.gui.helpers import make_block, make_preview

    # no Python reprs
    assert describe_detail({"keys": ["meadowlark"], "folded": ["b5", "b6"]}) == "keys meadowlark, folded b5, b6"
    assert plain({"folded": ["b5", "b6"]}) == "folded: b5, b6"
    window.block_inspector.set_block(make_block(0, kind="summary").model_copy(
        update={"trace": {"folded": ["b5", "b6"], "keys": ["meadowlark"]}}), "o200k_base")
    trace_text = window.block_inspector._labels["trace"].text()
    assert "[" not in trace_text and "'" not in trace_text and "b5, b6" in trace_text
    # banners say each thing once
    assert dedupe_lines("A.\nB\nA\n a. ") == "A.\nB"
    # the import dialog lists every format the importer reads
    for ext in ("*.png", "*.json", "*.jsonl", "*.lorebook", "*.traj"):
        assert ext in IMPORT_FILTER
    # Delete is off with nothing selected; the lorebook percentage says of what
    window.library.list.selectionModel().clearCurrentIndex()
    window.library.list.clearSelection()
    assert not window.library.delete_button.isEnabled() and not window.delete_action.isEnabled()
    window.library.select_chat(library[1])
    assert window.library.delete_button.isEnabled() and window.delete_action.isEnabled()
    assert "prompt budget" in window.settings_panel.wi_percent.suffix()
    assert "-token prompt budget" in window.settings_panel.wi_tokens.text()
    # compaction marks sit where the compact strategy compares the chat, and explain themselves
    # (issue 10 item 2: a mark past the prompt budget is no longer moved inside it)
    pv = make_preview([make_block(0, tokens=100, message_index=0)], limit=128_000, reserve=64_000)
    marks = compaction_marks(128_000)
    assert marks == {"trigger": 94_208, "target": 83_200}
    assert "94,208" in compaction_mark_tooltip("trigger", pv) and "prompt budget" in compaction_mark_tooltip("trigger", pv)
    window.budget_bar.set_preview(pv.model_copy(update={"strategy": "compact"}))  # marks: only under compact
    window.budget_bar.resize(800, 50)
    x = 1.0 + marks["trigger"] * (window.budget_bar._layout() and window.budget_bar._scale)
    assert window.budget_bar.mark_at(x) == "trigger"
    # the branch mark is a glyph the UI font draws (no missing-glyph box)
    assert QFontMetrics(window.library.list.font()).inFontUcs4(ord(BRANCH_MARK))


def test_toolbar_does_not_jump_as_the_undo_text_changes(qtbot, window) -> None:
    _show(qtbot, window, 1440, 900)
    bar = window.findChild(type(window.addToolBar("x")), "mainToolbar")
    generate = bar.widgetForAction(window.generate_action)
    before = generate.geometry().x()
    rerun(qtbot, window, lambda: window.set_pinned(3, True))
    QCoreApplication.processEvents()
    assert window.undo_action.text() == "Undo"
    assert "pin message 3" in window.undo_action.toolTip().lower()
    assert generate.geometry().x() == before


def test_fired_only_is_the_preview_and_rows_keep_their_place(qtbot, window, library) -> None:
    from engine.schema import Lorebook

    store, chat_id, _ = library
    extra = [LorebookEntry(uid=i, keys=[k], content=f"{k} lore. " * 30, comment=k.title())
             for i, k in ((2, "quay"), (3, "lantern"), (4, "meadowlark"))]
    new_id = store.lorebooks.add(Lorebook(name="Quay", entries=extra))
    store.chats.set_lorebooks(chat_id, [new_id])
    rerun(qtbot, window, window.ctx.document.reload)
    tab = window.lorebook_tab
    tab.test_edit.setPlainText("a meadowlark sings")
    with qtbot.waitSignal(tab.test_text_finished, timeout=5000):
        tab.run_test_text()
    tab.fired_only.setChecked(True)
    shown = {tab.proxy.data(tab.proxy.index(r, 0), Qt.ItemDataRole.UserRole + 1).entry.uid
             for r in range(tab.proxy.rowCount())}
    fired = {r.entry.uid for r in tab.rows() if r.trace is not None and r.trace.activated}
    tested = {r.entry.uid for r in tab.rows() if r.test is not None and r.test.activated}
    assert 4 in tested and 4 not in fired  # "meadowlark" only hit the test text
    assert shown == fired
    tab.fired_only.setChecked(False)
    tab.table.sortByColumn(list(tab.proxy.sourceModel().headerData(c, Qt.Orientation.Horizontal)
                                for c in range(tab.model.columnCount())).index("Tokens"), Qt.SortOrder.DescendingOrder)
    order = [tab.proxy.index(r, 0).data() for r in range(tab.proxy.rowCount())]
    settings = window.ctx.document.request.settings
    wi = settings.world_info.model_copy(update={"budget_percent": 1})
    rerun(qtbot, window, lambda: window._on_settings_panel_settings_edited(settings.model_copy(update={"world_info": wi})))
    assert [tab.proxy.index(r, 0).data() for r in range(tab.proxy.rowCount())] == order


# ---------------------------------------------------------------------------- item 5
def test_without_a_display_the_app_says_so_in_one_line(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["LOOMSCOPE_DB"] = f"sqlite:///{tmp_path / 'lib.sqlite3'}"
    proc = subprocess.run([sys.executable, "-m", "engine.cli"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no display found" in lines[0] and "--screenshot" in lines[0]
    assert "Traceback" not in proc.stderr and "xcb" not in proc.stderr.lower()


def test_display_problem_trusts_an_explicit_platform_and_wayland() -> None:
    from gui.app import display_problem

    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({}, "darwin") is None
    assert "no display" in display_problem({}, "linux")


def test_screenshot_renders_at_the_given_size_without_a_display(tmp_path) -> None:
    from PySide6.QtGui import QImage

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["LOOMSCOPE_DB"] = f"sqlite:///{tmp_path / 'lib.sqlite3'}"
    out = tmp_path / "shot.png"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "--screenshot", str(out), "--size", "1280x800",
                           "--tab", "settings"], env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1280, 800)
    bad = subprocess.run([sys.executable, "-m", "engine.cli", "gui", "--size", "huge"], env=env,
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "--size" in bad.stderr
    helptext = subprocess.run([sys.executable, "-m", "engine.cli", "gui", "--help"], env=env,
                              capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    for name in ("blocks", "chat", "block", "lorebook", "audit", "settings"):
        assert name in helptext


def test_tab_names_agree_between_the_cli_and_the_window(window) -> None:
    from engine.cli import build_parser
    from gui.tabs import TAB_NAMES

    gui_parser = build_parser()._subparsers._group_actions[0].choices["gui"]
    tab_action = next(a for a in gui_parser._actions if "--tab" in a.option_strings)
    assert tuple(tab_action.choices) == TAB_NAMES
    for name in TAB_NAMES:  # every name the CLI offers, the window shows
        assert window.select_tab(name), name
    assert not window.select_tab("no-such-tab")


def test_ctrl_c_closes_the_window_cleanly(qtbot, window) -> None:
    from PySide6.QtWidgets import QApplication

    from gui.app import install_interrupt_handler

    app = QApplication.instance()
    previous = signal.getsignal(signal.SIGINT)
    window.show()
    qtbot.waitExposed(window)
    timer = install_interrupt_handler(app, window)
    try:
        os.kill(os.getpid(), signal.SIGINT)
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)
        assert app.property("loomscope_interrupted")
    finally:
        timer.stop()
        app.setProperty("loomscope_interrupted", False)
        signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------- item 7
def test_the_fit_map_marks_where_the_story_starts_and_hovers_say_it(qtbot, window) -> None:
    _show(qtbot, window, 1440, 900)
    pv = _long_preview(400, limit=8192)
    window.apply_preview(pv)
    chart = window.tokens_chart
    fits = chart.fit_windows()
    by_msg = {b.message_index: b for b in pv.blocks if b.message_index is not None}
    assert fits == {i: pv.fit_windows[b.position] for i, b in by_msg.items()}
    # older messages need a window at least as large (truncate keeps history contiguous)
    history = [fits[i] for i in sorted(fits)]
    assert all(a >= b for a, b in itertools.pairwise(history))
    marks = dict(chart.fit_marks())
    assert 8192 in marks  # the current window is marked
    start = marks[8192]
    assert by_msg[start].status == "kept" and by_msg[start - 1].status == "excluded"
    larger = [w for w in marks if w > 8192]
    assert larger and all(marks[w] < start for w in larger)  # a larger window starts the story earlier
    item = next(it for it in chart._items if it[0] == start - 1)
    tip = chart.tooltip_for(item)
    assert f"sent from a context window of {pv.fit_windows[by_msg[start - 1].position]:,} tokens" in tip
    # hovering a bar shows it
    x = int(chart.mark_x(start - 1)) + 1
    from PySide6.QtWidgets import QToolTip

    qtbot.mouseMove(chart, QPoint(x, chart.height() - 3))
    qtbot.waitUntil(lambda: QToolTip.isVisible() or True, timeout=500)
    assert chart._item_at(x)[0] == start - 1
