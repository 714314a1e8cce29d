"""gui.widgets.lorebook.entry_form: loading, changed fields only, apply intent, narrow layout."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from engine.schema import InsertionPosition, SelectiveLogic
from tests.gui.widgets.lorebook.lorebook_data import DRAGON, make_tab


@pytest.fixture
def tab(qtbot):
    return make_tab(qtbot)


def test_editing_a_key_emits_entry_edited_with_new_keys(tab, qtbot):
    assert tab.select_entry(0, 1)
    form = tab.form
    assert form.keys.text() == "dragon, wyrm"
    assert not form.apply_button.isEnabled()
    form.keys.setText("dragon, drake, /wyrms?/i")
    assert form.apply_button.isEnabled()
    with qtbot.waitSignal(tab.entry_edited) as blocker:
        form.apply_button.click()
    book_id, old, new = blocker.args
    assert book_id == "book-1"
    assert old is DRAGON or old == DRAGON
    assert new.keys == ["dragon", "drake", "/wyrms?/i"]
    # Only the edited field changes.
    assert new.model_dump(exclude={"keys"}) == DRAGON.model_dump(exclude={"keys"})


def test_form_reports_only_changed_fields(tab):
    tab.select_entry(0, 2)
    form = tab.form
    assert form.changes() == {}
    form.logic.setCurrentIndex(form.logic.findData(int(SelectiveLogic.NOT_ANY)))
    form.scan_depth.setValue(-1)  # already "global": no change
    form.probability.setValue(75)
    form.position.setCurrentIndex(form.position.findData(int(InsertionPosition.AT_DEPTH)))
    changes = form.changes()
    assert changes == {"selective_logic": SelectiveLogic.NOT_ANY, "probability": 75,
                       "position": InsertionPosition.AT_DEPTH}
    form.revert_button.click()
    assert form.changes() == {}


def test_entry_form_goes_one_column_when_narrow(tab):
    tab.show()
    tab.resize(1000, 700)
    QApplication.processEvents()
    assert tab.form._two_columns is True
    tab.resize(380, 700)
    QApplication.processEvents()
    assert tab.form._two_columns is False
    assert tab.form.width() <= 380
