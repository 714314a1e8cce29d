"""Issue 31 (the writer's pass, round 2), on the real pipeline and a library with a SillyTavern folder.

Items 1–4 and 6 of the GUI; the SillyTavern folder is ``tests.engine.importers.st_fixture`` (a hidden
message, World Info before/after, an Author's Note with a World Info entry at its bottom).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, Qt

from engine.importers.st_folder import read_st_folder
from gui.models.blocks_model import BlockColumn
from tests.engine.importers.st_fixture import build_st_user
from tests.gui.test_main_window import rerun


@pytest.fixture
def st_window(qtbot, tmp_path: Path, qsettings):
    """A main window on the SillyTavern fixture's chat (first preview applied)."""
    from engine.storage import open_store
    from gui.app import build_context
    from gui.main_window import MainWindow

    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(build_st_user(tmp_path)))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    ctx = build_context(store, settings=qsettings)
    win = MainWindow(ctx)
    qtbot.addWidget(win)
    win.resize(1280, 800)
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        win.start(chat_id)
    yield win
    win.generation.wait(5000)
    ctx.preview.shutdown()
    store.close()


def _blocks(win):
    model = win.blocks_panel.model
    return [model.block(r) for r in range(model.rowCount())]


def _select(win, row: int) -> None:
    panel = win.blocks_panel
    panel.table.setCurrentIndex(panel.proxy.mapFromSource(panel.model.index(row, 0)))
    QCoreApplication.processEvents()


# ---------------------------------------------------------------------------- item 1
def test_inspector_lists_entries_by_title_with_why(qtbot, st_window) -> None:
    win = st_window
    blocks = _blocks(win)
    row = next(r for r, b in enumerate(blocks) if b.source == "prompt:worldInfoBefore")
    _select(win, row)
    insp = win.block_inspector
    table = insp.entries
    assert not table.isHidden() and table.rowCount() == 2
    assert [insp.entry_cells(r)["book"] for r in range(2)] == ["Realm", "Voyage"]
    assert insp.entry_cells(0)["why"] == 'key "harbor" in message 4 (depth 0)'
    assert insp.entry_cells(0)["position"] == "before the character (World Info before)"
    assert "lorebook:" not in insp._title.text() and "World Info before: entry 0" in insp._title.text()
    assert "parts" not in insp._labels["trace"].text() and "lorebook:" not in insp._labels["trace"].text()
    # the table's Source cell names the entries, not lorebook:Realm:0
    source = win.blocks_panel.model.index(row, BlockColumn.SOURCE).data()
    assert source == "World Info before: entry 0, entry 0"
    # a plain message shows no "Lorebook: st identifier: chatHistory-5"
    msg_row = next(r for r, b in enumerate(blocks) if b.message_index == 4)
    _select(win, msg_row)
    assert table.isHidden()
    assert "st identifier" not in insp._labels["trace"].text()
    assert not insp._form.isRowVisible(insp._labels["trace"])


# ---------------------------------------------------------------------------- item 2
def test_blocks_table_keeps_story_order_with_a_hidden_message(st_window) -> None:
    blocks = _blocks(st_window)
    order = [b.message_index for b in blocks if b.message_index is not None]
    assert order == [0, 1, 2, 3, 4]  # before: the hidden message 2 sat last, under message 4
    hidden = next(b for b in blocks if b.message_index == 2)
    assert hidden.status == "excluded"
    model = st_window.blocks_panel.model
    r = blocks.index(hidden)
    assert model.index(r, BlockColumn.TEXT).data(Qt.ItemDataRole.ForegroundRole) is not None  # greyed in place


# ---------------------------------------------------------------------------- item 3
def test_sillytavern_controls_are_honest(qtbot, st_window) -> None:
    from gui.main_window import ST_NO_PINNING

    win = st_window
    blocks = _blocks(win)
    model = win.blocks_panel.model
    r = next(k for k, b in enumerate(blocks) if b.message_index == 3)
    pin = model.index(r, BlockColumn.PIN)
    assert not (model.flags(pin) & Qt.ItemFlag.ItemIsEnabled)  # Pin is off, with the reason
    assert "SillyTavern has no pinning" in pin.data(Qt.ItemDataRole.ToolTipRole)
    excl = model.index(r, BlockColumn.EXCLUDE)
    assert model.flags(excl) & Qt.ItemFlag.ItemIsEnabled  # exclude still works (SillyTavern hides)
    win.set_pinned(3, True)
    assert not win.ctx.document.messages()[3].meta.pinned
    assert win.statusBar().currentMessage() == ST_NO_PINNING
    assert not win.chat_view.delegate.pin_available
    # the Settings tab names SillyTavern's assembly, as the header does
    sp = win.settings_panel
    assert sp.shows_sillytavern_strategy() and sp.strategy_box.currentText().startswith("sillytavern")
    assert not sp.strategy_box.isEnabled()
    assert "sillytavern" in win.preview.strategy
    # no compaction marks where compaction is not the strategy
    assert not win.budget_bar.shows_marks()


