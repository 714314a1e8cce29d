"""The library beside the chats (issue 18): Characters, Lorebooks and Personas panels.

Each panel lists one kind of library object with a search box, Rename, Delete (the window asks
for confirmation), Export, and an action (*New chat* with a character, *Attach to chat* for a
lorebook, *Use in chat* for a persona); "Used by" names the chats that use the selected object.
Panels emit intents only; the window does the work and calls :meth:`ObjectListPanel.set_items`.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QToolBox,
    QVBoxLayout,
    QWidget,
)

from ..roles import ID_ROLE, SEARCH_ROLE

KINDS = ("character", "lorebook", "persona")
ACTIONS = {"character": "New chat", "lorebook": "Attach to chat", "persona": "Use in chat"}
TITLES = {"character": "Characters", "lorebook": "Lorebooks", "persona": "Personas"}


class ObjectListPanel(QWidget):
    """One kind of library object (``kind``: ``character``, ``lorebook``, ``persona``).

    Signals: ``current_changed(str kind, str id)``, ``rename_requested(str kind, str id)``,
    ``delete_requested(str kind, str id)``, ``export_requested(str kind, str id)``,
    ``action_requested(str kind, str id)``.
    """

    current_changed = Signal(str, str)
    rename_requested = Signal(str, str)
    delete_requested = Signal(str, str)
    export_requested = Signal(str, str)
    action_requested = Signal(str, str)
    #: ``(kind, id)``: use this character in the open chat (the Characters panel's second action).
    use_requested = Signal(str, str)

    def __init__(self, kind: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.kind = kind
        self.setObjectName(f"{kind}Panel")
        self.model = QStandardItemModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterRole(SEARCH_ROLE)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText(f"Search {TITLES[kind].lower()}…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.proxy.setFilterFixedString)
        self.list = QListView(self)
        self.list.setModel(self.proxy)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.list.setAlternatingRowColors(True)
        self.list.selectionModel().currentChanged.connect(self._on_current)
        self.usage = QLabel("", self)
        self.usage.setObjectName(f"{kind}Usage")
        self.usage.setWordWrap(True)
        self.usage.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.usage.setStyleSheet("color: #444;")
        self.action_button = QPushButton(ACTIONS[kind], self)
        self.rename_button = QPushButton("Rename…", self)
        self.delete_button = QPushButton("Delete…", self)
        self.export_button = QPushButton("Export…", self)
        self.action_button.clicked.connect(lambda: self._emit(self.action_requested))
        self.use_button = QPushButton("Use in chat", self)
        self.use_button.setObjectName(f"{kind}UseButton")
        self.use_button.setToolTip("Make this the open chat's character (a chat imported without its card)")
        self.use_button.clicked.connect(lambda: self._emit(self.use_requested))
        self.use_button.setVisible(kind == "character")
        self.rename_button.clicked.connect(lambda: self._emit(self.rename_requested))
        self.delete_button.clicked.connect(lambda: self._emit(self.delete_requested))
        self.export_button.clicked.connect(lambda: self._emit(self.export_requested))
        if kind == "persona":
            self.export_button.hide()  # SillyTavern keeps personas in settings.json, not in files
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.search)
        lay.addWidget(self.list, 1)
        lay.addWidget(self.usage)
        row1 = QHBoxLayout()
        row1.addWidget(self.action_button)
        row1.addWidget(self.use_button)
        row1.addWidget(self.export_button)
        row2 = QHBoxLayout()
        row2.addWidget(self.rename_button)
        row2.addWidget(self.delete_button)
        lay.addLayout(row1)
        lay.addLayout(row2)
        self._update_buttons()

    def set_items(self, rows: list[tuple[str, str, str]], current: str | None = None) -> None:
        """Fill from ``(id, name, detail)`` rows, keeping ``current`` (or the old current) selected."""
        keep = current or self.current_id()
        self.model.clear()
        for obj_id, name, detail in rows:
            item = QStandardItem(name if not detail else f"{name}  ·  {detail}")
            item.setData(obj_id, ID_ROLE)
            item.setData(f"{name} {detail} {obj_id}", SEARCH_ROLE)
            item.setToolTip(f"{name}\nid {obj_id}")
            self.model.appendRow(item)
        if keep:
            self.select(keep)
        self._update_buttons()

    def ids(self) -> list[str]:
        """Ids in list order (unfiltered)."""
        return [self.model.item(r).data(ID_ROLE) for r in range(self.model.rowCount())]

    def select(self, obj_id: str) -> bool:
        """Select ``obj_id``; ``False`` when it is not listed."""
        for r in range(self.model.rowCount()):
            if self.model.item(r).data(ID_ROLE) == obj_id:
                self.search.clear()
                self.list.setCurrentIndex(self.proxy.mapFromSource(self.model.index(r, 0)))
                return True
        return False

    def current_id(self) -> str | None:
        """The selected object's id."""
        idx = self.list.currentIndex()
        return idx.data(ID_ROLE) if idx.isValid() else None

    def set_usage(self, text: str) -> None:
        """Show where the selected object is used."""
        self.usage.setText(text)

    def _emit(self, signal: Any) -> None:
        obj_id = self.current_id()
        if obj_id:
            signal.emit(self.kind, obj_id)

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._update_buttons()
        if current.isValid():
            self.current_changed.emit(self.kind, current.data(ID_ROLE))
        else:
            self.usage.setText("")

    def _update_buttons(self) -> None:
        on = self.current_id() is not None
        for b in (self.action_button, self.rename_button, self.delete_button, self.export_button, self.use_button):
            b.setEnabled(on)


class LibraryTabs(QToolBox):
    """Chats (the existing chat list), Characters, Lorebooks, Personas: one page open at a time
    (a tool box: it fits the narrow library column where four tabs would not)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("libraryTabs")
        self.chats: QWidget | None = None
        self.panels: dict[str, ObjectListPanel] = {}
        for kind in KINDS:
            panel = ObjectListPanel(kind, self)
            self.panels[kind] = panel
            self.addItem(panel, TITLES[kind])

    def set_chats_panel(self, chats: QWidget) -> None:
        """Put the chat list in front as the "Chats" tab."""
        self.chats = chats
        self.insertItem(0, chats, "Chats")
        self.setCurrentIndex(0)

    def show_kind(self, kind: str) -> None:
        """Bring ``kind``'s panel (or ``chat``: the chat list) to the front."""
        if kind == "chat" and self.chats is not None:
            self.setCurrentWidget(self.chats)
        elif kind in self.panels:
            self.setCurrentWidget(self.panels[kind])
