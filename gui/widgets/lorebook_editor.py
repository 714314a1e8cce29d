"""Lorebook editor: the World Info entries attached to the chat, why each fired, and a test box.

One table row per entry of every lorebook in ``request.lorebooks`` (book order, then entry
order) with its settings (keys, secondary keys, logic, constant, enabled, order, position,
depth, probability, scan depth) and, from the current preview's ``lorebook_trace``, whether it
fired, why (the trace code in words plus its evidence), its tokens and its share of the
lorebook budget. Below: an entry form and a "test text" box that runs
``engine.lorebook.test_text`` on any text and marks the entries it would trigger.

Data flows one way (STYLE.md 4): the table model is a read-only adapter; its check boxes and
the form emit :attr:`LorebookTab.entry_edited` ``(lorebook_id, old_entry, new_entry)`` and the
main window routes that through its undo stack and store, then calls :meth:`set_state` again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.schema import InsertionPosition, LorebookEntry, SelectiveLogic

from ..roles import ROW_ROLE, SORT_ROLE
from .block_inspector import describe_detail, is_dark, reason_in_words

#: Delay between the last keystroke in the test box and the test run (ms).
TEST_TEXT_DEBOUNCE_MS = 300

#: Custom item roles.

LOGIC_WORDS: dict[SelectiveLogic, str] = {
    SelectiveLogic.AND_ANY: "AND ANY",
    SelectiveLogic.NOT_ALL: "NOT ALL",
    SelectiveLogic.NOT_ANY: "NOT ANY",
    SelectiveLogic.AND_ALL: "AND ALL",
}

POSITION_WORDS: dict[InsertionPosition, str] = {
    InsertionPosition.BEFORE_CHAR: "Before character",
    InsertionPosition.AFTER_CHAR: "After character",
    InsertionPosition.AN_TOP: "Author's note top",
    InsertionPosition.AN_BOTTOM: "Author's note bottom",
    InsertionPosition.AT_DEPTH: "At depth",
    InsertionPosition.BEFORE_EXAMPLES: "Before examples",
    InsertionPosition.AFTER_EXAMPLES: "After examples",
    InsertionPosition.OUTLET: "Outlet",
}

ROLE_WORDS = {0: "system", 1: "user", 2: "assistant"}

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


# ---------------------------------------------------------------------------- helpers
def split_keys(text: str) -> list[str]:
    """Comma-separated keys → list; a regex key ``/a,b/i`` keeps its commas.

    Whitespace around keys is dropped, empty keys are skipped. A key starting with ``/`` runs
    to the next unescaped ``/`` followed only by flag letters and a comma (or the end).
    """
    keys: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            break
        end = -1
        if text[i] == "/":
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "/":
                    k = j + 1
                    while k < n and text[k].isalpha():
                        k += 1
                    rest = k
                    while rest < n and text[rest] in " \t":
                        rest += 1
                    if rest >= n or text[rest] == ",":
                        end = k
                        break
                j += 1
        if end < 0:
            comma = text.find(",", i)
            end = n if comma < 0 else comma
        key = text[i:end].strip()
        if key:
            keys.append(key)
        i = end + 1
    return keys


def join_keys(keys: list[str]) -> str:
    """List of keys → the comma-separated text :func:`split_keys` reads back."""
    return ", ".join(keys)


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def trace_key(book_index: Any, uid: Any) -> tuple[int, str]:
    """Key matching a trace record to an entry: ``(book_index, str(uid))``."""
    try:
        index = int(book_index)
    except (TypeError, ValueError):
        index = -1
    return index, str(uid)


def lorebook_budget(settings: Any, context_limit: int) -> int:
    """The lorebook token budget for ``context_limit`` (tokens).

    Delegates to ``engine.lorebook.compute_budget`` (the rule activation uses) when available;
    otherwise SillyTavern's rule (``world-info.js``): ``round(budget_percent × limit / 100)``
    half up, at least 1, capped by ``budget_cap`` when that is above 0.
    """
    wi = _field(settings, "world_info", settings)
    try:
        from engine.lorebook import compute_budget
    except ImportError:
        compute_budget = None
    if compute_budget is not None and not isinstance(wi, dict):
        return int(compute_budget(wi, context_limit))
    percent = float(_field(wi, "budget_percent", 25) or 0)
    cap = int(_field(wi, "budget_cap", 0) or 0)
    budget = max(1, math.floor(percent * max(0, context_limit) / 100 + 0.5))
    if cap > 0:
        budget = min(budget, cap)
    return budget


def books_for(request: Any) -> list[Any]:
    """The books World Info runs on: ``request.lorebooks`` plus the card's embedded book.

    Same rule as ``engine.pipeline`` (so trace ``book_index`` values line up): the card's
    ``character_book`` is appended, named ``"<card> (card)"`` when unnamed, unless a book of
    that name is already attached.
    """
    books = list(request.lorebooks)
    card = getattr(request, "character", None)
    embedded = getattr(card, "character_book", None) if card is not None else None
    if embedded is not None and embedded.entries:
        if not embedded.name:
            embedded = embedded.model_copy(update={"name": f"{card.name or 'character'} (card)"})
        if all(b.name != embedded.name for b in books):
            books.append(embedded)
    return books


@dataclass(frozen=True)
class EntryRow:
    """One table row: an entry, where it lives, and what the preview and test said about it.

    ``trace``/``test`` are trace records (dicts with ``activated``, ``code``, ``detail``,
    ``tokens``) or ``None``; ``budget`` is the lorebook budget in tokens (0 when unknown);
    ``embedded`` marks the card's own book (not in ``request.lorebooks``).
    """

    book_index: int
    book_name: str
    lorebook_id: str
    entry: LorebookEntry
    trace: dict[str, Any] | None = None
    test: dict[str, Any] | None = None
    budget: int = 0
    embedded: bool = False

    @property
    def key(self) -> tuple[int, str]:
        return trace_key(self.book_index, self.entry.uid)

    @property
    def editable(self) -> bool:
        return bool(self.lorebook_id)


def _record_dict(record: Any) -> dict[str, Any]:
    if isinstance(record, dict):
        return record
    dump = getattr(record, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return {k: getattr(record, k, None) for k in ("book", "book_index", "uid", "comment", "activated",
                                                  "code", "detail", "tokens")}


def index_trace(records: Any) -> dict[tuple[int, str], dict[str, Any]]:
    """Trace records by ``(book_index, str(uid))``; an activated record wins over others."""
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for raw in records or []:
        rec = _record_dict(raw)
        key = trace_key(rec.get("book_index"), rec.get("uid"))
        if key in out and out[key].get("activated") and not rec.get("activated"):
            continue
        out[key] = rec
    return out


# ---------------------------------------------------------------------------- model
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
        return list(self._rows)

    def row_at(self, row: int) -> EntryRow:
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
                    return QColor(_status_colour(rec, self._dark)[0])
            return None
        if role == Qt.ItemDataRole.BackgroundRole and col in ("fired", "test"):
            rec = row.trace if col == "fired" else row.test
            if rec is not None:
                return QColor(_status_colour(rec, self._dark)[1])
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


_HEADER_TIPS = {
    "fired": "Whether the entry fired in the current preview",
    "why": "The activation trace: why it fired or not",
    "tokens": "Tokens of the entry's content under the active profile",
    "share": "Tokens as a share of the lorebook budget",
    "test": "What the text in the test box would do",
    "order": "Insertion order and budget priority (higher is more important)",
    "scan_depth": "Messages scanned for keys (global when empty)",
}


def _status_colour(rec: dict[str, Any], dark: bool) -> tuple[str, str]:
    code = rec.get("code")
    if rec.get("activated"):
        return ("#9be3b4", "#1d3b28") if dark else ("#1e5e36", "#e7f5ec")
    if code == "LOREBOOK_BUDGET":
        return ("#ffb3ad", "#4a1f1c") if dark else ("#8a1f1c", "#fbe9e8")
    if code in ("LOREBOOK_INVALID_KEY",):
        return ("#ffd27a", "#4a3b12") if dark else ("#7a5a00", "#fff4d6")
    return ("#b8bec8", "#2a2d33") if dark else ("#5d6470", "#f1f3f5")


def _fired_text(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return ""
    if rec.get("activated"):
        return "✓ fired"
    if rec.get("code") == "LOREBOOK_BUDGET":
        return "✗ over budget"
    if rec.get("code") == "LOREBOOK_DISABLED":
        return "– disabled"
    return "– no"


def _why_text(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return ""
    words = reason_in_words(str(rec.get("code") or ""))
    detail = describe_detail(rec.get("detail"))
    return f"{words}: {detail}" if detail else words


def _tokens(rec: dict[str, Any] | None) -> int | None:
    if rec is None:
        return None
    tokens = rec.get("tokens")
    return int(tokens) if tokens is not None else None


def _share(row: EntryRow) -> float | None:
    tokens = _tokens(row.trace)
    if tokens is None or row.budget <= 0:
        return None
    return tokens / row.budget


def _entry_title(entry: LorebookEntry) -> str:
    """``#uid comment``; without a comment, the first keys in brackets (real books often lack titles)."""
    if entry.comment:
        return f"#{entry.uid} {entry.comment}"
    if entry.keys:
        keys = join_keys(entry.keys[:3]) + (", …" if len(entry.keys) > 3 else "")
        return f"#{entry.uid} [{keys}]"
    return f"#{entry.uid}"


