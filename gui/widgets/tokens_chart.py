"""A small chart of tokens per chat message (QPainter), to find what eats the budget.

Messages are bucketed per pixel column (the tallest message of a bucket is drawn), so a
10,000-message chat paints as fast as a short one. Bars are coloured by the message's status
in the current preview; clicking selects that message.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from engine.schema import ContextPreview

from ..labels import STATUS_COLORS, display_status


#: Height of the caption strip over the bars (px).
CAPTION_H = 14
CAPTION = "tokens per message, oldest → newest · green = sent, red = not sent"


class TokensChart(QWidget):
    """Bar per message: height ∝ tokens. Signal ``message_clicked(int message_index)``."""

    message_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items: list[tuple[int, int, str]] = []  # (message_index, tokens, status)
        self._max = 1
        self.setMouseTracking(True)
        self.setMinimumHeight(CAPTION_H + 30)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip("Tokens per message (hover for details, click to select)")

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(600, CAPTION_H + 40)

    def set_preview(self, preview: ContextPreview | None) -> None:
        """Take the per-message tokens of ``preview``."""
        items: list[tuple[int, int, str]] = [] if preview is None else [
            (b.message_index,
             b.original_tokens if b.original_tokens is not None else b.tokens,
             b.status if b.status != "truncated" else display_status(b.status, b.reason))
            for b in preview.blocks if b.message_index is not None]
        if any(items[i][0] > items[i + 1][0] for i in range(len(items) - 1)):
            items.sort()  # prompt order is chat order unless a stage moved a message
        self._items = items
        self._max = max((t for _, t, _ in items), default=1) or 1
        self.update()

    def items(self) -> list[tuple[int, int, str]]:
        """``[(message_index, tokens, status), ...]`` in chat order."""
        return list(self._items)

    def _item_at(self, x: float) -> tuple[int, int, str] | None:
        if not self._items:
            return None
        n = len(self._items)
        w = max(1.0, float(self.width()))
        if n <= w:
            i = int(x / min(16.0, w / n))
            if i >= n:
                return None
        else:
            i = int(x / w * n)
        return self._items[max(0, min(n - 1, i))]

    def caption(self) -> str:
        """The legend over the bars (with the tallest message's tokens, the chart's scale)."""
        if not self._items:
            return CAPTION
        return f"{CAPTION} · tallest {self._max:,} tokens"

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#fafbfc"))
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        p.setFont(small)
        p.setPen(QColor("#666"))
        caption_rect = QRectF(2, 0, self.width() - 4, CAPTION_H)
        p.drawText(caption_rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                   p.fontMetrics().elidedText(self.caption(), Qt.TextElideMode.ElideRight, int(caption_rect.width())))
        if not self._items:
            return
        p.translate(0, CAPTION_H)
        w, h = max(1, self.width()), self.height() - CAPTION_H - 2
        n = len(self._items)
        per_px = n / w
        if per_px <= 1:  # wide bars (at most 16 px, so a short chat still reads as a chart)
            bw = min(16.0, w / n)
            for i, (_, tokens, status) in enumerate(self._items):
                bh = max(1.0, h * tokens / self._max)
                p.fillRect(QRectF(i * bw, h - bh + 1, max(1.0, bw - 1), bh), QColor(STATUS_COLORS[status][0]))
        else:  # one column per pixel: the tallest message of the bucket
            for x in range(w):
                lo, hi = int(x * per_px), max(int(x * per_px) + 1, int((x + 1) * per_px))
                bucket = self._items[lo:hi]
                _, tokens, status = max(bucket, key=lambda it: it[1])
                bh = max(1.0, h * tokens / self._max)
                p.fillRect(QRectF(x, h - bh + 1, 1, bh), QColor(STATUS_COLORS[status][0]))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        item = self._item_at(event.position().x())
        if item is not None:
            idx, tokens, status = item
            QToolTip.showText(event.globalPosition().toPoint() + QPoint(8, 8),
                              f"message {idx}: {tokens:,} tokens ({status})", self)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        item = self._item_at(event.position().x())
        if item is not None:
            self.message_clicked.emit(item[0])
