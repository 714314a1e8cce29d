"""The *Prompt text* view: the exact string a Text Completion chat sends, each block shaded (issue 26).

The header names the mode, the instruct preset and the tokenizer ("Text Completion · Alpaca ·
llama3 exact"); the text is ``ContextPreview.prompt`` with each block's ``span`` on a soft
background in its kind's colour (neighbouring blocks alternate two shades; template text no block
owns stays unshaded). Hovering a shaded range names its block; clicking it emits
``block_clicked(index)`` (the window selects that row of the blocks table); :meth:`select_block`
shades a block chosen elsewhere in its strong colour and scrolls to it. *Token boundaries* shades every token on
demand (two shades per block colour), with the spans of the chat's tokenizer. A Chat Completion
preview shows its messages one after another, with a note that the request is a message list.

Big prompts stay fast: the document is set once per prompt string (a refresh with the same string
only re-shades), and only the paragraphs on screen get format ranges (:func:`gui.prompt_text.shade_runs`,
re-run on scroll and resize), so a 500,000-character prompt shades in the time of a screenful.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QThreadPool, Signal
from PySide6.QtGui import QColor, QFontDatabase, QMouseEvent, QTextCharFormat, QTextCursor, QTextLayout
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from engine.schema import ContextPreview, PreviewRequest

from .. import jobs
from ..labels import BUDGET_GROUPS, KIND_GROUP, kind_label
from ..prompt_text import CHAT_NOTE, TEXT_COMPLETION, Layout, header_text, layout_of, owner_at, shade_runs
from ..theme import is_dark
from ..token_shading import utf16_offsets
from .elided_label import ElidedLabel

#: Token spans of a text (code points), or ``None`` when the tokenizer cannot cut it.
TokenSpans = Callable[[str], list[tuple[int, int]]]
#: Share of the kind colour in a block's two shades (over the base colour), and its outline.
SHADE_ALPHAS = (0.18, 0.34)
SELECTED_ALPHA = 0.55
#: Darker step for odd tokens when token boundaries are on.
TOKEN_DARKER = 118
#: Texts shorter than this (characters) are cut into tokens at once; longer ones on a worker thread.
SYNC_TOKENIZE_CHARS = 100_000
#: Paragraphs shaded beyond the viewport's edges (smooth scrolling shows them shaded).
SHADE_MARGIN_PARAGRAPHS = 8
_GROUP_HEX = dict(BUDGET_GROUPS)


def _blend(hex_colour: str, base: QColor, alpha: float) -> QColor:
    c = QColor(hex_colour)
    return QColor(round(base.red() + (c.red() - base.red()) * alpha),
                  round(base.green() + (c.green() - base.green()) * alpha),
                  round(base.blue() + (c.blue() - base.blue()) * alpha))


def _cut(token_spans: TokenSpans, text: str) -> tuple[list[tuple[int, int]] | None, str | None]:
    """``(sorted spans, None)`` or ``(None, what went wrong)``: a tokenizer failing never takes the view down."""
    try:
        return sorted(token_spans(text)), None
    except Exception as exc:
        return None, f"token boundaries unavailable ({type(exc).__name__})"


class _CutRelay(QObject):
    """Carries a worker's token cut to the view's thread: ``done(generation, text, spans, error)``."""

    done = Signal(int, str, object, object)


def _cut_job(generation: int, text: str, token_spans: TokenSpans, relay: _CutRelay) -> None:  # worker thread
    """Cut one text into tokens on a pool thread (a long prompt: ~0.5 s for 500,000 characters)."""
    jobs.emit(relay.done, generation, text, *_cut(token_spans, text))


class PromptTextView(QWidget):
    """The whole prompt string with its blocks shaded and, on demand, its tokens.

    Signals
    -------
    block_clicked(int)   # index into ``ContextPreview.blocks`` of the shaded range clicked
    """

    block_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptTextView")
        self.header = ElidedLabel("No preview", self, always_tooltip=True)
        self.header.setObjectName("promptTextHeader")
        self.header.setStyleSheet("font-weight: bold;")
        self.note = QLabel(CHAT_NOTE, self)
        self.note.setObjectName("promptTextNote")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555;")
        self.note.hide()
        self.tokens_box = QCheckBox("Token boundaries", self)
        self.tokens_box.setObjectName("promptTokenBoundaries")
        self.tokens_box.setToolTip("Shade every token of the prompt as the chat's tokenizer cuts it")
        self.tokens_box.toggled.connect(self._on_tokens_box_toggled)
        self.facts = QLabel("", self)
        self.facts.setObjectName("promptTextFacts")
        self.facts.setWordWrap(True)
        self.facts.setStyleSheet("color: #555;")
        self.facts.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.edit = QPlainTextEdit(self)
        self.edit.setObjectName("promptText")
        self.edit.setReadOnly(True)
        self.edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.viewport().setMouseTracking(True)
        self.edit.viewport().installEventFilter(self)
        self.edit.verticalScrollBar().valueChanged.connect(lambda _v: self._shade_visible())
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setObjectName("promptTextCopy")
        self.copy_button.setToolTip("Copy the exact prompt string (as sent) to the clipboard")
        self.copy_button.clicked.connect(self.copy_text)
        bar = QHBoxLayout()
        bar.addWidget(self.header, 1)
        bar.addWidget(self.tokens_box)
        bar.addWidget(self.copy_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.note)
        lay.addWidget(self.facts)
        lay.addWidget(self.edit, 1)

        self.preview: ContextPreview | None = None
        self.layout_: Layout = layout_of(None)
        self._request: PreviewRequest | None = None
        self._token_spans_of: TokenSpans | None = None
        self._tokenizer_label: str | None = None
        self._tokens: list[tuple[int, int]] | None = None
        self._token_ends: list[int] = []
        self._token_error: str | None = None
        self._tokens_for: str | None = None
        self._u16: list[int] | None = None
        self._shaded: set[int] = set()
        #: Block kind → its six formats: [shade 0 even token, shade 0 odd, shade 1 even, shade 1 odd,
        #: selected even, selected odd].
        self._kind_formats: dict[str, list[QTextCharFormat]] = {}
        self._plain_token_formats: list[QTextCharFormat] = []
        self._selected: int | None = None
        self._dirty = False
        #: A token cut running on a worker, and the number of the latest one asked for.
        self._cutting: int | None = None
        self._cut_generation = 0
        self._relay = _CutRelay(self)
        self._relay.done.connect(self._on_tokens_cut)

    # ------------------------------------------------------------------ public
    def set_preview(self, preview: ContextPreview | None, request: PreviewRequest | None = None,
                    token_spans: TokenSpans | None = None, tokenizer_label: str | None = None) -> None:
        """Show ``preview`` (``None``: nothing). ``request`` names the instruct preset in the header;
        ``token_spans`` cuts text into tokens for *Token boundaries* (the chat's tokenizer);
        ``tokenizer_label`` names it in the header (default: the preview's profile, exact or ≈).

        While the view is hidden, the text is laid out when it is next shown.
        """
        self.preview = preview
        self._request = request
        if token_spans != self._token_spans_of:  # bound methods: equal when the same tokenizer
            self._tokens_for = None
        self._token_spans_of = token_spans
        self._tokenizer_label = tokenizer_label
        self.header.setText(header_text(preview, request, tokenizer_label))
        self.note.setVisible(preview is not None and preview.api != TEXT_COMPLETION)
        if self.isVisible():
            self._render()
        else:
            self._dirty = True

    def text(self) -> str:
        """The text shown (code points): the prompt string, or the laid-out messages (laid out now
        if the view was hidden when the preview came)."""
        self.ensure_rendered()
        return self.layout_.text

    def copy_text(self) -> None:
        """Put the whole text on the clipboard: the exact prompt string (Text Completion) or the laid-out messages."""
        QApplication.clipboard().setText(self.text())

    def ensure_rendered(self) -> None:
        """Lay out the latest preview now if it waits for the view to be shown."""
        if self._dirty:
            self._render()

    def select_block(self, index: int | None) -> None:
        """Shade block ``index`` (into ``ContextPreview.blocks``) as selected and scroll to it; ``None`` clears."""
        if index == self._selected:
            return  # a preview refresh re-selects the same block: the reader's scroll position stays
        previous = self.selected_ranges()
        self._selected = index
        if self._dirty:
            return
        self._apply_selection(scroll=True, previous=previous)

    def selected_block(self) -> int | None:
        """The block shown as selected (``None``: none)."""
        return self._selected

    def block_at(self, pos: int) -> int | None:
        """The block (index into ``ContextPreview.blocks``) owning code point ``pos`` of the text."""
        r = owner_at(self.layout_, pos)
        if r < 0:
            return None
        owner = self.layout_.owners[r]
        return owner if owner >= 0 else None

    def shaded_paragraphs(self) -> set[int]:
        """Numbers of the paragraphs that carry shading now (tests, diagnostics)."""
        return set(self._shaded)

    def token_spans(self) -> list[tuple[int, int]] | None:
        """The token spans shown (``None``: boundaries off or unavailable)."""
        return self._tokens if self.tokens_box.isChecked() else None

    def paragraph_runs(self, number: int) -> list[tuple[int, int, QColor]]:
        """Paragraph ``number``'s format ranges as ``(start, length, background)`` (UTF-16, within it)."""
        block = self.edit.document().findBlockByNumber(number)
        return [(r.start, r.length, r.format.background().color()) for r in block.layout().formats()]

    # ------------------------------------------------------------------ rendering
    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if self._dirty:
            self._render()

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._shade_visible()

    def _render(self) -> None:
        self._dirty = False
        layout = layout_of(self.preview)
        same_text = layout.text == self.layout_.text and self.edit.document().characterCount() > 1
        self.layout_ = layout
        self._make_formats()
        if not same_text:
            self._shaded.clear()
            self.edit.setPlainText(layout.text)
            self._u16 = utf16_offsets(layout.text)
            if self._tokens_for != layout.text:
                self._tokens = None
        else:
            self._clear_shading()
        if self.tokens_box.isChecked():
            self._ensure_tokens()
        self._update_facts()
        self._shade_visible()

    def _make_formats(self) -> None:
        base = self.edit.palette().color(self.edit.backgroundRole())
        dark = is_dark(self)
        self._kind_formats = {}
        for kind in set(self.layout_.kinds):
            hex_colour = _GROUP_HEX.get(KIND_GROUP.get(kind, "system"), "#6c7a89")
            shades = []
            for alpha in (*SHADE_ALPHAS, SELECTED_ALPHA):
                colour = _blend(hex_colour, base, alpha * (1.4 if dark else 1.0))
                even, odd = QTextCharFormat(), QTextCharFormat()
                even.setBackground(colour)
                odd.setBackground(colour.darker(TOKEN_DARKER) if not dark else colour.lighter(TOKEN_DARKER))
                shades += [even, odd]
            self._kind_formats[kind] = shades
        plain_odd = QTextCharFormat()
        plain_odd.setBackground(base.darker(112) if not dark else base.lighter(130))
        self._plain_token_formats = [QTextCharFormat(), plain_odd]

    def _format_of(self, owner: int, token: int) -> QTextCharFormat | None:
        parity = token % 2 if token >= 0 else 0
        if owner < 0:
            return self._plain_token_formats[1] if token >= 0 and parity else None
        shades = self._kind_formats[self.layout_.kinds[owner]]
        if self._selected is not None and self.layout_.owners[owner] == self._selected:
            return shades[4 + parity]
        return shades[self.layout_.shade[owner] * 2 + parity]

    def _qt(self, pos: int) -> int:
        return self._u16[pos] if self._u16 is not None else pos

    def _code_point(self, qt_pos: int) -> int:
        if self._u16 is None:
            return qt_pos
        return max(0, bisect.bisect_right(self._u16, qt_pos) - 1)

    def _visible_paragraphs(self) -> range:
        doc = self.edit.document()
        first = self.edit.firstVisibleBlock()
        if not first.isValid():
            return range(0)
        height = self.edit.viewport().height()
        offset = self.edit.contentOffset()
        block = first
        last = first.blockNumber()
        while block.isValid():
            top = self.edit.blockBoundingGeometry(block).translated(offset).top()
            if top > height:
                break
            last = block.blockNumber()
            block = block.next()
        lo = max(0, first.blockNumber() - SHADE_MARGIN_PARAGRAPHS)
        hi = min(doc.blockCount(), last + 1 + SHADE_MARGIN_PARAGRAPHS)
        return range(lo, hi)

    def _shade_visible(self) -> None:
        """Give the paragraphs on screen (and a margin) their format ranges."""
        if self._dirty or not self.layout_.text:
            return
        doc = self.edit.document()
        tokens = self._tokens if self.tokens_box.isChecked() else None
        changed: list[int] = []
        for number in self._visible_paragraphs():
            if number in self._shaded:
                continue
            block = doc.findBlockByNumber(number)
            qt_start = block.position()
            qt_end = qt_start + block.length() - 1
            start, end = self._code_point(qt_start), self._code_point(qt_end)
            ranges = []
            for run in shade_runs(self.layout_, start, end, tokens, self._token_ends if tokens else None):
                fmt = self._format_of(run.owner, run.token)
                if fmt is None:
                    continue
                rng = QTextLayout.FormatRange()
                rng.start = self._qt(run.start) - qt_start
                rng.length = self._qt(run.end) - self._qt(run.start)
                rng.format = fmt
                ranges.append(rng)
            block.layout().setFormats(ranges)
            self._shaded.add(number)
            changed.append(number)
        self._relayout(changed)

    def _relayout(self, numbers: list[int]) -> None:
        """Lay out again the paragraphs ``numbers`` whose formats changed (and only those: the
        reader's scroll position stays)."""
        if not numbers:
            return
        doc = self.edit.document()
        first = doc.findBlockByNumber(min(numbers))
        last = doc.findBlockByNumber(max(numbers))
        doc.markContentsDirty(first.position(), last.position() + last.length() - first.position())
        self.edit.viewport().update()

    def _clear_shading(self) -> None:
        doc = self.edit.document()
        numbers = sorted(self._shaded)
        for number in numbers:
            block = doc.findBlockByNumber(number)
            if block.isValid():
                block.layout().setFormats([])
        self._shaded.clear()
        self._relayout(numbers)

    def selected_ranges(self) -> list[tuple[int, int]]:
        """The code-point ranges of the selected block in the text (``[]``: none selected)."""
        index = self._selected
        if index is None:
            return []
        return [r for r, o in zip(self.layout_.ranges, self.layout_.owners) if o == index]

    def _paragraphs_of(self, ranges: list[tuple[int, int]]) -> set[int]:
        doc = self.edit.document()
        out: set[int] = set()
        for start, end in ranges:
            first = doc.findBlock(self._qt(start)).blockNumber()
            last = doc.findBlock(self._qt(max(start, end - 1))).blockNumber()
            out.update(range(first, last + 1))
        return out

    def _apply_selection(self, *, scroll: bool, previous: list[tuple[int, int]] | None = None) -> None:
        """Shade the selected block in its strong colour (token shades kept) and, if ``scroll``,
        bring it into view. ``previous``: the ranges selected before, to shade back."""
        spans = self.selected_ranges()
        # the paragraphs of the old and new selection are shaded again when next on screen
        self._shaded -= self._paragraphs_of(spans + (previous or []))
        if scroll and spans:
            cursor = QTextCursor(self.edit.document())
            cursor.setPosition(self._qt(spans[0][0]))
            self.edit.setTextCursor(cursor)
            self.edit.centerCursor()
        self._shade_visible()

    # ------------------------------------------------------------------ tokens
    def _ensure_tokens(self) -> None:
        """Cut the text into tokens: at once for a short text, on a worker for a long one (the
        shading follows when it is done; a newer text or tokenizer drops the old result)."""
        text = self.layout_.text
        if self._tokens_for == text and (self._tokens is not None or self._token_error
                                         or self._cutting == self._cut_generation):
            return
        self._tokens_for = text
        self._tokens, self._token_error, self._token_ends = None, None, []
        if self._token_spans_of is None:
            self._token_error = "no tokenizer to cut this text"
            return
        self._cut_generation += 1
        if len(text) < SYNC_TOKENIZE_CHARS:
            self._on_tokens_cut(self._cut_generation, text, *_cut(self._token_spans_of, text))
            return
        self._cutting = self._cut_generation
        jobs.start(None, _cut_job, self._cut_generation, text, self._token_spans_of, self._relay)

    def _on_tokens_cut(self, generation: int, text: str, tokens: list[tuple[int, int]] | None,
                       error: str | None) -> None:
        if generation == self._cutting:
            self._cutting = None
        if generation != self._cut_generation or text != self.layout_.text:
            return  # cut for a text or tokenizer the view has left
        self._tokens, self._token_error = tokens, error
        self._token_ends = [e for _, e in tokens] if tokens else []
        self._update_facts()
        if self.tokens_box.isChecked():
            self._clear_shading()
            self._shade_visible()

    def wait_for_tokens(self, timeout_ms: int = 30000) -> bool:
        """Block until a token cut running on a worker has been applied (tests); ``True`` when none is left."""
        from PySide6.QtCore import QCoreApplication, QDeadlineTimer

        deadline = QDeadlineTimer(timeout_ms)
        while self._cutting is not None and not deadline.hasExpired():
            QThreadPool.globalInstance().waitForDone(50)
            QCoreApplication.processEvents()
        return self._cutting is None

    def _on_tokens_box_toggled(self, checked: bool) -> None:
        if checked:
            self._ensure_tokens()
        self._update_facts()
        self._clear_shading()
        self._shade_visible()

    def _update_facts(self) -> None:
        pv = self.preview
        if pv is None:
            self.facts.setText("")
            return
        n_blocks = len(set(self.layout_.owners)) if pv.api == TEXT_COMPLETION else len(self.layout_.ranges)
        what = "blocks" if pv.api == TEXT_COMPLETION else "messages"
        parts = [f"{len(self.layout_.text):,} characters", f"{n_blocks} {what} shaded",
                 f"{pv.prompt_tokens:,} prompt tokens"]
        if pv.api == TEXT_COMPLETION:
            stops = ", ".join(repr(s) for s in pv.stop[:4]) + (" …" if len(pv.stop) > 4 else "")
            parts.append(f"stop: {stops}" if pv.stop else "no stop strings")
            parts.append(f"reply ≤ {pv.reply_reserve:,} tokens")
        if self.tokens_box.isChecked() and self._cutting is not None:
            parts.append("cutting tokens…")
        elif self.tokens_box.isChecked():
            n = len(self._tokens or [])
            shown = f"{n:,} tokens shown"
            if pv.api == TEXT_COMPLETION and self._tokens and n != pv.prompt_tokens:
                # the backend's count holds what the text does not show: BOS, control tokens
                shown += f" ({pv.prompt_tokens - n:+,} in the backend's count: BOS / control tokens)"
            parts.append(self._token_error or shown)
        self.facts.setText(" · ".join(parts))

    # ------------------------------------------------------------------ mouse
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is self.edit.viewport():
            if event.type() == QEvent.Type.MouseMove and isinstance(event, QMouseEvent):
                self._hover(event)
            elif (event.type() == QEvent.Type.MouseButtonRelease and isinstance(event, QMouseEvent)
                  and event.button() == Qt.MouseButton.LeftButton and not self.edit.textCursor().hasSelection()):
                self.click_at(self._code_point(self.edit.cursorForPosition(event.position().toPoint()).position()))
        return super().eventFilter(obj, event)

    def click_at(self, pos: int) -> int | None:
        """A click on code point ``pos``: selects the block there (emits ``block_clicked``)."""
        self.ensure_rendered()
        index = self.block_at(pos)
        if index is not None:
            self.select_block(index)
            self.block_clicked.emit(index)
        return index

    def describe_block(self, index: int) -> str:
        """What hovering block ``index`` says: kind, source, tokens, status."""
        if self.preview is None or not 0 <= index < len(self.preview.blocks):
            return ""
        b = self.preview.blocks[index]
        return f"#{b.position} {kind_label(b.kind)} · {b.source} · {b.tokens:,} tokens · {b.status} ({b.reason})"

    def _hover(self, event: QMouseEvent) -> None:
        point = event.position().toPoint()
        index = self.block_at(self._code_point(self.edit.cursorForPosition(point).position()))
        tip = self.describe_block(index) + "\nClick to select it in the blocks table" if index is not None else ""
        if tip:
            QToolTip.showText(event.globalPosition().toPoint(), tip, self.edit.viewport())
        else:
            QToolTip.hideText()
