"""BlocksTableModel: roles, flags, setData intents (called directly), and the filter proxy."""

from __future__ import annotations

from PySide6.QtCore import Qt

from gui.models.blocks_model import BLOCK_ROLE, SORT_ROLE, BlockColumn, BlocksFilterProxy, BlocksTableModel
from tests.gui.helpers import make_block, make_preview


def _model(qtbot) -> BlocksTableModel:
    blocks = [
        make_block(0, kind="system", role="system", protected=True, reason="SYSTEM_PROMPT", tokens=25),
        make_block(1, message_index=0, status="excluded", reason="MANUAL_EXCLUDED", manual_excluded=True, tokens=40),
        make_block(2, message_index=1, kind="tool_call", role="assistant", group="g0", tokens=12),
        make_block(3, message_index=2, kind="tool_result", role="tool", group="g0", tokens=30),
        make_block(4, message_index=3, pinned=True, reason="PINNED", tokens=7),
        make_block(5, kind="summary", status="truncated", reason="SUMMARIZED", tokens=5, original_tokens=50),
    ]
    model = BlocksTableModel()
    model.set_preview(make_preview(blocks))
    return model


def test_shape_and_display_roles(qtbot) -> None:
    model = _model(qtbot)
    assert model.rowCount() == 6
    assert model.columnCount() == len(BlockColumn)
    idx = model.index(1, BlockColumn.STATUS)
    assert model.data(idx) == "excluded"
    assert model.data(model.index(1, BlockColumn.REASON)) != "MANUAL_EXCLUDED"  # shown in words
    assert "MANUAL_EXCLUDED" in model.data(model.index(1, BlockColumn.REASON), Qt.ItemDataRole.ToolTipRole)
    assert model.data(model.index(0, BlockColumn.TOKENS)) == 25
    assert model.data(model.index(5, BlockColumn.TOKENS)) == "5 / 50"
    assert model.data(model.index(5, BlockColumn.STATUS)) == "summarized"
    assert model.data(model.index(3, BlockColumn.POSITION), BLOCK_ROLE).id == "b3"
    assert model.data(model.index(3, BlockColumn.TOKENS), SORT_ROLE) == 30
    assert model.headerData(BlockColumn.TOKENS, Qt.Orientation.Horizontal) == "Tokens"
    # status colours present
    assert model.data(model.index(1, BlockColumn.STATUS), Qt.ItemDataRole.BackgroundRole) is not None
    # markers: protected, pinned, group
    assert model.data(model.index(0, BlockColumn.MARKERS))
    assert model.data(model.index(4, BlockColumn.MARKERS))


def test_check_state_and_flags(qtbot) -> None:
    model = _model(qtbot)
    checkable = Qt.ItemFlag.ItemIsUserCheckable
    assert not model.flags(model.index(0, BlockColumn.PIN)) & checkable  # system block: no toggles
    assert model.flags(model.index(1, BlockColumn.EXCLUDE)) & checkable
    assert model.flags(model.index(4, BlockColumn.PIN)) & checkable
    assert not model.flags(model.index(4, BlockColumn.TEXT)) & checkable
    assert model.data(model.index(1, BlockColumn.EXCLUDE), Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    assert model.data(model.index(4, BlockColumn.PIN), Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
    assert model.data(model.index(2, BlockColumn.PIN), Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Unchecked
    assert model.data(model.index(0, BlockColumn.PIN), Qt.ItemDataRole.CheckStateRole) is None


def test_set_data_emits_intent_and_never_edits(qtbot) -> None:
    model = _model(qtbot)
    before = model.block(2)
    with qtbot.waitSignal(model.exclude_toggled, timeout=1000) as blocker:
        assert model.setData(model.index(2, BlockColumn.EXCLUDE), Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole)
    assert blocker.args == [1, True]  # the chat message index, not the row
    assert model.block(2) is before and not model.block(2).manual_excluded
    with qtbot.waitSignal(model.pin_toggled, timeout=1000) as blocker:
        model.setData(model.index(4, BlockColumn.PIN), Qt.CheckState.Unchecked, Qt.ItemDataRole.CheckStateRole)
    assert blocker.args == [3, False]
    # non-message blocks and other roles are refused
    assert not model.setData(model.index(0, BlockColumn.PIN), Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole)
    assert not model.setData(model.index(2, BlockColumn.TEXT), "x", Qt.ItemDataRole.EditRole)


def test_tool_group_is_visibly_linked(qtbot) -> None:
    model = _model(qtbot)
    assert model.group_size("g0") == 2
    tip = model.data(model.index(2, BlockColumn.EXCLUDE), Qt.ItemDataRole.ToolTipRole)
    assert "whole group (2 blocks)" in tip
    with qtbot.waitSignal(model.dataChanged, timeout=1000):
        model.set_highlight_group("g0")
    assert model.data(model.index(3, BlockColumn.TEXT), Qt.ItemDataRole.BackgroundRole) is not None
    assert model.data(model.index(4, BlockColumn.TEXT), Qt.ItemDataRole.BackgroundRole) is None


def test_proxy_filters_and_sorts(qtbot) -> None:
    model = _model(qtbot)
    proxy = BlocksFilterProxy()
    proxy.setSourceModel(model)
    assert proxy.rowCount() == 6
    proxy.set_statuses({"excluded"})
    assert proxy.rowCount() == 1
    proxy.set_statuses(None)
    proxy.set_kinds({"tool_call", "tool_result"})
    assert proxy.rowCount() == 2
    proxy.set_kinds(None)
    proxy.set_text("block 4")
    assert proxy.rowCount() == 1
    proxy.set_text("")
    proxy.sort(BlockColumn.TOKENS, Qt.SortOrder.DescendingOrder)
    tokens = [proxy.index(r, BlockColumn.TOKENS).data(SORT_ROLE) for r in range(proxy.rowCount())]
    assert tokens == sorted(tokens, reverse=True)


def test_reset_on_new_preview(qtbot) -> None:
    model = _model(qtbot)
    with qtbot.waitSignal(model.modelReset, timeout=1000):
        model.set_preview(None)
    assert model.rowCount() == 0


def test_current_input_and_protected_messages_offer_no_toggles(qtbot) -> None:
    blocks = [
        make_block(0, message_index=0, kind="system", role="system", protected=True, reason="SYSTEM_PROMPT"),
        make_block(1, message_index=1, tokens=40),
        make_block(2, message_index=2, pinned=True, protected=True, reason="PINNED"),
        make_block(3, message_index=3, protected=True, reason="CURRENT_INPUT"),
    ]
    model = BlocksTableModel()
    model.set_preview(make_preview(blocks))
    checkable = Qt.ItemFlag.ItemIsUserCheckable
    for row in (0, 3):  # protected and not flagged: nothing a toggle could change
        for col in (BlockColumn.PIN, BlockColumn.EXCLUDE):
            assert not model.flags(model.index(row, col)) & checkable
            assert model.data(model.index(row, col), Qt.ItemDataRole.CheckStateRole) is None
            assert not model.setData(model.index(row, col), Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole)
    assert model.flags(model.index(1, BlockColumn.EXCLUDE)) & checkable
    assert model.flags(model.index(2, BlockColumn.PIN)) & checkable  # a pin can always be taken back
    assert model.data(model.index(2, BlockColumn.PIN), Qt.ItemDataRole.CheckStateRole) == Qt.CheckState.Checked
