"""What the main window's composed parts may use of the window (issue 29 item 6).

:class:`~gui.main_window.MainWindow` is a coordinator that owns a few parts, each an object it
constructs and keeps: :class:`gui.window_state.WindowState` (tabs, splitter, saved layout),
:class:`gui.drop.DropHandler` (import dialog, drag-and-drop), :class:`gui.window_library.LibraryActions`
(import, delete, branch) and :class:`gui.window_generation.GenerationController` (Generate and
its outcome). Each part is given the window as one of the protocols below, which declare exactly
the members that part reads or calls, so mypy checks both sides: the part uses nothing the
protocol does not name, and the window provides everything it does.

Attributes a part only reads are declared as read-only properties (the window may keep them as
plain attributes); the one a part writes (``audit``) is a plain attribute. Qt methods are
declared with the PySide6 stubs' positional-only signatures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from PySide6.QtCore import QByteArray
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QSplitter, QStatusBar, QTabWidget, QWidget

    from engine.schema import ContextPreview
    from engine.schema.audit import PromptContextAudit
    from engine.storage import ImportRef

    from .commands import CommandRunner
    from .context import AppContext
    from .errors import UserError
    from .library_setup import LibrarySetup
    from .widgets.audit_inspector import AuditTab
    from .widgets.chat_view import ChatView
    from .widgets.library_panel import LibraryPanel
    from .widgets.lorebook import LorebookTab


class LayoutWindow(Protocol):
    """What :class:`gui.window_state.WindowState` uses: the columns, the tabs and Qt's window state."""

    @property
    def ctx(self) -> AppContext: ...
    @property
    def splitter(self) -> QSplitter: ...
    @property
    def centre_tabs(self) -> QTabWidget: ...
    @property
    def inspector_tabs(self) -> QTabWidget: ...
    @property
    def lorebook_tab(self) -> LorebookTab: ...
    @property
    def library_setup(self) -> LibrarySetup: ...
    def isVisible(self, /) -> bool: ...
    def saveGeometry(self, /) -> QByteArray: ...
    def restoreGeometry(self, geometry: QByteArray | bytes, /) -> bool: ...
    def saveState(self, /) -> QByteArray: ...
    def restoreState(self, state: QByteArray | bytes, /) -> bool: ...


class LibraryWindow(Protocol):
    """What :class:`gui.window_library.LibraryActions` uses: the library, the runner, opening chats."""

    @property
    def ctx(self) -> AppContext: ...
    @property
    def commands(self) -> CommandRunner: ...
    @property
    def library(self) -> LibraryPanel: ...
    @property
    def library_setup(self) -> LibrarySetup: ...
    def confirm(self, title: str, text: str, /) -> bool: ...
    def refresh_library(self) -> None: ...
    def open_chat(self, chat_id: str | None) -> None: ...
    def statusBar(self, /) -> QStatusBar: ...


class DropWindow(Protocol):
    """What :class:`gui.drop.DropHandler` uses: where files go, and the dialogs' parent."""

    @property
    def library_setup(self) -> LibrarySetup: ...
    def import_files(self, paths: list[str]) -> list[ImportRef]: ...
    def window(self, /) -> QWidget: ...


class GenerationWindow(Protocol):
    """What :class:`gui.window_generation.GenerationController` uses: the shown preview and audit,
    the chat view, the Generate / Cancel actions, the runner, errors and the status bar."""

    audit: PromptContextAudit | None

    @property
    def ctx(self) -> AppContext: ...
    @property
    def commands(self) -> CommandRunner: ...
    @property
    def preview(self) -> ContextPreview | None: ...
    @property
    def chat_view(self) -> ChatView: ...
    @property
    def audit_tab(self) -> AuditTab: ...
    @property
    def generate_action(self) -> QAction: ...
    @property
    def cancel_action(self) -> QAction: ...
    def refresh_library(self) -> None: ...
    def show_error(self, error: UserError, title: str = ...) -> None: ...
    def statusBar(self, /) -> QStatusBar: ...
    def window(self, /) -> QWidget: ...
