"""Block inspector: the full text of one prompt block with its token boundaries.

The selected :class:`~engine.schema.PreviewBlock` is shown with every token of the active
tokenizer profile on an alternating background, so a writer sees where the tokenizer cuts.
The header gives kind, role, source, status, the stable reason in words, the protected and
pinned markers, token and character counts, and the lorebook trace when the block is an
activated World Info entry.

Shading sets each paragraph's layout format ranges from precomputed token spans in one pass
(bisect per paragraph, no per-token document edits), so a 32,000-character block formats in
well under 100 ms.

This module also holds :data:`REASON_WORDS`, the stable reason codes (SPEC §3 and the World
Info trace codes) in words; the lorebook and audit inspectors reuse :func:`reason_in_words`.
"""

from __future__ import annotations

import bisect
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette, QTextCharFormat, QTextLayout
from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

#: Stable reason codes (blocks and lorebook trace) in words. Unknown codes are humanized.
REASON_WORDS: dict[str, str] = {
    # kept
    "SYSTEM_PROMPT": "System prompt (always kept)",
    "CHARACTER": "Character definition (always kept)",
    "PERSONA": "User persona (always kept)",
    "LOREBOOK_CONSTANT": "Constant lorebook entry (always kept)",
    "PINNED": "Pinned by you (always kept)",
    "CURRENT_INPUT": "Current user input (always kept)",
    "INSTRUCTION": "Instruction or author's note (always kept)",
    "TOOLS": "Tool schemas (always kept)",
    "LOREBOOK_MATCHED": "Lorebook entry matched a key",
    "MEMORY": "Memory block",
    "SUMMARY": "Summary of older history",
    "FITS_BUDGET": "Fits the budget",
    "EXAMPLE": "Example dialogue",
    # excluded
    "MANUAL_EXCLUDED": "Excluded by you",
    "HIDDEN": "Hidden message (not sent)",
    "HISTORY_OLDEST_FIRST": "Dropped: oldest history goes first",
    "TOOL_GROUP_DROPPED": "Dropped with its tool group",
    "LOREBOOK_BUDGET": "Dropped: over the lorebook budget",
    "LOW_RELEVANCE": "Dropped: least relevant to the conversation",
    "PRIORITY_LOWEST_FIRST": "Dropped: lowest priority goes first",
    "EXAMPLES_FIRST": "Dropped: example dialogue goes before history",
    "TOKEN_BUDGET_EXCEEDED": "Protected blocks alone exceed the budget",
    # truncated
    "SUMMARIZED": "Folded into a summary",
    "CUT": "Cut to fit the budget",
    # lorebook trace
    "LOREBOOK_KEY_MATCH": "A primary key matched",
    "LOREBOOK_DECORATOR_ACTIVATE": "Activated by its @@activate decorator",
    "LOREBOOK_DELAY_UNTIL_RECURSION": "Waits for a recursion pass that did not happen",
    "LOREBOOK_EXCLUDED_FROM_RECURSION": "Key appeared only in other entries (recursion excluded)",
    "LOREBOOK_GROUP_ALREADY_SATISFIED": "Its inclusion group already has an active entry",
    "LOREBOOK_EMPTY": "Matched, but its content is empty",
    "LOREBOOK_NOT_MATCHED": "No key matched",
    "LOREBOOK_DISABLED": "Entry is disabled",
    "LOREBOOK_PROBABILITY": "Lost the probability roll",
    "LOREBOOK_COOLDOWN": "On cooldown",
    "LOREBOOK_DELAY": "Delayed (not enough messages yet)",
    "LOREBOOK_GROUP_LOST": "Another entry of its inclusion group won",
    "LOREBOOK_INVALID_KEY": "Invalid key (bad regex)",
    "LOREBOOK_SECONDARY_FAILED": "Primary key matched, secondary keys did not",
    "LOREBOOK_STICKY": "Still active (sticky)",
    "LOREBOOK_RECURSION": "Matched through another entry's text (recursion)",
    "LOREBOOK_NO_KEYS": "Entry has no keys",
}


def reason_in_words(code: str | None) -> str:
    """The reason ``code`` in words (never empty for a non-empty code).

    Looks in the engine's table (``engine.reasons.REASON_CODES``) and the app's shared table
    (``gui.labels.REASON_WORDS``) first so the blocks table and the inspectors agree, then in
    :data:`REASON_WORDS` (which adds the World Info trace codes), then in the engine's
    ``TRACE_CODES`` meanings; unknown codes are humanized
    (``SOME_NEW_CODE`` → ``"Some new code"``).

    Parameters
    ----------
    code:
        A stable UPPER_SNAKE reason or trace code (SPEC §3), or ``None``.
    """
    if not code:
        return ""
    words = (_engine_reason_words().get(code) or _app_reason_words().get(code) or REASON_WORDS.get(code)
             or _trace_code_words().get(code))
    if words:
        return words[:1].upper() + words[1:]
    return code.replace("_", " ").strip().capitalize()


