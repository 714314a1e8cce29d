"""The main window's library actions: import files, delete and branch chats (split from
:mod:`gui.main_window`).

Each goes through the window's command runner (:class:`gui.commands.CommandRunner`): an engine
error is shown once, under the action's title, and the action reports that nothing happened.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import LoomscopeError

from .errors import UserError, user_error

if TYPE_CHECKING:
    from engine.storage import ImportRef

    from .window_parts import LibraryWindow


def import_error(exc: LoomscopeError, paths: list[str]) -> UserError:
    """What a failed import of ``paths`` says: the file at fault (else every file) and that nothing was imported."""
    err = user_error(exc)
    name = Path(exc.file).name if exc.file else ", ".join(Path(p).name for p in paths)
    return UserError(err.code, f"Could not import {name}: {err.text}\nNothing was imported.", exc.file, exc.place)


class LibraryActions:
    """Import, delete and branch: the library writes the window starts.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.LibraryWindow`): its context, command runner,
        library panel and setup, ``confirm`` (read at each use: tests replace it), chat opening
        and status bar.
    """

    def __init__(self, window: LibraryWindow) -> None:
        self._window = window

    def import_files(self, paths: list[str]) -> list[ImportRef]:
        """Import ``paths`` in one transaction; a bad file imports nothing and says which and why."""
        w = self._window
        store = w.ctx.store
        if store is None or not paths:
            return []
        imported = w.commands.do("Import failed", store.imports.files, paths,
                                 describe=lambda exc: import_error(exc, paths))
        if not imported.ok or imported.value is None:
            return []
        refs = imported.value
        w.refresh_library()
        chats = [r for r in refs if r.kind == "chat"]
        w.statusBar().showMessage("Imported " + ", ".join(f"{r.kind} “{r.name}”" for r in refs), 8000)
        if chats:
            w.open_chat(chats[-1].id)
        w.library_setup.after_import(refs)
        return refs

    def delete_chat(self, chat_id: str | None) -> bool:
        """Delete ``chat_id`` after confirmation (its audit goes with it); ``True`` when deleted."""
        w = self._window
        store, doc = w.ctx.store, w.ctx.document
        if store is None or not chat_id:
            return False
        title = next((c.title for c in store.chats.summaries() if c.id == chat_id), chat_id)
        if not w.confirm("Delete chat", f"Delete “{title}” and its audit? This cannot be undone."):
            return False
        if not w.commands.do("Delete chat", store.chats.delete, chat_id).ok:
            return False
        # a deleted chat cannot come back (the dialog said so): its commands go with it
        w.commands.forget_history()
        if doc.chat_id == chat_id:
            doc.load_chat(None)
        w.refresh_library()
        ids = w.library.chat_ids()
        if ids and doc.chat_id is None:
            w.open_chat(ids[0])
        return True

    def branch_chat(self, message_index: int) -> str | None:
        """Fork the open chat at ``message_index`` and open the branch; returns its id (``None``: nothing done)."""
        w = self._window
        store, doc = w.ctx.store, w.ctx.document
        if store is None or doc.chat_id is None:
            return None
        branched = w.commands.do("Branch", store.chats.branch, doc.chat_id, message_index)
        if not branched.ok or branched.value is None:
            return None
        new_id = branched.value
        w.refresh_library()
        w.open_chat(new_id)
        w.statusBar().showMessage(f"Branched at message {message_index}", 6000)
        return new_id
