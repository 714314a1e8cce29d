"""Block inspector: the full text of one prompt block with its token boundaries.

The selected :class:`~engine.schema.PreviewBlock` is shown with every token of the active
tokenizer profile on an alternating background, so a writer sees where the tokenizer cuts.
The header gives kind, role, source, status, the stable reason in words, the protected and
pinned markers, token and character counts, and the lorebook trace when the block is an
activated World Info entry.

Shading is :func:`gui.token_shading.apply_token_shading` (one pass over precomputed token
spans); codes are named through :mod:`gui.words` (the engine's one vocabulary), colours come
from :mod:`gui.theme`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontDatabase, QTextCharFormat
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.errors import LoomscopeError
from engine.lorebook_facts import EntryFact, block_entry_facts, block_source_label
from engine.schema import ContextPreview, PreviewBlock
from engine.tokenizers import TokenizerProfile, TokenizerRegistry, default_tokenizer_registry

from ..errors import worker_error
from ..labels import MARKS, kind_label, plain
from ..theme import is_dark, status_hex
from ..token_shading import apply_token_shading, utf16_offsets
from ..words import describe_detail, reason_in_words

if TYPE_CHECKING:  # the context imports the document and preview packages, not the widgets
    from ..context import AppContext


class BlockInspector(QWidget):
    """Full text of the selected prompt block, shaded per token, with its facts.

    Parameters
    ----------
    ctx:
        The application context; its ``registries.tokenizers`` count and cut the text. Without
        one (``None``: tests) the widget builds its own ``default_tokenizer_registry()``.
    parent:
        Qt parent.
    """

    def __init__(self, ctx: AppContext | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ctx = ctx
        self._registry: TokenizerRegistry | None = None
        self._block: PreviewBlock | None = None
        self._profile_name = ""
        #: Set by the window: the profile a name stands for in the current preview (a Text
        #: Completion chat's SillyTavern tokenizer is not in the registry), ``None`` to ask it.
        self.profile_resolver: Callable[[str], TokenizerProfile | None] | None = None
        self._spans: list[tuple[int, int]] = []
        self._span_cache: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._shown: tuple[str, str] | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)

        self._title = QLabel("No block selected")
        self._title.setWordWrap(True)
        title_font = self._title.font()
        title_font.setBold(True)
        title_font.setPointSizeF(title_font.pointSizeF() * 1.15)
        self._title.setFont(title_font)
        self._title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self._title)

        self._badges = QLabel("")
        self._badges.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self._badges)

        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self._labels: dict[str, QLabel] = {}
        for key, caption in (
            ("kind", "Kind"),
            ("role", "Role"),
            ("source", "Source"),
            ("status", "Status"),
            ("reason", "Reason"),
            ("tokens", "Tokens"),
            ("chars", "Characters"),
            ("trace", "Lorebook"),
        ):
            label = QLabel("")
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setObjectName(f"block_{key}")
            form.addRow(caption + ":", label)
            self._labels[key] = label
        self._form = form
        layout.addLayout(form)

        # The World Info entries a block holds: title · book · why · position · tokens
        # (engine.lorebook_facts, the words the CLI and the report use too).
        self.entries = _entries_table()
        layout.addWidget(self.entries)
        self._facts: list[EntryFact] = []

        bar = QHBoxLayout()
        self._shade_box = QCheckBox("Show token boundaries")
        self._shade_box.setChecked(True)
        self._shade_box.toggled.connect(self._on_shade_box_toggled)
        bar.addWidget(self._shade_box)
        bar.addStretch(1)
        self._profile_label = QLabel("")
        bar.addWidget(self._profile_label)
        layout.addLayout(bar)

        self._text = _block_text()
        layout.addWidget(self._text, 1)
        self._formats = _token_formats(is_dark(self))
        self._set_rows_visible(False)

    # ------------------------------------------------------------------ public API
    def set_block(self, block: PreviewBlock | None, profile_name: str, preview: ContextPreview | None = None,
                  chat_length: int | None = None) -> None:
        """Show ``block`` (a ``PreviewBlock`` or ``None``) under tokenizer ``profile_name``.

        Token boundaries come from ``profile.token_spans(text)`` (character spans); an unknown
        profile shows the text without shading and says why. The World Info entries the block
        holds are listed by title with why each fired (:func:`engine.lorebook_facts.block_entry_facts`;
        ``preview`` names them, ``chat_length`` gives a sticky entry's turns left).
        """
        self._block = block
        self._set_entries(block_entry_facts(block, preview, chat_length=chat_length) if block is not None else [])
        self._profile_name = profile_name or ""
        if block is None:
            self._show_nothing()
            return

        text = block.text
        self._set_rows_visible(True)
        kind, source, name = block.kind, block.source, block.name
        shown = block_source_label(block, preview) if self._facts else source  # entries by title
        self._title.setText(f"{kind_label(kind)} — {shown}" + (f" ({name})" if name and not self._facts else ""))
        badges = self._badges_html(block)
        self._badges.setText(badges)
        self._badges.setVisible(bool(badges))

        dark = is_dark(self)
        status = block.status
        colour = status_hex(status, dark)[0]
        reason = block.reason
        self._labels["kind"].setText(kind)
        self._labels["role"].setText(block.role)
        self._labels["source"].setText(source)
        self._labels["status"].setText(f'<span style="color:{colour}; font-weight:bold">{status}</span>')
        explained = preview.reason_detail(block.position) if preview is not None else None
        detail = explained.text if explained is not None else None
        why = f"{reason_in_words(reason)} <span style='color:gray'>({reason})</span>" if reason else ""
        if detail:  # the specific reason the engine gives (figures: tokens free, the newer message, ...)
            why += f"<br>{_escape(str(detail))}"
        self._labels["reason"].setText(why)

        spans, error = self._token_spans(text, self._profile_name)
        self._spans = spans
        self._labels["tokens"].setText(self._tokens_html(block, spans, error, dark))
        lines = text.count("\n") + 1 if text else 0
        self._labels["chars"].setText(f"{len(text):,} characters · {lines:,} lines")

        trace_text = "" if self._facts else self._trace_html(block.trace)
        self._labels["trace"].setText(trace_text)
        self._set_row_visible("trace", bool(trace_text))

        profile_note = ""
        if self._profile_name and error is None:
            profile = self._profile(self._profile_name)
            if profile is not None and profile.approximate:
                profile_note = "approximate profile: boundaries of the cl100k tokens it estimates from"
        self._profile_label.setText(profile_note)

        if self._shown == (self._profile_name, text):
            # Same text under the same profile (a live preview refresh): keep the document,
            # its shading and the reader's scroll position.
            return
        self._shown = (self._profile_name, text)
        self._text.setPlainText(text)
        self._apply_shading()

    def _show_nothing(self) -> None:
        """The inspector with no block selected."""
        self._title.setText("No block selected")
        self._badges.setText("")
        self._badges.hide()
        self._set_rows_visible(False)
        self._spans = []
        self._shown = None
        self._text.setPlainText("")
        self._profile_label.setText("")

    def _tokens_html(self, block: PreviewBlock, spans: list[tuple[int, int]], error: str | None, dark: bool) -> str:
        """The Tokens row: in the prompt, before a cut, in the text under the profile, boundaries shown."""
        text = block.text
        parts = [f"<b>{block.tokens}</b> in the prompt (with chat-format overhead)"]
        if block.original_tokens is not None and block.status == "truncated":
            parts.append(f"{block.original_tokens} before {'summarizing' if block.summary_id else 'cutting'}")
        if error is not None:
            parts.append(f"<span style='color:{status_hex('excluded', dark)[0]}'>{error}</span>")
            return " · ".join(parts)
        profile = self._profile(self._profile_name)
        text_tokens = profile.count(text) if profile is not None and text else len(spans)
        parts.append(f"{text_tokens:,} in the text under {self._profile_name}")
        if text_tokens != len(spans):
            if profile is not None and profile.approximate:
                parts.append(f"{len(spans):,} cl100k boundaries shown")
            else:
                parts.append(f"{len(spans):,} boundaries shown (tokens splitting a character merged)")
        return " · ".join(parts)

    def entry_facts(self) -> list[EntryFact]:
        """The entries listed in the entry table (for tests and the screenshot)."""
        return list(self._facts)

    def shaded_token_count(self) -> int:
        """Number of distinct tokens that carry a shading run in the laid-out document.

        Walks every paragraph's format ranges and maps them back to token indices; a token
        made only of line breaks has no visible character and is not counted. For tests and
        diagnostics.
        """
        starts = [s for s, _ in self._qt_spans()]
        seen: set[int] = set()
        block = self._text.document().firstBlock()
        while block.isValid():
            base = block.position()
            for rng in block.layout().formats():
                idx = bisect.bisect_right(starts, base + rng.start) - 1
                if idx >= 0:
                    seen.add(idx)
            block = block.next()
        return len(seen)

    def token_spans(self) -> list[tuple[int, int]]:
        """Token spans ``[(start, end)]`` (code-point offsets) of the shown block."""
        return list(self._spans)

    # ------------------------------------------------------------------ internals
    def _qt_spans(self) -> list[tuple[int, int]]:
        text = self._text.toPlainText()
        offsets = utf16_offsets(text)
        if offsets is None:
            return list(self._spans)
        return [(offsets[s], offsets[e]) for s, e in self._spans]

    def _tokenizers(self) -> TokenizerRegistry:
        if self._registry is None:
            self._registry = (self._ctx.registries.tokenizers if self._ctx is not None
                              else default_tokenizer_registry())
        return self._registry

    def _profile(self, name: str) -> TokenizerProfile | None:
        if self.profile_resolver is not None:
            resolved = self.profile_resolver(name)
            if resolved is not None:
                return resolved
        try:
            return self._tokenizers().get(name)
        except LoomscopeError:  # UNKNOWN_TOKENIZER
            return None

    def _token_spans(self, text: str, profile_name: str) -> tuple[list[tuple[int, int]], str | None]:
        if not text:
            return [], None
        if not profile_name:
            return [], "no tokenizer profile"
        key = (profile_name, text)
        cached = self._span_cache.get(key)
        if cached is not None:
            return cached, None
        profile = self._profile(profile_name)
        if profile is None:
            return [], f"unknown tokenizer profile {profile_name!r}"
        try:
            spans = list(profile.token_spans(text))
        except Exception as exc:
            return [], f"token boundaries unavailable ({worker_error(exc, 'token boundaries').code})"
        if len(self._span_cache) > 64:
            self._span_cache.clear()
        self._span_cache[key] = spans
        return spans, None

    def _set_entries(self, facts: list[EntryFact]) -> None:
        """One row per entry, two lines a cell so it reads in a narrow inspector:
        ``Quill harbor / Realm #0`` · ``key "harbor" in message 4 / before the character`` · tokens."""
        self._facts = facts
        table = self.entries
        table.setRowCount(len(facts))
        for r, f in enumerate(facts):
            tokens = "" if f.tokens is None else f"{f.tokens:,}"
            cells = (f"{f.title}\n{f.book} #{f.uid}", f"{f.why}\n{f.position}" if f.position else f.why, tokens)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(f"{f.label}\n{f.why}\n{f.position}\n{tokens} tokens · {f.code}")
                if c == len(cells) - 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
                else:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
                table.setItem(r, c, item)
        table.setVisible(bool(facts))
        table.resizeRowsToContents()
        # once the columns have their widths (the Why column stretches), the rows take their wrapped height
        QTimer.singleShot(0, table.resizeRowsToContents)

    def entry_cells(self, row: int) -> dict[str, str]:
        """The entry table's row ``row`` as ``{title, book, why, position, tokens}`` (tests, the screenshot)."""
        f = self._facts[row]
        return {"title": f.title, "book": f.book, "why": f.why, "position": f.position,
                "tokens": "" if f.tokens is None else f"{f.tokens:,}"}

    def _badges_html(self, block: PreviewBlock) -> str:
        m = MARKS
        badges = []
        if block.protected:
            badges.append((f"{m['protected']} protected", "#5b3cc4"))
        if block.pinned:
            badges.append((f"{m['pinned']} pinned", "#0b6bcb"))
        if block.manual_excluded:
            badges.append((f"{m['excluded']} excluded by you", "#b42318"))
        group = block.group
        if group:
            badges.append((f"{m['group']} tool group {_escape(str(group))}", "#6b7280"))
        return " &nbsp; ".join(
            f"<span style='color:white; background:{bg}'>&nbsp;{text}&nbsp;</span>" for text, bg in badges
        )

    @staticmethod
    def _trace_html(trace: dict[str, Any] | None) -> str:
        """A block's trace (the World Info record for lorebook blocks) as a few HTML lines."""
        if not trace:
            return ""
        rows = []
        code = trace.get("code")
        if code:
            rows.append(f"<b>{_escape(reason_in_words(str(code)))}</b> ({_escape(str(code))})")
        detail = trace.get("detail")
        if detail is None:  # flat trace: the evidence sits beside the code
            detail = {k: v for k, v in trace.items() if k in ("key", "message_index", "depth", "pass", "source")}
        phrase = describe_detail(detail) if isinstance(detail, dict) else str(detail)  # or evidence in words
        if phrase:
            rows.append(_escape(phrase))
        where = []
        if trace.get("book"):
            where.append(f"book {trace['book']}")
        if trace.get("uid") is not None:
            where.append(f"entry #{trace['uid']} {trace.get('comment') or ''}".strip())
        if trace.get("tokens") is not None:
            where.append(f"{trace['tokens']} tokens")
        if where:
            rows.append(_escape(" · ".join(where)))
        # st_identifier (SillyTavern's prompt id) and parts (the entries table) are not for the writer
        known = {"code", "detail", "book", "book_index", "uid", "comment", "tokens", "activated",
                 "key", "message_index", "depth", "pass", "source", "st_identifier", "parts"}
        for key, value in trace.items():
            if key in known or value in (None, "", [], {}):
                continue
            if isinstance(value, dict) and isinstance(value.get("note"), str):  # placement, send order
                rows.append(_escape(f"{key.replace('_', ' ')}: {value['note']}"))
                continue
            rows.append(_escape(f"{key.replace('_', ' ')}: {plain(value)}"))
        return "<br>".join(rows)

    def _set_rows_visible(self, visible: bool) -> None:
        for key in self._labels:
            self._set_row_visible(key, visible)

    def _set_row_visible(self, key: str, visible: bool) -> None:
        self._form.setRowVisible(self._labels[key], visible)

    def _apply_shading(self) -> None:
        formats = self._formats if self._shade_box.isChecked() else []
        apply_token_shading(self._text.document(), self._qt_spans(), formats)

    def _on_shade_box_toggled(self, checked: bool) -> None:
        self._apply_shading()


#: Columns of the entry table.
ENTRY_COLUMNS = ("Entry · book", "Why · where it goes", "Tokens")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _entries_table() -> QTableWidget:
    """The Block inspector's table of World Info entries (read-only, wrapping, hidden until filled)."""
    table = QTableWidget(0, len(ENTRY_COLUMNS))
    table.setObjectName("block_entries")
    table.setHorizontalHeaderLabels(list(ENTRY_COLUMNS))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setWordWrap(True)
    table.setTabKeyNavigation(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    table.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
    table.hide()
    return table


def _block_text() -> QPlainTextEdit:
    """The read-only, monospaced box the block's text is shown (and shaded) in."""
    text = QPlainTextEdit()
    text.setReadOnly(True)
    text.setObjectName("block_text")
    mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    mono.setStyleHint(QFont.StyleHint.Monospace)
    text.setFont(mono)
    text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
    return text


def _token_formats(dark: bool) -> list[QTextCharFormat]:
    """The two alternating token shades (dark or light palette)."""
    colours = (QColor("#1f3a5a"), QColor("#4a3b12")) if dark else (QColor("#d6e8ff"), QColor("#ffe7b3"))
    formats: list[QTextCharFormat] = []
    for colour in colours:
        fmt = QTextCharFormat()
        fmt.setBackground(colour)
        formats.append(fmt)
    return formats
