"""A small chart of tokens per chat message (QPainter), to find what eats the budget, with the fit map.

Messages are bucketed per pixel column (the tallest message of a bucket is drawn), so a
10,000-message chat paints as fast as a short one. Bars are coloured by the message's status
in the current preview; clicking selects that message.

The fit map (issue 16 item 7): each message carries the smallest context window from which it is
sent under the chat's settings and strategy (``ContextPreview.fit_windows``, computed by
``engine.shifting.fitmap``). Dashed marks show where the story would start at common window
sizes and at the current one ("8k → message 340, 32k → message 120"); hovering a bar says the
message's own window.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from engine.schema import ContextPreview, FitWindows, PreviewBlock

from ..models.preview_delta import PreviewDelta
from ..theme import status_hex
from ..words import display_status

#: Height of the caption strip over the bars (px).
CAPTION_H = 14
CAPTION = "tokens per message, oldest → newest · green = sent, red = not sent · ┆ where the story starts at a window"
#: Window sizes (tokens) the fit map marks when they fall inside the chat's range.
FIT_WINDOWS = (4096, 8192, 16384, 32768, 65536, 131072, 200000, 1048576)
#: At most this many fit marks (the current window always among them).
MAX_FIT_MARKS = 5


def _bar_tokens(b: PreviewBlock) -> int:
    return b.original_tokens if b.original_tokens is not None else b.tokens


def _bar_status(b: PreviewBlock) -> str:
    return b.status if b.status != "truncated" else display_status(b.status, b.reason)


def window_label(tokens: int) -> str:
    """``8192`` → ``"8k"``, ``131072`` → ``"128k"``, ``200000`` → ``"200k"``, ``1048576`` → ``"1M"``."""
    if tokens >= 1_000_000 and tokens % 1_048_576 == 0:
        return f"{tokens // 1_048_576}M"
    if tokens % 1024 == 0:
        return f"{tokens // 1024}k"
    if tokens % 1000 == 0:
        return f"{tokens // 1000}k"
    return f"{tokens:,}"


def story_start(items: list[tuple[int, int, str, int | None]], window: int) -> int | None:
    """The position (in ``items``) of the oldest message of the contiguous stretch of history that
    a ``window``-token context sends, from the newest message back; ``None`` when not even the
    newest is sent. Messages no window sends (hidden, excluded by hand) are skipped over."""
    start = None
    for pos in range(len(items) - 1, -1, -1):
        fit = items[pos][3]
        if fit is None:
            continue
        if fit > window:
            break
        start = pos
    return start


class _FitIndex:
    """:func:`story_start` for many windows over one list of fits, in O(log n) each.

    ``suffix[k]`` is the largest fit among the last ``k + 1`` messages (messages no window sends
    count as 0), so the messages a window sends from the newest back are the last
    ``bisect_right(suffix, window)``; the story starts at the first of them that any window sends.
    """

    def __init__(self, fits: list[int | None]) -> None:
        self._fits = fits
        # numpy: a 10,000-message chat's suffix maxima in well under a millisecond, on every preview
        raw = np.array(fits, dtype=np.float64)  # None → nan
        known = ~np.isnan(raw)
        self._suffix = np.maximum.accumulate(np.where(known, raw, 0.0)[::-1])
        sent = raw[known]
        #: the smallest and largest fit window of a message some window sends (``None``: none is)
        self.span = (int(sent.min()), int(sent.max())) if len(sent) else None

    def story_start(self, window: int) -> int | None:
        n = len(self._fits)
        pos = n - int(np.searchsorted(self._suffix, window, side="right"))
        while pos < n and self._fits[pos] is None:
            pos += 1
        return pos if pos < n else None


class TokensChart(QWidget):
    """Bar per message: height ∝ tokens. Signal ``message_clicked(int message_index)``.

    The bars are kept as parallel columns in chat order (message index, tokens, status, fit
    window). A preview with the same rows as the one shown (:class:`~gui.models.preview_delta.PreviewDelta`)
    updates only the changed messages' tokens and status and reads the fits again (they move on
    nearly every message after a toggle); the per-pixel buckets are computed once per preview
    and width, when painted.
    """

    message_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._preview: ContextPreview | None = None
        self._rows: list[int] = []  # block row of each bar, chat order
        self._pos: dict[int, int] | None = None  # block row → bar, built on first use
        self._index: list[int] = []  # message index of each bar
        self._tokens: list[int] = []
        self._status: list[str] = []
        self._fits: list[int | None] = []
        self._items_cache: list[tuple[int, int, str, int | None]] | None = None
        self._buckets: tuple[int, list[tuple[int, str]]] | None = None  # (width, per-pixel (tokens, status))
        self._max = 1
        self._limit = 0
        self._marks: list[tuple[int, int, int]] = []  # (window, message index, bar)
        self.setMouseTracking(True)
        self.setMinimumHeight(CAPTION_H + 40)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setToolTip("Tokens per message and the context window each needs (hover for details, "
                        "click to select)")

    def sizeHint(self) -> QSize:
        return QSize(600, CAPTION_H + 52)

    def set_preview(self, preview: ContextPreview | None, delta: PreviewDelta | None = None) -> None:
        """Take the per-message tokens of ``preview`` (``delta``: the changed rows when known,
        ignored unless its ``old`` is the preview shown)."""
        if preview is not None and delta is not None and delta.follows(self._preview) and delta.new is preview:
            self._patch_buckets(self._update(preview, delta))
        else:
            self._rebuild(preview)
            self._buckets = None
        self._preview = preview
        self._items_cache = None
        self._limit = preview.context_limit if preview is not None else 0
        self._marks = self._fit_marks()
        self.update()

    def _rebuild(self, preview: ContextPreview | None) -> None:
        blocks = preview.blocks if preview is not None else []
        rows = [r for r, b in enumerate(blocks) if b.message_index is not None]
        index = [i for r in rows if (i := blocks[r].message_index) is not None]
        if any(index[i] > index[i + 1] for i in range(len(index) - 1)):
            # prompt order is chat order unless a stage moved a message
            order = sorted(range(len(rows)), key=index.__getitem__)
            rows = [rows[k] for k in order]
            index = [index[k] for k in order]
        self._rows, self._index, self._pos = rows, index, None
        self._tokens = [_bar_tokens(blocks[r]) for r in rows]
        self._status = [_bar_status(blocks[r]) for r in rows]
        fits = FitWindows.column(preview.fit_windows if preview is not None else [], len(blocks))
        self._fits = fits.take(rows)
        self._max = max(self._tokens, default=1) or 1

    def _update(self, preview: ContextPreview, delta: PreviewDelta) -> list[int]:
        """Take the changed rows' tokens and status and every fit; returns the bars that changed."""
        blocks = preview.blocks
        bars: list[int] = []
        if delta.key_rows:
            if self._pos is None:
                self._pos = {r: k for k, r in enumerate(self._rows)}
            for r in delta.key_rows:
                k = self._pos.get(r)
                if k is not None:
                    self._tokens[k] = _bar_tokens(blocks[r])
                    self._status[k] = _bar_status(blocks[r])
                    bars.append(k)
            self._max = max(self._tokens, default=1) or 1
        if delta.fits is not None:  # None: every block is the old one, so are the fits
            self._fits = delta.fits.take(self._rows)
        return bars

    def _patch_buckets(self, bars: list[int]) -> None:
        """Recompute only the pixel buckets (:meth:`_pixel_buckets`) holding ``bars``."""
        if self._buckets is None or not bars:
            return
        w, old = self._buckets
        n = len(self._tokens)
        per_px = n / w
        out = list(old)
        for k in bars:
            x0 = int(k / per_px)
            for x in range(max(0, x0 - 1), min(w, x0 + 2)):
                lo = int(x * per_px)
                if lo <= k < max(lo + 1, int((x + 1) * per_px)):
                    out[x] = self._bucket(x, per_px)
        self._buckets = (w, out)

    def _bucket(self, x: int, per_px: float) -> tuple[int, str]:
        """Pixel column ``x``: the tallest of its messages (the first of equals) as ``(tokens, status)``."""
        lo = int(x * per_px)
        hi = max(lo + 1, int((x + 1) * per_px))
        bucket = self._tokens[lo:hi]
        top = max(bucket)
        return top, self._status[lo + bucket.index(top)]

    @property
    def _items(self) -> list[tuple[int, int, str, int | None]]:
        """``[(message_index, tokens, status, fit window), ...]`` in chat order."""
        if self._items_cache is None:
            self._items_cache = list(zip(self._index, self._tokens, self._status, self._fits, strict=True))
        return self._items_cache

    def items(self) -> list[tuple[int, int, str]]:
        """``[(message_index, tokens, status), ...]`` in chat order."""
        return list(zip(self._index, self._tokens, self._status, strict=True))

    def fit_windows(self) -> dict[int, int | None]:
        """``message index → smallest context window (tokens) from which it is sent``."""
        return dict(zip(self._index, self._fits, strict=True))

    def fit_marks(self) -> list[tuple[int, int]]:
        """``[(window tokens, message index where the story starts), ...]``, oldest start first.

        Common window sizes inside the chat's range plus the current window; a mark is kept only
        where it moves the start, at most :data:`MAX_FIT_MARKS` (the current window always).
        """
        return [(w, i) for w, i, _ in self._marks]

    def _fit_marks(self) -> list[tuple[int, int, int]]:
        index = _FitIndex(self._fits)
        if index.span is None:
            return []
        lo, hi = index.span
        windows = sorted({w for w in FIT_WINDOWS if lo <= w < hi * 2} | ({self._limit} if self._limit else set()))
        by_start: dict[int, int] = {}
        for w in windows:
            pos = index.story_start(w)
            if pos is None:
                continue
            if pos not in by_start or w == self._limit:  # the smallest window reaching a start; the
                by_start[pos] = w                        # current window names its own start
        marks = sorted(((w, pos) for pos, w in by_start.items()), key=lambda m: m[1])
        if len(marks) > MAX_FIT_MARKS:  # keep the current window and the ones spread furthest apart
            current = [m for m in marks if m[0] == self._limit]
            others = [m for m in marks if m[0] != self._limit]
            step = len(others) / (MAX_FIT_MARKS - len(current))
            others = [others[int(k * step)] for k in range(MAX_FIT_MARKS - len(current))]
            marks = sorted(current + others, key=lambda m: m[1])
        return [(w, self._index[pos], pos) for w, pos in marks]

    def tooltip_for(self, item: tuple[int, int, str, int | None] | tuple[int, int, str]) -> str:
        """``message 12: 340 tokens (excluded) · sent from a context window of 9,812 tokens``."""
        idx, tokens, status = item[0], item[1], item[2]
        fit = item[3] if len(item) > 3 else self.fit_windows().get(idx)
        text = f"message {idx}: {tokens:,} tokens ({status})"
        if fit is None:
            return text + " · no context window sends it (hidden or excluded by you)"
        text += f" · sent from a context window of {fit:,} tokens"
        if self._limit:
            text += " (this one)" if fit <= self._limit and status != "excluded" else \
                f" ({fit - self._limit:+,} vs the current {self._limit:,})"
        return text

    def _item_at(self, x: float) -> tuple[int, int, str, int | None] | None:
        n = len(self._index)
        if not n:
            return None
        w = max(1.0, float(self.width()))
        if n <= w:
            i = int(x / min(16.0, w / n))
            if i >= n:
                return None
        else:
            i = int(x / w * n)
        i = max(0, min(n - 1, i))
        return self._index[i], self._tokens[i], self._status[i], self._fits[i]

    def caption(self) -> str:
        """The legend over the bars (with the tallest message's tokens, the chart's scale)."""
        if not self._index:
            return CAPTION
        return f"{CAPTION} · tallest {self._max:,} tokens"

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("#fafbfc"))
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        p.setFont(small)
        p.setPen(QColor("#666"))
        caption_rect = QRectF(2, 0, self.width() - 4, CAPTION_H)
        p.drawText(caption_rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                   p.fontMetrics().elidedText(self.caption(), Qt.TextElideMode.ElideRight, int(caption_rect.width())))
        if not self._index:
            return
        p.translate(0, CAPTION_H)
        w, h = max(1, self.width()), self.height() - CAPTION_H - 2
        n = len(self._index)
        if n <= w:  # wide bars (at most 16 px, so a short chat still reads as a chart)
            bw = min(16.0, w / n)
            for i, (tokens, status) in enumerate(zip(self._tokens, self._status, strict=True)):
                bh = max(1.0, h * tokens / self._max)
                p.fillRect(QRectF(i * bw, h - bh + 1, max(1.0, bw - 1), bh), QColor(status_hex(status)[0]))
        else:  # one column per pixel: the tallest message of the bucket
            colors: dict[str, QColor] = {}
            for x, (tokens, status) in enumerate(self._pixel_buckets(w)):
                bh = max(1.0, h * tokens / self._max)
                color = colors.get(status)
                if color is None:
                    color = colors[status] = QColor(status_hex(status)[0])
                p.fillRect(QRectF(x, h - bh + 1, 1, bh), color)
        self._paint_fit_marks(p, w, h)

    def _pixel_buckets(self, w: int) -> list[tuple[int, str]]:
        """Per pixel column of a ``w``-px chart narrower than the bar count: the tallest message of
        the messages it covers (the first of equals) as ``(tokens, status)``; kept until the
        preview or the width changes."""
        if self._buckets is not None and self._buckets[0] == w:
            return self._buckets[1]
        per_px = len(self._tokens) / w
        out = [self._bucket(x, per_px) for x in range(w)]
        self._buckets = (w, out)
        return out

    def mark_x(self, message_index: int) -> float:
        """The x (px) of the left edge of message ``message_index``'s bar."""
        n = len(self._index)
        w = max(1, self.width())
        pos = next((k for _, i, k in self._marks if i == message_index), None)
        if pos is None:
            pos = next((k for k, i in enumerate(self._index) if i == message_index), 0)
        return pos * min(16.0, w / n) if n <= w else pos * w / n

    def _paint_fit_marks(self, p: QPainter, w: int, h: float) -> None:
        fm = p.fontMetrics()
        last_right = -1e9
        n = len(self._index)
        for window, _message_index, pos in self._marks:
            x = pos * min(16.0, w / n) if n <= w else pos * w / n
            current = window == self._limit
            color = QColor("#1f6fb2") if current else QColor("#5b6470")
            p.setPen(QPen(color, 1, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x, 0), QPointF(x, h))
            label = window_label(window) + (" (now)" if current else "")
            lw = fm.horizontalAdvance(label) + 4
            lx = min(max(0.0, x + 2), w - lw)
            if lx < last_right:  # labels never overlap: a crowded one is left to the tooltip
                continue
            p.fillRect(QRectF(lx, 0, lw, fm.height()), QColor(250, 251, 252, 220))
            p.setPen(color)
            p.drawText(QRectF(lx + 2, 0, lw, fm.height()), int(Qt.AlignmentFlag.AlignLeft), label)
            last_right = lx + lw + 2

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        item = self._item_at(event.position().x())
        if item is not None:
            text = self.tooltip_for(item)
            starts = [f"{window_label(w)} from message {i}" for w, i, _ in self._marks]
            if starts:
                text += "\nthe story starts at: " + ", ".join(starts)
            QToolTip.showText(event.globalPosition().toPoint() + QPoint(8, 8), text, self)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        item = self._item_at(event.position().x())
        if item is not None:
            self.message_clicked.emit(item[0])
