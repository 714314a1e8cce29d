"""The prompt blocks panel: filterable, sortable table over the latest preview.

Keyboard: arrows / Page keys move, ``Space`` toggles manual exclude, ``P`` toggles pin on the
current chat message when the row was clicked or reached with those keys (both emit the model's
intent signals, hence undoable); other typing goes to the filter box.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import compress, repeat
from operator import is_not, itemgetter
from typing import Any

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPersistentModelIndex, Qt, Signal
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
from engine.vocabulary import VOCABULARY

from ..labels import KIND_LABELS, kind_label
from ..models.blocks_model import HEADERS, BlockColumn, BlocksFilterProxy, BlocksTableModel
from ..models.preview_delta import PreviewDelta, shaped_cells
from ..roles import BLOCK_ROLE
from ..words import display_status, reason_cell

STATUS_FILTERS = ("kept", "excluded", "truncated", "summarized")


#: The Reason column's width range (px): never under the minimum (readable), at most what its
#: longest cell needs; the Text column takes what is left, and Source the least.
REASON_MIN_W, REASON_MAX_W = 150, 330
#: Text never narrower than this (px) while the other columns can still give.
TEXT_MIN_W = 160
#: Source's range (px): it gives up width first.
SOURCE_MIN_W, SOURCE_MAX_W = 110, 180
#: Horizontal padding added to measured text (px): cell margins and the sort arrow.
CELL_PAD = 18
#: Keys that move the current row: a row reached with them (or clicked) is focused on purpose.
NAVIGATION_KEYS = frozenset({Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_PageUp, Qt.Key.Key_PageDown,
                             Qt.Key.Key_Home, Qt.Key.Key_End})


#: What the column widths read of each block, as columns (:func:`_distinct_cells`).
_WIDTH_FIELDS = itemgetter("kind", "role", "status", "reason", "tokens", "original_tokens", "source")


def _distinct_cells(blocks: Sequence[PreviewBlock], shaped: dict[int, str]
                    ) -> tuple[list[int], set[str], set[str], set[Any], str]:
    """The distinct cells of every row, for the column widths: a row per distinct (kind, role)
    (its Kind cell), the Status cells, the Reason cells (codes, or the text their data makes),
    the Tokens cells and the longest source. One read per block, then C-level passes."""
    n = len(blocks)
    kinds, roles, statuses, reasons, tokens, originals, sources = (
        list(zip(*map(_WIDTH_FIELDS, map(vars, blocks)))) or [()] * 7)
    pairs = list(zip(kinds, roles))
    kinds_at = sorted(dict(zip(reversed(pairs), reversed(range(n)))).values())  # first row of each
    shown_statuses = {s if s != "truncated" else display_status(s, r) for s, r in set(zip(statuses, reasons))}
    truncated = compress(range(n), map(is_not, originals, repeat(None)))
    shown_tokens: set[Any] = set(tokens) | {f"{tokens[r]} / {originals[r]}" for r in truncated
                                            if statuses[r] == "truncated"}
    shown_reasons = set(reasons) | set(shaped.values())
    return kinds_at, shown_statuses, shown_reasons, shown_tokens, max(sources, key=len, default="")


class BlocksTable(QTableView):
    """The blocks table: columns sized to their content, Space / P on a row chosen on purpose.

    Column widths: ``#``, Kind, Tokens, Status and the check columns fit their content (``#`` its
    digits); Source, Reason and Text share the rest: Reason up to what its cells need (at least
    :data:`REASON_MIN_W`), Text at least :data:`TEXT_MIN_W`, Source the leftovers (hidden when
    even its minimum does not fit: the inspector and tooltips name the source); nothing scrolls
    sideways.

    Keyboard: ``Space`` toggles exclude and ``P`` pin only on a row the user clicked or moved to
    with the arrow / page keys (:attr:`armed`); other typing goes to the filter box
    (``typed(str)``), so stray keystrokes never toggle a row.
    """

    typed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: Whether the current row was chosen by the user (click or navigation key).
        self.armed = False
        self._wants: dict[int, int] = {}

    def set_content_widths(self, wants: dict[int, int]) -> None:
        """Preferred widths (px) measured from the content, per column; then refit."""
        self._wants = dict(wants)
        self.fit_columns()

    def fit_columns(self) -> None:
        """Size the columns to the viewport (see the class docstring)."""
        header = self.horizontalHeader()
        shared = (BlockColumn.SOURCE, BlockColumn.REASON, BlockColumn.TEXT)
        fixed = 0
        for c in range(header.count()):
            if c in shared or header.isSectionHidden(c):
                continue
            want = self._wants.get(c)
            if want is not None and header.sectionSize(c) != want:
                self.setColumnWidth(c, want)
            fixed += header.sectionSize(c)
        room = max(0, self.viewport().width() - fixed)
        # Source repeats what the inspector and the tooltips say: it goes first when room is short
        hide_source = room < REASON_MIN_W + TEXT_MIN_W + SOURCE_MIN_W
        if header.isSectionHidden(BlockColumn.SOURCE) != hide_source:
            self.setColumnHidden(BlockColumn.SOURCE, hide_source)
        reason_want = max(REASON_MIN_W, min(REASON_MAX_W, self._wants.get(BlockColumn.REASON, REASON_MIN_W)))
        source_want = max(SOURCE_MIN_W, min(SOURCE_MAX_W, self._wants.get(BlockColumn.SOURCE, SOURCE_MAX_W)))
        # Reason first (up to what it needs), then Text's minimum, then Source; Text gets the rest
        reason = max(REASON_MIN_W, min(reason_want, room - TEXT_MIN_W - (0 if hide_source else SOURCE_MIN_W)))
        source = 0 if hide_source else max(SOURCE_MIN_W, min(source_want, room - reason - TEXT_MIN_W))
        text = room - reason - source
        if text < 60:  # a very narrow centre: Text gives way before Reason does
            text = 60 if room >= 60 + 110 else max(30, room // 3)
            reason = max(60, room - text)
        self.setColumnWidth(BlockColumn.REASON, reason)
        if not hide_source:
            self.setColumnWidth(BlockColumn.SOURCE, source)
        self.setColumnWidth(BlockColumn.TEXT, text)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.fit_columns()

    def dataChanged(self, top_left: QModelIndex | QPersistentModelIndex,
                    bottom_right: QModelIndex | QPersistentModelIndex, roles: Sequence[int] = ()) -> None:
        """Repaint only the changed rows this table shows.

        Qt repaints the whole viewport for a change spanning several rows that are not all in
        view; after a click on a 10,000-message chat most changed rows (Reason cells of old
        history) are far out of view, and a full repaint of the rows shown costs more than
        the rest of the update. Rows outside the viewport are painted when scrolled to.
        """
        top, bottom = top_left.row(), bottom_right.row()
        if top != bottom and top_left.isValid() and bottom_right.isValid() and self.isVisible():
            first = self.rowAt(0)
            last = self.rowAt(self.viewport().height() - 1)
            if first >= 0:
                last = self.model().rowCount() - 1 if last < 0 else last
                lo, hi = max(top, first), min(bottom, last)
                if lo > hi:
                    return
                if (lo, hi) != (top, bottom):
                    top_left = top_left.sibling(lo, top_left.column())
                    bottom_right = bottom_right.sibling(hi, bottom_right.column())
        super().dataChanged(top_left, bottom_right, list(roles))

    def mousePressEvent(self, event) -> None:
        self.armed = self.indexAt(event.position().toPoint()).isValid()
        super().mousePressEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        index = self.currentIndex()
        key = event.key()
        plain = not (event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier)
        if index.isValid() and plain and key in (Qt.Key.Key_Space, Qt.Key.Key_P) and self.armed:
            column = BlockColumn.EXCLUDE if key == Qt.Key.Key_Space else BlockColumn.PIN
            target = index.sibling(index.row(), column)
            if target.flags() & Qt.ItemFlag.ItemIsUserCheckable:
                state = target.data(Qt.ItemDataRole.CheckStateRole)
                checked = state in (Qt.CheckState.Checked, Qt.CheckState.Checked.value)
                self.model().setData(target, Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked,
                                     Qt.ItemDataRole.CheckStateRole)
            return  # Space / P never fall through to Qt's own toggling or keyboard search
        if key in NAVIGATION_KEYS:
            self.armed = True
            super().keyPressEvent(event)
            return
        text = event.text()
        if text and text.isprintable() and not (event.modifiers() & Qt.KeyboardModifier.ControlModifier):
            # typing that was meant for the filter box (or nowhere): never a toggle
            self.armed = False
            self.typed.emit(text)
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
        self.table.typed.connect(self._on_table_typed)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
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
        header.setMinimumSectionSize(24)
        self.table.setColumnHidden(BlockColumn.ROLE, True)  # the Kind column shows a message's role
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.model.modelAboutToBeReset.connect(self._remember_selection)
        self.model.modelReset.connect(self._restore_selection)
        self._selected_source: str | None = None
        self._selected_message: int | None = None
        self._widths: dict[int, int] = {}

        bar = QHBoxLayout()
        bar.addWidget(self.kind_filter)
        bar.addWidget(self.status_filter)
        bar.addWidget(self.search, 1)
        bar.addWidget(self.count_label)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.table, 1)

    def measure(self, preview: ContextPreview | None) -> dict[int, int]:
        """The column widths :meth:`set_preview` will want for ``preview`` when it fills the table
        anew (:meth:`content_widths` of its blocks), measured ahead: a window spreading the
        first apply of a big chat over two turns of the event loop does this in the first."""
        return self.content_widths(preview=preview) if preview is not None else self.content_widths(blocks=[])

    def set_preview(self, preview: ContextPreview | None, widths: dict[int, int] | None = None,
                    delta: PreviewDelta | None = None) -> None:
        """Show ``preview``'s blocks: in place when the rows are the same (selection and scroll
        stay), else a model reset (the selection follows the block's source; ``widths``: its
        column widths when already measured, :meth:`measure`; ``delta``: the rows that changed
        when already found, :meth:`BlocksTableModel.set_preview`)."""
        changed = self.model.set_preview(preview, delta)
        self._update_count()
        if changed is None:
            self._widths = widths if widths is not None else self.content_widths()
            self.table.set_content_widths(self._widths)
        elif changed:  # only the changed rows can need more room; a column never shrinks in place
            delta = self.model.last_delta
            assert delta is not None
            # rows whose Reason cell alone changed: measure those cells (a handful of distinct texts)
            grown = self.content_widths(delta.key_rows, reasons=set(delta.reason_cells.values()))
            wants = {c: max(w, self._widths.get(c, 0)) for c, w in grown.items()}
            wants[BlockColumn.POSITION] = self._widths.get(BlockColumn.POSITION, wants[BlockColumn.POSITION])
            if wants != self._widths:
                self._widths = wants
                self.table.set_content_widths(wants)

    def content_widths(self, rows: list[int] | None = None, reasons: Iterable[str] = (),
                       blocks: Sequence[PreviewBlock] | None = None,
                       preview: ContextPreview | None = None) -> dict[int, int]:
        """Widths (px) the columns' content needs: ``#`` its digits, Kind / Tokens / Status their
        widest cell, Source and Reason their widest cell (capped later by ``fit_columns``).
        ``rows`` limits the measure to those rows (default: all); ``reasons`` are Reason cell
        texts to measure besides theirs; ``blocks`` measures those blocks (a preview not shown
        yet) instead of the model's rows, ``preview`` that preview's blocks (:meth:`measure`)."""
        from PySide6.QtGui import QFont, QFontMetrics

        fm = QFontMetrics(self.table.font())
        bold = QFont(self.table.font())
        bold.setBold(True)
        fmb = QFontMetrics(bold)
        header = self.table.horizontalHeader()
        hfm = QFontMetrics(header.font())

        def head(col: BlockColumn) -> int:
            return hfm.horizontalAdvance(HEADERS[col]) + CELL_PAD

        count = self.model.rowCount() if blocks is None else len(blocks)
        extra_reasons = set(reasons)
        if count == 0 or (rows == [] and not extra_reasons):
            return {BlockColumn.POSITION: max(head(BlockColumn.POSITION), fm.horizontalAdvance("88") + CELL_PAD)}
        m = self.model
        if rows is None:  # every row (a reset): distinct values from C-level passes over the blocks
            shown = preview if preview is not None else m.preview() if blocks is None else None
            if blocks is None:
                blocks = shown.blocks if shown is not None else m.blocks()
            shaped = shaped_cells(shown) if shown is not None else {}
            kinds_at, statuses, reasons_seen, tokens, longest_source = _distinct_cells(blocks, shaped)
            kinds = {m.display_of(blocks[r], BlockColumn.KIND) for r in kinds_at}
            reasons_seen |= extra_reasons
        else:
            kinds, statuses, reasons_seen, tokens = set(), set(), set(extra_reasons), set()
            longest_source = ""
            seen_kinds: set[tuple[str, str]] = set()
            for r in rows:
                b = m.block(r)
                if (b.kind, b.role) not in seen_kinds:
                    seen_kinds.add((b.kind, b.role))
                    kinds.add(m.display_text(r, BlockColumn.KIND))
                statuses.add(b.status if b.status != "truncated" else m.display_text(r, BlockColumn.STATUS))
                reasons_seen.add(m.display_text(r, BlockColumn.REASON) if m.detail(r) is not None else b.reason)
                tokens.add(b.tokens if b.original_tokens is None else m.display_text(r, BlockColumn.TOKENS))
                src = b.source
                if len(src) > len(longest_source):
                    longest_source = src
        digits = len(str(count - 1))
        out: dict[int, int] = {
            BlockColumn.POSITION: max(fm.horizontalAdvance("8" * digits) + CELL_PAD, 28),
            BlockColumn.REASON: max(fm.horizontalAdvance(reason_cell(x) if x in VOCABULARY else str(x))
                                    for x in reasons_seen) + CELL_PAD,
        }
        if kinds:
            out.update({
                BlockColumn.KIND: max(head(BlockColumn.KIND),
                                      max(fm.horizontalAdvance(str(k)) for k in kinds) + CELL_PAD),
                BlockColumn.TOKENS: max(head(BlockColumn.TOKENS),
                                        max(fm.horizontalAdvance(str(t)) for t in tokens) + CELL_PAD),
                BlockColumn.STATUS: max(head(BlockColumn.STATUS),
                                        max(fmb.horizontalAdvance(str(s)) for s in statuses) + CELL_PAD),
                BlockColumn.SOURCE: fm.horizontalAdvance(longest_source) + CELL_PAD,
            })
        return out

    def _update_count(self) -> None:
        p = self.model.preview()
        if p is None:
            self.count_label.setText("")
            return
        self.count_label.setText(f"{self.proxy.rowCount()} shown · {self.model.kept_count()}/{len(p.blocks)} kept")

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
            self.table.armed = False  # chosen for the user, not by them: Space does not toggle it
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
            self.table.armed = False
            return
        idx = self.proxy.mapFromSource(self.model.index(row, BlockColumn.POSITION))
        if idx.isValid():
            self.table.selectionModel().setCurrentIndex(
                idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)

    def _on_table_typed(self, text: str) -> None:
        """Typing in the table filters it (like a list's type-to-search), never toggles a row."""
        self.search.setFocus(Qt.FocusReason.OtherFocusReason)
        self.search.insert(text)

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