def _display(row: EntryRow, col: str) -> Any:
    e = row.entry
    if col == "book":
        return row.book_name or f"Book {row.book_index + 1}"
    if col == "entry":
        return _entry_title(e)
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
        return _fired_text(row.trace)
    if col == "why":
        return _why_text(row.trace)
    if col == "tokens":
        tokens = _tokens(row.trace)
        return "" if tokens is None else f"{tokens:,}"
    if col == "share":
        share = _share(row)
        return "" if share is None else f"{share * 100:.1f} %"
    if col == "test":
        if row.test is None:
            return ""
        if row.test.get("activated"):
            return "✓ would fire"
        if row.test.get("code") == "LOREBOOK_BUDGET":
            return "✗ over budget"
        return "– " + reason_in_words(str(row.test.get("code") or "")).lower()
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
        return _tokens(row.trace) or 0
    if col == "share":
        return _share(row) or 0.0
    if col == "constant":
        return int(e.constant)
    if col == "enabled":
        return int(not e.disable)
    if col == "fired":
        rec = row.trace
        return -1 if rec is None else (2 if rec.get("activated") else (1 if rec.get("code") == "LOREBOOK_BUDGET" else 0))
    if col == "book":
        return (row.book_index, _display(row, col))
    d = _display(row, col)
    return "" if d is None else str(d).lower()


