"""The budget bar: the context limit as a stacked bar by kind, reserve, free space and the cut.

Painted with ``QPainter`` (no extra dependency). Marks: the compaction trigger
(``limit × (1 − 0.08) × 0.80``, SPEC §4) and the compaction target (65 % of the limit) with the
chat's own compaction options, exactly where the ``compact`` strategy puts them
(:func:`engine.preview_facts.strategy_compaction_marks`; under ``compact`` the preview's own
``strategy_info``), drawn only where ``compact`` is the strategy. A mark past the prompt budget stays there (the strategy compares the chat
before fitting with it), and its tooltip says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from engine.compaction.options import CompactionOptions
from engine.preview_facts import CompactionMarks, strategy_compaction_marks
from engine.preview_facts import compaction_marks as engine_compaction_marks
from engine.schema import ContextPreview, PreviewBlock

from ..labels import BUDGET_GROUPS, CUT_COLOR, FREE_COLOR, KIND_GROUP, RESERVE_COLOR, SAFETY_COLOR
from ..models.preview_delta import PreviewDelta

#: The "cut" segment takes at most this share of the bar's width (the cut can be many times the limit).
CUT_MAX_SHARE = 0.22


@dataclass(frozen=True)
class Segment:
    """One stretch of the bar: ``key`` (``history``, ``reserve``, ``free``, ``cut``...), tokens, colour."""

    key: str
    label: str
    tokens: int
    color: str


def _add_block(used: dict[str, int], b: PreviewBlock, sign: int = 1) -> int:
    """Add (``sign`` -1: take back) block ``b``'s share to ``used``; returns its cut tokens (signed)."""
    group = KIND_GROUP.get(b.kind, "system")
    if b.status == "kept":
        used[group] += sign * b.tokens
        return 0
    if b.status == "truncated":
        used[group] += sign * b.tokens
        return sign * max(0, (b.original_tokens or b.tokens) - b.tokens)
    return sign * b.tokens


def block_usage(blocks: Iterable[PreviewBlock]) -> tuple[dict[str, int], int]:
    """``(tokens per budget group, cut tokens)`` of ``blocks``: what :func:`budget_segments` draws."""
    used: dict[str, int] = {g: 0 for g, _ in BUDGET_GROUPS}
    cut = 0
    for b in blocks:
        cut += _add_block(used, b)
    return used, cut


def budget_segments(preview: ContextPreview, usage: tuple[dict[str, int], int] | None = None) -> list[Segment]:
    """The bar's segments in drawing order; the last one is ``cut`` (may be 0 tokens).

    Kept blocks count in full, truncated blocks with their remaining tokens; the chat-format
    priming tokens not attributed to a block show as ``overhead``. ``usage`` is
    :func:`block_usage` of ``preview.blocks`` when already at hand.
    """
    used, cut = usage if usage is not None else block_usage(preview.blocks)
    segs = [Segment(g, g.title(), used[g], color) for g, color in BUDGET_GROUPS]
    overhead = preview.prompt_tokens - sum(used.values())
    if overhead > 0:
        segs.append(Segment("overhead", "Format overhead", overhead, "#9aa3ad"))
    segs.append(Segment("safety", "Safety margin", preview.safety_margin, SAFETY_COLOR))
    segs.append(Segment("reserve", "Reply reserve", preview.reply_reserve, RESERVE_COLOR))
    filled = sum(s.tokens for s in segs)
    segs.append(Segment("free", "Free", max(0, preview.context_limit - filled), FREE_COLOR))
    segs.append(Segment("cut", "Cut (excluded / truncated)", cut, CUT_COLOR))
    return segs


def compaction_marks(context_limit: int, options: CompactionOptions | None = None) -> dict[str, int]:
    """``{"trigger": tokens, "target": tokens}`` for a ``context_limit``-token window and the
    chat's compaction ``options`` (``engine.preview_facts.compaction_marks``: SPEC §4)."""
    m = engine_compaction_marks(context_limit, None, options)
    return {"trigger": m.trigger, "target": m.target}


def compaction_mark_tooltip(key: str, preview: ContextPreview, options: CompactionOptions | None = None) -> str:
    """What a compaction mark means, in tokens, and where it sits against the prompt budget."""
    limit, budget = preview.context_limit, preview.context_limit - preview.reply_reserve
    m = strategy_compaction_marks(preview, options)
    tokens = m.trigger if key == "trigger" else m.target
    if key == "trigger":
        text = (f"Compaction trigger: {tokens:,} tokens. With the compact strategy, a prompt this "
                f"large is summarized down to the target.")
    else:
        text = f"Compaction target: {tokens:,} tokens, where compaction stops."
    text += (f" ({100 * tokens / limit:.1f} % of the context window)" if limit else "")
    if tokens >= budget:
        text += (f" It lies beyond the {budget:,}-token prompt budget (context window − reply reserve "
                 f"{preview.reply_reserve:,}): the strategy compares the whole chat, before anything is "
                 f"cut to fit, with it.")
    return text


