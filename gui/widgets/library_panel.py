"""The chat library: search box, chat list, import and delete.

Rows come from ``store.chats.summaries()`` (most recently updated first). The panel only emits
intents (``chat_selected``, ``import_requested``, ``delete_requested``); the window does the work.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from ..roles import CHAT_ID_ROLE, SEARCH_ROLE, SUBTITLE_ROLE

if TYPE_CHECKING:  # the storage package (SQLAlchemy) loads with the store, not with this widget
    from engine.storage.models import ChatSummary

#: The library column's default width (px) in the window's splitter.
DEFAULT_WIDTH = 250


class ChatRowDelegate(QStyledItemDelegate):
    """Paints a chat as two one-line rows: the title (bold) and the counts, each elided with "…"."""

    PADDING = 4

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        fm = option.fontMetrics
        return QSize(120, 2 * fm.height() + 2 * self.PADDING + 2)

    def lines(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> tuple[str, str]:
        """The two lines as painted in ``option.rect`` (elided to its width)."""
        width = max(0, option.rect.width() - 2 * self.PADDING)
        bold = QFont(option.font)
        bold.setBold(True)
        title = QFontMetrics(bold).elidedText(str(index.data(Qt.ItemDataRole.DisplayRole) or ""),
                                              Qt.TextElideMode.ElideRight, width)
        sub = option.fontMetrics.elidedText(str(index.data(SUBTITLE_ROLE) or ""), Qt.TextElideMode.ElideRight, width)
        return title, sub

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # the background, selection and focus come from the style; the text from here
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        title, sub = self.lines(option, index)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        group = QPalette.ColorGroup.Active if option.state & QStyle.StateFlag.State_Active \
            else QPalette.ColorGroup.Inactive
        text_color = option.palette.color(group, QPalette.ColorRole.HighlightedText if selected
                                          else QPalette.ColorRole.Text)
        r = option.rect.adjusted(self.PADDING, self.PADDING, -self.PADDING, -self.PADDING)
        h = option.fontMetrics.height()
        painter.save()
        bold = QFont(option.font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(text_color)
        painter.drawText(QRect(r.left(), r.top(), r.width(), h),
                         int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), title)
        painter.setFont(option.font)
        if not selected:
            text_color = option.palette.color(group, QPalette.ColorRole.PlaceholderText)
        painter.setPen(text_color)
        painter.drawText(QRect(r.left(), r.top() + h + 2, r.width(), h),
                         int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), sub)
        painter.restore()


#: Shown instead of the list when the library has no chat yet.
EMPTY_TEXT = ("<b>No chats yet.</b><br><br>Using SillyTavern? <b>File → Open SillyTavern folder…</b> "
              "(Ctrl+Shift+O) imports your characters, worlds and chats as SillyTavern sends them."
              "<br><br>Or import a chat (SillyTavern .jsonl, an OpenAI message list "
              "or an agent transcript) with <b>Import…</b> below or Ctrl+O, or drop it on this window."
              "<br><br>Import its character card (.png / .json) and world (.json) in the same go and "
              "they are attached to it.")
#: Shown when the search matches no chat.
NO_MATCH_TEXT = "No chat matches “{}”."
#: The branch mark before a branch's title (U+21B3, in DejaVu Sans and the common UI fonts).
BRANCH_MARK = "↳"


class LibraryPanel(QWidget):
    """Signals: ``chat_selected(str)`` (the user picked a chat), ``import_requested()``,
    ``delete_requested(str)``, ``selection_changed(str)`` (``""`` when nothing is selected).

    Typing in the search box only filters the list: the open chat stays open (and selected when
    it is listed); only a click or the arrow keys open another chat.
    """

    chat_selected = Signal(str)
    import_requested = Signal()
    delete_requested = Signal(str)
    selection_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = QStandardItemModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterRole(SEARCH_ROLE)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        title = QLabel("<b>Library</b>", self)
        self.search = QLineEdit(self)
        self.search.setObjectName("chatSearch")
        self.search.setPlaceholderText("Search chats…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_text_changed)
        self.list = QListView(self)
        self.list.setObjectName("chatList")
        self.list.setModel(self.proxy)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.list.setAlternatingRowColors(True)
        self.list.setWordWrap(False)
        self.list.setUniformItemSizes(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.delegate = ChatRowDelegate(self.list)
        self.list.setItemDelegate(self.delegate)
        self.list.selectionModel().currentChanged.connect(self._on_current_changed)
        self.import_button = QPushButton("Import…", self)
        self.import_button.setToolTip("Import character cards (PNG/JSON), worlds and chats (JSONL); "
                                      "you can also drop files on the window")
        self.import_button.clicked.connect(self.import_requested)
        self.delete_button = QPushButton("Delete", self)
        self.delete_button.setToolTip("Delete the selected chat and its audit")
        self.delete_button.setEnabled(False)
        self.delete_button.clicked.connect(self._on_delete_clicked)
        self.empty_label = QLabel(EMPTY_TEXT, self)
        self.empty_label.setObjectName("libraryEmpty")
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.empty_label.setStyleSheet("QLabel#libraryEmpty { color: #555; padding: 8px; }")
        self.empty_label.hide()
        buttons = QHBoxLayout()
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.delete_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(title)
        lay.addWidget(self.search)
        lay.addWidget(self.list, 1)
        lay.addWidget(self.empty_label, 1)
        lay.addLayout(buttons)
        self._suppress = False
        #: The chat the window has open (kept selected while the search filters the list).
        self._open_id: str | None = None
        self._update_empty()

    def set_chats(self, chats: list[ChatSummary], current: str | None = None) -> None:
        """Fill the list from ``ChatSummary`` rows; keep ``current`` selected (no signal)."""
        self._suppress = True
        titles = {c.id: c.title for c in chats}
        try:
            self.model.clear()
            for c in chats:
                character = f" · {c.character}" if c.character else ""
                audit = " · audit ✓" if c.has_audit else ""
                branch = f"{BRANCH_MARK} " if c.parent_id else ""
                item = QStandardItem(f"{branch}{c.title or c.id}")
                count = f"{c.messages} message{'' if c.messages == 1 else 's'}"
                parent = titles.get(c.parent_id or "")
                if branch:  # told apart from its parent: where it branched, and from what
                    where = f"branch at message {c.branch_point}" if c.branch_point is not None else "branch"
                    item.setData(f"{where}{f' of {parent}' if parent else ''} · {count}{audit}", SUBTITLE_ROLE)
                else:
                    item.setData(f"{count}{character}{audit}", SUBTITLE_ROLE)
                item.setData(c.id, CHAT_ID_ROLE)
                item.setData(f"{c.title} {c.character or ''} {c.id}", SEARCH_ROLE)
                item.setToolTip(f"{c.title}\nid {c.id}\nupdated {c.updated_at:%Y-%m-%d %H:%M} UTC")
                self.model.appendRow(item)
            if current is not None:
                self.select_chat(current, emit=False)
        finally:
            self._suppress = False
        self._update_empty()

    def chat_ids(self) -> list[str]:
        """Ids in list order (unfiltered)."""
        return [self.model.item(r).data(CHAT_ID_ROLE) for r in range(self.model.rowCount())]

    def select_chat(self, chat_id: str, emit: bool = True) -> bool:
        """Select ``chat_id``; returns ``False`` when it is not in the list."""
        if not emit:
            self._open_id = chat_id
        for r in range(self.model.rowCount()):
            if self.model.item(r).data(CHAT_ID_ROLE) == chat_id:
                idx = self.proxy.mapFromSource(self.model.index(r, 0))
                old, self._suppress = self._suppress, self._suppress or not emit
                try:
                    self.list.setCurrentIndex(idx)
                finally:
                    self._suppress = old
                return True
        return False

    def current_chat_id(self) -> str | None:
        """The selected chat's id."""
        idx = self.list.currentIndex()
        return idx.data(CHAT_ID_ROLE) if idx.isValid() else None

    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        chat_id = current.data(CHAT_ID_ROLE) if current.isValid() else None
        self.delete_button.setEnabled(bool(chat_id))
        self.selection_changed.emit(chat_id or "")
        if self._suppress or not current.isValid():
            return
        self._open_id = chat_id
        self.chat_selected.emit(chat_id)

    def _on_search_text_changed(self, text: str) -> None:
        """Filter only: the open chat stays open, and selected again once it is listed."""
        self._suppress = True
        try:
            self.proxy.setFilterFixedString(text)
            if self._open_id is not None:
                for r in range(self.model.rowCount()):
                    if self.model.item(r).data(CHAT_ID_ROLE) == self._open_id:
                        idx = self.proxy.mapFromSource(self.model.index(r, 0))
                        if idx.isValid():
                            self.list.setCurrentIndex(idx)
                        else:
                            self.list.selectionModel().clearCurrentIndex()
                            self.list.clearSelection()
                        break
        finally:
            self._suppress = False
        self._update_empty()

    def _update_empty(self) -> None:
        """The empty library says how to start; a search without matches says so."""
        empty = self.model.rowCount() == 0
        no_match = not empty and self.proxy.rowCount() == 0
        if empty:
            self.empty_label.setText(EMPTY_TEXT)
        elif no_match:
            self.empty_label.setText(NO_MATCH_TEXT.format(escape(self.search.text())))
        self.empty_label.setVisible(empty or no_match)
        self.list.setVisible(not (empty or no_match))
        self.search.setEnabled(not empty)

    def _on_delete_clicked(self) -> None:
        chat_id = self.current_chat_id()
        if chat_id:
            self.delete_requested.emit(chat_id)
