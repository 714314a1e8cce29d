"""Audit inspector: the stored last generation audit of the chat (SPEC §6).

Shows status, generation id, provider, model, time, the tokenizer profile (with a warning when
counts are approximate), context limit / reply reserve / final prompt tokens, every prompt
block with its stable reason, the final provider messages as read-only JSON with a Copy
button, interceptor diagnostics and the normalized error code in words. A "Compare with
preview" view lists what changed since that generation: blocks added, dropped, newly
excluded or included, and token deltas, matched by block ``source``
(:func:`engine.audit_compare.compare_audit_with_preview`).

The tab is put together here; its table models are :mod:`gui.widgets.audit.models`, its facts
panel :mod:`gui.widgets.audit.facts`.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import QAbstractTableModel, Qt
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
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

from engine.audit_compare import CHANGE_WORDS, Change, CompareRow, compare_audit_with_preview, summarize_comparison
from engine.schema import ContextPreview
from engine.schema.audit import PromptContextAudit

from ..theme import is_dark
from .audit.facts import AuditFacts, error_text
from .audit.models import BLOCK_COLUMNS, AuditBlocksModel, CompareModel

__all__ = [
    "BLOCK_COLUMNS",
    "EMPTY_TEXT",
    "FACTS_TWO_COLUMN_W",
    "AuditTab",
    "compare_audit_with_preview",
    "error_text",
    "summarize_comparison",
]

EMPTY_TEXT = "No generation yet for this chat"

#: From this tab width (px) on, the facts grid shows two caption/value pairs per row.
FACTS_TWO_COLUMN_W = 620

#: Changes the summary line counts, in its order.
_SHOWN_CHANGES: tuple[Change, ...] = ("added", "dropped", "now_excluded", "now_included", "changed")


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
        self._audit: PromptContextAudit | None = None
        self._preview: ContextPreview | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.stack = QStackedWidget()
        outer.addWidget(self.stack)
        self.stack.addWidget(self._build_empty_page())
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(6, 6, 6, 6)
        self.facts = AuditFacts()
        layout.addWidget(self.facts)
        # the facts' widgets, where the tests and the window reach them
        self.title = self.facts.title
        self.error_banner = self.facts.error_banner
        self.approx_banner = self.facts.approx_banner
        self.fields = self.facts.fields
        self.tabs = QTabWidget()
        self.tabs.setUsesScrollButtons(True)
        self.tabs.setElideMode(Qt.TextElideMode.ElideNone)
        layout.addWidget(self.tabs, 1)
        self.tabs.addTab(self._build_blocks_view(), "Blocks")
        self.tabs.addTab(self._build_messages_page(), "Messages")
        self.diagnostics_view = QPlainTextEdit()
        self.diagnostics_view.setReadOnly(True)
        self.tabs.addTab(self.diagnostics_view, "Diagnostics")
        self.tabs.addTab(self._build_compare_page(), "Compare")
        self.tabs.setTabToolTip(3, "Compare with preview: what changed since this generation")
        self.tabs.setTabToolTip(1, "The final provider messages, as sent")
        self.stack.addWidget(page)

        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        self.show_unchanged.toggled.connect(self._on_show_unchanged_toggled)
        self.set_state(None, None)

    def _build_empty_page(self) -> QWidget:
        """What the inspector shows without an audit."""
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
        return empty

    def _build_blocks_view(self) -> QTableView:
        """The "Blocks" tab: the audited blocks, the role column last."""
        self.blocks_model = AuditBlocksModel(self)
        self.blocks_view = _table(self.blocks_model)
        for col, width in enumerate((32, 84, 64, 120, 56, 72, 320, 60)):
            self.blocks_view.setColumnWidth(col, width)
        # the role is the least telling column (Kind and Source name the block): shown last, so
        # the Reason column starts within a narrow inspector
        role_col = next(i for i, (key, _) in enumerate(BLOCK_COLUMNS) if key == "role")
        header = self.blocks_view.horizontalHeader()
        header.moveSection(header.visualIndex(role_col), len(BLOCK_COLUMNS) - 1)
        return self.blocks_view

    def _build_messages_page(self) -> QWidget:
        """The "Messages" tab: the final provider messages as JSON, with Copy."""
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
        return messages_page

    def _build_compare_page(self) -> QWidget:
        """The "Compare" tab: what changed between this generation and the current preview."""
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
        return compare_page

    # ------------------------------------------------------------------ public API
    def fact_columns(self) -> int:
        """How many caption/value pairs the facts grid shows per row (1 when the tab is narrow)."""
        return self.facts.columns()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # two pairs per row only when both values get room; else one pair per row (no clipped ids)
        self.facts.layout_facts(2 if event.size().width() >= FACTS_TWO_COLUMN_W else 1)

    def set_state(self, audit: PromptContextAudit | None, preview: ContextPreview | None) -> None:
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
        self.facts.show_audit(audit)
        dark = is_dark(self)
        blocks = audit.blocks
        self.blocks_model.set_blocks(blocks, dark=dark)
        self.tabs.setTabText(0, f"Blocks ({len(blocks)})")
        self.messages_view.setPlainText(self.messages_json())
        messages, tools = audit.provider_messages, audit.tools
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
        return json.dumps(self._audit.provider_messages, indent=2, ensure_ascii=False, default=str)

    def compare_rows(self) -> list[CompareRow]:
        """All comparison rows (including unchanged ones) for the current audit and preview."""
        if self._audit is None or self._preview is None:
            return []
        return compare_audit_with_preview(self._audit.blocks, self._preview.blocks)

    # ------------------------------------------------------------------ internals
    def _fill_diagnostics(self, audit: PromptContextAudit) -> None:
        lines: list[str] = []
        diags = audit.interceptor_diagnostics
        lines.append(f"Interceptor diagnostics ({len(diags)}):")
        if diags:
            lines.extend(f"  • {d}" for d in diags)
        else:
            lines.append("  none")
        warnings = audit.warnings
        if warnings:
            lines.append("")
            lines.append(f"Warnings ({len(warnings)}):")
            lines.extend(f"  • {w}" for w in warnings)
        self.diagnostics_view.setPlainText("\n".join(lines))
        count = len(diags) + len(warnings)
        self.tabs.setTabText(2, f"Diagnostics ({count})" if count else "Diagnostics")

    def _fill_compare(self) -> None:
        if self._audit is None or self._preview is None:
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
        then, now = self._audit.prompt_tokens, self._preview.prompt_tokens
        parts = [f"{summary.count(k)} {CHANGE_WORDS[k]}" for k in _SHOWN_CHANGES if summary.count(k)]
        text = "Since this generation: " + (", ".join(parts) if parts else "no block changed") + "."
        text += f" Prompt tokens {then:,} → {now:,} ({now - then:+,})."
        a_prof, p_prof = self._audit.tokenizer.profile, self._preview.tokenizer.profile
        if a_prof and p_prof and a_prof != p_prof:
            text += f" Note: counted under {a_prof} then and {p_prof} now."
        self.compare_summary.setText(text)

    def _on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.messages_json())

    def _on_show_unchanged_toggled(self, _checked: bool) -> None:
        if self._audit is not None:
            self._fill_compare()
