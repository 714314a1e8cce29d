"""Lorebook editor tab: table model roles/flags, trace mapping, editing intents, test text box."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from engine.schema import (
    Chat,
    ChatMessage,
    ContextPreview,
    InsertionPosition,
    Lorebook,
    LorebookEntry,
    PreviewRequest,
    SelectiveLogic,
    TokenizerInfo,
)
from gui.widgets.lorebook_editor import (
    COLUMN_INDEX,
    ROW_ROLE,
    SORT_ROLE,
    LorebookTab,
    describe_detail,
    join_keys,
    lorebook_budget,
    split_keys,
)

DRAGON = LorebookEntry(uid=1, comment="Dragon", keys=["dragon", "wyrm"], content="Dragons hoard brass.")
CASTLE = LorebookEntry(uid=2, comment="Castle", keys=["castle"], secondary_keys=["ruined"],
                       selective_logic=SelectiveLogic.AND_ALL, order=250, content="The castle is ruined.")
RULES = LorebookEntry(uid=3, comment="Rules", constant=True, content="Magic is rare.")
OFF = LorebookEntry(uid=4, comment="Off", keys=["dragon"], disable=True, position=InsertionPosition.AT_DEPTH,
                    depth=2, probability=40, scan_depth=5, content="never")


def _request() -> PreviewRequest:
    return PreviewRequest(
        lorebooks=[Lorebook(name="World", entries=[DRAGON, CASTLE, RULES, OFF])],
        chat=Chat(messages=[ChatMessage(role="user", content="A dragon circles the tower.")]),
    )


def _preview(trace: list[dict]) -> ContextPreview:
    return ContextPreview(
        model="gpt-4o", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False),
        context_limit=2200, reply_reserve=200, budget=2000, safety_margin=0, headroom=1000,
        prompt_tokens=900, strategy="truncate", lorebook_trace=trace,
    )


TRACE = [
    {"book": "World", "book_index": 0, "uid": 1, "comment": "Dragon", "activated": True,
     "code": "LOREBOOK_KEY_MATCH", "detail": {"key": "dragon", "message_index": 0, "depth": 0}, "tokens": 50},
    {"book": "World", "book_index": 0, "uid": 2, "comment": "Castle", "activated": False,
     "code": "LOREBOOK_NOT_MATCHED", "detail": {}, "tokens": None},
    {"book": "World", "book_index": 0, "uid": 3, "comment": "Rules", "activated": True,
     "code": "LOREBOOK_CONSTANT", "detail": {}, "tokens": 5},
    {"book": "World", "book_index": 0, "uid": 4, "comment": "Off", "activated": False,
     "code": "LOREBOOK_DISABLED", "detail": {}, "tokens": None},
]


@pytest.fixture
def tab(qtbot):
    widget = LorebookTab(None)
    qtbot.addWidget(widget)
    widget.resize(1000, 700)
    widget.set_state(_request(), _preview(TRACE), ["book-1"])
    return widget


def _cell(tab, row: int, col: str, role=Qt.ItemDataRole.DisplayRole):
    return tab.model.data(tab.model.index(row, COLUMN_INDEX[col]), role)


def test_rows_and_display_roles(tab):
    m = tab.model
    assert m.rowCount() == 4
    assert _cell(tab, 0, "book") == "World"
    assert _cell(tab, 0, "entry") == "#1 Dragon"
    assert _cell(tab, 0, "keys") == "dragon, wyrm"
    assert _cell(tab, 1, "secondary") == "ruined"
    assert _cell(tab, 1, "logic") == "AND ALL"
    assert _cell(tab, 0, "logic") == ""  # no secondary keys: logic does not apply
    assert _cell(tab, 1, "order") == "250"
    assert _cell(tab, 3, "position") == "At depth (system)"
    assert _cell(tab, 3, "depth") == "2"
    assert _cell(tab, 3, "probability") == "40 %"
    assert _cell(tab, 3, "scan_depth") == "5"
    assert _cell(tab, 0, "scan_depth") == "global"
    assert _cell(tab, 0, "constant") is None  # check columns carry no text
    assert _cell(tab, 0, "entry", ROW_ROLE).entry == DRAGON


def test_trace_columns_fired_why_tokens_share(tab):
    budget = lorebook_budget(_request().settings, 2000)
    assert budget == 500  # 25 % of the 2000-token budget (SillyTavern default)
    assert _cell(tab, 0, "fired") == "✓ fired"
    assert "dragon" in _cell(tab, 0, "why") and "message 0" in _cell(tab, 0, "why")
    assert _cell(tab, 0, "tokens") == "50"
    assert _cell(tab, 0, "share") == "10.0 %"
    assert _cell(tab, 0, "share", SORT_ROLE) == pytest.approx(0.1)
    assert _cell(tab, 1, "fired") == "– no"
    assert _cell(tab, 1, "tokens") == ""
    assert _cell(tab, 3, "fired") == "– disabled"
    assert "LOREBOOK_NOT_MATCHED" in _cell(tab, 1, "why", Qt.ItemDataRole.ToolTipRole)
    assert _cell(tab, 0, "fired", Qt.ItemDataRole.BackgroundRole) is not None
    assert "2 fired" in tab.summary.text() and "55 / 500" in tab.summary.text()


def test_no_preview_leaves_trace_columns_empty(qtbot):
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(_request(), None, ["book-1"])
    assert tab.model.rowCount() == 4
    assert _cell(tab, 0, "fired") == ""
    assert "pending" in tab.summary.text()
    tab.set_state(None, None, [])
    assert tab.model.rowCount() == 0


def test_flags_and_check_states(tab):
    m = tab.model
    for col in ("constant", "enabled"):
        flags = m.flags(m.index(0, COLUMN_INDEX[col]))
        assert flags & Qt.ItemFlag.ItemIsUserCheckable
        assert not flags & Qt.ItemFlag.ItemIsEditable
    assert not m.flags(m.index(0, COLUMN_INDEX["keys"])) & Qt.ItemFlag.ItemIsUserCheckable
    assert _cell(tab, 2, "constant", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    assert _cell(tab, 0, "constant", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert _cell(tab, 3, "enabled", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert _cell(tab, 0, "keys", Qt.ItemDataRole.CheckStateRole) is None
    assert _cell(tab, 0, "order", SORT_ROLE) == 100.0


def test_read_only_without_library_ids(qtbot):
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(_request(), _preview(TRACE), [])
    m = tab.model
    assert not m.flags(m.index(0, COLUMN_INDEX["constant"])) & Qt.ItemFlag.ItemIsUserCheckable
    assert not m.setData(m.index(0, COLUMN_INDEX["constant"]), Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole)
    tab.select_entry(0, 1)
    assert not tab.form.keys.isEnabled()
    assert "read-only" in tab.form.where.text()


def test_checkbox_emits_entry_edited_without_changing_model(tab, qtbot):
    m = tab.model
    with qtbot.waitSignal(tab.entry_edited) as blocker:
        assert m.setData(m.index(0, COLUMN_INDEX["enabled"]), Qt.CheckState.Unchecked.value,
                         Qt.ItemDataRole.CheckStateRole)
    book_id, old, new = blocker.args
    assert book_id == "book-1"
    assert old == DRAGON and new.disable is True and new.keys == DRAGON.keys
    # The model is a read-only adapter: it shows the old state until set_state brings the new one.
    assert _cell(tab, 0, "enabled", Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked


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


def test_selection_survives_new_state_and_dirty_form_is_kept(tab):
    tab.select_entry(0, 2)
    tab.form.comment.setText("Castle (edited)")
    tab.set_state(_request(), _preview(TRACE), ["book-1"])
    assert tab.form.row().entry.uid == 2
    assert tab.form.comment.text() == "Castle (edited)"
    tab.form.revert_button.click()
    tab.set_state(_request(), _preview(TRACE), ["book-1"])
    assert tab.form.comment.text() == "Castle"


def test_filter_and_fired_only(tab):
    tab.filter_edit.setText("castle")
    assert tab.proxy.rowCount() == 1
    tab.filter_edit.setText("")
    tab.fired_only.setChecked(True)
    assert tab.proxy.rowCount() == 2
    tab.fired_only.setChecked(False)
    assert tab.proxy.rowCount() == 4


def test_card_embedded_book_is_shown_read_only(qtbot):
    from engine.schema import Character

    req = _request().model_copy(update={"character": Character(
        name="Elara", character_book=Lorebook(entries=[LorebookEntry(uid=9, keys=["elara"], content="x")]))})
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(req, None, ["book-1"])
    rows = tab.rows()
    assert len(rows) == 5
    assert rows[-1].book_name == "Elara (card)" and rows[-1].embedded and not rows[-1].editable
    assert rows[0].editable


def test_split_and_join_keys():
    assert split_keys("a, b ,c,,") == ["a", "b", "c"]
    assert split_keys("/a,b/i, plain, /x\\/y/") == ["/a,b/i", "plain", "/x\\/y/"]
    assert split_keys("/unclosed, next") == ["/unclosed", "next"]
    keys = ["Dr. Smith", "#tag", "/dr(agon)?s?/i"]
    assert split_keys(join_keys(keys)) == keys


def test_describe_detail():
    assert describe_detail({"key": "sword", "message_index": 12, "depth": 0, "pass": 1}) == (
        'key "sword" in message 12 (depth 0), recursion pass 1')
    assert describe_detail({}) == ""
    assert "roll 73" in describe_detail({"roll": 73})


def _world_info_test_text():
    lorebook = pytest.importorskip("engine.lorebook")
    if not hasattr(lorebook, "test_text"):
        pytest.skip("engine.lorebook.test_text not available yet")
    return lorebook.test_text


def test_test_text_box_marks_triggered_entries(tab):
    _world_info_test_text()
    tab.test_edit.setPlainText("The old wyrm sleeps under the castle.")
    tab.run_test_text()
    fired = {row.entry.uid for row in tab.rows() if (row.test or {}).get("activated")}
    assert fired == {1, 3}  # wyrm → Dragon; constant Rules; Castle lacks its AND ALL secondary "ruined"
    assert _cell(tab, 0, "test") == "✓ would fire"
    assert _cell(tab, 1, "test") != "✓ would fire"
    assert "2 entries would fire" in tab.test_result.text()
    assert "#1 Dragon" in tab.test_result.text()

    tab.test_edit.setPlainText("A ruined castle.")
    tab.run_test_text()
    fired = {row.entry.uid for row in tab.rows() if (row.test or {}).get("activated")}
    assert fired == {2, 3}


def test_test_text_debounced_while_typing(tab, qtbot):
    _world_info_test_text()
    tab.test_edit.setPlainText("dragon")
    qtbot.waitUntil(lambda: any((r.test or {}).get("activated") and r.entry.uid == 1 for r in tab.rows()),
                    timeout=3000)


def test_real_preview_trace_shows_fired_entries(qtbot):
    _world_info_test_text()
    from engine.pipeline import preview

    request = _request()
    result = preview(request)
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(request, result, ["book-1"])
    by_uid = {row.entry.uid: row for row in tab.rows()}
    assert by_uid[1].trace["activated"] and by_uid[3].trace["activated"]
    assert not by_uid[2].trace["activated"]
    assert by_uid[1].trace["tokens"] > 0
    assert _cell(tab, 0, "fired") == "✓ fired"


def test_applied_edit_comes_back_clean(tab, qtbot):
    """Round trip as the main window does it: entry_edited → new request → set_state."""
    edits = []
    tab.entry_edited.connect(lambda book_id, old, new: edits.append(new))
    tab.select_entry(0, 1)
    tab.form.keys.setText("dragon, drake")
    tab.form.apply_button.click()
    assert len(edits) == 1
    request = _request()
    book = request.lorebooks[0]
    entries = [edits[0] if e.uid == 1 else e for e in book.entries]
    request = request.model_copy(update={"lorebooks": [book.model_copy(update={"entries": entries})]})
    tab.set_state(request, _preview(TRACE), ["book-1"])
    assert tab.form.keys.text() == "dragon, drake"
    assert not tab.form.is_dirty() and not tab.form.apply_button.isEnabled()
    assert _cell(tab, 0, "keys") == "dragon, drake"


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


def test_entry_form_goes_one_column_when_narrow(tab):
    tab.show()
    tab.resize(1000, 700)
    QApplication.processEvents()
    assert tab.form._two_columns is True
    tab.resize(380, 700)
    QApplication.processEvents()
    assert tab.form._two_columns is False
    assert tab.form.width() <= 380


def test_budget_matches_engine_rule_and_sorting_is_numeric(tab):
    from engine.schema import WorldInfoSettings

    assert lorebook_budget({"world_info": {"budget_percent": 25, "budget_cap": 0}}, 10) == 3  # 2.5 rounds up
    assert lorebook_budget({"world_info": {"budget_percent": 25, "budget_cap": 100}}, 2000) == 100
    lorebook = pytest.importorskip("engine.lorebook")
    for percent, limit, cap in ((25, 10, 0), (7.5, 1234, 0), (25, 2000, 100), (0, 500, 0)):
        wi = WorldInfoSettings(budget_percent=percent, budget_cap=cap)
        assert lorebook_budget(wi, limit) == lorebook.compute_budget(wi, limit)
        assert lorebook_budget({"world_info": wi.model_dump()}, limit) == lorebook.compute_budget(wi, limit)
    # Sorting uses SORT_ROLE numbers (order 250 before 100; "1,234"-style text would sort wrong).
    tab.table.sortByColumn(COLUMN_INDEX["tokens"], Qt.SortOrder.DescendingOrder)
    col = COLUMN_INDEX["tokens"]
    values = [tab.proxy.data(tab.proxy.index(r, col), SORT_ROLE) for r in range(tab.proxy.rowCount())]
    assert values == [50, 5, 0, 0]
    tab.table.sortByColumn(COLUMN_INDEX["order"], Qt.SortOrder.DescendingOrder)
    first = tab.proxy.data(tab.proxy.index(0, COLUMN_INDEX["entry"]), ROW_ROLE)
    assert first.entry.uid == 2 and first.entry.order == 250
