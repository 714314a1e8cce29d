"""The main window's header texts and its error banner (split from :mod:`gui.main_window`).

The one-line token summary, the ``TOKEN_BUDGET_EXCEEDED`` message (the engine's own figures,
never re-derived here), the chat's compaction options for the budget bar, and the banner label.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from engine.compaction.options import CompactionOptions
from engine.errors import LoomscopeError
from engine.schema import ContextPreview, ContextSettings

from .errors import message_for

#: The banner's look (a light red box; the text stays selectable).
BANNER_STYLE = ("QLabel#errorBanner { background: #fdecea; color: #8a1f1c; "
                "border: 1px solid #e6a19c; border-radius: 4px; padding: 6px; }")


def token_summary(preview: ContextPreview, elapsed_s: float = 0.0) -> str:
    """The header's one-line summary: prompt vs budget, headroom, context window, strategy, tokenizer.

    ``"prompt 1,520 / budget 1,536 tokens · headroom 16 · context window 2,048 · manual · o200k_base ·
    preview took 12 ms"``
    (all figures in tokens; the budget is the context window minus the reply reserve, and the
    headroom is the budget minus the safety margin and the prompt, as in :class:`ContextPreview`).
    """
    approx = " ≈ approximate" if preview.tokenizer.approximate else ""
    return (f"prompt {preview.prompt_tokens:,} / budget {preview.budget:,} tokens · "
            f"headroom {preview.headroom:,} · context window {preview.context_limit:,} · "
            f"{preview.strategy} · {preview.tokenizer.profile}{approx} · preview took {1000 * elapsed_s:,.0f} ms")


def compaction_options(settings: ContextSettings) -> CompactionOptions | None:
    """The chat's compaction options, as the ``compact`` strategy reads them (``None`` when they
    are invalid: the preview then reports ``INVALID_SETTINGS`` itself)."""
    try:
        return CompactionOptions.from_options(settings.strategy_options)
    except LoomscopeError:
        return None


def dedupe_lines(text: str) -> str:
    """``text`` without repeated lines or sentences (a banner says each thing once)."""
    seen: set[str] = set()
    out: list[str] = []
    for line in text.splitlines():
        key = " ".join(line.split()).rstrip(".").lower()
        if key and key in seen:
            continue
        seen.add(key)
        out.append(line)
    return "\n".join(out)


def budget_message(preview: ContextPreview) -> str:
    """The message for a preview error; for ``TOKEN_BUDGET_EXCEEDED`` it names the protected blocks.

    The figures are the engine's own (``preview.error.message`` and ``details``: the
    protected tokens, the budget after the safety margin, the protected block ids); the
    GUI only looks the blocks up for their source and reason.
    """
    assert preview.error is not None
    error = preview.error
    text = message_for(error.code)
    if error.code == "TOKEN_BUDGET_EXCEEDED":
        by_id = {b.id: b for b in preview.blocks}
        ids = error.details.get("protected_blocks", [])
        protected = sorted((by_id[i] for i in ids if i in by_id), key=lambda b: -b.tokens)
        lines = [f"{text}", f"{error.message[:1].upper()}{error.message[1:]}.", "Protected blocks:"]
        for b in protected[:6]:
            lines.append(f"  • {b.source} — {b.tokens:,} tokens ({b.reason})")
        if len(protected) > 6:
            lines.append(f"  • … and {len(protected) - 6} more")
        lines.append("No request will be sent until this fits.")
        return "\n".join(lines)
    return f"{text} ({error.code})"


class Banner(QLabel):
    """The error banner over the prompt blocks: hidden until there is something to say."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setStyleSheet(BANNER_STYLE)
        self.hide()

    def show_text(self, text: str) -> None:
        """Show ``text``, each line or sentence once (:func:`dedupe_lines`)."""
        self.setText(dedupe_lines(text))
        self.show()

    def dismiss(self) -> None:
        """Hide the banner and forget its text."""
        self.hide()
        self.clear()
