"""The prompt blocks panel: filterable, sortable table over the latest preview.

Keyboard: arrows / Page keys move, ``Space`` toggles manual exclude, ``P`` toggles pin on the
current chat message (both emit the model's intent signals, hence undoable).
"""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from engine.schema import ContextPreview, PreviewBlock

from ..labels import KIND_LABELS, kind_label
from ..models.blocks_model import BLOCK_ROLE, BlockColumn, BlocksFilterProxy, BlocksTableModel

STATUS_FILTERS = ("kept", "excluded", "truncated", "summarized")


#: The Reason column's width range (px); the Text column stretches over the rest.
REASON_MIN_W, REASON_MAX_W = 80, 260


class BlocksTable(QTableView):
    """Table with Space / P shortcuts on chat messages; the Reason column keeps a readable width."""

    def fit_columns(self) -> None:
        """Share the free width: Reason gets 45 % of it (within its range), Text stretches over the rest."""
        header = self.horizontalHeader()
        fixed = sum(header.sectionSize(c) for c in range(header.count())
                    if c not in (BlockColumn.TEXT, BlockColumn.REASON) and not header.isSectionHidden(c))
        free = self.viewport().width() - fixed
        self.setColumnWidth(BlockColumn.REASON, max(REASON_MIN_W, min(REASON_MAX_W, int(free * 0.45))))

    def resizeEvent(self, event) -> None:  # noqa: ANN001, N802
        super().resizeEvent(event)
        self.fit_columns()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        index = self.currentIndex()
        if index.isValid() and event.key() in (Qt.Key.Key_Space, Qt.Key.Key_P) and not event.modifiers():
            column = BlockColumn.EXCLUDE if event.key() == Qt.Key.Key_Space else BlockColumn.PIN
            target = index.sibling(index.row(), column)
            if target.flags() & Qt.ItemFlag.ItemIsUserCheckable:
                state = target.data(Qt.ItemDataRole.CheckStateRole)
                checked = state in (Qt.CheckState.Checked, Qt.CheckState.Checked.value)
                self.model().setData(target, Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked,
                                     Qt.ItemDataRole.CheckStateRole)
                return
        super().keyPressEvent(event)


class BlocksPanel(QWidget):
    """Filter bar and table. Signal ``block_selected(object PreviewBlock | None)``."""

    block_selected = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = BlocksTableModel(self)
        self.proxy = BlocksFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        self.kind_filter = QComboBox(self)
        self.kind_filter.setObjectName("kindFilter")
        self.kind_filter.addItem("All kinds", None)
        for kind in KIND_LABELS:
            self.kind_filter.addItem(kind_label(kind), kind)
        self.kind_filter.currentIndexChanged.connect(self._on_kind_filter_changed)
        self.status_filter = QComboBox(self)
        self.status_filter.setObjectName("statusFilter")
        self.status_filter.addItem("All statuses", None)
        self.status_filter.addItem("Not kept", "notkept")
        for status in STATUS_FILTERS:
            self.status_filter.addItem(status.title(), status)
        self.status_filter.currentIndexChanged.connect(self._on_status_filter_changed)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Filter block text…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.proxy.set_text)
        self.count_label = QLabel(self)

        self.table = BlocksTable(self)
        self.table.setObjectName("blocksTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # prompt order until the user sorts
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        widths = {BlockColumn.POSITION: 30, BlockColumn.KIND: 88, BlockColumn.ROLE: 64,
                  BlockColumn.SOURCE: 90, BlockColumn.TEXT: 220, BlockColumn.TOKENS: 52,
                  BlockColumn.STATUS: 76, BlockColumn.REASON: 146, BlockColumn.MARKERS: 30,
                  BlockColumn.PIN: 30, BlockColumn.EXCLUDE: 40}
        for col, w in widths.items():
            self.table.setColumnWidth(col, w)
        header.setSectionResizeMode(BlockColumn.TEXT, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(24)
        self.table.setColumnHidden(BlockColumn.ROLE, True)  # the Kind column shows a message's role
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.model.modelAboutToBeReset.connect(self._remember_selection)
        self.model.modelReset.connect(self._restore_selection)
        self._selected_source: str | None = None
        self._selected_message: int | None = None

        bar = QHBoxLayout()
        bar.addWidget(self.kind_filter)
        bar.addWidget(self.status_filter)
        bar.addWidget(self.search, 1)
        bar.addWidget(self.count_label)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.table, 1)

    def set_preview(self, preview: ContextPreview | None) -> None:
        """Show ``preview``'s blocks (model reset; the selection follows the block's source)."""
        self.model.set_preview(preview)
        self._update_count()

    def _update_count(self) -> None:
        p = self.model.preview()
        if p is None:
            self.count_label.setText("")
            return
        kept = sum(1 for b in p.blocks if b.status == "kept")
        self.count_label.setText(f"{self.proxy.rowCount()} shown · {kept}/{len(p.blocks)} kept")

    def current_block(self) -> PreviewBlock | None:
        """The selected block."""
        idx = self.table.currentIndex()
        return idx.data(BLOCK_ROLE) if idx.isValid() else None

    def select_message(self, message_index: int) -> None:
        """Select the block of chat message ``message_index`` (if shown)."""
        row = self.model.row_of_message(message_index)
        if row is None:
            return
        idx = self.proxy.mapFromSource(self.model.index(row, BlockColumn.POSITION))
        if idx.isValid():
            self.table.setCurrentIndex(idx)
            self.table.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _remember_selection(self) -> None:
        b = self.current_block()
        self._selected_source = b.source if b is not None else None
        self._selected_message = b.message_index if b is not None else None

    def _restore_selection(self) -> None:
        if self._selected_source is None:
            return
        if self._selected_message is not None:
            row = self.model.row_of_message(self._selected_message)
        else:
            row = self.model.row_of_source(self._selected_source)
        if row is None:
            return
        idx = self.proxy.mapFromSource(self.model.index(row, BlockColumn.POSITION))
        if idx.isValid():
            self.table.selectionModel().setCurrentIndex(
                idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)

    def _on_current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        block = current.data(BLOCK_ROLE) if current.isValid() else None
        self.model.set_highlight_group(block.group if block is not None else None)
        self.block_selected.emit(block)

    def _on_kind_filter_changed(self, _i: int) -> None:
        kind = self.kind_filter.currentData()
        self.proxy.set_kinds(None if kind is None else {kind})
        self._update_count()

    def _on_status_filter_changed(self, _i: int) -> None:
        status = self.status_filter.currentData()
        if status is None:
            self.proxy.set_statuses(None)
        elif status == "notkept":
            self.proxy.set_statuses({"excluded", "truncated", "summarized"})
        else:
            self.proxy.set_statuses({status})
        self._update_count()