def test_loomscope_chat_keeps_pin_and_its_strategy(window) -> None:
    model = window.blocks_panel.model
    r = next(k for k in range(model.rowCount()) if model.block(k).message_index == 3)
    assert model.flags(model.index(r, BlockColumn.PIN)) & Qt.ItemFlag.ItemIsEnabled
    assert not window.settings_panel.shows_sillytavern_strategy()
    assert window.settings_panel.strategy_box.isEnabled()


# ---------------------------------------------------------------------------- item 4
def test_fired_only_follows_every_preview(qtbot, window) -> None:
    tab = window.lorebook_tab
    tab.fired_only.setChecked(True)
    assert tab.proxy.rowCount() == 0  # "dragon" appears in no message yet
    rerun(qtbot, window, lambda: window.edit_message(19, "A dragon lands on the quay."))
    assert tab.proxy.rowCount() == 1  # before: stayed hidden until the box was clicked again
    rerun(qtbot, window, lambda: window.edit_message(19, "Nothing lands on the quay."))
    assert tab.proxy.rowCount() == 0


# ---------------------------------------------------------------------------- item 5
def test_keyboard_reaches_every_pane(qtbot, window) -> None:
    from PySide6.QtWidgets import QPlainTextEdit

    window.show()
    qtbot.waitExposed(window)
    keys = {sc.key().toString(): sc for sc in window.shortcuts}
    assert {"Alt+1", "Alt+2", "Alt+3", "Alt+4", "Alt+5", "Ctrl+Tab"} <= set(keys)
    keys["Alt+3"].activated.emit()
    assert window.centre_tabs.currentWidget() is window.chat_view
    keys["Alt+2"].activated.emit()
    assert window.centre_tabs.currentWidget() is window.blocks_panel
    keys["Alt+5"].activated.emit()
    assert window.inspector_tabs.currentWidget() is window.lorebook_tab
    before = window.inspector_tabs.currentIndex()
    keys["Ctrl+Tab"].activated.emit()
    assert window.inspector_tabs.currentIndex() == (before + 1) % window.inspector_tabs.count()
    boxes = window.findChildren(QPlainTextEdit)
    assert boxes and all(b.tabChangesFocus() for b in boxes)  # the composer, the test box, the setup prompts
    assert "focus" in window.styleSheet()


# ---------------------------------------------------------------------------- item 6
def test_big_chat_chrome(qtbot, window) -> None:
    from engine.schema import ChatMessage
    from gui.main_window import newest_prose_message
    from gui.widgets.library_panel import EMPTY_TEXT

    assert "preview took" in window.status_label.text() and " ms" in window.status_label.text()
    assert "Open SillyTavern folder…" in EMPTY_TEXT and "Ctrl+Shift+O" in EMPTY_TEXT
    assert window.library_setup.export_action.isEnabled()
    window.open_chat(None)
    QCoreApplication.processEvents()
    assert not window.library_setup.export_action.isEnabled()
    msgs = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="calling"),
            ChatMessage(role="tool", content="{}", tool_call_id="c1")]
    assert newest_prose_message(msgs) == 1  # not the tool result
    # the inspector takes a share of a wider window (before: stretch 0, it kept its width)
    assert window.splitter.widget(2) is window.inspector_tabs
    assert window.inspector_tabs.sizePolicy().horizontalStretch() >= 1


def test_edit_menu_says_what_undo_will_do(qtbot, window) -> None:
    from PySide6.QtWidgets import QMenu

    rerun(qtbot, window, lambda: window.set_pinned(3, True))
    menus = {m.title(): m for m in window.menuBar().findChildren(QMenu)}
    texts = [a.text() for a in menus["&Edit"].actions()]
    assert any(t.startswith("Undo") and "pin message 3" in t.lower() for t in texts), texts
    assert window.undo_action.text() == "Undo"  # the toolbar keeps its words
    assert window.undo_menu_action.shortcut().toString() == "Ctrl+Z"
    rerun(qtbot, window, window.undo_action.trigger)  # Ctrl+Z's window action still undoes
    assert not window.ctx.document.messages()[3].meta.pinned


def test_ctrl_z_stays_one_shortcut(qtbot, window) -> None:
    window.show()
    qtbot.waitExposed(window)
    rerun(qtbot, window, lambda: window.set_pinned(3, True))
    window.blocks_panel.table.setFocus()
    rerun(qtbot, window, lambda: qtbot.keyClick(window.blocks_panel.table, Qt.Key.Key_Z,
                                                Qt.KeyboardModifier.ControlModifier))
    assert not window.ctx.document.messages()[3].meta.pinned  # the menu's twin makes it no ambiguous shortcut


