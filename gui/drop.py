"""Files into the library: the import dialog and drag-and-drop (split from :mod:`gui.main_window`).

Dropped folders import as SillyTavern folders, files as cards / worlds / chats
(:meth:`gui.library_setup.LibrarySetup.import_dropped`); the drop is handled after the event
returns, so the drag source is never kept waiting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtGui import QDragEnterEvent, QDropEvent

from .file_dialogs import ask_open_files

if TYPE_CHECKING:
    from .window_parts import DropWindow

#: Every format the importer reads (engine.importers.detect sniffs the content): cards (PNG, JSON),
#: worlds and NovelAI lorebooks, SillyTavern JSONL chats, OpenAI message arrays and agent
#: transcripts (tau-bench JSON, SWE-agent ``.traj``).
IMPORT_FILTER = ("Cards, worlds and chats (*.png *.json *.jsonl *.lorebook *.traj);;"
                 "Character cards (*.png *.json);;Worlds and lorebooks (*.json *.lorebook);;"
                 "Chats and transcripts (*.jsonl *.json *.traj);;All files (*)")


class DropHandler:
    """*File → Import…* and files or folders dropped on the window.

    The window forwards its ``dragEnterEvent`` / ``dropEvent`` here.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.DropWindow`): where files are imported and the
        dialog's parent.
    """

    def __init__(self, window: DropWindow) -> None:
        self._window = window

    def ask_import_files(self) -> None:
        """Ask for files (*File → Import…*) and import them."""
        paths = ask_open_files(self._window.window(), "Import cards, worlds and chats", "", IMPORT_FILTER)
        if paths:
            self._window.import_files(paths)

    def drag_entered(self, event: QDragEnterEvent) -> None:
        """Accept a drag that carries at least one local file or folder."""
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropped(self, event: QDropEvent) -> None:
        """Import the local files and folders dropped, after the event returns."""
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            library_setup = self._window.library_setup
            QTimer.singleShot(0, lambda: library_setup.import_dropped(paths))
