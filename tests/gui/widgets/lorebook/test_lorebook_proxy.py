"""gui.widgets.lorebook.proxy: text filter, "fired only", numeric sorting by SORT_ROLE."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from engine.schema import ContextSettings, WorldInfoSettings
from gui.roles import ROW_ROLE, SORT_ROLE
from gui.widgets.lorebook import COLUMN_INDEX, LorebookTab
from tests.gui.widgets.lorebook.lorebook_data import make_request, make_tab


@pytest.fixture
def tab(qtbot):
    return make_tab(qtbot)


def _settings(percent: float, cap: int) -> ContextSettings:
    return ContextSettings(world_info=WorldInfoSettings(budget_percent=percent, budget_cap=cap))


def test_filter_and_fired_only(tab):
    tab.filter_edit.setText("castle")
    assert tab.proxy.rowCount() == 1
    tab.filter_edit.setText("")
    tab.fired_only.setChecked(True)
    assert tab.proxy.rowCount() == 2
    tab.fired_only.setChecked(False)
    assert tab.proxy.rowCount() == 4


def test_budget_matches_engine_rule_and_sorting_is_numeric(tab, qtbot):
    from engine import lorebook
    from engine.resolve import lorebook_budget, model_profile_and_limit

    assert lorebook_budget(_settings(25, 0), 10) == 3  # 2.5 rounds up
    assert lorebook_budget(_settings(25, 100), 2000) == 100
    other = LorebookTab(None)
    qtbot.addWidget(other)
    for percent, limit, cap in ((25, 10, 0), (7.5, 1234, 0), (25, 2000, 100), (0, 500, 0)):
        settings = _settings(percent, cap)
        assert lorebook_budget(settings, limit) == lorebook.compute_budget(settings.world_info, limit)
        # without a preview the tab asks the engine for the prompt budget the percentage applies to
        other.set_state(make_request().model_copy(update={"settings": settings}), None, ["book-1"])
        expected = lorebook.compute_budget(settings.world_info, model_profile_and_limit(settings).budget)
        assert {r.budget for r in other.rows()} == {expected}
    # Sorting uses SORT_ROLE numbers (order 250 before 100; "1,234"-style text would sort wrong).
    tab.table.sortByColumn(COLUMN_INDEX["tokens"], Qt.SortOrder.DescendingOrder)
    col = COLUMN_INDEX["tokens"]
    values = [tab.proxy.data(tab.proxy.index(r, col), SORT_ROLE) for r in range(tab.proxy.rowCount())]
    assert values == [50, 5, 0, 0]
    tab.table.sortByColumn(COLUMN_INDEX["order"], Qt.SortOrder.DescendingOrder)
    first = tab.proxy.data(tab.proxy.index(0, COLUMN_INDEX["entry"]), ROW_ROLE)
    assert first.entry.uid == 2 and first.entry.order == 250
