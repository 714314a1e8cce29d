"""The Lorebook tab's table: a read-only adapter over :class:`~.rows.EntryRow` items (STYLE.md 4).

Columns: the entry's settings (keys, secondary keys, logic, constant, enabled, order, position,
depth, probability, scan depth) and what the preview and the test text said about it (fired,
why, tokens, budget share, test). The constant and enabled check boxes emit an edit intent;
the model never changes a row itself.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QColor

from engine.schema import InsertionPosition

from ...roles import ROW_ROLE, SORT_ROLE
from .rows import EntryRow
from .status import fired_rank, fired_text, status_colour, text_test_words, why_text, why_tooltip
from .words import LOGIC_WORDS, POSITION_WORDS, ROLE_WORDS, entry_title, join_keys

#: (column key, header). The order is the table's column order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("book", "Book"),
    ("entry", "Entry"),
    ("fired", "In preview"),
    ("why", "Why"),
    ("tokens", "Tokens"),
    ("share", "Budget share"),
    ("test", "Test text"),
    ("keys", "Keys"),
    ("secondary", "Secondary keys"),
    ("logic", "Logic"),
    ("constant", "Constant"),
    ("enabled", "Enabled"),
    ("order", "Order"),
    ("position", "Position"),
    ("depth", "Depth"),
    ("probability", "Probability"),
    ("scan_depth", "Scan depth"),
)
COLUMN_INDEX: dict[str, int] = {key: i for i, (key, _) in enumerate(COLUMNS)}
_CHECK_COLUMNS = ("constant", "enabled")
_NUMERIC_COLUMNS = ("order", "depth", "probability", "scan_depth", "tokens", "share")

_HEADER_TIPS = {
    "fired": "Whether the entry fired in the current preview",
    "why": "The activation trace: why it fired or not",
    "tokens": "Tokens of the entry's content under the active profile",
    "share": "Tokens as a share of the lorebook budget",
    "test": "What the text in the test box would do",
    "order": "Insertion order and budget priority (higher is more important)",
    "scan_depth": "Messages scanned for keys (global when empty)",
}


class LorebookEntriesModel(QAbstractTableModel):
    """Read-only table adapter over :class:`EntryRow` items.

    Check boxes (constant, enabled) are user-checkable on editable rows; ``setData`` does not
    change the row but emits :attr:`edit_requested` ``(row, update)`` with a
    ``LorebookEntry.model_copy`` update dict (intent, STYLE.md 4).
    """

    edit_requested = Signal(int, dict)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[EntryRow] = []
        self._dark = False

    def set_rows(self, rows: list[EntryRow], *, dark: bool = False) -> None:
        """Replace all rows.

        When the same entries come back (a new preview, another budget, an edit), the rows are
        updated in place (``dataChanged``, no reset): the table keeps its order, selection and
        scroll position, so rows keep their place. A different set of entries resets the model.
        """
        if [r.key for r in rows] == [r.key for r in self._rows] and dark == self._dark and rows:
            self._rows = list(rows)
            self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, self.columnCount() - 1))
            return
        self.beginResetModel()
        self._rows = list(rows)
        self._dark = dark
        self.endResetModel()

    def rows(self) -> list[EntryRow]:
        """All rows, in source order."""
        return list(self._rows)

    def row_at(self, row: int) -> EntryRow:
        """The row at source row ``row``."""
        return self._rows[row]

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][1]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return _HEADER_TIPS.get(COLUMNS[section][0])
        return None

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if COLUMNS[index.column()][0] in _CHECK_COLUMNS and self._rows[index.row()].editable:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        col = COLUMNS[index.column()][0]
        if role == Qt.ItemDataRole.DisplayRole:
            return _display(row, col)
        if role == ROW_ROLE:
            return row
        if role == SORT_ROLE:
            return _sort_value(row, col)
        if role == Qt.ItemDataRole.CheckStateRole and col in _CHECK_COLUMNS:
            on = row.entry.constant if col == "constant" else not row.entry.disable
            return Qt.CheckState.Checked if on else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.ToolTipRole:
            return _tooltip(row, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in _NUMERIC_COLUMNS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole:
            if row.entry.disable:
                return QColor("#8a8f98")
            if col in ("fired", "test"):
                rec = row.trace if col == "fired" else row.test
                if rec is not None:
                    return QColor(status_colour(rec, self._dark)[0])
            return None
        if role == Qt.ItemDataRole.BackgroundRole and col in ("fired", "test"):
            rec = row.trace if col == "fired" else row.test
            if rec is not None:
                return QColor(status_colour(rec, self._dark)[1])
        return None

    def setData(self, index: QModelIndex | QPersistentModelIndex, value: Any,
                role: int = Qt.ItemDataRole.EditRole) -> bool:
        if not index.isValid() or role != Qt.ItemDataRole.CheckStateRole:
            return False
        col = COLUMNS[index.column()][0]
        row = self._rows[index.row()]
        if col not in _CHECK_COLUMNS or not row.editable:
            return False
        checked = _is_checked(value)
        if col == "constant":
            if checked == row.entry.constant:
                return False
            self.edit_requested.emit(index.row(), {"constant": checked})
        else:
            if checked == (not row.entry.disable):
                return False
            self.edit_requested.emit(index.row(), {"disable": not checked})
        return True


def _is_checked(value: Any) -> bool:
    if isinstance(value, Qt.CheckState):
        return value == Qt.CheckState.Checked
    try:
        return int(value) == Qt.CheckState.Checked.value
    except (TypeError, ValueError):
        return bool(value)


def _display(row: EntryRow, col: str) -> Any:
    e = row.entry
    if col == "book":
        return row.book_name or f"Book {row.book_index + 1}"
    if col == "entry":
        return entry_title(e)
    if col == "keys":
        return join_keys(e.keys)
    if col == "secondary":
        return join_keys(e.secondary_keys)
    if col == "logic":
        return LOGIC_WORDS.get(e.selective_logic, str(e.selective_logic)) if e.secondary_keys else ""
    if col in _CHECK_COLUMNS:
        return None
    if col == "order":
        return f"{e.order:g}"
    if col == "position":
        words = POSITION_WORDS.get(e.position, str(e.position))
        if e.position == InsertionPosition.AT_DEPTH:
            words += f" ({ROLE_WORDS.get(e.role if isinstance(e.role, int) else 0, 'system')})"
        return words
    if col == "depth":
        return str(e.depth) if e.position == InsertionPosition.AT_DEPTH else f"({e.depth})"
    if col == "probability":
        return f"{e.probability:g} %" if e.use_probability else "off"
    if col == "scan_depth":
        return "global" if e.scan_depth is None else str(e.scan_depth)
    if col == "fired":
        return fired_text(row.trace)
    if col == "why":
        return why_text(row.trace)
    if col == "tokens":
        tokens = row.tokens
        return "" if tokens is None else f"{tokens:,}"
    if col == "share":
        share = row.share
        return "" if share is None else f"{share * 100:.1f} %"
    if col == "test":
        return text_test_words(row.test)
    return None


def _sort_value(row: EntryRow, col: str) -> Any:
    e = row.entry
    if col == "order":
        return float(e.order)
    if col == "depth":
        return e.depth
    if col == "probability":
        return float(e.probability)
    if col == "scan_depth":
        return -1 if e.scan_depth is None else e.scan_depth
    if col == "tokens":
        return row.tokens or 0
    if col == "share":
        return row.share or 0.0
    if col == "constant":
        return int(e.constant)
    if col == "enabled":
        return int(not e.disable)
    if col == "fired":
        return fired_rank(row.trace)
    if col == "book":
        return (row.book_index, _display(row, col))
    d = _display(row, col)
    return "" if d is None else str(d).lower()


def _tooltip(row: EntryRow, col: str) -> str | None:
    e = row.entry
    if col == "entry":
        content = e.content if len(e.content) <= 400 else e.content[:400] + "…"
        return f"{entry_title(e)}\n\n{content}" if content else entry_title(e)
    if col in ("fired", "why"):
        return "No preview yet" if row.trace is None else why_tooltip(row.trace)
    if col == "test" and row.test is not None:
        return why_tooltip(row.test)
    if col == "share" and row.budget:
        return f"of the {row.budget:,}-token lorebook budget"
    if col in ("keys", "secondary"):
        keys = e.keys if col == "keys" else e.secondary_keys
        return "\n".join(keys) or None
    return None