def _engine_reason_words() -> dict[str, str]:
    try:
        from engine.reasons import REASON_CODES
    except ImportError:  # older engine without the reason table
        return {}
    return {code: words for code, (_category, words) in REASON_CODES.items()}


def _app_reason_words() -> dict[str, str]:
    try:
        from gui.labels import REASON_WORDS as app_words
    except ImportError:  # the shared table is optional
        return {}
    return app_words


def _trace_code_words() -> dict[str, str]:
    try:
        from engine.lorebook.codes import TRACE_CODES
    except ImportError:  # World Info engine not installed yet
        return {}
    return TRACE_CODES


#: Status → (light-theme colour, dark-theme colour) for the status label.
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    "kept": ("#1b7f3b", "#6fd38f"),
    "excluded": ("#b42318", "#ff8a80"),
    "truncated": ("#b54708", "#ffb366"),
}


def marks() -> dict[str, str]:
    """Marker glyphs shared with the blocks table (``gui.labels``), emoji-free fallbacks."""
    try:
        from gui import labels
    except ImportError:  # pragma: no cover - labels ship with the app
        labels = None  # type: ignore[assignment]
    return {
        "protected": getattr(labels, "PROTECTED_MARK", "⚷"),
        "pinned": getattr(labels, "PINNED_MARK", "⚑"),
        "group": getattr(labels, "GROUP_MARK", "↔"),
        "excluded": getattr(labels, "EXCLUDE_MARK", "⊘"),
    }


def kind_words(kind: str) -> str:
    """``"✉ Message"``-style label for a block kind (``gui.labels.kind_label`` when present)."""
    try:
        from gui.labels import kind_label
    except ImportError:  # pragma: no cover - labels ship with the app
        return kind.replace("_", " ").capitalize()
    return kind_label(kind)


def is_dark(widget: QWidget) -> bool:
    """``True`` when the widget's palette has a dark base (dark theme)."""
    return widget.palette().color(QPalette.ColorRole.Base).lightness() < 128


def describe_detail(detail: Any) -> str:
    """A trace record's ``detail`` (dict of evidence) in a short phrase.

    ``{"key": "sword", "message_index": 12, "depth": 0, "pass": 1}`` →
    ``'key "sword" in message 12 (depth 0), recursion pass 1'``.
    """
    if not detail:
        return ""
    if not isinstance(detail, dict):
        return str(detail)
    parts: list[str] = []
    rest = dict(detail)
    key = rest.pop("key", None)
    msg = rest.pop("message_index", None)
    depth = rest.pop("depth", None)
    rpass = rest.pop("pass", None)
    source = rest.pop("source", None)
    # World Info under the sillytavern rules: where the loomscope rules differ, say it in words
    other_rules = rest.pop("loomscope", None)
    rest.pop("order_of_activation", None)
    if key is not None:
        phrase = f'key "{key}"'
        if msg is not None:
            phrase += f" in message {msg}"
        elif source:
            phrase += f" in {source}"
        if depth is not None:
            phrase += f" (depth {depth})"
        parts.append(phrase)
    else:
        if msg is not None:
            parts.append(f"message {msg}")
        if depth is not None:
            parts.append(f"depth {depth}")
        if source:
            parts.append(f"in {source}")
    if rpass:
        parts.append(f"recursion pass {rpass}")
    from gui.labels import plain

    for name, value in rest.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = describe_detail(value) or plain(value)
        parts.append(f"{name.replace('_', ' ')} {plain(value)}")  # never a Python repr
    if isinstance(other_rules, dict) and other_rules.get("message"):
        parts.append(str(other_rules["message"]))
    return ", ".join(parts)


def utf16_offsets(text: str) -> list[int] | None:
    """Map code-point offsets of ``text`` to UTF-16 offsets (Qt positions).

    Returns ``None`` when the text has no character outside the BMP (offsets are equal);
    otherwise a list of length ``len(text) + 1``.
    """
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        return None
    out = [0] * (len(text) + 1)
    pos = 0
    for i, c in enumerate(text):
        out[i] = pos
        pos += 2 if ord(c) >= 0x10000 else 1
    out[len(text)] = pos
    return out


