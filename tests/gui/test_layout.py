"""Window layout on the real pipeline: header labels, sidebar width, column widths, stable splitter."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication

from gui.main_window import CENTRE_PREFERRED_W, INSPECTOR_MIN_W, INSPECTOR_WIDTH, token_summary
from gui.models.blocks_model import BlockColumn
from gui.widgets.blocks_panel import REASON_MAX_W, REASON_MIN_W
from gui.widgets.library_panel import DEFAULT_WIDTH


def _show(qtbot, window) -> None:
    window.resize(1440, 900)
    window.show()
    qtbot.waitExposed(window)
    for _ in range(3):
        QCoreApplication.processEvents()


def test_header_labels_prompt_budget_and_context_window(qtbot, window) -> None:
    p = window.preview
    text = window.status_label.text()
    expected = token_summary(p, 0.0)
    assert text.rsplit(" · ", 1)[0] == expected.rsplit(" · ", 1)[0]  # all but the elapsed ms
    assert f"prompt {p.prompt_tokens:,} / budget {p.budget:,} tokens" in text
    assert f"context window {p.context_limit:,}" in text
    assert window.budget_bar.caption() == f"context window {p.context_limit:,} tokens"


def test_long_title_elides_with_tooltip_and_summary_stays_whole(qtbot, window) -> None:
    _show(qtbot, window)
    long_title = "Seraphina - 2023-5-12 @21h 32m 29s 224ms " * 4
    window.title_label.setText(long_title)
    QCoreApplication.processEvents()
    assert window.title_label.toolTip() == long_title
    assert window.title_label.is_elided()
    # the summary has its own row: not cut at the default layout, whatever the title
    assert not window.status_label.is_elided()
    assert window.title_label.width() <= window.centre_tabs.width() + 10


def test_default_widths_and_stable_splitter_across_tabs(qtbot, window) -> None:
    _show(qtbot, window)
    sizes = window.splitter.sizes()
    # 1440 px: the library at its default width, the centre at its preferred width first, the
    # inspector takes the rest up to its default
    assert sizes[0] == DEFAULT_WIDTH and INSPECTOR_MIN_W <= sizes[2] <= INSPECTOR_WIDTH
    assert sizes[1] >= CENTRE_PREFERRED_W
    for tab in ("lorebook", "audit", "settings", "block"):
        assert window.select_tab(tab)
        QCoreApplication.processEvents()
        assert window.splitter.sizes() == sizes, tab  # a wider page never squeezes the blocks
    table = window.blocks_panel.table
    reason = table.columnWidth(BlockColumn.REASON)
    assert REASON_MIN_W <= reason <= REASON_MAX_W
    assert table.columnWidth(BlockColumn.TEXT) > 60
    # all columns fit: no horizontal scrolling needed to read the Reason column
    header = table.horizontalHeader()
    right = header.sectionViewportPosition(BlockColumn.EXCLUDE) + header.sectionSize(BlockColumn.EXCLUDE)
    assert right <= table.viewport().width() + 1


def test_current_input_row_has_no_toggles(qtbot, window) -> None:
    from PySide6.QtCore import Qt

    window.chat_view.composer.setPlainText("Where is the parcel?")
    with qtbot.waitSignal(window.preview_applied, timeout=20000) as blocker:
        window.chat_view.send_button.click()
    model = window.blocks_panel.model
    current = next(b for b in blocker.args[0].blocks if b.reason == "CURRENT_INPUT")
    row = model.row_of_message(current.message_index)
    for col in (BlockColumn.PIN, BlockColumn.EXCLUDE):
        idx = model.index(row, col)
        assert not idx.flags() & Qt.ItemFlag.ItemIsUserCheckable
        assert idx.data(Qt.ItemDataRole.CheckStateRole) is None
    other = model.index(model.row_of_message(current.message_index - 1), BlockColumn.EXCLUDE)
    assert other.flags() & Qt.ItemFlag.ItemIsUserCheckable


def test_chat_view_offers_no_pin_exclude_on_the_current_input(qtbot, window) -> None:
    from PySide6.QtCore import QEvent, QPointF, Qt
    from PySide6.QtGui import QMouseEvent
    from PySide6.QtWidgets import QStyleOptionViewItem

    from gui.models.chat_model import FATE_ROLE, MESSAGE_ROLE
    from gui.widgets.chat_view import offers_toggles

    window.chat_view.composer.setPlainText("Where is the parcel?")
    with qtbot.waitSignal(window.preview_applied, timeout=20000):
        window.chat_view.send_button.click()
    _show(qtbot, window)
    window.select_tab("chat")
    view = window.chat_view
    model = view.model
    current, older = model.index(20), model.index(19)
    assert current.data(FATE_ROLE).reason == "CURRENT_INPUT"
    assert not offers_toggles(current.data(MESSAGE_ROLE), current.data(FATE_ROLE))
    assert offers_toggles(older.data(MESSAGE_ROLE), older.data(FATE_ROLE))
    delegate = view.list.itemDelegate()
    clicked: list[tuple[int, bool]] = []
    delegate.pin_clicked.connect(lambda i, on: clicked.append((i, on)))
    delegate.exclude_clicked.connect(lambda i, on: clicked.append((i, on)))

    def click(index, which: int) -> None:
        option = QStyleOptionViewItem()
        option.rect = view.list.visualRect(index)
        rect = delegate.button_rects(option.rect, False)[which]
        event = QMouseEvent(QEvent.Type.MouseButtonRelease, QPointF(rect.center()), QPointF(rect.center()),
                            Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
        delegate.editorEvent(event, model, option, index)

    click(current, 0)
    click(current, 1)
    assert clicked == []  # the protected current input: nothing to toggle
    click(older, 1)
    assert clicked == [(19, True)]
