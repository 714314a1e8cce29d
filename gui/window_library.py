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



class LibraryActionsMixin:
    """Import, delete and branch: the library writes the window starts."""

    def import_files(self, paths: list[str]) -> list[ImportRef]:
        """Import ``paths`` in one transaction; a bad file imports nothing and says which and why."""
        if self.ctx.store is None or not paths:
            return []
        def describe(exc: LoomscopeError) -> UserError:
            err = user_error(exc)
            name = Path(exc.file).name if exc.file else ", ".join(Path(p).name for p in paths)
            return UserError(err.code, f"Could not import {name}: {err.text}\nNothing was imported.",
                             exc.file, exc.place)

        imported = self.commands.do("Import failed", self.ctx.store.imports.files, paths, describe=describe)
        if not imported.ok or imported.value is None:
            return []
        refs = imported.value
        self.refresh_library()
        chats = [r for r in refs if r.kind == "chat"]
        self.statusBar().showMessage(
            "Imported " + ", ".join(f"{r.kind} “{r.name}”" for r in refs), 8000)
        if chats:
            self.open_chat(chats[-1].id)
        self.library_setup.after_import(refs)
        return refs

    def delete_chat(self, chat_id: str | None) -> bool:
        """Delete ``chat_id`` after confirmation (its audit goes with it)."""
        if self.ctx.store is None or not chat_id:
            return False
        title = next((c.title for c in self.ctx.store.chats.summaries() if c.id == chat_id), chat_id)
        if not self.confirm("Delete chat", f"Delete “{title}” and its audit? This cannot be undone."):
            return False
        if not self.commands.do("Delete chat", self.ctx.store.chats.delete, chat_id).ok:
            return False
        # a deleted chat cannot come back (the dialog said so): its commands go with it
        self.commands.forget_history()
        if self.ctx.document.chat_id == chat_id:
            self.ctx.document.load_chat(None)
        self.refresh_library()
        ids = self.library.chat_ids()
        if ids and self.ctx.document.chat_id is None:
            self.open_chat(ids[0])
        return True

    def branch_chat(self, message_index: int) -> str | None:
        """Fork the open chat at ``message_index`` and open the branch."""
        doc = self.ctx.document
        if self.ctx.store is None or doc.chat_id is None:
            return None
        branched = self.commands.do("Branch", self.ctx.store.chats.branch, doc.chat_id, message_index)
        if not branched.ok or branched.value is None:
            return None
        new_id = branched.value
        self.refresh_library()
        self.open_chat(new_id)
        self.statusBar().showMessage(f"Branched at message {message_index}", 6000)
        return new_id