def apply_token_shading(document: Any, spans: list[tuple[int, int]], formats: list[QTextCharFormat]) -> int:
    """Shade token ``spans`` (UTF-16 document positions, sorted) alternately in ``document``.

    Sets each paragraph's layout format ranges once (no document edits, no highlighter: the
    PySide6 ``QSyntaxHighlighter.setFormat`` binding leaks a reference to ``None`` per call and
    aborts CPython 3.11 after a few thousand tokens). Returns the number of format ranges set.
    Passing ``formats=[]`` clears the shading.
    """
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    n = len(spans)
    total = 0
    block = document.firstBlock()
    while block.isValid():
        ranges = []
        if formats:
            block_start = block.position()
            block_end = block_start + block.length() - 1  # without the paragraph separator
            i = bisect.bisect_right(ends, block_start)
            while i < n and starts[i] < block_end:
                start = max(starts[i], block_start)
                end = min(ends[i], block_end)
                if end > start:
                    rng = QTextLayout.FormatRange()
                    rng.start = start - block_start
                    rng.length = end - start
                    rng.format = formats[i % len(formats)]
                    ranges.append(rng)
                i += 1
        block.layout().setFormats(ranges)
        total += len(ranges)
        block = block.next()
    document.markContentsDirty(0, document.characterCount())
    return total


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class BlockInspector(QWidget):
    """Full text of the selected prompt block, shaded per token, with its facts.

    Parameters
    ----------
    ctx:
        The application context (opaque). When it has ``registries.tokenizers`` that registry
        is used; otherwise the widget builds its own ``default_tokenizer_registry()``.
    parent:
        Qt parent.
    """

    def __init__(self, ctx: Any = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ctx = ctx
        self._registry: Any = None
        self._block: Any = None
        self._profile_name = ""
        self._spans: list[tuple[int, int]] = []
        self._span_cache: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._shown: tuple[str, str] | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)

        self._title = QLabel("No block selected")
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

        bar = QHBoxLayout()
        self._shade_box = QCheckBox("Show token boundaries")
        self._shade_box.setChecked(True)
        self._shade_box.toggled.connect(self._on_shade_box_toggled)
        bar.addWidget(self._shade_box)
        bar.addStretch(1)
        self._profile_label = QLabel("")
        bar.addWidget(self._profile_label)
        layout.addLayout(bar)

        self._text = QPlainTextEdit()
        self._text.setReadOnly(True)
        self._text.setObjectName("block_text")
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self._text.setFont(mono)
        self._text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        layout.addWidget(self._text, 1)

        dark = is_dark(self)
        colours = (
            (QColor("#1f3a5a"), QColor("#4a3b12")) if dark else (QColor("#d6e8ff"), QColor("#ffe7b3"))
        )
        self._formats: list[QTextCharFormat] = []
        for colour in colours:
            fmt = QTextCharFormat()
            fmt.setBackground(colour)
            self._formats.append(fmt)
        self._set_rows_visible(False)

    # ------------------------------------------------------------------ public API
    def set_block(self, block: Any, profile_name: str) -> None:
        """Show ``block`` (a ``PreviewBlock`` or ``None``) under tokenizer ``profile_name``.

        Token boundaries come from ``profile.token_spans(text)`` (character spans); an unknown
        profile shows the text without shading and says why.
        """
        self._block = block
        self._profile_name = profile_name or ""
        if block is None:
            self._title.setText("No block selected")
            self._badges.setText("")
            self._badges.hide()
            self._set_rows_visible(False)
            self._spans = []
            self._shown = None
            self._text.setPlainText("")
            self._profile_label.setText("")
            return

        text = str(_field(block, "text", "") or "")
        self._set_rows_visible(True)
        kind = str(_field(block, "kind", ""))
        source = str(_field(block, "source", ""))
        name = _field(block, "name")
        self._title.setText(f"{kind_words(kind)} — {source}" + (f" ({name})" if name else ""))
        badges = self._badges_html(block)
        self._badges.setText(badges)
        self._badges.setVisible(bool(badges))

        dark = is_dark(self)
        status = str(_field(block, "status", ""))
        colour = STATUS_COLOURS.get(status, ("#444444", "#cccccc"))[1 if dark else 0]
        reason = str(_field(block, "reason", "") or "")
        self._labels["kind"].setText(kind)
        self._labels["role"].setText(str(_field(block, "role", "")))
        self._labels["source"].setText(source)
        self._labels["status"].setText(f'<span style="color:{colour}; font-weight:bold">{status}</span>')
        detail = _field(block, "reason_detail")
        why = f"{reason_in_words(reason)} <span style='color:gray'>({reason})</span>" if reason else ""
        if detail:  # the specific reason the engine gives (figures: tokens free, the newer message, ...)
            why += f"<br>{_escape(str(detail))}"
        self._labels["reason"].setText(why)

        spans, error = self._token_spans(text, self._profile_name)
        self._spans = spans
        tokens = _field(block, "tokens", 0)
        original = _field(block, "original_tokens")
        parts = [f"<b>{tokens}</b> in the prompt (with chat-format overhead)"]
        if original is not None and status == "truncated":
            parts.append(f"{original} before {'summarizing' if _field(block, 'summary_id') else 'cutting'}")
        if error is None:
            profile = self._profile(self._profile_name)
            text_tokens = profile.count(text) if profile is not None and text else len(spans)
            parts.append(f"{text_tokens:,} in the text under {self._profile_name}")
            if text_tokens != len(spans):
                if profile is not None and getattr(profile, "approximate", False):
                    parts.append(f"{len(spans):,} cl100k boundaries shown")
                else:
                    parts.append(f"{len(spans):,} boundaries shown (tokens splitting a character merged)")
        else:
            parts.append(f"<span style='color:{STATUS_COLOURS['excluded'][1 if dark else 0]}'>{error}</span>")
        self._labels["tokens"].setText(" · ".join(parts))
        lines = text.count("\n") + 1 if text else 0
        self._labels["chars"].setText(f"{len(text):,} characters · {lines:,} lines")

        trace = _field(block, "trace")
        trace_text = self._trace_html(trace)
        self._labels["trace"].setText(trace_text)
        self._set_row_visible("trace", bool(trace_text))

        profile_note = ""
        if self._profile_name and error is None:
            profile = self._profile(self._profile_name)
            if profile is not None and getattr(profile, "approximate", False):
                profile_note = "approximate profile: boundaries of the cl100k tokens it estimates from"
        self._profile_label.setText(profile_note)

        if self._shown == (self._profile_name, text):
            # Same text under the same profile (a live preview refresh): keep the document,
            # its shading and the reader's scroll position.
            return
        self._shown = (self._profile_name, text)
        self._text.setPlainText(text)
        self._apply_shading()

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

    def _tokenizers(self) -> Any:
        if self._registry is None:
            registries = getattr(self._ctx, "registries", None)
            registry = getattr(registries, "tokenizers", None)
            if registry is None:
                from engine.tokenizers import default_tokenizer_registry

                registry = default_tokenizer_registry()
            self._registry = registry
        return self._registry

    def _profile(self, name: str) -> Any:
        try:
            return self._tokenizers().get(name)
        except Exception:
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
            code = getattr(exc, "code", type(exc).__name__)
            return [], f"token boundaries unavailable ({code})"
        if len(self._span_cache) > 64:
            self._span_cache.clear()
        self._span_cache[key] = spans
        return spans, None

    def _badges_html(self, block: Any) -> str:
        m = marks()
        badges = []
        if _field(block, "protected", False):
            badges.append((f"{m['protected']} protected", "#5b3cc4"))
        if _field(block, "pinned", False):
            badges.append((f"{m['pinned']} pinned", "#0b6bcb"))
        if _field(block, "manual_excluded", False):
            badges.append((f"{m['excluded']} excluded by you", "#b42318"))
        group = _field(block, "group")
        if group:
            badges.append((f"{m['group']} tool group {_escape(str(group))}", "#6b7280"))
        return " &nbsp; ".join(
            f"<span style='color:white; background:{bg}'>&nbsp;{text}&nbsp;</span>" for text, bg in badges
        )

    @staticmethod
    def _trace_html(trace: Any) -> str:
        """A block's trace (the World Info record for lorebook blocks) as a few HTML lines."""
        if not trace:
            return ""
        if not isinstance(trace, dict):
            return _escape(str(trace))
        rows = []
        code = trace.get("code")
        if code:
            rows.append(f"<b>{_escape(reason_in_words(str(code)))}</b> ({_escape(str(code))})")
        detail = trace.get("detail")
        if detail is None:  # flat trace: the evidence sits beside the code
            detail = {k: v for k, v in trace.items() if k in ("key", "message_index", "depth", "pass", "source")}
        phrase = describe_detail(detail)
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
        known = {"code", "detail", "book", "book_index", "uid", "comment", "tokens", "activated",
                 "key", "message_index", "depth", "pass", "source"}
        from gui.labels import plain

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


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