class BudgetBar(QWidget):
    """Stacked bar of one preview; hover shows tokens and percent of the context limit."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._preview: ContextPreview | None = None
        self._options: CompactionOptions | None = None
        self._segments: list[Segment] = []
        self._usage: tuple[dict[str, int], int] | None = None  # block_usage of the preview shown
        self._rects: list[tuple[QRectF, Segment]] = []
        self.setMouseTracking(True)
        self.setMinimumHeight(46)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(600, 50)

    def set_preview(self, preview: ContextPreview | None, options: CompactionOptions | None = None,
                    delta: PreviewDelta | None = None) -> None:
        """Show ``preview`` (``None`` clears the bar) with the chat's compaction ``options``
        (``CompactionOptions.from_options(settings.strategy_options)``; ``None``: SPEC §4's defaults).

        ``delta`` (:func:`~gui.models.preview_delta.diff_previews` from the preview shown): only
        its changed rows are counted again; ignored unless its ``old`` is the preview shown.
        """
        usage: tuple[dict[str, int], int] | None = None
        if preview is not None:
            shown = self._preview
            if (delta is not None and shown is not None and delta.follows(shown) and delta.new is preview
                    and self._usage is not None):
                used, cut = dict(self._usage[0]), self._usage[1]
                old_blocks, new_blocks = shown.blocks, preview.blocks
                for r in delta.key_rows:  # a block's share reads only key fields (kind, status, tokens)
                    cut += _add_block(used, old_blocks[r], -1) + _add_block(used, new_blocks[r])
                usage = used, cut
            else:
                usage = block_usage(preview.blocks)
        self._preview = preview
        self._usage = usage
        self._options = options
        self._segments = budget_segments(preview, usage) if preview is not None else []
        self.update()

    def segments(self) -> list[Segment]:
        """The segments shown (for tests and the legend)."""
        return list(self._segments)

    def tooltip_for(self, seg: Segment) -> str:
        """``"History: 1,234 tokens (12.3 % of the 8,192-token limit)"``."""
        limit = self._preview.context_limit if self._preview else 0
        pct = 100.0 * seg.tokens / limit if limit else 0.0
        return f"{seg.label}: {seg.tokens:,} tokens ({pct:.1f} % of the {limit:,}-token limit)"

    def segment_at(self, x: float) -> Segment | None:
        """The segment under widget x coordinate ``x``."""
        for rect, seg in self._layout():
            if rect.left() <= x < rect.right():
                return seg
        return None

    # -- painting ------------------------------------------------------------------------
    def _layout(self) -> list[tuple[QRectF, Segment]]:
        if self._preview is None:
            return []
        w = max(10.0, self.width() - 2.0)
        top, h = 16.0, max(12.0, self.height() - 22.0)
        cut = self._segments[-1]
        main = self._segments[:-1]
        total_main = max(1, sum(s.tokens for s in main))
        limit = self._preview.context_limit
        cut_w = 0.0
        if cut.tokens > 0:
            cut_w = min(CUT_MAX_SHARE * w, w * cut.tokens / (total_main + cut.tokens))
            cut_w = max(cut_w, 18.0)
        main_w = w - cut_w - (6.0 if cut_w else 0.0)
        scale = main_w / max(total_main, limit)
        out: list[tuple[QRectF, Segment]] = []
        x = 1.0
        for s in main:
            if s.tokens <= 0:
                continue
            rw = s.tokens * scale
            out.append((QRectF(x, top, rw, h), s))
            x += rw
        if cut_w:
            out.append((QRectF(w - cut_w + 1.0, top, cut_w, h), cut))
        self._scale = scale
        return out

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        self._rects = self._layout()
        if self._preview is None:
            p.setPen(QColor("#888"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No preview yet")
            return
        p.setFont(self._small_font())
        for rect, seg in self._rects:
            p.fillRect(rect, QColor(seg.color))
            if seg.key == "cut":
                p.fillRect(rect, QBrush(QColor("#ffffff"), Qt.BrushStyle.BDiagPattern))
        # limit border and compaction marks
        limit = self._preview.context_limit
        p.setPen(QPen(QColor("#333"), 1))
        bar_top = self._rects[0][0].top() if self._rects else 16.0
        bar_h = self._rects[0][0].height() if self._rects else 20.0
        p.drawRect(QRectF(1.0, bar_top, limit * self._scale, bar_h))
        self._mark_x: dict[str, float] = {}
        marks = self.marks()
        for key, tokens in (("trigger", marks.trigger), ("target", marks.target)) if self.shows_marks() else ():
            x = 1.0 + tokens * self._scale
            self._mark_x[key] = x
            color = QColor("#c0392b") if key == "trigger" else QColor("#1f6fb2")
            p.setPen(QPen(color, 2, Qt.PenStyle.DashLine))
            p.drawLine(int(x), int(bar_top - 3), int(x), int(bar_top + bar_h + 3))
            p.setPen(color)
            # target label left of its line, trigger label right of it: they never overlap
            if key == "trigger":
                p.drawText(QRectF(x + 3, 0, 140, 14), int(Qt.AlignmentFlag.AlignLeft),
                           f"compaction trigger {100 * marks.trigger_share:.0f} %")
            else:
                p.drawText(QRectF(x - 143, 0, 140, 14), int(Qt.AlignmentFlag.AlignRight),
                           f"target {100 * marks.target_share:.0f} %")
        fm = p.fontMetrics()
        for rect, seg in self._rects:  # labels last, so the marks never hide them
            if seg.key == "cut":
                self._paint_cut_label(p, rect, seg)
            elif rect.width() > 46:
                p.setPen(QColor("#ffffff") if seg.key not in ("free", "reserve", "safety") else QColor("#333"))
                inner = rect.adjusted(3, 0, -2, 0)
                p.drawText(inner, int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                           fm.elidedText(f"{seg.label} {seg.tokens:,}", Qt.TextElideMode.ElideRight,
                                         int(inner.width())))
        p.setPen(QColor("#333"))
        p.drawText(QRectF(2, 0, 300, 14), int(Qt.AlignmentFlag.AlignLeft), self.caption())

    def shows_marks(self) -> bool:
        """The compaction marks are drawn only where compaction is the strategy (``compact``, issue 31)."""
        return self._preview is not None and self._preview.strategy == "compact"

    def marks(self) -> CompactionMarks:
        """The compaction marks drawn: the ones the ``compact`` strategy uses for this preview."""
        assert self._preview is not None
        return strategy_compaction_marks(self._preview, self._options)

    def caption(self) -> str:
        """The text over the bar's left end: what the whole bar stands for (``"context window 2,048 tokens"``)."""
        return f"context window {self._preview.context_limit:,} tokens" if self._preview is not None else ""

    def cut_label(self, width: float) -> str:
        """The cut segment's label for ``width`` px: the long form when it fits, else ``"not sent 984"``,
        ``"Cut 984"`` or the bare number (``""`` when not even that fits)."""
        cut = self._segments[-1] if self._segments else None
        if cut is None:
            return ""
        fm = QFontMetricsF(self._small_font())
        for text in (f"{cut.label} {cut.tokens:,}", f"not sent {cut.tokens:,}", f"Cut {cut.tokens:,}",
                     f"{cut.tokens:,}"):
            if fm.horizontalAdvance(text) + 8 <= width:
                return text
        return ""

    def _small_font(self) -> QFont:
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        return small

    def _paint_cut_label(self, p: QPainter, rect: QRectF, seg: Segment) -> None:
        # dark text on a light, rounded backdrop: readable over the red hatching
        text = self.cut_label(rect.width() - 4)
        if not text:
            return
        fm = QFontMetricsF(p.font())
        w, h = fm.horizontalAdvance(text) + 8, fm.height() + 2
        box = QRectF(rect.left() + (rect.width() - w) / 2, rect.center().y() - h / 2, w, h)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(255, 255, 255, 235))
        p.drawRoundedRect(box, 3, 3)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QColor("#5c1512"))
        p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)

    def mark_at(self, x: float, y: float | None = None) -> str | None:
        """The compaction mark (``trigger``/``target``) under ``x`` (its label or line, ±4 px)."""
        if self._preview is None:
            return None
        self._layout()
        if not self.shows_marks():
            return None
        marks = self.marks()
        for key, tokens in (("trigger", marks.trigger), ("target", marks.target)):
            mx = 1.0 + tokens * self._scale
            on_label = y is not None and y < 15 and (mx <= x <= mx + 140 if key == "trigger" else mx - 143 <= x <= mx)
            if abs(x - mx) <= 4 or on_label:
                return key
        return None

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        mark = self.mark_at(event.position().x(), event.position().y())
        if mark is not None and self._preview is not None:
            QToolTip.showText(event.globalPosition().toPoint() + QPoint(8, 8),
                              compaction_mark_tooltip(mark, self._preview, self._options), self)
            return
        seg = self.segment_at(event.position().x())
        if seg is None:
            QToolTip.hideText()
            return
        QToolTip.showText(event.globalPosition().toPoint() + QPoint(8, 8), self.tooltip_for(seg), self)
