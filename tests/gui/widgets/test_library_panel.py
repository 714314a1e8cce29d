"""Library panel: one elided title line and one counts line per chat, full title as tooltip."""

from __future__ import annotations

from datetime import UTC, datetime

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QStyleOptionViewItem

from engine.storage.models import ChatSummary
from gui.widgets.library_panel import BRANCH_MARK, CHAT_ID_ROLE, SUBTITLE_ROLE, LibraryPanel

LONG = "Seraphina - 2023-5-12 @21h 32m 29s 224ms and a much longer tail that never fits a sidebar"


def _chats():
    when = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
    return [ChatSummary(id="c1", title=LONG, character="Seraphina", messages=5, has_audit=True,
                        parent_id=None, updated_at=when),
            ChatSummary(id="c2", title="Short", character=None, messages=1, has_audit=False,
                        parent_id="c1", updated_at=when)]


def test_rows_have_title_counts_and_tooltip(qtbot) -> None:
    panel = LibraryPanel()
    qtbot.addWidget(panel)
    panel.set_chats(_chats())
    first = panel.proxy.index(0, 0)
    assert first.data(Qt.ItemDataRole.DisplayRole) == LONG  # one line, no newline
    assert "\n" not in first.data(Qt.ItemDataRole.DisplayRole)
    assert first.data(SUBTITLE_ROLE) == "5 messages · Seraphina · audit ✓"
    assert LONG in first.data(Qt.ItemDataRole.ToolTipRole)
    second = panel.proxy.index(1, 0)
    # a branch is marked with a glyph the UI fonts carry and says whose branch it is
    assert second.data(Qt.ItemDataRole.DisplayRole) == f"{BRANCH_MARK} Short"
    assert second.data(SUBTITLE_ROLE) == f"branch of {LONG} · 1 message"
    assert second.data(CHAT_ID_ROLE) == "c2"
    panel.search.setText("seraphina")
    assert panel.proxy.rowCount() == 1


def test_long_titles_elide_on_one_line_without_a_horizontal_scrollbar(qtbot) -> None:
    panel = LibraryPanel()
    qtbot.addWidget(panel)
    panel.resize(250, 400)
    panel.set_chats(_chats())
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.list.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff
    assert not panel.list.horizontalScrollBar().isVisible()
    index = panel.proxy.index(0, 0)
    option = QStyleOptionViewItem()
    option.initFrom(panel.list)
    option.rect = panel.list.visualRect(index)
    title, sub = panel.delegate.lines(option, index)
    assert title.endswith("…") and title[:-1] in LONG and len(title) < len(LONG)
    assert sub.startswith("5 messages")
    fm = option.fontMetrics
    # two text lines per row, all rows the same height
    assert panel.delegate.sizeHint(option, index).height() >= 2 * fm.height()
    assert panel.list.visualRect(index).height() == panel.list.visualRect(panel.proxy.index(1, 0)).height()
    # a wide list shows the whole title
    option.rect = option.rect.adjusted(0, 0, 2000, 0)
    assert panel.delegate.lines(option, index)[0] == LONG
