"""Audit inspector: the stored last generation audit of the chat (SPEC §6).

Shows status, generation id, provider, model, time, the tokenizer profile (with a warning when
counts are approximate), context limit / reply reserve / final prompt tokens, every prompt
block with its stable reason, the final provider messages as read-only JSON with a Copy
button, interceptor diagnostics and the normalized error code in words. A "Compare with
preview" view lists what changed since that generation: blocks added, dropped, newly
excluded or included, and token deltas, matched by block ``source``
(:func:`compare_audit_with_preview`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QStackedWidget,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.vocabulary import STATUS_COLOURS

from ..labels import MARKS, kind_label
from ..roles import ROW_ROLE
from ..theme import is_dark, status_hex, status_qcolors
from ..words import reason_in_words

EMPTY_TEXT = "No generation yet for this chat"


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _status_colours(status: str, dark: bool) -> tuple[QColor, QColor] | None:
    """The block status's colours (``None`` for a status the vocabulary does not colour)."""
    return status_qcolors(status, dark) if status in STATUS_COLOURS else None


# ---------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class CompareRow:
    """One block in the comparison of an audit with the current preview.

    Attributes
    ----------
    source, kind:
        The block's stable origin (``message:12``, ``lorebook:Book:3``, ...) and kind.
    change:
        ``added`` (only in the preview), ``dropped`` (only in the audit), ``now_excluded``
        (sent then, excluded now), ``now_included`` (excluded then, sent now), ``changed``
        (tokens or status differ otherwise) or ``same``.
    audit_tokens, preview_tokens:
        The block's tokens then and now (``None`` where the block is absent).
    delta:
        ``preview_tokens − audit_tokens`` with absent counted as 0 (tokens).
    audit_status, preview_status, audit_reason, preview_reason:
        Status and stable reason code then and now (``None`` where absent).
    """

    source: str
    kind: str
    change: str
    audit_tokens: int | None
    preview_tokens: int | None
    delta: int
    audit_status: str | None
    preview_status: str | None
    audit_reason: str | None
    preview_reason: str | None


CHANGE_WORDS: dict[str, str] = {
    "added": "added",
    "dropped": "dropped",
    "now_excluded": "now excluded",
    "now_included": "now included",
    "changed": "changed",
    "same": "unchanged",
}

_SENT = ("kept", "truncated")


def _keyed(blocks: Any) -> list[tuple[tuple[str, int], Any]]:
    """Blocks keyed by ``(source, occurrence)`` so repeated sources match in order."""
    seen: Counter[str] = Counter()
    out = []
    for block in blocks or []:
        source = str(_field(block, "source", ""))
        out.append(((source, seen[source]), block))
        seen[source] += 1
    return out


def _row(audit_block: Any, preview_block: Any) -> CompareRow:
    ref = preview_block if preview_block is not None else audit_block
    a_tokens = int(_field(audit_block, "tokens", 0)) if audit_block is not None else None
    p_tokens = int(_field(preview_block, "tokens", 0)) if preview_block is not None else None
    a_status = _field(audit_block, "status") if audit_block is not None else None
    p_status = _field(preview_block, "status") if preview_block is not None else None
    if audit_block is None:
        change = "added"
    elif preview_block is None:
        change = "dropped"
    elif a_status in _SENT and p_status == "excluded":
        change = "now_excluded"
    elif a_status == "excluded" and p_status in _SENT:
        change = "now_included"
    elif (a_status != p_status or a_tokens != p_tokens
          or _field(audit_block, "reason") != _field(preview_block, "reason")):
        change = "changed"
    else:
        change = "same"
    return CompareRow(
        source=str(_field(ref, "source", "")),
        kind=str(_field(ref, "kind", "")),
        change=change,
        audit_tokens=a_tokens,
        preview_tokens=p_tokens,
        delta=(p_tokens or 0) - (a_tokens or 0),
        audit_status=a_status,
        preview_status=p_status,
        audit_reason=_field(audit_block, "reason") if audit_block is not None else None,
        preview_reason=_field(preview_block, "reason") if preview_block is not None else None,
    )