def _tooltip(row: EntryRow, col: str) -> str | None:
    e = row.entry
    if col == "entry":
        content = e.content if len(e.content) <= 400 else e.content[:400] + "…"
        return f"{_entry_title(e)}\n\n{content}" if content else _entry_title(e)
    if col in ("fired", "why"):
        rec = row.trace
        if rec is None:
            return "No preview yet"
        code = rec.get("code")
        return f"{_why_text(rec)}\n({code})"
    if col == "test" and row.test is not None:
        return f"{_why_text(row.test)}\n({row.test.get('code')})"
    if col == "share" and row.budget:
        return f"of the {row.budget:,}-token lorebook budget"
    if col in ("keys", "secondary"):
        keys = e.keys if col == "keys" else e.secondary_keys
        return "\n".join(keys) or None
    return None


class _EntriesProxy(QSortFilterProxyModel):
    """Sorts by :data:`SORT_ROLE`; filters by text and by "fired only"."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)
        # rows keep their place when a preview updates them in place (a budget change must not
        # re-sort the table under the reader); the user's own sort click still sorts
        self.setDynamicSortFilter(False)
        self.fired_only = False

    def set_fired_only(self, value: bool) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt ≥ 6.9; invalidateFilter is deprecated there
            self.beginFilterChange()
            self.fired_only = value
            self.endFilterChange()
        else:  # pragma: no cover - older Qt
            self.fired_only = value
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        model = self.sourceModel()
        if self.fired_only:
            row = model.row_at(source_row)
            if not (row.trace or {}).get("activated"):  # fired in the preview; test text is not the preview
                return False
        return super().filterAcceptsRow(source_row, source_parent)


# ---------------------------------------------------------------------------- form
class EntryForm(QGroupBox):
    """Editor of one entry. :meth:`changes` gives the ``model_copy`` update of what the user changed.

    Only fields whose widget value differs from what :meth:`load` put there are reported, so a
    value the widget cannot show exactly (an order of 100.25 in a whole-number box) is never
    rewritten by accident.
    """

    apply_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Entry", parent)
        self._row: EntryRow | None = None
        self._loaded: dict[str, Any] = {}
        self._loading = False

        grid = QGridLayout(self)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        self.where = QLabel("Select an entry in the table.")
        self.where.setWordWrap(True)
        grid.addWidget(self.where, 0, 0, 1, 4)

        def label(text: str) -> QLabel:
            lab = QLabel(text)
            lab.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            return lab

        self.comment = QLineEdit()
        self.comment.setPlaceholderText("title / memo")
        grid.addWidget(label("Title:"), 1, 0)
        grid.addWidget(self.comment, 1, 1, 1, 3)
        self.keys = QLineEdit()
        self.keys.setPlaceholderText("comma-separated; /regex/i allowed")
        grid.addWidget(label("Keys:"), 2, 0)
        grid.addWidget(self.keys, 2, 1, 1, 3)
        self.secondary = QLineEdit()
        self.secondary.setPlaceholderText("optional filter keys")
        grid.addWidget(label("Secondary:"), 3, 0)
        grid.addWidget(self.secondary, 3, 1, 1, 3)

        self.logic = QComboBox()
        for logic, words in LOGIC_WORDS.items():
            self.logic.addItem(words, int(logic))
        self.position = QComboBox()
        for pos, words in POSITION_WORDS.items():
            self.position.addItem(words, int(pos))
        for combo in (self.logic, self.position):
            # Let the panel shrink: combos otherwise claim their longest item's width.
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(6)
        self.order = QDoubleSpinBox()
        self.order.setRange(-1_000_000, 1_000_000)
        self.order.setDecimals(0)
        self.depth = QSpinBox()
        self.depth.setRange(0, 10_000)
        self.probability = QDoubleSpinBox()
        self.probability.setRange(0, 100)
        self.probability.setDecimals(0)
        self.probability.setSuffix(" %")
        self.scan_depth = QSpinBox()
        self.scan_depth.setRange(-1, 1000)
        self.scan_depth.setSpecialValueText("global")
        # The six short fields sit in pairs when there is room, one per row when narrow.
        self._pairs = [
            (label("Logic:"), self.logic, label("Position:"), self.position),
            (label("Order:"), self.order, label("Depth:"), self.depth),
            (label("Probability:"), self.probability, label("Scan depth:"), self.scan_depth),
        ]
        self._pair_grid = QGridLayout()
        self._pair_grid.setContentsMargins(0, 0, 0, 0)
        self._two_columns: bool | None = None
        self._arrange_pairs(True)
        grid.addLayout(self._pair_grid, 4, 0, 1, 4)

        flags = QHBoxLayout()
        self.constant = QCheckBox("Constant")
        self.constant.setToolTip("Always on and protected: never dropped for the budget")
        self.enabled = QCheckBox("Enabled")
        flags.addWidget(self.constant)
        flags.addWidget(self.enabled)
        flags.addStretch(1)
        grid.addLayout(flags, 7, 0, 1, 4)

        self.content = QPlainTextEdit()
        self.content.setMinimumHeight(70)
        content_label = label("Content:")
        content_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        grid.addWidget(content_label, 8, 0)
        grid.addWidget(self.content, 8, 1, 1, 3)
        grid.setRowStretch(8, 1)

        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(label("Preview:"), 9, 0)
        grid.addWidget(self.status, 9, 1, 1, 3)

        buttons = QHBoxLayout()
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip("Save the entry (undo with Ctrl+Z)")
        self.revert_button = QPushButton("Revert")
        buttons.addStretch(1)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.apply_button)
        grid.addLayout(buttons, 10, 0, 1, 4)

        self.apply_button.clicked.connect(self.apply_requested)
        self.revert_button.clicked.connect(self._on_revert_button_clicked)
        for edit in (self.comment, self.keys, self.secondary):
            edit.returnPressed.connect(self.apply_requested)
            edit.textChanged.connect(self._on_field_changed)
        for box in (self.constant, self.enabled):
            box.toggled.connect(self._on_field_changed)
        for combo in (self.logic, self.position):
            combo.currentIndexChanged.connect(self._on_field_changed)
        for spin in (self.order, self.depth, self.probability, self.scan_depth):
            spin.valueChanged.connect(self._on_field_changed)
        self.content.textChanged.connect(self._on_field_changed)
        self.load(None)

    # -- layout
    #: Below this width (px) the short fields go one per row.
    NARROW_WIDTH = 440

    def _arrange_pairs(self, two_columns: bool) -> None:
        if two_columns == self._two_columns:
            return
        self._two_columns = two_columns
        g = self._pair_grid
        for pair in self._pairs:
            for w in pair:
                g.removeWidget(w)
        for r, (lab1, w1, lab2, w2) in enumerate(self._pairs):
            if two_columns:
                g.addWidget(lab1, r, 0)
                g.addWidget(w1, r, 1)
                g.addWidget(lab2, r, 2)
                g.addWidget(w2, r, 3)
            else:
                g.addWidget(lab1, 2 * r, 0)
                g.addWidget(w1, 2 * r, 1)
                g.addWidget(lab2, 2 * r + 1, 0)
                g.addWidget(w2, 2 * r + 1, 1)
        for c in range(4):
            g.setColumnStretch(c, 1 if (c in (1, 3) and two_columns) or (c == 1 and not two_columns) else 0)

    def resizeEvent(self, event: Any) -> None:
        self._arrange_pairs(event.size().width() >= self.NARROW_WIDTH)
        super().resizeEvent(event)

    # -- state
    def row(self) -> EntryRow | None:
        return self._row

    def load(self, row: EntryRow | None) -> None:
        """Fill the form from ``row`` (``None`` clears and disables it)."""
        self._loading = True
        try:
            self._row = row
            e = row.entry if row is not None else LorebookEntry()
            self.comment.setText(e.comment)
            self.keys.setText(join_keys(e.keys))
            self.secondary.setText(join_keys(e.secondary_keys))
            self.logic.setCurrentIndex(max(0, self.logic.findData(int(e.selective_logic))))
            self.constant.setChecked(e.constant)
            self.enabled.setChecked(not e.disable)
            self.order.setValue(float(e.order))
            self.position.setCurrentIndex(max(0, self.position.findData(int(e.position))))
            self.depth.setValue(int(e.depth))
            self.probability.setValue(float(e.probability))
            self.scan_depth.setValue(-1 if e.scan_depth is None else int(e.scan_depth))
            self.content.setPlainText(e.content)
            self._loaded = self._values()
        finally:
            self._loading = False
        editable = row is not None and row.editable
        for w in (self.comment, self.keys, self.secondary, self.logic, self.constant, self.enabled,
                  self.order, self.position, self.depth, self.probability, self.scan_depth):
            w.setEnabled(editable)
        self.content.setReadOnly(not editable)
        if row is None:
            self.where.setText("Select an entry in the table.")
            self.status.setText("")
        else:
            where = f"<b>{_escape(row.book_name or 'Book')}</b> · {_escape(_entry_title(row.entry))}"
            if not row.editable:
                where += ("<br><i>Embedded in the character card: read-only here.</i>" if row.embedded else
                          "<br><i>This lorebook is not in the library: read-only here.</i>")
            self.where.setText(where)
            self.set_status(row)
        self._update_buttons()

    def set_status(self, row: EntryRow) -> None:
        rec = row.trace
        if rec is None:
            self.status.setText("no preview yet")
            return
        parts = [f"{_fired_text(rec)} — {_why_text(rec)}"]
        tokens = _tokens(rec)
        if tokens is not None:
            share = _share(row)
            parts.append(f"{tokens:,} tokens" + (f" ({share * 100:.1f} % of the {row.budget:,}-token "
                                                  "lorebook budget)" if share is not None else ""))
        self.status.setText("\n".join(parts))

    def is_dirty(self) -> bool:
        return self._row is not None and bool(self.changes())

    def _values(self) -> dict[str, Any]:
        return {
            "comment": self.comment.text(),
            "keys": tuple(split_keys(self.keys.text())),
            "secondary_keys": tuple(split_keys(self.secondary.text())),
            "selective_logic": self.logic.currentData(),
            "constant": self.constant.isChecked(),
            "disable": not self.enabled.isChecked(),
            "order": self.order.value(),
            "position": self.position.currentData(),
            "depth": self.depth.value(),
            "probability": self.probability.value(),
            "scan_depth": self.scan_depth.value(),
            "content": self.content.toPlainText(),
        }

    def changes(self) -> dict[str, Any]:
        """``{field: new value}`` for the fields the user changed since :meth:`load`."""
        if self._row is None:
            return {}
        now = self._values()
        out: dict[str, Any] = {}
        for name, value in now.items():
            if value == self._loaded.get(name):
                continue
            if name in ("keys", "secondary_keys"):
                out[name] = list(value)
            elif name == "selective_logic":
                out[name] = SelectiveLogic(value)
            elif name == "position":
                out[name] = InsertionPosition(value)
            elif name == "scan_depth":
                out[name] = None if value < 0 else int(value)
            elif name in ("order", "probability"):
                out[name] = int(value) if float(value).is_integer() else float(value)
            else:
                out[name] = value
        return out

    def set_values(self, update: dict[str, Any]) -> None:
        """Put ``update`` (a :meth:`changes`-style dict) into the widgets, as if typed."""
        for name, value in update.items():
            if name == "comment":
                self.comment.setText(value)
            elif name == "keys":
                self.keys.setText(join_keys(list(value)))
            elif name == "secondary_keys":
                self.secondary.setText(join_keys(list(value)))
            elif name == "selective_logic":
                self.logic.setCurrentIndex(max(0, self.logic.findData(int(value))))
            elif name == "constant":
                self.constant.setChecked(bool(value))
            elif name == "disable":
                self.enabled.setChecked(not value)
            elif name == "order":
                self.order.setValue(float(value))
            elif name == "position":
                self.position.setCurrentIndex(max(0, self.position.findData(int(value))))
            elif name == "depth":
                self.depth.setValue(int(value))
            elif name == "probability":
                self.probability.setValue(float(value))
            elif name == "scan_depth":
                self.scan_depth.setValue(-1 if value is None else int(value))
            elif name == "content":
                self.content.setPlainText(value)
        self._update_buttons()

    def _update_buttons(self) -> None:
        dirty = self.is_dirty()
        editable = self._row is not None and self._row.editable
        self.apply_button.setEnabled(editable and dirty)
        self.revert_button.setEnabled(dirty)

    def _on_field_changed(self, *_: Any) -> None:
        if not self._loading:
            self._update_buttons()

    def _on_revert_button_clicked(self) -> None:
        self.load(self._row)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---------------------------------------------------------------------------- tab
class LorebookTab(QWidget):
    """The lorebook inspector tab.

    Parameters
    ----------
    ctx:
        The application context (opaque; may be ``None``). ``ctx.registries.tokenizers`` is
        used for the test box's token counter when present.
    parent:
        Qt parent.

    Signals
    -------
    entry_edited(str lorebook_id, object old_entry, object new_entry)
        The user changed an entry (``new_entry = old_entry.model_copy(update=...)``). The tab
        does not store it; the owner routes it through the undo stack and calls
        :meth:`set_state` with the new request and preview.
    """

    entry_edited = Signal(str, object, object)

    def __init__(self, ctx: Any = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ctx = ctx
        self._registry: Any = None
        self._request: Any = None
        self._preview: Any = None
        self._ids: list[str] = []
        self._test_trace: dict[tuple[int, str], dict[str, Any]] | None = None
        self._selected_key: tuple[int, str] | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.summary = QLabel("No chat open.")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)

        bar = QHBoxLayout()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter entries (title, keys, book)…")
        self.filter_edit.setClearButtonEnabled(True)
        self.fired_only = QCheckBox("Fired only")
        self.fired_only.setToolTip("Show only the entries that fired in the preview (test-text hits are "
                                   "marked in the Test column)")
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.fired_only)
        layout.addLayout(bar)

        self.model = LorebookEntriesModel(self)
        self.proxy = _EntriesProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        for key, width in (("book", 72), ("entry", 136), ("keys", 150), ("secondary", 100), ("logic", 70),
                           ("constant", 70), ("enabled", 64), ("order", 52), ("position", 120),
                           ("depth", 48), ("probability", 76), ("scan_depth", 72), ("fired", 86),
                           ("why", 380), ("tokens", 56), ("share", 86), ("test", 150)):
            self.table.setColumnWidth(COLUMN_INDEX[key], width)

        self.form = EntryForm()
        form_scroll = QScrollArea()
        form_scroll.setWidgetResizable(True)
        form_scroll.setWidget(self.form)

        self.form.setTitle("")
        self.form.setFlat(True)
        test_box = QWidget()
        test_layout = QVBoxLayout(test_box)
        self.test_edit = QPlainTextEdit()
        self.test_edit.setPlaceholderText("Type or paste text to see which entries it would trigger…")
        self.test_button = QPushButton("Test")
        self.test_button.setToolTip("Run World Info activation on this text (Ctrl+Return)")
        self.test_result = QLabel("")
        self.test_result.setWordWrap(True)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        test_layout.addWidget(self.test_edit, 2)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.test_button)
        test_layout.addLayout(row)
        test_layout.addWidget(self.test_result, 1)

        # Tabs rather than side by side: the inspector panel is often under 500 px wide.
        self.bottom_tabs = QTabWidget()
        self.bottom_tabs.addTab(form_scroll, "Entry")
        self.bottom_tabs.addTab(test_box, "Test text")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.bottom_tabs)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)

        self._test_timer = QTimer(self)
        self._test_timer.setSingleShot(True)
        self._test_timer.setInterval(TEST_TEXT_DEBOUNCE_MS)
        self._test_timer.timeout.connect(self.run_test_text)

        self.filter_edit.textChanged.connect(self.proxy.setFilterFixedString)
        self.fired_only.toggled.connect(self.proxy.set_fired_only)
        self.table.selectionModel().currentRowChanged.connect(self._on_table_current_row_changed)
        self.model.edit_requested.connect(self._on_model_edit_requested)
        self.form.apply_requested.connect(self._on_form_apply_requested)
        self.test_button.clicked.connect(self.run_test_text)
        self.test_edit.textChanged.connect(self._test_timer.start)
        QShortcut(QKeySequence("Ctrl+Return"), self.test_edit, activated=self.run_test_text)

    # ------------------------------------------------------------------ public API
    def set_state(self, request: Any, preview: Any, lorebook_ids: list[str]) -> None:
        """Show the lorebooks of ``request`` with the activation trace of ``preview``.

        Parameters
        ----------
        request:
            The chat's ``PreviewRequest`` (``None``: no chat open).
        preview:
            The current ``ContextPreview`` (``None``: not computed yet).
        lorebook_ids:
            Library ids parallel to ``request.lorebooks``; empty when unknown (rows are then
            read-only).
        """
        self._request = request
        self._preview = preview
        self._ids = list(lorebook_ids or [])
        if self.test_edit.toPlainText().strip() and request is not None:
            self._test_trace = self._compute_test_trace(self.test_edit.toPlainText())
        else:
            self._test_trace = None
        self._rebuild()

    def rows(self) -> list[EntryRow]:
        """The rows shown (all books, book order), for tests and the screenshot."""
        return self.model.rows()

    def select_entry(self, book_index: int, uid: Any, *, scroll: bool = True) -> bool:
        """Select the row of entry ``uid`` in book ``book_index``; ``False`` when absent."""
        key = trace_key(book_index, uid)
        for i, row in enumerate(self.model.rows()):
            if row.key == key:
                proxy_index = self.proxy.mapFromSource(self.model.index(i, 0))
                if not proxy_index.isValid():
                    return False
                self.table.setCurrentIndex(proxy_index)
                if scroll:
                    self.table.scrollTo(proxy_index)
                return True
        return False

    def run_test_text(self) -> None:
        """Run ``engine.lorebook.test_text`` on the test box and mark the entries it triggers."""
        self._test_timer.stop()
        text = self.test_edit.toPlainText()
        if self._request is None:
            self.test_result.setText("Open a chat first.")
            return
        if not text.strip():
            self._test_trace = None
            self.test_result.setText("")
        else:
            self._test_trace = self._compute_test_trace(text)
        self._rebuild()

    # ------------------------------------------------------------------ internals
    def _tokenizers(self) -> Any:
        if self._registry is None:
            registry = getattr(getattr(self._ctx, "registries", None), "tokenizers", None)
            if registry is None:
                from engine.tokenizers import default_tokenizer_registry

                registry = default_tokenizer_registry()
            self._registry = registry
        return self._registry

    def _profile_and_limit(self) -> tuple[str, int]:
        """Tokenizer profile and the context size World Info budgets against (tokens).

        Mirrors ``engine.pipeline``: activation gets ``context_limit − reply_reserve``
        (``preview.budget``) as its context limit.
        """
        request, preview = self._request, self._preview
        if preview is not None:
            return preview.tokenizer.profile, int(preview.budget)
        from engine.tokenizers import lookup_model

        settings = request.settings
        info = lookup_model(settings.model)
        limit = int(settings.context_limit or info.context_limit)
        try:
            reserve = settings.resolve_reply_reserve(limit)
        except Exception:
            reserve = 0
        return settings.tokenizer or info.profile, max(1, limit - reserve)

    def _budget(self) -> int:
        if self._request is None:
            return 0
        _, limit = self._profile_and_limit()
        return lorebook_budget(self._request.settings, limit)

    def _count_tokens(self) -> Callable[[str], int]:
        profile_name, _ = self._profile_and_limit()
        return self._tokenizers().get(profile_name).count

    def _compute_test_trace(self, text: str) -> dict[tuple[int, str], dict[str, Any]] | None:
        try:
            from engine.lorebook import test_text
        except ImportError:
            self.test_result.setText("The World Info engine is not available in this build.")
            return None
        request = self._request
        try:
            _, limit = self._profile_and_limit()
            result = test_text(books_for(request), text, request.settings.world_info,
                               count_tokens=self._count_tokens(), context_limit=limit,
                               **_optional_kwargs(test_text, _macro_names(request)))
        except Exception as exc:
            from gui.errors import user_error

            err = user_error(exc)
            self.test_result.setText(f"Test failed: {err.text} ({err.code})")
            return None
        trace = index_trace(_field(result, "trace", []))
        fired = [rec for rec in trace.values() if rec.get("activated")]
        dropped = [rec for rec in trace.values() if rec.get("code") == "LOREBOOK_BUDGET"]
        if fired:
            names = ", ".join(_record_title(r) for r in fired)
            msg = f"<b>{len(fired)} {'entry' if len(fired) == 1 else 'entries'} would fire:</b> {_escape(names)}"
        else:
            msg = "<b>No entry would fire.</b>"
        if dropped:
            msg += f"<br>{len(dropped)} matched but would be over the lorebook budget: " + _escape(
                ", ".join(_record_title(r) for r in dropped))
        used = _field(result, "used_tokens")
        budget = _field(result, "budget")
        if used is not None and budget:
            msg += f"<br>{used:,} of {budget:,} lorebook tokens."
        for diag in _field(result, "diagnostics", []) or []:
            msg += f"<br><span style='color:#b54708'>⚠ {_escape(str(diag))}</span>"
        self.test_result.setText(msg)
        return trace

    def _build_rows(self) -> list[EntryRow]:
        request = self._request
        if request is None:
            return []
        trace = index_trace(self._preview.lorebook_trace) if self._preview is not None else {}
        budget = self._budget()
        ids = self._ids if len(self._ids) == len(request.lorebooks) else []
        rows: list[EntryRow] = []
        for bi, book in enumerate(books_for(request)):
            book_id = ids[bi] if ids and bi < len(ids) else ""
            for entry in book.entries:
                key = trace_key(bi, entry.uid)
                rows.append(EntryRow(
                    book_index=bi, book_name=book.name, lorebook_id=book_id, entry=entry,
                    trace=trace.get(key) if self._preview is not None else None,
                    test=self._test_trace.get(key) if self._test_trace is not None else None,
                    budget=budget, embedded=bi >= len(request.lorebooks),
                ))
        return rows

    def _rebuild(self) -> None:
        keep_key = self._selected_key
        form_row = self.form.row()
        dirty = self.form.is_dirty()
        rows = self._build_rows()
        vbar, hbar = self.table.verticalScrollBar(), self.table.horizontalScrollBar()
        scroll = (vbar.value(), hbar.value())
        self.model.set_rows(rows, dark=is_dark(self))
        single_book = len({r.book_index for r in rows}) <= 1
        self.table.setColumnHidden(COLUMN_INDEX["book"], single_book)
        self._update_summary(rows)
        new_row = next((r for r in rows if keep_key is not None and r.key == keep_key), None)
        if new_row is not None:
            self.table.selectionModel().blockSignals(True)
            self.select_entry(new_row.book_index, new_row.entry.uid, scroll=False)
            self.table.selectionModel().blockSignals(False)
        # A live preview refresh must not move the table under the reader.
        vbar.setValue(scroll[0])
        hbar.setValue(scroll[1])
        if new_row is None:
            self._selected_key = None
            self.form.load(None)
        elif dirty and form_row is not None and form_row.key == new_row.key:
            # Re-base the form on the new entry and keep only the edits it does not already
            # hold: an applied edit comes back clean, typing in progress survives a preview.
            pending = self.form.changes()
            self.form.load(new_row)
            remaining = {k: v for k, v in pending.items() if getattr(new_row.entry, k, None) != v}
            if remaining:
                self.form.set_values(remaining)
        else:
            self.form.load(new_row)

    def _update_summary(self, rows: list[EntryRow]) -> None:
        request = self._request
        if request is None:
            self.summary.setText("No chat open.")
            return
        books = len(books_for(request))
        if not books:
            self.summary.setText("No lorebook is attached to this chat.")
            return
        unknown_ids = any(not r.editable and not r.embedded for r in rows)
        read_only = "<br><i>Read-only: the library ids of these books are not known.</i>" if unknown_ids else ""
        text = f"{books} lorebook{'s' if books != 1 else ''} · {len(rows)} entries"
        if self._preview is None:
            self.summary.setText(text + " · preview pending…" + read_only)
            return
        fired = [r for r in rows if (r.trace or {}).get("activated")]
        dropped = [r for r in rows if (r.trace or {}).get("code") == "LOREBOOK_BUDGET"]
        used = sum(_tokens(r.trace) or 0 for r in fired)
        budget = self._budget()
        text += f" · <b>{len(fired)} fired</b> in the preview"
        if dropped:
            text += f" · {len(dropped)} over budget"
        if budget:
            text += f" · {used:,} / {budget:,} lorebook tokens ({used / budget * 100:.0f} %)"
        self.summary.setText(text + read_only)

    def _emit_edit(self, row: EntryRow, update: dict[str, Any]) -> None:
        if not row.editable or not update:
            return
        new_entry = row.entry.model_copy(update=update)
        self.entry_edited.emit(row.lorebook_id, row.entry, new_entry)

    def _on_model_edit_requested(self, source_row: int, update: dict) -> None:
        self._emit_edit(self.model.row_at(source_row), update)

    def _on_form_apply_requested(self) -> None:
        row = self.form.row()
        if row is None:
            return
        self._emit_edit(row, self.form.changes())

    def _on_table_current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        row = self.proxy.data(current, ROW_ROLE)
        if row is None:
            return
        self._selected_key = row.key
        self.form.load(row)


def _macro_names(request: Any) -> dict[str, Any]:
    """``{{user}}``/``{{char}}`` names and the card/persona, chosen as ``engine.pipeline`` does."""
    card = request.character
    persona = request.persona
    user = (persona.name if persona is not None and persona.name else None) or request.chat.user_name or "User"
    char = ((card.nickname or card.name) if card is not None and (card.nickname or card.name)
            else (request.chat.character_name or ""))
    return {"user_name": user, "char_name": char, "character": card, "persona": persona}


def _optional_kwargs(fn: Callable[..., Any], candidates: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``candidates`` that ``fn`` accepts as keyword arguments."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(candidates)
    return {k: v for k, v in candidates.items() if k in params}


def _record_title(rec: dict[str, Any]) -> str:
    comment = rec.get("comment") or ""
    title = f"#{rec.get('uid')} {comment}".strip()
    book = rec.get("book")
    return f"{title} ({book})" if book else title
