"""The app's file dialogs: one helper every dialog goes through (issue 25 item 1).

Qt's file dialog asks an icon provider for each file's icon and type; the default one looks the MIME
type up by *content*, opening and closing every file it lists, the library database too. On POSIX that
close drops every lock SQLite holds on the library (see :mod:`engine.storage.database`), and another
process then deletes the ``-wal`` file the app still writes into. So every dialog here is Qt's own
(a native GTK dialog would sniff files inside this process as well) with a
:class:`ContentFreeIconProvider`, which answers from ``stat`` alone. New dialogs use these helpers.
"""

from __future__ import annotations

from PySide6.QtCore import QFileInfo
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QFileDialog, QFileIconProvider, QWidget

__all__ = ["ContentFreeIconProvider", "ask_directory", "ask_open_files", "ask_save_file", "file_dialog"]


class ContentFreeIconProvider(QFileIconProvider):
    """Icons and type names from the kind of entry only (folder, file); never opens a file."""

    def icon(self, what: QFileInfo | QFileIconProvider.IconType) -> QIcon:  # both Qt overloads in one
        if isinstance(what, QFileInfo):
            what = QFileIconProvider.IconType.Folder if what.isDir() else QFileIconProvider.IconType.File
        return super().icon(what)

    def type(self, info: QFileInfo) -> str:
        return "Folder" if info.isDir() else "File"


def file_dialog(parent: QWidget | None, caption: str, directory: str = "", name_filter: str = "") -> QFileDialog:
    """A Qt (not native) file dialog with a :class:`ContentFreeIconProvider`, not yet shown."""
    dialog = QFileDialog(parent, caption, directory, name_filter)
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
    dialog.setOption(QFileDialog.Option.DontUseCustomDirectoryIcons, True)
    provider = ContentFreeIconProvider()
    dialog.setIconProvider(provider)
    dialog.setProperty("loomscope_content_free", True)
    dialog._loomscope_icon_provider = provider  # type: ignore[attr-defined]  # the dialog does not own it
    return dialog


def ask_open_files(parent: QWidget | None, caption: str, directory: str = "", name_filter: str = "") -> list[str]:
    """Existing files chosen by the user (empty when cancelled)."""
    dialog = file_dialog(parent, caption, directory, name_filter)
    dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
    return list(dialog.selectedFiles()) if dialog.exec() else []


def ask_directory(parent: QWidget | None, caption: str, directory: str = "") -> str | None:
    """A folder chosen by the user (``None`` when cancelled)."""
    dialog = file_dialog(parent, caption, directory)
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    if not dialog.exec():
        return None
    files = dialog.selectedFiles()
    return files[0] if files else None


def ask_save_file(parent: QWidget | None, caption: str, directory: str = "", name_filter: str = "") -> str | None:
    """A file name to write (``None`` when cancelled)."""
    dialog = file_dialog(parent, caption, directory, name_filter)
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    if not dialog.exec():
        return None
    files = dialog.selectedFiles()
    return files[0] if files else None
