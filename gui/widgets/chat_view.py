"""The chat as a writer reads it: speaker, text, swipes, pin & exclude, the fit marker, a composer.

Rows are painted by :class:`ChatDelegate` (no widget per message, so 10,000 messages scroll
smoothly). The pin and exclude buttons on each message, the context menu and the composer
emit intents; the window turns them into undoable commands. Progress steps (streaming a
reply, compaction, anything reporting :class:`ProgressEvent`) appear as indicator rows at
the end of the conversation, like a tool-call indicator.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QPoint, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPen,
    QShortcut,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractScrollArea,
    QHBoxLayout,
    QListView,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from engine.schema import ChatMessage, ContextPreview, PreviewBlock, ProgressEvent

from ..labels import EXCLUDE_MARK, GROUP_MARK, PINNED_MARK
from ..models.chat_model import (
    FATE_ROLE,
    FLAGS_ROLE,
    GREYED_ROLE,
    MARKER_ROLE,
    MESSAGE_ROLE,
    PROGRESS_ROLE,
    SPEAKER_ROLE,
    SUMMARY_ROLE,
    ChatMessagesModel,
    MessageFate,
)
from ..models.preview_delta import PreviewDelta
from ..theme import status_hex
from ..words import reason_meaning
from .compaction_row import compaction_row_text, is_compaction

_Index = QModelIndex | QPersistentModelIndex

PAD = 6
MAX_TEXT_LINES = 8
MARKER_H = 20
BUTTON_W = 26
#: Lines of a compaction summary shown above the message it is sent before (header included).
SUMMARY_LINES = 4
#: A chat with more messages than this opens at its newest message at once (issue 31): its
#: older rows get an estimated height first and are measured in the background.
BIG_CHAT_ROWS = 1500
#: Newest rows measured exactly before the first paint of a big chat.
EXACT_TAIL_ROWS = 200
#: Rows measured per background step at most, and the UI-thread time one step may take (the
#: app's UI stall target is 50 ms: measuring 400 rows took ~55 ms, so a step stops at its budget).
MEASURE_CHUNK_ROWS = 400
MEASURE_STEP_BUDGET_S = 0.006
#: Pause between two steps: measuring runs Python on the UI thread and holds the GIL, so back-to-back
#: steps starve the preview worker (the first preview of a 5,000-message chat came 0.5 s later).
MEASURE_STEP_GAP_MS = 20


def swipe_info(message: ChatMessage) -> tuple[int, int] | None:
    """``(current, total)`` swipes (1-based) from SillyTavern's ``swipes``/``swipe_id`` keys, if any."""
    extra = message.model_extra or {}
    meta_extra = message.meta.model_extra or {}
    swipes = extra.get("swipes", meta_extra.get("swipes"))
    if not isinstance(swipes, list) or len(swipes) < 2:
        return None
    sid = extra.get("swipe_id", meta_extra.get("swipe_id", 0))
    try:
        current = int(sid) + 1
    except (TypeError, ValueError):
        current = 1
    return current, len(swipes)


def offers_toggles(msg: ChatMessage, fate: MessageFate | None) -> bool:
    """Whether message ``msg`` gets pin / exclude buttons: not when the preview protects it anyway
    (the current user input, a leading system message), as in the prompt blocks table; a pinned or
    hand-excluded message keeps them so the flag can be taken back."""
    if fate is None or not fate.protected:
        return True
    return bool(msg.meta.pinned or msg.meta.manualExcluded)


