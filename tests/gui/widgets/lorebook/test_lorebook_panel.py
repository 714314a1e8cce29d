"""gui.widgets.lorebook.panel: LorebookTab state, selection, read-only rows, real previews."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from engine.schema import Lorebook, LorebookEntry, PreviewRequest
from gui.widgets.lorebook import LorebookTab
from tests.gui.widgets.lorebook.lorebook_data import TRACE, cell, make_preview, make_request, make_tab


def test_no_preview_leaves_trace_columns_empty(qtbot):
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(make_request(), None, ["book-1"])
    assert tab.model.rowCount() == 4
    assert cell(tab, 0, "fired") == ""
    assert "pending" in tab.summary.text()
    tab.set_state(None, None, [])
    assert tab.model.rowCount() == 0


def test_read_only_without_library_ids(qtbot):
    from PySide6.QtCore import Qt

    from gui.widgets.lorebook import COLUMN_INDEX

    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(make_request(), make_preview(TRACE), [])
    m = tab.model
    assert not m.flags(m.index(0, COLUMN_INDEX["constant"])) & Qt.ItemFlag.ItemIsUserCheckable
    assert not m.setData(m.index(0, COLUMN_INDEX["constant"]), Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole)
    tab.select_entry(0, 1)
    assert not tab.form.keys.isEnabled()
    assert "read-only" in tab.form.where.text()


def test_selection_survives_new_state_and_dirty_form_is_kept(qtbot):
    tab = make_tab(qtbot)
    tab.select_entry(0, 2)
    tab.form.comment.setText("Castle (edited)")
    tab.set_state(make_request(), make_preview(TRACE), ["book-1"])
    assert tab.form.row().entry.uid == 2
    assert tab.form.comment.text() == "Castle (edited)"
    tab.form.revert_button.click()
    tab.set_state(make_request(), make_preview(TRACE), ["book-1"])
    assert tab.form.comment.text() == "Castle"


def test_real_preview_trace_shows_fired_entries(qtbot):
    from engine.pipeline import preview

    request = make_request()
    result = preview(request)
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(request, result, ["book-1"])
    by_uid = {row.entry.uid: row for row in tab.rows()}
    assert by_uid[1].trace.activated and by_uid[3].trace.activated
    assert not by_uid[2].trace.activated
    assert by_uid[1].trace.tokens > 0
    assert cell(tab, 0, "fired") == "✓ fired"


def test_applied_edit_comes_back_clean(qtbot):
    """Round trip as the main window does it: entry_edited → new request → set_state."""
    tab = make_tab(qtbot)
    edits = []
    tab.entry_edited.connect(lambda book_id, old, new: edits.append(new))
    tab.select_entry(0, 1)
    tab.form.keys.setText("dragon, drake")
    tab.form.apply_button.click()
    assert len(edits) == 1
    request = make_request()
    book = request.lorebooks[0]
    entries = [edits[0] if e.uid == 1 else e for e in book.entries]
    request = request.model_copy(update={"lorebooks": [book.model_copy(update={"entries": entries})]})
    tab.set_state(request, make_preview(TRACE), ["book-1"])
    assert tab.form.keys.text() == "dragon, drake"
    assert not tab.form.is_dirty() and not tab.form.apply_button.isEnabled()
    assert cell(tab, 0, "keys") == "dragon, drake"


def test_refresh_keeps_table_scroll_position(qtbot):
    entries = [LorebookEntry(uid=i, comment=f"Entry {i}", keys=[f"key{i}"]) for i in range(200)]
    request = PreviewRequest(lorebooks=[Lorebook(name="Big", entries=entries)])
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.resize(600, 500)
    tab.show()
    tab.set_state(request, None, ["big"])
    tab.select_entry(0, 5)
    QApplication.processEvents()
    bar = tab.table.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    position = bar.value()
    assert position > 0
    tab.set_state(request, None, ["big"])
    assert bar.value() == position
    assert tab.form.row().entry.uid == 5
