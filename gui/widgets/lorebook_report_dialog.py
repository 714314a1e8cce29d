"""*Lorebook → Report*: the lorebook tuning report of the open chat, in a dialog.

The report (:mod:`engine.lorebook.report`) replays World Info over the chat's history turn by
turn; it runs on a worker thread (a long chat takes seconds) and fills a sortable table of
entries (fired, first/last turn, tokens, budget drops, matched keys, why an entry never fired),
a line per book (share of the lorebook budget) and a small chart of lorebook tokens per turn.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QRectF, QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QTableView,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from engine.lorebook.report import NEVER_FIRED_REASONS, LorebookReport
from engine.lorebook_facts import entry_title
from engine.lorebook_report import report_for_request
from engine.schema import PreviewRequest

from .. import jobs
from ..errors import worker_error
from ..roles import SORT_ROLE

#: Table columns: (title, tooltip).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Entry", "the entry's title (its comment; else its first words)"),
    ("Book", "the lorebook"),
    ("UID", "the entry's id in its book"),
    ("Fired", "turns the entry was inserted, of all replayed turns"),
    ("First", "first turn it fired"),
    ("Last", "last turn it fired"),
    ("Tokens", "average tokens per firing"),
    ("Total", "tokens over all turns"),
    ("Dropped", "turns the lorebook budget dropped it"),
    ("Matched keys", "which key matched, and how often"),
    ("Never fired because", "why an entry never fired"),
)


class _Signals(QObject):
    done = Signal(object)
    failed = Signal(str)


def _report(request: PreviewRequest, signals: _Signals) -> None:  # worker thread
    """Replay ``request``'s lorebooks over its chat; report the report (or why not) through ``signals``."""
    try:
        report = report_for_request(request)
    except Exception as exc:
        error = worker_error(exc, "lorebook report")
        jobs.emit(signals.failed, f"{error.text} ({error.code})")
        return
    jobs.emit(signals.done, report)