class ChatDelegate(QStyledItemDelegate):
    """Paints message and progress rows; clicks on the pin / exclude buttons emit intents."""

    pin_clicked = Signal(int, bool)
    exclude_clicked = Signal(int, bool)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        #: ``False`` on a chat from a SillyTavern folder: the pin button is drawn faint (no pinning there).
        self.pin_available = True
        self._size_cache: dict[tuple[int, int, int], QSize] = {}
        #: Rows under this index get an estimated height until measured (a big chat; 0: none).
        self.exact_from = 0
        self._estimates: dict[tuple[int, int, int], QSize] = {}
        self._paragraphs: list[tuple[int, ...]] = []
        self._metrics: tuple[QFont, int, int] | None = None
        self._width = 0
        #: Called when the width changed while rows were estimated (the view measures again).
        self.on_width_changed: Any = None

    def clear_cache(self) -> None:
        """Forget row sizes (after the messages change)."""
        self._size_cache.clear()
        self._estimates.clear()

    def _estimate(self, row: int, width: int, model: Any, font: QFont) -> QSize:
        """A row's height from its paragraph lengths and the font's average character width (no text layout)."""
        shape = 0
        if isinstance(model, ChatMessagesModel):
            shape = int(model.marker_index() == row) + 2 * int(model.summary_row() == row)
        key = (row, width, shape)
        cached = self._estimates.get(key)
        if cached is not None:
            return cached
        if self._metrics is None or self._metrics[0] != font:
            fm = QFontMetrics(font)
            self._metrics = (QFont(font), max(1, fm.averageCharWidth()), fm.lineSpacing())
        _, char_w, line_h = self._metrics
        per_line = max(1, (width - 2 * PAD - 8) // char_w)
        if width != self._width:
            self._width = width
            if self.on_width_changed is not None:
                self.on_width_changed()
        lines = sum(max(1, -(-n // per_line)) for n in self._paragraphs[row])
        h = PAD + 22 + line_h * max(1, min(lines, MAX_TEXT_LINES)) + PAD
        if shape & 1:
            h += MARKER_H
        if shape & 2:
            h += self.summary_height(font)
        size = self._estimates[key] = QSize(width, h)
        return size

    def forget_row(self, row: int) -> None:
        """Forget the sizes of ``row`` (its text changed)."""
        for key in [k for k in self._size_cache if k[0] == row]:
            del self._size_cache[key]

    # geometry --------------------------------------------------------------------------
    @staticmethod
    def _body(rect: QRect, marker: bool, extra: int = 0) -> QRect:
        top = rect.top() + (MARKER_H if marker else 0) + extra
        return QRect(rect.left() + PAD, top + PAD // 2, rect.width() - 2 * PAD, rect.bottom() - top - PAD)

    @staticmethod
    def summary_height(font: QFont) -> int:
        """Height of the compaction summary band drawn above a message row, in pixels."""
        return QFontMetrics(font).lineSpacing() * SUMMARY_LINES + 2 * PAD

    def button_rects(self, rect: QRect, marker: bool, extra: int = 0) -> tuple[QRect, QRect]:
        """``(pin_rect, exclude_rect)`` in the row's header line (``extra``: a summary band's height)."""
        body = self._body(rect, marker, extra)
        h = 20
        excl = QRect(body.right() - BUTTON_W, body.top(), BUTTON_W, h)
        pin = QRect(excl.left() - BUTTON_W - 2, body.top(), BUTTON_W, h)
        return pin, excl

    def set_paragraphs(self, lengths: list[tuple[int, ...]]) -> None:
        """Each message's paragraph lengths (characters), for the estimated heights of a big chat."""
        self._paragraphs = lengths
        self._estimates.clear()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        view = option.widget
        width = max(200, option.rect.width() or (view.viewport().width() if isinstance(view, QAbstractScrollArea) else 600))
        row, model = index.row(), index.model()
        if row < self.exact_from and row < len(self._paragraphs):  # a big chat's older row: estimated
            return self._estimate(row, width, model, option.font)
        if isinstance(model, ChatMessagesModel):  # a layout asks for every row: no data() round trips
            shape = int(model.marker_index() == row) + 2 * int(model.summary_row() == row)
        else:
            shape = int(bool(index.data(MARKER_ROLE))) + 2 * int(index.data(SUMMARY_ROLE) is not None)
        key = (row, width, shape)
        cached = self._size_cache.get(key)
        if cached is not None:
            return cached
        if width != self._width:
            self._width = width
            if self.on_width_changed is not None:
                self.on_width_changed()
        fm = QFontMetrics(option.font)
        if index.data(PROGRESS_ROLE) is not None:
            size = QSize(width, fm.height() * 3 + 2 * PAD)
        else:
            text = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
            if len(text) > 4000:
                text = text[:4000]
            rect = fm.boundingRect(QRect(0, 0, width - 2 * PAD - 8, 100000),
                                   int(Qt.TextFlag.TextWordWrap), text)
            text_h = min(rect.height(), fm.lineSpacing() * MAX_TEXT_LINES)
            h = PAD + 22 + max(fm.lineSpacing(), text_h) + PAD
            if key[2] & 1:
                h += MARKER_H
            if key[2] & 2:
                h += self.summary_height(option.font)
            size = QSize(width, h)
        self._size_cache[key] = size
        return size

    # painting --------------------------------------------------------------------------
    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        painter.save()
        event = index.data(PROGRESS_ROLE)
        if event is not None:
            self._paint_progress(painter, option, event)
        else:
            self._paint_message(painter, option, index)
        painter.restore()

    def _paint_message(self, p: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        msg: ChatMessage = index.data(MESSAGE_ROLE)
        fate: MessageFate | None = index.data(FATE_ROLE)
        marker = bool(index.data(MARKER_ROLE))
        greyed = bool(index.data(GREYED_ROLE))
        rect = option.rect
        if marker:
            self._paint_marker(p, option)
        summary = index.data(SUMMARY_ROLE)
        extra = self.summary_height(option.font) if summary is not None else 0
        if summary is not None:
            self._paint_summary(p, option, summary, rect.top() + (MARKER_H if marker else 0), extra)
        body = self._body(rect, marker, extra)
        card = body.adjusted(-2, -2, 2, 2)
        p.fillRect(card, _card_colour(msg, bool(option.state & QStyle.StateFlag.State_Selected)))
        if fate is not None:
            p.fillRect(QRect(card.left(), card.top(), 3, card.height()), QColor(status_hex(fate.status)[0]))
        fg = QColor("#9aa0a6") if greyed else QColor("#1d2126")
        pin_r, excl_r = self.button_rects(rect, marker, extra)
        self._paint_header(p, option, index, body, pin_r.left() - 4, fg, greyed)
        if offers_toggles(msg, fate):
            # a click shows at once, the preview may roll it back
            pinned, excluded = index.data(FLAGS_ROLE)
            self._paint_buttons(p, pin_r, bool(pinned), excl_r, bool(excluded))
        p.setFont(option.font)
        p.setPen(fg)
        text_rect = QRect(body.left() + 6, body.top() + 22, body.width() - 8, body.bottom() - body.top() - 22)
        _paint_text(p, QFontMetrics(option.font), text_rect, str(index.data(Qt.ItemDataRole.DisplayRole) or ""))

    def _paint_marker(self, p: QPainter, option: QStyleOptionViewItem) -> None:
        """The dashed line above the oldest message that still fits, with its label."""
        rect = option.rect
        y = rect.top() + MARKER_H // 2
        p.setPen(QPen(QColor("#c0392b"), 1, Qt.PenStyle.DashLine))
        p.drawLine(rect.left() + PAD, y, rect.right() - PAD, y)
        f = QFont(option.font)
        f.setPointSizeF(max(7.0, f.pointSizeF() * 0.85))
        p.setFont(f)
        label = "▲ above: does not fit the context   ·   ▼ oldest message that still fits"
        fm = QFontMetrics(f)
        lw = fm.horizontalAdvance(label) + 12
        lr = QRect(rect.center().x() - lw // 2, rect.top() + 2, lw, MARKER_H - 4)
        p.fillRect(lr, QColor("#fff"))
        p.setPen(QColor("#c0392b"))
        p.drawText(lr, int(Qt.AlignmentFlag.AlignCenter), label)
        p.setFont(option.font)

    def _paint_header(self, p: QPainter, option: QStyleOptionViewItem, index: _Index, body: QRect,
                      right: int, fg: QColor, greyed: bool) -> None:
        """The speaker in bold, then ``#row · role · tokens · fate · swipes · calls · group`` up to ``right``."""
        msg: ChatMessage = index.data(MESSAGE_ROLE)
        fate: MessageFate | None = index.data(FATE_ROLE)
        bold = QFont(option.font)
        bold.setBold(True)
        p.setFont(bold)
        p.setPen(fg)
        fm_b = QFontMetrics(bold)
        speaker = str(index.data(SPEAKER_ROLE) or msg.role)
        x = body.left() + 6
        p.drawText(QRect(x, body.top(), body.width(), 20), int(Qt.AlignmentFlag.AlignVCenter), speaker)
        x += fm_b.horizontalAdvance(speaker) + 10
        small = QFont(option.font)
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.88))
        p.setFont(small)
        parts = [f"#{index.row()}", msg.role]
        if fate is not None:
            parts.append(f"{fate.tokens:,} tok")
            parts.append(fate.status if fate.status == "kept" else f"{fate.status}: {reason_meaning(fate.reason)}")
        swipes = swipe_info(msg)
        if swipes:
            parts.append(f"⇆ swipe {swipes[0]}/{swipes[1]}")
        if msg.tool_calls:
            parts.append("calls " + ", ".join(c.function.name or "?" for c in msg.tool_calls))
        if fate is not None and fate.group:
            parts.append(f"{GROUP_MARK} tool group {fate.group}")
        p.setPen(QColor(status_hex(fate.status)[0]) if fate is not None and not greyed else QColor("#7a8088"))
        p.drawText(QRect(x, body.top(), right - x, 20), int(Qt.AlignmentFlag.AlignVCenter), "  ·  ".join(parts))

    def _paint_buttons(self, p: QPainter, pin_r: QRect, pinned: bool, excl_r: QRect, excluded: bool) -> None:
        """The pin and exclude toggles (the pin greyed out where SillyTavern has no pinning)."""
        for r, on, glyph, color in ((pin_r, pinned, PINNED_MARK, "#d08a00"), (excl_r, excluded, EXCLUDE_MARK, "#c0392b")):
            if glyph == PINNED_MARK and not self.pin_available and not on:  # SillyTavern: no pinning
                p.setPen(QColor("#dfe2e6"))
                p.drawText(r, int(Qt.AlignmentFlag.AlignCenter), glyph)
                continue
            p.setPen(QColor(color) if on else QColor("#b5bac0"))
            if on:
                p.fillRect(r.adjusted(1, 1, -1, -1), QColor(color).lighter(185))
            p.drawRect(r.adjusted(1, 1, -2, -2))
            p.drawText(r, int(Qt.AlignmentFlag.AlignCenter), glyph)

    def _paint_summary(self, p: QPainter, option: QStyleOptionViewItem, block: PreviewBlock, top: int,
                       height: int) -> None:
        """The compaction summary band: what it covers, its size, and its first lines."""
        rect = QRect(option.rect.left() + PAD + 20, top + PAD // 2, option.rect.width() - 2 * PAD - 20,
                     height - PAD)
        p.fillRect(rect, QColor("#fff8e6"))
        p.setPen(QPen(QColor("#d08a00"), 1))
        p.drawRect(rect.adjusted(0, 0, -1, -1))
        fm = QFontMetrics(option.font)
        covers = (block.trace or {}).get("covers") or ["?", "?"]
        bold = QFont(option.font)
        bold.setBold(True)
        p.setFont(bold)
        p.setPen(QColor("#8a5a00"))
        head = (f"▤ Compaction summary of messages #{covers[0]}–#{covers[1]} · {block.tokens:,} tok · "
                "sent instead of them (right-click: remove, Ctrl+Z: undo)")
        p.drawText(QRect(rect.left() + 6, rect.top() + 3, rect.width() - 12, fm.height()),
                   int(Qt.AlignmentFlag.AlignLeft), fm.elidedText(head, Qt.TextElideMode.ElideRight, rect.width() - 12))
        p.setFont(option.font)
        p.setPen(QColor("#3d3420"))
        lines = [ln for ln in block.text.splitlines()[1:] if ln.strip()][: SUMMARY_LINES - 1]
        for k, ln in enumerate(lines):
            p.drawText(QRect(rect.left() + 6, rect.top() + 3 + fm.lineSpacing() * (k + 1), rect.width() - 12,
                             fm.height()), int(Qt.AlignmentFlag.AlignLeft),
                       fm.elidedText(ln, Qt.TextElideMode.ElideRight, rect.width() - 12))

    def _paint_progress(self, p: QPainter, option: QStyleOptionViewItem, event: ProgressEvent) -> None:
        rect = option.rect.adjusted(PAD + 20, PAD // 2, -PAD, -PAD // 2)
        colors = {"running": "#1f6fb2", "done": "#2e7d32", "failed": "#c0392b", "cancelled": "#7a8088"}
        color = QColor(colors.get(event.state, "#1f6fb2"))
        p.fillRect(rect, QColor("#f6f8fb"))
        p.setPen(QPen(color, 1))
        p.drawRect(rect.adjusted(0, 0, -1, -1))
        fm = QFontMetrics(option.font)
        glyph = {"running": "⟳", "done": "✓", "failed": "✗", "cancelled": "⊘"}.get(event.state, "•")
        label, text = compaction_row_text(event) if is_compaction(event) else (event.label, event.text or "")
        head = f"{glyph} {label}"
        if event.fraction is not None:
            head += f"  {100 * event.fraction:.0f} %"
        elif event.state == "running":
            head += "  …"
        p.drawText(QRect(rect.left() + 6, rect.top() + 2, rect.width() - 12, fm.height()),
                   int(Qt.AlignmentFlag.AlignLeft), head)
        bar = QRect(rect.left() + 6, rect.top() + fm.height() + 4, rect.width() - 12, 5)
        p.fillRect(bar, QColor("#dde3ea"))
        if event.fraction is not None:
            p.fillRect(QRect(bar.left(), bar.top(), int(bar.width() * max(0.0, min(1.0, event.fraction))),
                             bar.height()), color)
        if text:
            tail = " ".join(text.split())[-300:]
            p.setPen(QColor("#555"))
            p.drawText(QRect(rect.left() + 6, bar.bottom() + 3, rect.width() - 12, fm.height()),
                       int(Qt.AlignmentFlag.AlignLeft), fm.elidedText(tail, Qt.TextElideMode.ElideLeft,
                                                                      rect.width() - 12))

    def editorEvent(self, event: QEvent, model: Any, option: QStyleOptionViewItem,
                    index: _Index) -> bool:
        if isinstance(event, QMouseEvent) and event.type() == QEvent.Type.MouseButtonRelease \
                and index.data(PROGRESS_ROLE) is None:
            msg: ChatMessage | None = index.data(MESSAGE_ROLE)
            if msg is None:
                return False
            pos = event.position().toPoint()
            extra = self.summary_height(option.font) if index.data(SUMMARY_ROLE) is not None else 0
            pin_r, excl_r = self.button_rects(option.rect, bool(index.data(MARKER_ROLE)), extra)
            if not offers_toggles(msg, index.data(FATE_ROLE)):
                return super().editorEvent(event, model, option, index)
            pinned, excluded = index.data(FLAGS_ROLE)
            if pin_r.contains(pos):
                self.pin_clicked.emit(index.row(), not pinned)
                return True
            if excl_r.contains(pos):
                self.exclude_clicked.emit(index.row(), not excluded)
                return True
        return super().editorEvent(event, model, option, index)


class ChatList(QListView):
    """The conversation list; it lays its rows out only while it is shown.

    Every row of a chat has its own height (its text wrapped to the width), so a layout asks the
    delegate for all of them: a hidden list (another centre tab is current) would do that work
    for nothing, at a width it does not have, and on a 10,000-message chat compete with the tab
    the writer is using. While hidden, :meth:`doItemsLayout` and the scroll requests are
    remembered and run when the list is shown.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout_on_show = False
        self._scroll_on_show: tuple[QPersistentModelIndex, QAbstractItemView.ScrollHint] | None = None
        self._bottom_on_show = False

    def doItemsLayout(self) -> None:
        if not self.isVisible():
            self._layout_on_show = True
            return
        super().doItemsLayout()

    def scrollToBottom(self) -> None:
        if not self.isVisible():
            self._bottom_on_show, self._scroll_on_show = True, None
            return
        super().scrollToBottom()

    def scrollTo(self, index: QModelIndex | QPersistentModelIndex,
                 hint: QAbstractItemView.ScrollHint = QAbstractItemView.ScrollHint.EnsureVisible) -> None:
        if not self.isVisible():
            self._scroll_on_show, self._bottom_on_show = (QPersistentModelIndex(index), hint), False
            return
        super().scrollTo(index, hint)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._layout_on_show:
            self._layout_on_show = False
            super().doItemsLayout()
        if self._bottom_on_show:
            self._bottom_on_show = False
            super().scrollToBottom()
        elif self._scroll_on_show is not None:
            index, hint = self._scroll_on_show
            self._scroll_on_show = None
            if index.isValid():
                super().scrollTo(self.model().index(index.row(), index.column()), hint)


class ChatView(QWidget):
    """Conversation list and composer.

    Signals
    -------
    pin_toggled(int message_index, bool) / exclude_toggled(int message_index, bool)
    hide_toggled(int message_index, bool)  # hidden messages are never sent (SillyTavern is_system)
    edit_requested(int message_index) / delete_requested(int message_index)
    branch_requested(int message_index)
    message_selected(int message_index)
    message_submitted(str text)         # the composer's Send
    summary_remove_requested()          # "Remove compaction summary" on the summary's row
    compaction_reset_requested()        # "Retry auto-compaction" after it stopped on failures
    """

    pin_toggled = Signal(int, bool)
    exclude_toggled = Signal(int, bool)
    branch_requested = Signal(int)
    hide_toggled = Signal(int, bool)
    edit_requested = Signal(int)
    delete_requested = Signal(int)
    message_selected = Signal(int)
    message_submitted = Signal(str)
    generate_requested = Signal()
    summary_remove_requested = Signal()
    compaction_reset_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = ChatMessagesModel(self)
        self.delegate = ChatDelegate(self)
        self.list = ChatList(self)
        self.list.setObjectName("chatList")
        self.list.setModel(self.model)
        self.list.setItemDelegate(self.delegate)
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        # a scroll bar that comes and goes changes the width every row is measured at
        self.list.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.list.setLayoutMode(QListView.LayoutMode.Batched)
        self.list.setBatchSize(100)  # rows measured per turn of the event loop: a few ms each
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setWordWrap(True)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._on_list_context_menu)
        self.list.selectionModel().currentChanged.connect(self._on_current_changed)
        self.delegate.pin_clicked.connect(self.pin_toggled)
        self.delegate.exclude_clicked.connect(self.exclude_toggled)
        self.model.modelReset.connect(self.delegate.clear_cache)
        self.model.rowsInserted.connect(lambda *_: self.list.scrollToBottom())
        self._measure_timer = QTimer(self)  # a big chat's older rows, measured after the first paint
        self._measure_timer.setSingleShot(True)
        self._measure_timer.setInterval(MEASURE_STEP_GAP_MS)
        self._measure_timer.timeout.connect(self._measure_step)
        self.delegate.on_width_changed = self._on_delegate_width_changed

        self.composer = QPlainTextEdit(self)
        self.composer.setObjectName("composer")
        self.composer.setPlaceholderText("Write the next user message… (Ctrl+Enter to send)")
        self.composer.setMaximumHeight(80)
        self.send_button = QPushButton("Send", self)
        self.send_button.setToolTip("Append this as the next user message (Ctrl+Enter)")
        self.send_button.clicked.connect(self._on_send_clicked)
        self.generate_button = QPushButton("Generate ▶", self)
        self.generate_button.setToolTip("Send the previewed prompt (with your message, if any) and append the reply")
        self.generate_button.clicked.connect(self._on_generate_clicked)
        QShortcut(QKeySequence("Ctrl+Return"), self.composer).activated.connect(self._on_send_clicked)
        buttons = QVBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.generate_button)
        row = QHBoxLayout()
        row.addWidget(self.composer, 1)
        row.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.list, 1)
        lay.addLayout(row)

    # -- state in --------------------------------------------------------------------------
    def set_messages(self, messages: list[ChatMessage], user_name: str, char_name: str) -> None:
        """Show the chat's messages, at the newest one.

        A big chat (over :data:`BIG_CHAT_ROWS` messages) paints at once: its newest rows are
        measured, the older ones get an estimated height and are measured in the background
        (:meth:`_measure_step`), then laid out again at the same place.
        """
        big = len(messages) > BIG_CHAT_ROWS
        self.delegate.exact_from = max(0, len(messages) - EXACT_TAIL_ROWS) if big else 0
        self.delegate.set_paragraphs([tuple(len(p) for p in m.text()[:4000].split("\n")) for m in messages]
                                     if big else [])
        # one pass: with estimates a layout is cheap; a batched layout starts at the oldest row
        self.list.setLayoutMode(QListView.LayoutMode.SinglePass if big else QListView.LayoutMode.Batched)
        self.model.set_messages(messages, user_name, char_name)
        self.list.scrollToBottom()
        if big:
            self._measure_timer.start()

    def measuring(self) -> bool:
        """``True`` while older rows of a big chat still carry estimated heights."""
        return self.delegate.exact_from > 0

    def _on_delegate_width_changed(self) -> None:
        n = self.model.message_count()
        if n > BIG_CHAT_ROWS:  # measure again at the new width, newest first
            self.delegate.exact_from = max(0, n - EXACT_TAIL_ROWS)
            self._measure_timer.start()

    def showEvent(self, event: QShowEvent) -> None:
        """Shown (the Chat tab brought forward): measuring of a big chat's older rows resumes."""
        super().showEvent(event)
        if self.delegate.exact_from > 0:
            self._measure_timer.start()

    def _measure_step(self) -> None:
        """Measure older rows for up to :data:`MEASURE_STEP_BUDGET_S` (at most :data:`MEASURE_CHUNK_ROWS`); lay out again when all are.

        Only while the view is shown: hidden behind another tab, its rows are not painted, and
        measuring them took about a quarter of the UI thread while the writer clicked in the
        prompt blocks (issue 29's click benchmark). :meth:`showEvent` resumes it.
        """
        d = self.delegate
        end = d.exact_from
        if end <= 0 or not self.isVisible():
            return
        floor = max(0, end - MEASURE_CHUNK_ROWS)
        deadline = time.perf_counter() + MEASURE_STEP_BUDGET_S
        start = end
        while start > floor and (start == end or time.perf_counter() < deadline):
            start -= 1
            d.exact_from = start  # rows from here on are measured, not estimated
            self.list.sizeHintForIndex(self.model.index(start))
        if start > 0:
            self._measure_timer.start()
            return
        bar = self.list.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 2
        top = QPersistentModelIndex(self.list.indexAt(QPoint(8, 8)))
        self.list.doItemsLayout()
        if at_bottom or not top.isValid():
            self.list.scrollToBottom()
        else:
            self.list.scrollTo(self.model.index(top.row()), QAbstractItemView.ScrollHint.PositionAtTop)

    def update_message(self, index: int, message: ChatMessage) -> None:
        """Message ``index`` changed in place (a flag or its text): repaint, re-lay out only if its text changed."""
        if self.model.update_message(index, message):
            self.delegate.forget_row(index)
            self.list.doItemsLayout()

    def set_preview(self, preview: ContextPreview | None, delta: PreviewDelta | None = None) -> None:
        """Apply the latest preview's per-message fates and the fit marker (``delta``: the changed
        rows when known, :meth:`ChatMessagesModel.set_preview`)."""
        # row heights depend on text, width and whether the row carries the marker or the summary
        # (all in the size cache key), not on the fates: re-layout only when those moved
        self.model.set_preview(preview, delta)
        if self.model.layout_changed:
            self.list.doItemsLayout()

    def update_progress(self, event: ProgressEvent) -> None:
        """Show or update the inline indicator of ``event.step_id``."""
        self.model.update_progress(event)

    def scroll_to_message(self, message_index: int) -> None:
        """Select and show message ``message_index``."""
        if 0 <= message_index < self.model.message_count():
            idx = self.model.index(message_index)
            self.list.setCurrentIndex(idx)
            self.list.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtCenter)

    def scroll_to_marker(self) -> None:
        """Show the oldest message that still fits (or the end of the chat)."""
        m = self.model.marker_index()
        if m is None:
            self.list.scrollToBottom()
        else:
            self.list.scrollTo(self.model.index(m), QAbstractItemView.ScrollHint.PositionAtTop)

    # -- intents out ------------------------------------------------------------------------
    def _on_send_clicked(self) -> None:
        text = self.composer.toPlainText().strip()
        if text:
            self.message_submitted.emit(text)
            self.composer.clear()

    def _on_generate_clicked(self) -> None:
        self._on_send_clicked()  # a written message goes first, as chat front-ends do
        self.generate_requested.emit()

    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid() and current.row() < self.model.message_count():
            self.message_selected.emit(current.row())

    def _on_list_context_menu(self, pos: QPoint) -> None:
        index = self.list.indexAt(pos)
        if not index.isValid() or index.row() >= self.model.message_count():
            return
        msg: ChatMessage = index.data(MESSAGE_ROLE)
        row = index.row()
        menu = QMenu(self)
        if offers_toggles(msg, index.data(FATE_ROLE)):
            pinned, excluded = index.data(FLAGS_ROLE)
            menu.addAction("Unpin" if pinned else "Pin (always keep)",
                           lambda: self.pin_toggled.emit(row, not pinned))
            menu.addAction("Include again" if excluded else "Exclude from the prompt",
                           lambda: self.exclude_toggled.emit(row, not excluded))
            menu.addSeparator()
        menu.addAction("Edit text…", lambda: self.edit_requested.emit(row))
        menu.addAction("Unhide (send again)" if msg.meta.hidden else "Hide (never send)",
                       lambda: self.hide_toggled.emit(row, not msg.meta.hidden))
        menu.addAction("Delete message", lambda: self.delete_requested.emit(row))
        menu.addSeparator()
        menu.addAction("Branch from here", lambda: self.branch_requested.emit(row))
        summary = index.data(SUMMARY_ROLE)
        if summary is not None:
            covers = (summary.trace or {}).get("covers") or ["?", "?"]
            menu.addSeparator()
            menu.addAction(f"Remove compaction summary (send messages #{covers[0]}–#{covers[1]} verbatim again)",
                           self.summary_remove_requested.emit)
        if self.model.compaction_stopped:
            menu.addSeparator()
            menu.addAction("Retry auto-compaction (it stopped after 3 failures in a row)",
                           self.compaction_reset_requested.emit)
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def set_generating(self, running: bool) -> None:
        """While a generation runs, Generate is off (one at a time)."""
        self.generate_button.setEnabled(not running)
        self.generate_button.setToolTip(
            "A generation is running; cancel it with ■ Cancel" if running
            else "Send the previewed prompt (with your message, if any) and append the reply")


def _card_colour(msg: ChatMessage, selected: bool) -> QColor:
    """A message card's background: by role (tool exchanges lilac), blue when selected."""
    if selected:
        return QColor("#d6e6ff")
    if msg.role == "user":
        return QColor("#eef4fb")
    if msg.role in ("tool", "function") or msg.tool_calls:
        return QColor("#f4f1fa")
    if msg.role == "system":
        return QColor("#f3f3f3")
    return QColor("#ffffff")


def _paint_text(p: QPainter, fm: QFontMetrics, text_rect: QRect, text: str) -> None:
    """``text`` word-wrapped in ``text_rect``; when it does not fit, its first lines and a pointer to the full text."""
    full = fm.boundingRect(QRect(0, 0, text_rect.width(), 100000), int(Qt.TextFlag.TextWordWrap), text)
    if full.height() > text_rect.height():
        lines = max(1, text_rect.height() // fm.lineSpacing())
        clip = QRect(text_rect.left(), text_rect.top(), text_rect.width(), (lines - 1) * fm.lineSpacing())
        p.drawText(clip, int(Qt.TextFlag.TextWordWrap), text)
        p.setPen(QColor("#7a8088"))
        p.drawText(QRect(text_rect.left(), clip.bottom(), text_rect.width(), fm.lineSpacing()),
                   int(Qt.AlignmentFlag.AlignLeft), "… (full text in the Block tab)")
    else:
        p.drawText(text_rect, int(Qt.TextFlag.TextWordWrap), text)