def compare_audit_with_preview(audit_blocks: Any, preview_blocks: Any) -> list[CompareRow]:
    """What changed between the blocks of a stored audit and those of the current preview.

    Blocks are matched by ``source`` (the n-th block with a given source in the audit matches
    the n-th one in the preview). The result follows the preview's prompt order; a block only
    in the audit is placed after the row of the audit block that preceded it.

    Parameters
    ----------
    audit_blocks, preview_blocks:
        Sequences of ``PreviewBlock`` (or dicts with ``source``, ``kind``, ``tokens``,
        ``status``, ``reason``), in prompt order. ``None`` is treated as empty.

    Returns
    -------
    list[CompareRow]
        One row per distinct block of either side (``len`` = matched + added + dropped).
    """
    audit = _keyed(audit_blocks)
    preview = _keyed(preview_blocks)
    audit_pos = {key: i for i, (key, _) in enumerate(audit)}
    preview_keys = {key for key, _ in preview}
    rows: list[CompareRow] = []
    ai = 0

    def flush_until(limit: int) -> None:
        nonlocal ai
        while ai < limit:
            key, block = audit[ai]
            if key not in preview_keys:
                rows.append(_row(block, None))
            ai += 1

    for key, p_block in preview:
        j = audit_pos.get(key)
        if j is None:
            rows.append(_row(None, p_block))
            continue
        flush_until(j)
        ai = max(ai, j + 1)
        rows.append(_row(audit[j][1], p_block))
    flush_until(len(audit))
    return rows


def summarize_comparison(rows: list[CompareRow]) -> dict[str, int]:
    """Counts per change kind plus ``delta`` (sum of token deltas of sent blocks, tokens).

    ``delta`` counts a block's tokens only on the side(s) where it was sent (kept or
    truncated), so it approximates the change of the prompt's block tokens.
    """
    out: dict[str, int] = {k: 0 for k in CHANGE_WORDS}
    delta = 0
    for r in rows:
        out[r.change] += 1
        before = r.audit_tokens if r.audit_status in _SENT else 0
        after = r.preview_tokens if r.preview_status in _SENT else 0
        delta += (after or 0) - (before or 0)
    out["delta"] = delta
    return out


# ---------------------------------------------------------------------------- models
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


class _ReadOnlyTableModel(QAbstractTableModel):
    """Rows under fixed ``COLUMNS`` (key, header); read-only; subclasses implement ``data``."""

    COLUMNS: tuple[tuple[str, str], ...] = ()

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._items: list[Any] = []
        self._dark = False

    def _reset(self, items: Any, dark: bool) -> None:
        self.beginResetModel()
        self._items = list(items or [])
        self._dark = dark
        self.endResetModel()

    def _item(self, index: QModelIndex | QPersistentModelIndex) -> Any:
        """The row's item and its column key, or ``None`` for an invalid index."""
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        return self._items[index.row()], self.COLUMNS[index.column()][0]

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._items)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section][1]
        return None

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable


class AuditBlocksModel(_ReadOnlyTableModel):
    """Read-only table of an audit's prompt blocks in actual order."""

    COLUMNS = BLOCK_COLUMNS

    def set_blocks(self, blocks: Any, *, dark: bool = False) -> None:
        """Replace all rows (model reset)."""
        self._reset(blocks, dark)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        found = self._item(index)
        if found is None:
            return None
        block, col = found
        if role == Qt.ItemDataRole.DisplayRole:
            if col == "position":
                pos = _field(block, "position")
                return str(pos if pos is not None else index.row())
            if col == "tokens":
                tokens = int(_field(block, "tokens", 0))
                original = _field(block, "original_tokens")
                if _field(block, "status") == "truncated" and original is not None:
                    return f"{tokens:,} (of {int(original):,})"
                return f"{tokens:,}"
            if col == "reason":
                return reason_in_words(_field(block, "reason"))
            if col == "flags":
                m = MARKS
                shown = [m[name] for name, on in (("protected", _field(block, "protected", False)),
                                                  ("pinned", _field(block, "pinned", False)),
                                                  ("group", bool(_field(block, "group")))) if on]
                return " ".join(shown)
            if col == "kind":
                return kind_label(str(_field(block, "kind", "")))
            return str(_field(block, col, "") or "")
        if role == ROW_ROLE:
            return block
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == "reason":
                return str(_field(block, "reason", ""))
            if col == "flags":
                parts = [name for name, on in (("protected", _field(block, "protected", False)),
                                               ("pinned", _field(block, "pinned", False))) if on]
                group = _field(block, "group")
                if group:
                    parts.append(f"tool group {group}")
                return ", ".join(parts) or None
            text = str(_field(block, "text", "") or "")
            return text[:300] + ("…" if len(text) > 300 else "") if text else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col in ("position", "tokens"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if col == "status" and role in (Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.BackgroundRole):
            colours = _status_colours(str(_field(block, "status", "")), self._dark)
            if colours is not None:
                return colours[0] if role == Qt.ItemDataRole.ForegroundRole else colours[1]
        return None


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

#: Change → (light fg, light bg) colours.
CHANGE_COLOURS: dict[str, tuple[str, str]] = {
    "added": ("#1e5e36", "#e7f5ec"),
    "now_included": ("#1e5e36", "#e7f5ec"),
    "dropped": ("#8a1f1c", "#fbe9e8"),
    "now_excluded": ("#8a1f1c", "#fbe9e8"),
    "changed": ("#7a5a00", "#fff4d6"),
}


class CompareModel(_ReadOnlyTableModel):
    """Read-only table of :class:`CompareRow` items."""

    COLUMNS = COMPARE_COLUMNS

    def set_rows(self, rows: list[CompareRow], *, dark: bool = False) -> None:
        """Replace all rows (model reset)."""
        self._reset(rows, dark)

    def rows(self) -> list[CompareRow]:
        return list(self._items)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        found = self._item(index)
        if found is None:
            return None
        r, col = found
        if role == Qt.ItemDataRole.DisplayRole:
            if col == "change":
                return CHANGE_WORDS.get(r.change, r.change)
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
        if role == ROW_ROLE:
            return r
        if role == Qt.ItemDataRole.ToolTipRole and col == "reason":
            return f"then: {r.audit_reason or '—'}\nnow: {r.preview_reason or '—'}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col in ("audit_tokens", "preview_tokens", "delta"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if col == "change" and role in (Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.BackgroundRole):
            pair = CHANGE_COLOURS.get(r.change)
            if pair is None:
                return None
            fg, bg = pair
            if self._dark:
                fg, bg = bg, QColor(fg).darker(160).name()
            return QColor(fg if role == Qt.ItemDataRole.ForegroundRole else bg)
        return None


# ---------------------------------------------------------------------------- tab
def _format_time(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone()
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _duration(start: Any, end: Any) -> str:
    try:
        seconds = (end - start).total_seconds()
    except Exception:
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_text(code: str | None) -> str:
    """The normalized error ``code`` in words (``gui.errors.message_for`` when available)."""
    if not code:
        return ""
    try:
        from gui.errors import message_for
    except ImportError:  # fall back to the engine's code table
        from engine.errors import ERROR_CODES

        meaning = ERROR_CODES.get(code, code.replace("_", " ").lower())
        return meaning[:1].upper() + meaning[1:] + "."
    return message_for(code)


def _table(model: QAbstractTableModel) -> QTableView:
    view = QTableView()
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 8)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    view.horizontalHeader().setStretchLastSection(True)
    return view


#: From this tab width (px) on, the facts grid shows two caption/value pairs per row.
FACTS_TWO_COLUMN_W = 620


class AuditTab(QWidget):
    """The audit inspector tab.

    Parameters
    ----------
    ctx:
        The application context (opaque; may be ``None``; unused beyond being kept).
    parent:
        Qt parent.
    """

    def __init__(self, ctx: Any = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ctx = ctx
        self._audit: Any = None
        self._preview: Any = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.stack = QStackedWidget()
        outer.addWidget(self.stack)

        empty = QWidget()
        empty_layout = QVBoxLayout(empty)
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        font = self.empty_label.font()
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self.empty_label.setFont(font)
        hint = QLabel("Generate a reply to record exactly what was sent to the model.")
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint.setWordWrap(True)
        self.empty_label.setWordWrap(True)
        hint.setStyleSheet("color: gray")
        empty_layout.addStretch(1)
        empty_layout.addWidget(self.empty_label)
        empty_layout.addWidget(hint)
        empty_layout.addStretch(2)
        self.stack.addWidget(empty)

        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(6, 6, 6, 6)
        self.title = QLabel("")
        self.title.setWordWrap(True)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.title)

        self.error_banner = QLabel("")
        self.error_banner.setWordWrap(True)
        self.error_banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_banner.setFrameShape(QFrame.Shape.StyledPanel)
        self.error_banner.setObjectName("audit_error")
        layout.addWidget(self.error_banner)

        self.approx_banner = QLabel("")
        self.approx_banner.setWordWrap(True)
        self.approx_banner.setObjectName("audit_approximate")
        layout.addWidget(self.approx_banner)

        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(2)
        self.fields: dict[str, QLabel] = {}
        self._fact_widgets: list[tuple[QLabel, QLabel]] = []
        facts = (
            ("status", "Status"), ("generation_id", "Generation id"),
            ("provider", "Provider"), ("model", "Model"),
            ("started", "Started"), ("finished", "Finished"),
            ("tokenizer", "Tokenizer"), ("strategy", "Strategy"),
            ("context_limit", "Context limit"), ("reply_reserve", "Reply reserve"),
            ("budget", "Budget"), ("safety_margin", "Safety margin"),
            ("prompt_tokens", "Final prompt tokens"), ("headroom", "Headroom"),
            ("error_code", "Error"), ("reply", "Reply"),
        )
        for key, caption in facts:
            cap = QLabel(caption + ":")
            cap.setStyleSheet("color: gray")
            cap.setWordWrap(True)
            value = QLabel("")
            value.setWordWrap(True)  # lets the panel shrink below the longest value
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setObjectName(f"audit_{key}")
            self._fact_widgets.append((cap, value))
            self.fields[key] = value
        self._facts_grid = grid
        self._fact_columns = 0
        self._layout_facts(2)
        layout.addLayout(grid)

        self.tabs = QTabWidget()
        self.tabs.setUsesScrollButtons(True)
        self.tabs.setElideMode(Qt.TextElideMode.ElideNone)
        layout.addWidget(self.tabs, 1)

        self.blocks_model = AuditBlocksModel(self)
        self.blocks_view = _table(self.blocks_model)
        for col, width in enumerate((32, 84, 64, 120, 56, 72, 320, 60)):
            self.blocks_view.setColumnWidth(col, width)
        # the role is the least telling column (Kind and Source name the block): shown last, so
        # the Reason column starts within a narrow inspector
        role_col = next(i for i, (key, _) in enumerate(BLOCK_COLUMNS) if key == "role")
        header = self.blocks_view.horizontalHeader()
        header.moveSection(header.visualIndex(role_col), len(BLOCK_COLUMNS) - 1)
        self.tabs.addTab(self.blocks_view, "Blocks")

        messages_page = QWidget()
        messages_layout = QVBoxLayout(messages_page)
        messages_layout.setContentsMargins(4, 4, 4, 4)
        bar = QHBoxLayout()
        self.messages_info = QLabel("")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the final provider messages as JSON")
        bar.addWidget(self.messages_info, 1)
        bar.addWidget(self.copy_button)
        messages_layout.addLayout(bar)
        self.messages_view = QPlainTextEdit()
        self.messages_view.setReadOnly(True)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.messages_view.setFont(mono)
        messages_layout.addWidget(self.messages_view, 1)
        self.tabs.addTab(messages_page, "Messages")

        self.diagnostics_view = QPlainTextEdit()
        self.diagnostics_view.setReadOnly(True)
        self.tabs.addTab(self.diagnostics_view, "Diagnostics")

        compare_page = QWidget()
        compare_layout = QVBoxLayout(compare_page)
        compare_layout.setContentsMargins(4, 4, 4, 4)
        compare_bar = QHBoxLayout()
        self.compare_summary = QLabel("")
        self.compare_summary.setWordWrap(True)
        self.show_unchanged = QCheckBox("Show unchanged")
        compare_bar.addWidget(self.compare_summary, 1)
        compare_bar.addWidget(self.show_unchanged)
        compare_layout.addLayout(compare_bar)
        self.compare_model = CompareModel(self)
        self.compare_view = _table(self.compare_model)
        for col, width in enumerate((100, 80, 170, 80, 80, 70, 150, 200)):
            self.compare_view.setColumnWidth(col, width)
        compare_layout.addWidget(self.compare_view, 1)
        self.tabs.addTab(compare_page, "Compare")
        self.tabs.setTabToolTip(3, "Compare with preview: what changed since this generation")
        self.tabs.setTabToolTip(1, "The final provider messages, as sent")
        self.stack.addWidget(page)

        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        self.show_unchanged.toggled.connect(self._on_show_unchanged_toggled)
        self.set_state(None, None)

    # ------------------------------------------------------------------ public API
    def fact_columns(self) -> int:
        """How many caption/value pairs the facts grid shows per row (1 when the tab is narrow)."""
        return self._fact_columns

    def _layout_facts(self, columns: int) -> None:
        if columns == self._fact_columns:
            return
        grid = self._facts_grid
        for cap, value in self._fact_widgets:
            grid.removeWidget(cap)
            grid.removeWidget(value)
        for i, (cap, value) in enumerate(self._fact_widgets):
            r, c = divmod(i, columns)
            grid.addWidget(cap, r, c * 2)
            grid.addWidget(value, r, c * 2 + 1)
        for col in range(4):
            grid.setColumnStretch(col, 1 if col % 2 == 1 and col < 2 * columns else 0)
        self._fact_columns = columns

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # two pairs per row only when both values get room; else one pair per row (no clipped ids)
        self._layout_facts(2 if event.size().width() >= FACTS_TWO_COLUMN_W else 1)

    def set_state(self, audit: Any, preview: Any) -> None:
        """Show ``audit`` (a ``PromptContextAudit`` or ``None``) and compare it with ``preview``."""
        same_audit = audit is not None and self._audit is not None and (audit is self._audit or audit == self._audit)
        self._audit = audit
        self._preview = preview
        if audit is None:
            self.stack.setCurrentIndex(0)
            self.blocks_model.set_blocks([])
            self.compare_model.set_rows([])
            self.messages_view.setPlainText("")
            self.diagnostics_view.setPlainText("")
            return
        self.stack.setCurrentIndex(1)
        if same_audit:
            # Only the preview changed (live refresh): keep tables, JSON view and scroll positions.
            self._fill_compare()
            return
        self._fill_facts(audit)
        dark = is_dark(self)
        blocks = list(_field(audit, "blocks", []) or [])
        self.blocks_model.set_blocks(blocks, dark=dark)
        self.tabs.setTabText(0, f"Blocks ({len(blocks)})")
        self.messages_view.setPlainText(self.messages_json())
        messages = _field(audit, "provider_messages", []) or []
        tools = _field(audit, "tools", []) or []
        info = f"{len(messages)} message{'s' if len(messages) != 1 else ''} sent"
        if tools:
            info += f" with {len(tools)} tool schema{'s' if len(tools) != 1 else ''}"
        self.messages_info.setText(info + " (read-only)")
        self.copy_button.setEnabled(bool(messages))
        self._fill_diagnostics(audit)
        self._fill_compare()

    def messages_json(self) -> str:
        """The audit's final provider messages as indented JSON (``""`` without an audit)."""
        if self._audit is None:
            return ""
        messages = _field(self._audit, "provider_messages", []) or []
        return json.dumps(messages, indent=2, ensure_ascii=False, default=str)

    def compare_rows(self) -> list[CompareRow]:
        """All comparison rows (including unchanged ones) for the current audit and preview."""
        if self._audit is None or self._preview is None:
            return []
        return compare_audit_with_preview(_field(self._audit, "blocks", []), _field(self._preview, "blocks", []))

    # ------------------------------------------------------------------ internals
    def _fill_facts(self, audit: Any) -> None:
        dark = is_dark(self)
        f = self.fields
        status = str(_field(audit, "status", ""))
        colour = status_hex(status, dark)[0]
        status_html = f"<span style='color:{colour}; font-weight:bold'>{_escape(status)}</span>"
        gen_id = str(_field(audit, "generation_id", ""))
        started = _field(audit, "created_at")
        self.title.setText(f"<b>Last generation</b> · {status_html} · {_escape(_format_time(started))}")
        f["status"].setText(status_html)
        f["generation_id"].setText(gen_id)
        f["provider"].setText(str(_field(audit, "provider", "")))
        f["model"].setText(str(_field(audit, "model", "")))
        f["started"].setText(_format_time(started))
        finished = _field(audit, "finished_at")
        duration = _duration(started, finished)
        f["finished"].setText(_format_time(finished) + (f" ({duration})" if duration else ""))

        tok = _field(audit, "tokenizer")
        profile = str(_field(tok, "profile", "")) if tok is not None else ""
        approximate = bool(_field(tok, "approximate", False)) if tok is not None else False
        version = _field(tok, "version") if tok is not None else None
        warn = STATUS_WARN_DARK if dark else STATUS_WARN
        f["tokenizer"].setText(_escape(profile) + (f" (version {_escape(str(version))})" if version else "")
                               + (f" <span style='color:{warn}'>⚠ approximate</span>" if approximate else ""))
        margin = int(_field(audit, "safety_margin", 0) or 0)
        if approximate:
            self.approx_banner.setText(
                f"<span style='color:{warn}'>⚠ Token counts are estimates under the approximate profile "
                f"<b>{_escape(profile)}</b>; the real tokenizer may count more. A safety margin of "
                f"{margin:,} tokens was held back.</span>")
            self.approx_banner.show()
        else:
            self.approx_banner.hide()
        f["strategy"].setText(str(_field(audit, "strategy", "")))
        for key in ("context_limit", "reply_reserve", "budget", "safety_margin", "headroom"):
            value = _field(audit, key)
            f[key].setText("—" if value is None else f"{int(value):,}")
        prompt = int(_field(audit, "prompt_tokens", 0) or 0)
        limit = int(_field(audit, "context_limit", 0) or 0)
        f["prompt_tokens"].setText(f"<b>{prompt:,}</b>" + (f" ({prompt / limit * 100:.1f} % of the limit)"
                                                          if limit else ""))

        code = _field(audit, "error_code")
        message = _field(audit, "error_message")
        if code:
            f["error_code"].setText(f"<span style='color:{status_hex('failed', dark)[0]}'>"
                                    f"{_escape(str(code))}</span>")
            text = f"<b>{_escape(str(code))}</b>: {_escape(error_text(str(code)))}"
            if message:
                text += f"<br>{_escape(str(message))}"
            self.error_banner.setText(text)
            bg, fg = ("#4a1f1c", "#ffb3ad") if dark else ("#fbe9e8", "#8a1f1c")
            if status == "cancelled":
                bg, fg = ("#4a3b12", "#ffd27a") if dark else ("#fff4d6", "#7a5a00")
            self.error_banner.setStyleSheet(f"QLabel#audit_error {{ background: {bg}; color: {fg}; padding: 6px; }}")
            self.error_banner.show()
        else:
            f["error_code"].setText("none")
            self.error_banner.hide()

        reply = []
        chars = _field(audit, "reply_chars")
        if chars is not None:
            reply.append(f"{int(chars):,} characters")
        finish = _field(audit, "finish_reason")
        if finish:
            reply.append(f"finish: {finish}")
        usage = _field(audit, "usage") or {}
        if usage:
            reply.append("provider counted " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in usage.items()))
        f["reply"].setText(" · ".join(reply) or "—")

    def _fill_diagnostics(self, audit: Any) -> None:
        lines: list[str] = []
        diags = list(_field(audit, "interceptor_diagnostics", []) or [])
        lines.append(f"Interceptor diagnostics ({len(diags)}):")
        if diags:
            lines.extend(f"  • {d}" for d in diags)
        else:
            lines.append("  none")
        warnings = list(_field(audit, "warnings", []) or [])
        if warnings:
            lines.append("")
            lines.append(f"Warnings ({len(warnings)}):")
            lines.extend(f"  • {w}" for w in warnings)
        self.diagnostics_view.setPlainText("\n".join(lines))
        count = len(diags) + len(warnings)
        self.tabs.setTabText(2, f"Diagnostics ({count})" if count else "Diagnostics")

    def _fill_compare(self) -> None:
        if self._preview is None:
            self.compare_summary.setText("The current preview is not ready yet.")
            self.compare_model.set_rows([])
            return
        rows = self.compare_rows()
        summary = summarize_comparison(rows)
        shown = rows if self.show_unchanged.isChecked() else [r for r in rows if r.change != "same"]
        bar = self.compare_view.verticalScrollBar()
        position = bar.value()
        self.compare_model.set_rows(shown, dark=is_dark(self))
        bar.setValue(position)
        then = int(_field(self._audit, "prompt_tokens", 0) or 0)
        now = int(_field(self._preview, "prompt_tokens", 0) or 0)
        parts = [f"{summary[k]} {CHANGE_WORDS[k]}" for k in ("added", "dropped", "now_excluded", "now_included",
                                                               "changed") if summary[k]]
        text = "Since this generation: " + (", ".join(parts) if parts else "no block changed") + "."
        text += f" Prompt tokens {then:,} → {now:,} ({now - then:+,})."
        a_tok = _field(self._audit, "tokenizer")
        p_tok = _field(self._preview, "tokenizer")
        a_prof = _field(a_tok, "profile") if a_tok is not None else None
        p_prof = _field(p_tok, "profile") if p_tok is not None else None
        if a_prof and p_prof and a_prof != p_prof:
            text += f" Note: counted under {a_prof} then and {p_prof} now."
        self.compare_summary.setText(text)

    def _on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.messages_json())

    def _on_show_unchanged_toggled(self, _checked: bool) -> None:
        if self._audit is not None:
            self._fill_compare()


STATUS_WARN = "#b54708"
STATUS_WARN_DARK = "#ffb366"