def test_a_chat_without_a_character_can_be_given_one(qtbot, window, library) -> None:
    from engine.schema import Character, Chat, ChatMessage

    store, _, _ = library
    bare = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hello")]), title="No card")
    other = store.characters.add(Character(name="Orrin", description="A lighthouse keeper who counts ships."))
    window.refresh_library()
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        window.open_chat(bare)
    assert not any(b.kind == "character" for b in window.preview.blocks)
    setup = window.library_setup
    setup.refresh_library()
    panel = setup.tabs.panels["character"]
    assert panel.select(other) and panel.use_button.isEnabled() and panel.use_button.isVisibleTo(panel)
    rerun(qtbot, window, panel.use_button.click)
    assert any("lighthouse keeper" in b.text for b in window.preview.blocks if b.kind == "character")
    assert store.chats.get_setup(bare).character_id == other
    rerun(qtbot, window, window.undo_action.trigger)  # undoable
    assert store.chats.get_setup(bare).character_id is None


def test_big_chat_paints_at_its_newest_message_at_once(qtbot) -> None:
    from PySide6.QtCore import QPoint

    from engine.schema import ChatMessage
    from gui.widgets.chat_view import BIG_CHAT_ROWS, ChatView

    n = 10_000
    assert n > BIG_CHAT_ROWS
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                        content=f"Message {i}: the courier counts lanterns on the quay. " * (1 + i % 5)) for i in range(n)]
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    qtbot.waitExposed(view)
    view.set_messages(msgs, "Wren", "Marisol")
    QCoreApplication.processEvents()  # one turn of the event loop: the first paint

    def bottom_row() -> int:
        return view.list.indexAt(view.list.viewport().rect().bottomLeft() + QPoint(8, -4)).row()

    assert bottom_row() == n - 1  # before: row 0 (a batched layout from the top, then the jump)
    assert view.measuring()  # older rows still estimated
    delegate = view.delegate
    qtbot.waitUntil(lambda: not view.measuring(), timeout=20000)
    assert bottom_row() == n - 1  # laid out again with exact heights, still at the newest message
    assert delegate.exact_from == 0  # every row measured: no estimate is left
    # hidden (another tab in front), a big chat's older rows wait: measuring resumes when it is shown
    view.hide()
    view.set_messages(msgs[:-1], "Wren", "Marisol")
    waiting = delegate.exact_from
    qtbot.wait(300)
    assert waiting > 0 and delegate.exact_from == waiting and view.measuring()
    view.show()
    qtbot.waitUntil(lambda: not view.measuring(), timeout=20000)


def test_setup_edits_apply_as_you_type_one_undo_step_per_burst(qtbot, st_window) -> None:
    from PySide6.QtWidgets import QPushButton

    win = st_window
    win.show()
    qtbot.waitExposed(win)
    setup = win.library_setup.setup_panel
    win.inspector_tabs.setCurrentWidget(setup)
    applies = [b for b in setup.findChildren(QPushButton) if b.text().startswith("Apply")]
    assert applies and not any(b.isVisibleTo(setup) for b in applies)  # no Apply buttons
    stack = win.ctx.undo_stack
    before = stack.count()
    box = setup.note_text
    box.setFocus()
    box.moveCursor(box.textCursor().MoveOperation.End)
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        qtbot.keyClicks(box, " Mention the lighthouse.")
    qtbot.waitUntil(lambda: "Mention the lighthouse." in " ".join(b.text for b in win.preview.blocks), timeout=20000)
    assert stack.count() == before + 1  # the whole burst is one step
    assert box.toPlainText().endswith(" Mention the lighthouse.")
    assert box.textCursor().position() == len(box.toPlainText())  # the refill kept the cursor
    rerun(qtbot, win, win.undo_action.trigger)
    assert "Mention the lighthouse." not in " ".join(b.text for b in win.preview.blocks)


# ---------------------------------------------------------------------------- item 8
def test_qt_platform_noise_is_not_printed(capsys) -> None:
    from PySide6.QtCore import QMessageLogContext, QtMsgType

    from gui.app import _qt_message

    ctx = QMessageLogContext()
    _qt_message(QtMsgType.QtWarningMsg, ctx, "This plugin does not support propagateSizeHints()")
    _qt_message(QtMsgType.QtDebugMsg, ctx, "debug chatter")
    assert capsys.readouterr().err == ""
    _qt_message(QtMsgType.QtWarningMsg, ctx, "QPainter::begin: Paint device returned engine == 0")
    assert capsys.readouterr().err == "loomscope: Qt: QPainter::begin: Paint device returned engine == 0\n"
