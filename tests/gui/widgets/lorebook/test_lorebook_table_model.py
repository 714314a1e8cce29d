"""gui.widgets.lorebook.table_model: display, sort, check-state roles, flags and edit intents."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from engine.resolve import lorebook_budget
from gui.roles import ROW_ROLE, SORT_ROLE
from gui.widgets.lorebook import COLUMN_INDEX
from tests.gui.widgets.lorebook.lorebook_data import DRAGON, cell, make_request, make_tab


@pytest.fixture
def tab(qtbot):
    return make_tab(qtbot)


def test_rows_and_display_roles(tab):
    m = tab.model
    assert m.rowCount() == 4
    assert cell(tab, 0, "book") == "World"
    assert cell(tab, 0, "entry") == "Dragon  #1"  # title first, uid a detail (issue 31)
    assert cell(tab, 0, "keys") == "dragon, wyrm"
    assert cell(tab, 1, "secondary") == "ruined"
    assert cell(tab, 1, "logic") == "AND ALL"
    assert cell(tab, 0, "logic") == ""  # no secondary keys: logic does not apply
    assert cell(tab, 1, "order") == "250"
    assert cell(tab, 3, "position") == "At depth (system)"
    assert cell(tab, 3, "depth") == "2"
    assert cell(tab, 3, "probability") == "40 %"
    assert cell(tab, 3, "scan_depth") == "5"
    assert cell(tab, 0, "scan_depth") == "global"
    assert cell(tab, 0, "constant") is None  # check columns carry no text
    assert cell(tab, 0, "entry", ROW_ROLE).entry == DRAGON


def test_trace_columns_fired_why_tokens_share(tab):
    budget = lorebook_budget(make_request().settings, 2000)
    assert budget == 500  # 25 % of the preview's 2000-token budget (SillyTavern default)
    assert {r.budget for r in tab.rows()} == {budget}
    assert cell(tab, 0, "fired") == "✓ fired"
    assert "dragon" in cell(tab, 0, "why") and "message 0" in cell(tab, 0, "why")
    assert cell(tab, 0, "tokens") == "50"
    assert cell(tab, 0, "share") == "10.0 %"
    assert cell(tab, 0, "share", SORT_ROLE) == pytest.approx(0.1)
    assert cell(tab, 1, "fired") == "– no"
    assert cell(tab, 1, "tokens") == ""
    assert cell(tab, 3, "fired") == "– disabled"
    assert "LOREBOOK_NOT_MATCHED" in cell(tab, 1, "why", Qt.ItemDataRole.ToolTipRole)
    assert cell(tab, 0, "fired", Qt.ItemDataRole.BackgroundRole) is not None
    assert "2 fired" in tab.summary.text() and "55 / 500" in tab.summary.text()


def test_flags_and_check_states(tab):
    m = tab.model
    for col in ("constant", "enabled"):
        flags = m.flags(m.index(0, COLUMN_INDEX[col]))
        assert flags & Qt.ItemFlag.ItemIsUserCheckable
        assert not flags & Qt.ItemFlag.ItemIsEditable
    assert not m.flags(m.index(0, COLUMN_INDEX["keys"])) & Qt.ItemFlag.ItemIsUserCheckable
    assert cell(tab, 2, "constant", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    assert cell(tab, 0, "constant", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert cell(tab, 3, "enabled", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert cell(tab, 0, "keys", Qt.ItemDataRole.CheckStateRole) is None
    assert cell(tab, 0, "order", SORT_ROLE) == 100.0


def test_checkbox_emits_entry_edited_without_changing_model(tab, qtbot):
    m = tab.model
    with qtbot.waitSignal(tab.entry_edited) as blocker:
        assert m.setData(m.index(0, COLUMN_INDEX["enabled"]), Qt.CheckState.Unchecked.value,
                         Qt.ItemDataRole.CheckStateRole)
    book_id, old, new = blocker.args
    assert book_id == "book-1"
    assert old == DRAGON and new.disable is True and new.keys == DRAGON.keys
    # The model is a read-only adapter: it shows the old state until set_state brings the new one.
    assert cell(tab, 0, "enabled", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
