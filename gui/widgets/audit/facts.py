"""The Audit inspector's facts panel: title, error and approximate-count banners, the facts grid."""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QVBoxLayout, QWidget

from engine.schema.audit import PromptContextAudit

from ...errors import message_for
from ...theme import is_dark, status_hex

#: (key, caption) of each fact, in reading order.
FACTS: tuple[tuple[str, str], ...] = (
    ("status", "Status"), ("generation_id", "Generation id"),
    ("provider", "Provider"), ("model", "Model"),
    ("started", "Started"), ("finished", "Finished"),
    ("tokenizer", "Tokenizer"), ("strategy", "Strategy"),
    ("context_limit", "Context limit"), ("reply_reserve", "Reply reserve"),
    ("budget", "Budget"), ("safety_margin", "Safety margin"),
    ("prompt_tokens", "Final prompt tokens"), ("headroom", "Headroom"),
    ("error_code", "Error"), ("reply", "Reply"),
)


def format_time(value: datetime | None) -> str:
    """A timestamp in local time, ``2026-11-29 23:00:00`` (``—`` for none)."""
    if value is None:
        return "—"
    if value.tzinfo is not None:
        value = value.astimezone()
    return value.strftime("%Y-%m-%d %H:%M:%S")


def duration_text(start: datetime | None, end: datetime | None) -> str:
    """``61.0 s`` or ``2.5 min`` between two timestamps (``""`` when one is missing)."""
    if start is None or end is None:
        return ""
    try:
        seconds = (end - start).total_seconds()
    except TypeError:  # one aware, one naive timestamp
        return ""
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def escape(text: str) -> str:
    """``text`` safe inside rich text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_text(code: str | None) -> str:
    """The normalized error ``code`` in words (``gui.errors.message_for``; ``""`` for none)."""
    return message_for(code) if code else ""


class AuditFacts(QWidget):
    """Title, banners and the facts grid of one audit.

    The grid shows one or two caption/value pairs per row (:meth:`layout_facts`); the tab picks
    the number from its width.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
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
        for key, caption in FACTS:
            cap = QLabel(caption + ":")
            cap.setStyleSheet("color: gray")
            cap.setWordWrap(True)
            value = QLabel("")
            value.setWordWrap(True)  # lets the panel shrink below the longest value
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setObjectName(f"audit_{key}")
            self._fact_widgets.append((cap, value))
            self.fields[key] = value
        self.grid = grid
        self._columns = 0
        self.layout_facts(2)
        layout.addLayout(grid)

    def columns(self) -> int:
        """How many caption/value pairs the grid shows per row."""
        return self._columns

    def layout_facts(self, columns: int) -> None:
        """Lay the facts out ``columns`` (1 or 2) pairs per row."""
        if columns == self._columns:
            return
        grid = self.grid
        for cap, value in self._fact_widgets:
            grid.removeWidget(cap)
            grid.removeWidget(value)
        for i, (cap, value) in enumerate(self._fact_widgets):
            r, c = divmod(i, columns)
            grid.addWidget(cap, r, c * 2)
            grid.addWidget(value, r, c * 2 + 1)
        for col in range(4):
            grid.setColumnStretch(col, 1 if col % 2 == 1 and col < 2 * columns else 0)
        self._columns = columns

    def show_audit(self, audit: PromptContextAudit) -> None:
        """Fill the title, banners and facts from ``audit``."""
        dark = is_dark(self)
        f = self.fields
        colour = status_hex(audit.status, dark)[0]
        status_html = f"<span style='color:{colour}; font-weight:bold'>{escape(audit.status)}</span>"
        started = audit.created_at
        self.title.setText(f"<b>Last generation</b> · {status_html} · {escape(format_time(started))}")
        f["status"].setText(status_html)
        f["generation_id"].setText(audit.generation_id)
        f["provider"].setText(audit.provider)
        f["model"].setText(audit.model)
        f["started"].setText(format_time(started))
        duration = duration_text(started, audit.finished_at)
        f["finished"].setText(format_time(audit.finished_at) + (f" ({duration})" if duration else ""))
        self._show_tokenizer(audit, dark)
        f["strategy"].setText(audit.strategy)
        for key, value in (("context_limit", audit.context_limit), ("reply_reserve", audit.reply_reserve),
                           ("budget", audit.budget), ("safety_margin", audit.safety_margin),
                           ("headroom", audit.headroom)):
            f[key].setText(f"{value:,}")
        prompt, limit = audit.prompt_tokens, audit.context_limit
        f["prompt_tokens"].setText(f"<b>{prompt:,}</b>" + (f" ({prompt / limit * 100:.1f} % of the limit)"
                                                          if limit else ""))
        self._show_error(audit, dark)
        reply = []
        if audit.reply_chars is not None:
            reply.append(f"{audit.reply_chars:,} characters")
        if audit.finish_reason:
            reply.append(f"finish: {audit.finish_reason}")
        if audit.usage:
            reply.append("provider counted " + ", ".join(f"{k.replace('_', ' ')} {v:,}"
                                                         for k, v in audit.usage.items()))
        f["reply"].setText(" · ".join(reply) or "—")

    def _show_tokenizer(self, audit: PromptContextAudit, dark: bool) -> None:
        tok = audit.tokenizer
        warn = status_hex("warning", dark)[0]
        self.fields["tokenizer"].setText(
            escape(tok.profile) + (f" (version {escape(str(tok.version))})" if tok.version else "")
            + (f" <span style='color:{warn}'>⚠ approximate</span>" if tok.approximate else ""))
        if tok.approximate:
            self.approx_banner.setText(
                f"<span style='color:{warn}'>⚠ Token counts are estimates under the approximate profile "
                f"<b>{escape(tok.profile)}</b>; the real tokenizer may count more. A safety margin of "
                f"{audit.safety_margin:,} tokens was held back.</span>")
            self.approx_banner.show()
        else:
            self.approx_banner.hide()

    def _show_error(self, audit: PromptContextAudit, dark: bool) -> None:
        code = audit.error_code
        if not code:
            self.fields["error_code"].setText("none")
            self.error_banner.hide()
            return
        self.fields["error_code"].setText(f"<span style='color:{status_hex('failed', dark)[0]}'>"
                                          f"{escape(code)}</span>")
        text = f"<b>{escape(code)}</b>: {escape(error_text(code))}"
        if audit.error_message:
            text += f"<br>{escape(audit.error_message)}"
        self.error_banner.setText(text)
        fg, bg = status_hex("cancelled" if audit.status == "cancelled" else "failed", dark)
        self.error_banner.setStyleSheet(f"QLabel#audit_error {{ background: {bg}; color: {fg}; padding: 6px; }}")
        self.error_banner.show()
