"""Files into the library: the import dialog and drag-and-drop (split from :mod:`gui.main_window`).

Dropped folders import as SillyTavern folders, files as cards / worlds / chats
(:meth:`gui.library_setup.LibrarySetup.import_dropped`); the drop is handled after the event
returns, so the drag source is never kept waiting.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QDragEnterEvent, QDropEvent

from .file_dialogs import ask_open_files

#: Every format the importer reads (engine.importers.detect sniffs the content): cards (PNG, JSON),
#: worlds and NovelAI lorebooks, SillyTavern JSONL chats, OpenAI message arrays and agent
#: transcripts (tau-bench JSON, SWE-agent ``.traj``).
IMPORT_FILTER = ("Cards, worlds and chats (*.png *.json *.jsonl *.lorebook *.traj);;"
                 "Character cards (*.png *.json);;Worlds and lorebooks (*.json *.lorebook);;"
                 "Chats and transcripts (*.jsonl *.json *.traj);;All files (*)")


class DropMixin:
    """*File → Import…* and files or folders dropped on the window."""

    def ask_import_files(self) -> None:
        """Ask for files (*File → Import…*) and import them."""
        paths = ask_open_files(self, "Import cards, worlds and chats", "", IMPORT_FILTER)
        if paths:
            self.import_files(paths)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            QTimer.singleShot(0, lambda: self.library_setup.import_dropped(paths))

