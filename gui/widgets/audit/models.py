"""Read-only table models of the Audit inspector: an audit's blocks, and its comparison with the preview."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from engine.audit_compare import CHANGE_STATUS, CHANGE_WORDS, CompareRow
from engine.schema import PreviewBlock
from engine.vocabulary import STATUS_COLOURS

from ...labels import MARKS, kind_label
from ...roles import ROW_ROLE
from ...theme import status_qcolors
from ...words import reason_in_words

_Index = QModelIndex | QPersistentModelIndex
T = TypeVar("T")

BLOCK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("position", "#"),
    ("kind", "Kind"),
    ("role", "Role"),
    ("source", "Source"),
    ("tokens", "Tokens"),
    ("status", "Status"),
    ("reason", "Reason"),
    ("flags", "Flags"),
)

COMPARE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("change", "Change"),
    ("kind", "Kind"),
    ("source", "Source"),
    ("audit_tokens", "Tokens then"),
    ("preview_tokens", "Tokens now"),
    ("delta", "Δ tokens"),
    ("status", "Status then → now"),
    ("reason", "Reason now"),
)

_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_COLOUR_ROLES = (Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.BackgroundRole)


class _ReadOnlyTableModel(QAbstractTableModel, Generic[T]):
    """Rows of ``T`` under fixed ``COLUMNS`` (key, header); read-only; subclasses implement ``data``."""

    COLUMNS: tuple[tuple[str, str], ...] = ()

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._items: list[T] = []
        self._dark = False

    def _reset(self, items: Sequence[T], dark: bool) -> None:
        self.beginResetModel()
        self._items = list(items)
        self._dark = dark
        self.endResetModel()

    def _item(self, index: _Index) -> tuple[T, str] | None:
        """The row's item and its column key, or ``None`` for an invalid index."""
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        return self._items[index.row()], self.COLUMNS[index.column()][0]

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._items)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section][1]
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable


class AuditBlocksModel(_ReadOnlyTableModel[PreviewBlock]):
    """Read-only table of an audit's prompt blocks (``PromptContextAudit.blocks``) in actual order."""

    COLUMNS = BLOCK_COLUMNS

    def set_blocks(self, blocks: Sequence[PreviewBlock], *, dark: bool = False) -> None:
        """Replace all rows (model reset)."""
        self._reset(blocks, dark)

    def rows(self) -> list[PreviewBlock]:
        """The blocks shown, in row order."""
        return list(self._items)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        found = self._item(index)
        if found is None:
            return None
        block, col = found
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(block, col)
        if role == ROW_ROLE:
            return block
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(block, col)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in ("position", "tokens"):
            return _RIGHT
        if col == "status" and role in _COLOUR_ROLES and block.status in STATUS_COLOURS:
            colours = status_qcolors(block.status, self._dark)
            return colours[0] if role == Qt.ItemDataRole.ForegroundRole else colours[1]
        return None

    @staticmethod
    def _display(block: PreviewBlock, col: str) -> str:
        if col == "position":
            return str(block.position)
        if col == "tokens":
            if block.status == "truncated" and block.original_tokens is not None:
                return f"{block.tokens:,} (of {block.original_tokens:,})"
            return f"{block.tokens:,}"
        if col == "reason":
            return reason_in_words(block.reason)
        if col == "flags":
            on = (("protected", block.protected), ("pinned", block.pinned), ("group", bool(block.group)))
            return " ".join(MARKS[name] for name, flag in on if flag)
        if col == "kind":
            return kind_label(block.kind)
        return str(getattr(block, col) or "")

    @staticmethod
    def _tooltip(block: PreviewBlock, col: str) -> str | None:
        if col == "reason":
            return block.reason
        if col == "flags":
            parts = [name for name, on in (("protected", block.protected), ("pinned", block.pinned)) if on]
            if block.group:
                parts.append(f"tool group {block.group}")
            return ", ".join(parts) or None
        text = block.text
        return text[:300] + ("…" if len(text) > 300 else "") if text else None


class CompareModel(_ReadOnlyTableModel[CompareRow]):
    """Read-only table of :class:`~engine.audit_compare.CompareRow` items."""

    COLUMNS = COMPARE_COLUMNS

    def set_rows(self, rows: Sequence[CompareRow], *, dark: bool = False) -> None:
        """Replace all rows (model reset)."""
        self._reset(rows, dark)

    def rows(self) -> list[CompareRow]:
        """The rows shown, in row order."""
        return list(self._items)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        found = self._item(index)
        if found is None:
            return None
        r, col = found
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(r, col)
        if role == ROW_ROLE:
            return r
        if role == Qt.ItemDataRole.ToolTipRole and col == "reason":
            return f"then: {r.audit_reason or '—'}\nnow: {r.preview_reason or '—'}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col in ("audit_tokens", "preview_tokens", "delta"):
            return _RIGHT
        if col == "change" and role in _COLOUR_ROLES:
            status = CHANGE_STATUS.get(r.change)
            if status is None:
                return None
            colours = status_qcolors(status, self._dark)
            return colours[0] if role == Qt.ItemDataRole.ForegroundRole else colours[1]
        return None

    @staticmethod
    def _display(r: CompareRow, col: str) -> Any:
        if col == "change":
            return CHANGE_WORDS[r.change]
        if col == "audit_tokens":
            return "" if r.audit_tokens is None else f"{r.audit_tokens:,}"
        if col == "preview_tokens":
            return "" if r.preview_tokens is None else f"{r.preview_tokens:,}"
        if col == "delta":
            return f"{r.delta:+,}" if r.delta else "0"
        if col == "status":
            return f"{r.audit_status or '—'} → {r.preview_status or '—'}"
        if col == "reason":
            return reason_in_words(r.preview_reason or r.audit_reason)
        return getattr(r, col)
