"""The main window's actions, menus and toolbar (split from :mod:`gui.main_window`).

:func:`build_actions` creates every ``QAction`` as an attribute of the window (``undo_action``,
``generate_action``, ...: the names tests and other modules use), owned by the window, connects
each to the window's slot, and lays out the menu bar and the toolbar. It sees the window as a
:class:`~gui.window_parts.ActionsWindow`. Undo and Redo keep fixed texts (the toolbar
must not jump as the command names change); their tooltip and status tip name what Ctrl+Z
would undo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QToolBar

if TYPE_CHECKING:
    from .window_parts import ActionsWindow


def describe_undo(action: QAction, verb: str, text: str, keys: str) -> None:
    """Set ``action``'s tooltip and status tip: ``"Undo pin message 3 (Ctrl+Z)"`` or ``"Nothing to undo"``."""
    tip = f"{verb} {text[:1].lower() + text[1:]} ({keys})" if text else f"Nothing to {verb.lower()}"
    action.setToolTip(tip)
    action.setStatusTip(tip)


class _UndoTexts(QObject):
    """Keeps the Undo / Redo tips naming what they would undo or redo."""

    def __init__(self, window: ActionsWindow) -> None:
        super().__init__(window.window())
        self._window = window

    def on_undo_text_changed(self, text: str) -> None:
        describe_undo(self._window.undo_action, "Undo", text, "Ctrl+Z")

    def on_redo_text_changed(self, text: str) -> None:
        describe_undo(self._window.redo_action, "Redo", text, "Ctrl+Shift+Z")


def build_actions(window: ActionsWindow) -> None:
    """Create the window's actions, menus and toolbar (called once from ``MainWindow.__init__``)."""
    _undo_actions(window)
    _file_actions(window)
    _generate_actions(window)
    _menus(window)
    _toolbar(window)


def _undo_actions(window: ActionsWindow) -> None:
    owner = window.window()  # the window owns its actions
    stack = window.ctx.undo_stack
    window.undo_action = QAction("Undo", owner)
    window.undo_action.setObjectName("undoAction")
    window.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
    window.undo_action.triggered.connect(stack.undo)
    window.redo_action = QAction("Redo", owner)
    window.redo_action.setObjectName("redoAction")
    window.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
    window.redo_action.triggered.connect(stack.redo)
    stack.canUndoChanged.connect(window.undo_action.setEnabled)
    stack.canRedoChanged.connect(window.redo_action.setEnabled)
    # slots of a QObject the window owns: the connections end with the window (the stack outlives it)
    texts = _UndoTexts(window)
    stack.undoTextChanged.connect(texts.on_undo_text_changed)
    stack.redoTextChanged.connect(texts.on_redo_text_changed)
    describe_undo(window.undo_action, "Undo", stack.undoText(), "Ctrl+Z")
    describe_undo(window.redo_action, "Redo", stack.redoText(), "Ctrl+Shift+Z")
    window.undo_action.setEnabled(stack.canUndo())
    window.redo_action.setEnabled(stack.canRedo())
    # The Edit menu says what Undo / Redo would do ("Undo Pin message 3"); the toolbar keeps its
    # fixed words. The menu's actions show the keys but only act while the menu has the focus,
    # so Ctrl+Z stays one unambiguous window shortcut (issue 31).
    window.undo_menu_action = stack.createUndoAction(owner, "Undo")
    window.redo_menu_action = stack.createRedoAction(owner, "Redo")
    for action, twin in ((window.undo_menu_action, window.undo_action), (window.redo_menu_action, window.redo_action)):
        action.setShortcuts(twin.shortcuts())
        action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)


def _file_actions(window: ActionsWindow) -> None:
    owner = window.window()  # the window owns its actions
    window.import_action = QAction("&Import…", owner)
    window.import_action.setToolTip("Import character cards, worlds / lorebooks and chats (Ctrl+O); "
                                    "you can also drop files on the window")
    window.import_action.setShortcut(QKeySequence("Ctrl+O"))
    window.import_action.triggered.connect(window.ask_import_files)
    window.delete_action = QAction("&Delete chat…", owner)
    window.delete_action.setEnabled(False)  # nothing selected yet
    window.delete_action.triggered.connect(lambda: window.delete_chat(window.library.current_chat_id()))
    window.quit_action = QAction("&Quit", owner)
    window.quit_action.setShortcut(QKeySequence("Ctrl+Q"))
    window.quit_action.triggered.connect(window.close)


def _generate_actions(window: ActionsWindow) -> None:
    owner = window.window()  # the window owns its actions
    window.generate_action = QAction("▶ Generate", owner)
    window.generate_action.setObjectName("generateAction")
    window.generate_action.setShortcut(QKeySequence("Ctrl+G"))
    window.generate_action.setToolTip("Send the previewed prompt to the provider and append the reply (Ctrl+G)")
    window.generate_action.triggered.connect(window.generate)
    window.cancel_action = QAction("■ Cancel", owner)
    window.cancel_action.setEnabled(False)
    window.cancel_action.triggered.connect(window.generation.cancel)
    window.provider_action = QAction("Provider…", owner)
    window.provider_action.triggered.connect(window.edit_provider)
    window.refresh_action = QAction("Refresh preview", owner)
    window.refresh_action.setShortcut(QKeySequence("F5"))
    window.refresh_action.triggered.connect(window.ctx.preview.schedule)
    window.lorebook_report_action = QAction("&Report…", owner)
    window.lorebook_report_action.setObjectName("lorebookReportAction")
    window.lorebook_report_action.setToolTip("Replay World Info over this chat: what fired, when, what it cost")
    window.lorebook_report_action.triggered.connect(window.show_lorebook_report)


def _menus(window: ActionsWindow) -> None:
    bar = window.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addAction(window.import_action)
    file_menu.addAction(window.delete_action)
    file_menu.addSeparator()
    file_menu.addAction(window.quit_action)
    edit_menu = bar.addMenu("&Edit")
    edit_menu.addAction(window.undo_menu_action)
    edit_menu.addAction(window.redo_menu_action)
    gen_menu = bar.addMenu("&Generate")
    for action in (window.generate_action, window.cancel_action, window.provider_action, window.refresh_action):
        gen_menu.addAction(action)
    lore_menu = bar.addMenu("&Lorebook")
    lore_menu.addAction(window.lorebook_report_action)


def _toolbar(window: ActionsWindow) -> None:
    bar = QToolBar("Main", window.window())
    bar.setObjectName("mainToolbar")
    bar.setMovable(False)
    for action in (window.import_action, window.undo_action, window.redo_action, window.generate_action,
                   window.cancel_action, window.provider_action):
        bar.addAction(action)
    window.addToolBar(bar)