class TurnsChart(QWidget):
    """Bars of lorebook tokens per replayed turn, with the budget as a dashed line when it fits."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: list[int] = []
        self.budget = 0
        self.setMinimumHeight(90)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMouseTracking(True)
        self.setToolTip("Lorebook tokens per turn (hover a bar)")

    def sizeHint(self) -> QSize:
        return QSize(640, 100)

    def set_values(self, values: list[int], budget: int) -> None:
        self.values = list(values)
        self.budget = budget
        self.update()

    def _step(self) -> float:
        """Pixels per turn (bars are at most 24 px wide, so a short chat is not one wide slab)."""
        return min(24.0, self.width() / max(1, len(self.values)))

    def _top(self) -> int:
        top = max(self.values, default=0)
        return max(1, top)

    def turn_at(self, x: float) -> int | None:
        """The 1-based turn under pixel column ``x``."""
        if not self.values or self.width() <= 0:
            return None
        i = int(x / self._step())
        return i + 1 if 0 <= i < len(self.values) else None

    def paintEvent(self, _event: QPaintEvent) -> None:
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), self.palette().base())
            caption_h = 14
            font = QFont(p.font())
            font.setPointSizeF(max(7.0, font.pointSizeF() - 1))
            p.setFont(font)
            p.setPen(self.palette().text().color())
            p.drawText(4, 11, f"lorebook tokens per turn ({len(self.values)} turns, peak {max(self.values, default=0)}"
                              f", budget {self.budget})")
            if not self.values:
                return
            h = self.height() - caption_h - 2
            top = self._top()
            step = self._step()
            bar = QColor("#3b82f6")
            for i, v in enumerate(self.values):
                bh = h * v / top
                p.fillRect(QRectF(i * step, caption_h + h - bh, max(1.0, step - (1 if step > 3 else 0)), bh), bar)
        finally:
            p.end()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        t = self.turn_at(event.position().x())
        if t is not None:
            QToolTip.showText(event.globalPosition().toPoint(), f"turn {t}: {self.values[t - 1]} tokens", self)


class LorebookReportDialog(QDialog):
    """The report of ``request`` (a :class:`engine.schema.PreviewRequest`). Signal ``ready``."""

    ready = Signal()

    def __init__(self, request: PreviewRequest | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lorebook report")
        self.resize(1100, 640)
        self.report: LorebookReport | None = None
        self.summary = QLabel("Replaying World Info over the chat…")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.chart = TurnsChart(self)
        self.model = QStandardItemModel(0, len(COLUMNS), self)
        for col, (title, tip) in enumerate(COLUMNS):
            item = QStandardItem(title)
            item.setToolTip(tip)
            self.model.setHorizontalHeaderItem(col, item)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QTableView(self)
        self.table.setObjectName("lorebookReportTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.chart)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
        self._signals = _Signals(self)
        self._signals.done.connect(self.set_report)
        self._signals.failed.connect(self._on_failed)
        if request is None:
            self.summary.setText("Open a chat first: the report replays its history.")
        else:
            jobs.start(None, _report, request, self._signals)

    def _on_failed(self, message: str) -> None:
        self.summary.setText(f"The report could not be computed: {message}")
        self.ready.emit()

    def set_report(self, report: LorebookReport) -> None:
        """Show ``report``: summary, chart, table (sorted by total tokens, largest first)."""
        self.report = report
        n = len(report.turns)
        books = "; ".join(f"<b>{_esc(b.book)}</b>: {b.entries_fired}/{b.entries} entries fired, {b.total_tokens} tokens, "
                          f"budget share mean {100 * b.mean_share:.1f} % · max {100 * b.max_share:.1f} %"
                          for b in report.books)
        self.summary.setText(f"{report.messages} messages · {n} turns replayed · lorebook budget {report.budget} "
                             f"tokens · rules <b>{report.rules}</b><br>{books or 'no lorebooks attached'}")
        self.chart.set_values([t.tokens for t in report.turns], report.budget)
        self.model.setRowCount(0)
        for s in report.entries:
            keys = ", ".join(f"{k} ×{c}" for k, c in s.keys.items())
            never = NEVER_FIRED_REASONS.get(s.never_fired, s.never_fired) if s.never_fired else ""
            title = entry_title(s.comment, s.uid)  # named by title, the uid as a detail (engine.lorebook_facts)
            cells: list[tuple[str, Any]] = [
                (title, title.lower()), (s.book, s.book.lower()), (str(s.uid), _uid_key(s.uid)),
                (f"{s.turns_fired}/{n}", s.turns_fired),
                (str(s.first_turn or ""), s.first_turn if s.first_turn is not None else 10**9),
                (str(s.last_turn or ""), s.last_turn if s.last_turn is not None else -1),
                (f"{s.mean_tokens:.0f}" if s.turns_fired else "", s.mean_tokens),
                (str(s.total_tokens), s.total_tokens), (str(s.budget_dropped or ""), s.budget_dropped),
                (keys, keys.lower()), (never, never),
            ]
            row = []
            for col, (text, key) in enumerate(cells):
                item = QStandardItem(text)
                item.setData(key, SORT_ROLE)
                if col in (2, 3, 4, 5, 6, 7, 8):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == 10 and never:
                    item.setToolTip(never)
                    item.setForeground(QColor("#b45309"))
                if col == 9 and s.where:
                    item.setToolTip("\n".join(_where(w) for w in s.where))
                row.append(item)
            self.model.appendRow(row)
        self.table.sortByColumn(7, Qt.SortOrder.DescendingOrder)
        self.table.resizeColumnsToContents()
        for col in (0, 9):
            self.table.setColumnWidth(col, min(self.table.columnWidth(col), 220))
        self.ready.emit()

    def column_values(self, column: int) -> list[str]:
        """The shown texts of ``column``, top to bottom (as sorted)."""
        return [self.proxy.index(r, column).data() for r in range(self.proxy.rowCount())]


def _uid_key(uid: int | str) -> str:
    """A sort key as a string (numbers in numeric order, then the other uids)."""
    return f"0{int(uid):020d}" if str(uid).isdigit() else f"1{uid}"


def _where(w: dict[str, Any]) -> str:
    src = w.get("source")
    place = (f"message {w.get('message_index')}" if src == "chat" else
             f"entry {w.get('from_uid')}'s content" if src == "recursion" else str(src))
    return f"turn {w.get('turn')}: {w.get('key')!r} in {place}"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
