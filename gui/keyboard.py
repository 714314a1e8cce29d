"""Keyboard reach for the main window (issue 31 item 5).

Alt+1 … Alt+5 go to the library (its search box), the prompt blocks, the chat, the inspector
and the Lorebook tab; Ctrl+Tab / Ctrl+Shift+Tab cycle the inspector's tabs; every multi-line
text box passes Tab on to the next control (``tabChangesFocus``) instead of typing a tab; a
visible focus ring marks the control that has the keyboard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QPlainTextEdit, QTabWidget, QTextEdit, QWidget

if TYPE_CHECKING:
    from .window_parts import KeyboardWindow

#: The focus ring: a 2 px outline on the focused input, list or table (the platform style's own
#: ring is faint or missing on some Linux styles).
FOCUS_RING_CSS = ("QLineEdit:focus, QPlainTextEdit:focus, QTextEdit:focus, QAbstractItemView:focus, "
                  "QComboBox:focus, QSpinBox:focus, QDoubleSpinBox:focus { border: 2px solid #2f6fdf; }")


def _show_tab(tabs: QTabWidget, page: QWidget) -> None:
    tabs.setCurrentWidget(page)
    page.setFocus()


def _show_blocks(window: KeyboardWindow) -> None:
    _show_tab(window.centre_tabs, window.blocks_panel)
    window.blocks_panel.table.setFocus()


def _cycle(tabs: QTabWidget, step: int) -> None:
    n = tabs.count()
    if n:
        tabs.setCurrentIndex((tabs.currentIndex() + step) % n)
        tabs.currentWidget().setFocus()


def pass_tab_on(root: QWidget) -> int:
    """Make every multi-line text box under ``root`` pass Tab on; returns how many were set."""
    plain, rich = root.findChildren(QPlainTextEdit), root.findChildren(QTextEdit)
    for box in plain:
        box.setTabChangesFocus(True)
    for text_box in rich:
        text_box.setTabChangesFocus(True)
    return len(plain) + len(rich)


def install_keyboard(window: KeyboardWindow) -> list[QShortcut]:
    """Add the window's tab shortcuts, Tab passing and the focus ring; returns the shortcuts."""
    targets = (
        ("Alt+1", lambda: window.library.search.setFocus()),
        ("Alt+2", lambda: _show_blocks(window)),
        ("Alt+3", lambda: _show_tab(window.centre_tabs, window.chat_view)),
        ("Alt+4", lambda: window.inspector_tabs.currentWidget().setFocus()),
        ("Alt+5", lambda: _show_tab(window.inspector_tabs, window.lorebook_tab)),
        ("Ctrl+Tab", lambda: _cycle(window.inspector_tabs, 1)),
        ("Ctrl+Shift+Tab", lambda: _cycle(window.inspector_tabs, -1)),
    )
    root = window.window()  # the window itself: it owns the shortcuts and carries the focus ring
    shortcuts = []
    for keys, slot in targets:
        sc = QShortcut(QKeySequence(keys), root)
        sc.activated.connect(slot)
        shortcuts.append(sc)
    pass_tab_on(root)
    root.setStyleSheet((root.styleSheet() + "\n" + FOCUS_RING_CSS).strip())
    return shortcuts
