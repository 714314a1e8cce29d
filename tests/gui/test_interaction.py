"""Keyboard, drag-and-drop, search and filters on the real window."""

from __future__ import annotations

import json

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from engine.schema import Chat, ChatMessage
from gui.models.blocks_model import BLOCK_ROLE, SORT_ROLE, BlockColumn
from gui.preview import PreviewOutcome
from tests.gui.test_main_window import block_of, rerun


def test_space_on_a_message_row_toggles_exclude_and_ctrl_z_undoes(qtbot, window) -> None:
    panel = window.blocks_panel
    panel.select_message(3)
    panel.table.setFocus()
    # a row chosen on purpose (moved to with the arrow keys) toggles with Space
    qtbot.keyClick(panel.table, Qt.Key.Key_Down)
    qtbot.keyClick(panel.table, Qt.Key.Key_Up)
    preview = rerun(qtbot, window, lambda: qtbot.keyClick(panel.table, Qt.Key.Key_Space))
    assert block_of(preview, 3).reason == "MANUAL_EXCLUDED"
    preview = rerun(qtbot, window, lambda: qtbot.keyClick(panel.table, Qt.Key.Key_P))
    assert block_of(preview, 3).pinned
    preview = rerun(qtbot, window, window.undo_action.trigger)
    assert not block_of(preview, 3).pinned
    preview = rerun(qtbot, window, window.redo_action.trigger)
    assert block_of(preview, 3).pinned
    assert window.undo_action.shortcut().toString() == "Ctrl+Z"
    assert "Ctrl+Shift+Z" in [s.toString() for s in window.redo_action.shortcuts()]


def test_drop_files_imports_them(qtbot, window, library, tmp_path) -> None:
    store, _, _ = library
    path = tmp_path / "dropped.jsonl"
    lines = [{"user_name": "Wren", "character_name": "Marisol"}, {"name": "Wren", "is_user": True, "mes": "Hi"}]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                       Qt.KeyboardModifier.NoModifier)
    n_before = len(store.chats.summaries())
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        window.dropEvent(event)
    assert len(store.chats.summaries()) == n_before + 1
    assert window.chat_view.model.message_count() == 1


def test_chat_search_filters_the_library(qtbot, window, library) -> None:
    store, _, _ = library
    store.chats.add(Chat(title="Harbour night", messages=[ChatMessage(role="user", content="x")]), title="Harbour night")
    window.refresh_library()
    lib = window.library
    assert lib.proxy.rowCount() == 2
    lib.search.setText("harbour")
    assert lib.proxy.rowCount() == 1
    assert "Harbour night" in lib.proxy.index(0, 0).data()
    lib.search.clear()
    assert lib.proxy.rowCount() == 2


def test_kind_and_status_filters(qtbot, window) -> None:
    panel = window.blocks_panel
    total = panel.proxy.rowCount()
    panel.kind_filter.setCurrentIndex(panel.kind_filter.findData("message"))
    assert 0 < panel.proxy.rowCount() < total
    assert all(panel.proxy.index(r, 0).data(BLOCK_ROLE).kind == "message" for r in range(panel.proxy.rowCount()))
    panel.kind_filter.setCurrentIndex(0)
    panel.status_filter.setCurrentIndex(panel.status_filter.findData("excluded"))
    assert panel.proxy.rowCount() == sum(1 for b in window.preview.blocks if b.status == "excluded")
    panel.status_filter.setCurrentIndex(0)
    assert panel.proxy.rowCount() == total
    panel.table.sortByColumn(BlockColumn.TOKENS, Qt.SortOrder.DescendingOrder)
    first = panel.proxy.index(0, BlockColumn.TOKENS).data(SORT_ROLE)
    assert first == max(b.tokens for b in window.preview.blocks)


def test_result_for_a_state_the_document_left_is_not_applied(qtbot, window) -> None:
    old = window.preview
    stale_request = window.ctx.document.request.model_copy()
    applied = []
    window.preview_applied.connect(applied.append)
    window.presenter.on_preview_ready(PreviewOutcome(99, stale_request, old, None, 0.0))
    assert applied == []
