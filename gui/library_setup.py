"""Wires the library panels, the prompt setup editor and the full entry editor into the window
(issue 18), and adds *File → Open SillyTavern folder…* and *File → Export…*.

Kept apart from :mod:`gui.main_window` so the window only has to build one
:class:`LibrarySetup`. Every chat-setup change is an undo command (:mod:`gui.setup_commands`)
pushed on the window's stack; library renames and deletes ask first and are not undoable.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog, QMenu, QMessageBox, QProgressDialog

from engine.commands.exporting import plan_export, write_export
from engine.errors import LoomscopeError, StorageError
from engine.importers.warning_groups import group_warnings
from engine.lorebook import running_timers
from engine.st_sync import last_synced_folder, note_export

from .errors import UserError, message_for, user_error
from .file_dialogs import ask_directory
from .folder_import import run_folder_import
from .setup_commands import (
    AddLorebookEntryCommand,
    DeleteLorebookEntryCommand,
    EditPersonaCommand,
    SetChatCharacterCommand,
    SetChatSetupCommand,
    SetupState,
)
from .widgets.entry_editor import EntryEditor
from .widgets.library_tabs import TITLES, LibraryTabs
from .widgets.prompt_setup import PromptSetupPanel

if TYPE_CHECKING:
    from engine.schema import ContextPreview, LorebookEntry, Persona
    from engine.storage import FolderImportReport, ImportRef, Store

    from .window_parts import SetupWindow

KIND_WORDS = {"character": "Character", "lorebook": "Lorebook", "persona": "Persona", "chat": "Chat"}


def export_exists_text(exc: LoomscopeError) -> str:
    """What the overwrite question says about ``EXPORT_TARGET_EXISTS``: the mapped message and
    the file (never ``str(exc)``)."""
    err = user_error(exc)
    return err.text + (f"\nFile: {err.file}" if err.file else "")


class LibrarySetup(QObject):
    """The library panels, setup editor and entry editor of one :class:`~gui.main_window.MainWindow`
    (seen as a :class:`~gui.window_parts.SetupWindow`).

    Attributes: ``tabs`` (:class:`LibraryTabs`), ``setup_panel`` (:class:`PromptSetupPanel`,
    inspector tab "Setup"), ``entry_editor`` (:class:`EntryEditor`, the Lorebook tab's "All
    fields"), ``last_report`` (the last folder import's ``FolderImportReport``). ``ask_text``,
    ``ask_directory`` may be replaced in tests.
    """

    def __init__(self, window: SetupWindow) -> None:
        owner = window.window()  # the window itself: the Qt parent of the panels and actions
        super().__init__(owner)
        self.window = window
        self.ctx = window.ctx
        self.last_report: FolderImportReport | None = None
        self._select_after: tuple[str, int | str] | None = None
        self.ask_text = self._ask_text
        self.ask_directory = self._ask_directory
        self.ask_conflicts = self._ask_conflicts

        self.tabs = LibraryTabs()
        sizes = window.splitter.sizes()
        window.splitter.replaceWidget(window.splitter.indexOf(window.library), self.tabs)
        self.tabs.set_chats_panel(window.library)
        window.library.show()
        window.splitter.setSizes(sizes)
        window.splitter.setCollapsible(0, False)
        self.setup_panel = PromptSetupPanel(owner)
        window.inspector_tabs.addTab(self.setup_panel, "Setup")
        self.entry_editor = EntryEditor(owner)
        window.lorebook_tab.bottom_tabs.addTab(self.entry_editor, "All fields")

        self.open_folder_action = QAction("Open SillyTavern &folder…", owner)
        self.open_folder_action.setShortcut("Ctrl+Shift+O")
        self.open_folder_action.triggered.connect(self._on_open_folder)
        self.reload_folder_action = QAction("&Reload SillyTavern folder", owner)
        self.reload_folder_action.setShortcut("Ctrl+Shift+R")
        self.reload_folder_action.setStatusTip("Bring in what changed in the SillyTavern folder imported last")
        self.reload_folder_action.triggered.connect(lambda: self.reload_folder())
        self.export_action = QAction("&Export chat…", owner)
        self.export_action.setShortcut("Ctrl+E")
        self.export_action.triggered.connect(lambda: self.export([self.ctx.document.chat_id or ""]))
        file_menu = window.menuBar().actions()[0].menu()
        assert isinstance(file_menu, QMenu)  # the window's first menu is File (QAction.menu() is typed QObject)
        after_first = file_menu.actions()[1:2]  # the new actions go right after the first one
        for action in (self.open_folder_action, self.reload_folder_action, self.export_action):
            if after_first:
                file_menu.insertAction(after_first[0], action)
            else:
                file_menu.addAction(action)

        self.setup_panel.setup_edited.connect(self.edit_setup)
        self.setup_panel.persona_edited.connect(self.edit_persona)
        self.entry_editor.entry_applied.connect(window.edit_lorebook_entry)
        self.entry_editor.new_requested.connect(lambda book: self.add_entry(book))
        self.entry_editor.duplicate_requested.connect(lambda book, uid: self.add_entry(book, uid))
        self.entry_editor.delete_requested.connect(self.delete_entry)
        window.lorebook_tab.table.selectionModel().currentRowChanged.connect(lambda *_: self._load_entry())
        window.preview_applied.connect(self._on_preview_applied)
        doc = self.ctx.document
        doc.setup_changed.connect(self.refresh_setup)  # not on message edits: a toggle stays cheap
        for panel in self.tabs.panels.values():
            panel.current_changed.connect(self._on_current_changed)
            panel.rename_requested.connect(self.rename)
            panel.delete_requested.connect(self.delete)
            panel.export_requested.connect(lambda _k, obj_id: self.export([obj_id]))
            panel.action_requested.connect(self._on_action)
            panel.use_requested.connect(lambda _k, obj_id: self.use_character(obj_id))
        self.refresh_library()

    # ================================================================ library panels
    @property
    def store(self) -> Store | None:
        return self.ctx.store

    def _library(self) -> Store:
        """The library; raises ``STORAGE_ERROR`` when the window runs without one (an in-memory
        chat), which :meth:`~gui.commands.Commands.do` shows instead of crashing."""
        store = self.ctx.store
        if store is None:
            raise StorageError("STORAGE_ERROR", "no library is open (the window shows an in-memory chat)")
        return store

    def refresh_library(self) -> None:
        """Re-read characters, lorebooks and personas from the store."""
        store = self.store
        if store is None:
            return
        listed = self.window.commands.do(
            "Library", lambda: (store.characters.summaries(), store.lorebooks.summaries(), store.personas.summaries()))
        if listed.value is None:
            return
        chars, books, personas = listed.value
        owner = {c.id: c.name for c in chars}
        self.tabs.panels["character"].set_items(
            [(c.id, c.name, "card book" if c.lorebook_id else "") for c in chars])
        self.tabs.panels["lorebook"].set_items(
            [(b.id, b.name, f"{b.entries} entr{'y' if b.entries == 1 else 'ies'}" + (f" · in {owner.get(b.character_id, 'a')} card"
                                                      if b.character_id else "")) for b in books])
        self.tabs.panels["persona"].set_items([(p.id, p.name, "") for p in personas])

    def usage_text(self, kind: str, obj_id: str) -> str:
        """"Used by …" for the library panel (chat titles with how each uses the object)."""
        try:
            uses = self._library().chats.where_used(kind, obj_id)
        except LoomscopeError as exc:
            return f"Used by: ? ({exc.code})"
        if not uses:
            return "Used by no chat."
        shown = ", ".join(f"“{u.title}” ({u.how})" for u in uses[:6])
        more = f" and {len(uses) - 6} more" if len(uses) > 6 else ""
        return f"Used by {len(uses)} chat{'s' if len(uses) != 1 else ''}: {shown}{more}"

    def _on_current_changed(self, kind: str, obj_id: str) -> None:
        self.tabs.panels[kind].set_usage(self.usage_text(kind, obj_id))

    def _name(self, kind: str, obj_id: str) -> str:
        try:
            if kind == "character":
                return self._library().characters.get(obj_id).name
            if kind == "lorebook":
                return self._library().lorebooks.get(obj_id).name
            if kind == "persona":
                return self._library().personas.get(obj_id).name
        except LoomscopeError:
            pass
        return obj_id

    def rename(self, kind: str, obj_id: str, name: str | None = None) -> bool:
        """Rename a library object (asks for the name when ``name`` is ``None``)."""
        old = self._name(kind, obj_id)
        if name is None:
            name = self.ask_text(f"Rename {kind}", f"New name for “{old}”:", old)
        if not name or not name.strip() or name.strip() == old:
            return False
        new_name = name.strip()

        def rename_it() -> object:
            store = self._library()
            fn = {"character": store.characters.rename, "lorebook": store.lorebooks.rename,
                  "persona": store.personas.rename}[kind]
            return fn(obj_id, new_name)

        if not self.window.commands.do(f"Rename {kind}", rename_it).ok:
            return False
        self._after_library_change(kind, obj_id)
        return True

    def delete(self, kind: str, obj_id: str) -> bool:
        """Delete a library object after confirmation naming the chats that use it."""
        name = self._name(kind, obj_id)
        usage = self.usage_text(kind, obj_id)
        effect = {"character": "Its chats stay, without a character; its card book goes with it.",
                  "lorebook": "It is detached from every chat.",
                  "persona": "Its chats stay, without a persona."}[kind]
        if not self.window.confirm(f"Delete {kind}", f"Delete {kind} “{name}”? {usage}\n{effect}\n"
                                   "This cannot be undone."):
            return False
        def delete_it() -> object:
            store = self._library()
            fn = {"character": store.characters.delete, "lorebook": store.lorebooks.delete,
                  "persona": store.personas.delete}[kind]
            return fn(obj_id)

        if not self.window.commands.do(f"Delete {kind}", delete_it).ok:
            return False
        self.window.commands.forget_history()  # setup commands may name the deleted object
        self._after_library_change(kind, None)
        self.window.statusBar().showMessage(f"Deleted {kind} “{name}”", 8000)
        return True

    def _after_library_change(self, kind: str, obj_id: str | None) -> None:
        self.refresh_library()
        self.window.refresh_library()
        if obj_id:
            self.tabs.panels[kind].select(obj_id)
        self.ctx.document.reload()
        self.refresh_setup()

    def _on_action(self, kind: str, obj_id: str) -> None:
        if kind == "character":
            self.new_chat(obj_id)
        elif kind == "lorebook":
            self.setup_panel.attach(obj_id, "chat")
        elif kind == "persona":
            self.setup_panel.pick_persona(obj_id)

    def use_character(self, character_id: str) -> bool:
        """Make ``character_id`` the open chat's character (undoable): a chat without one gets one.

        A chat from a SillyTavern folder keeps its card's fields as SillyTavern reads them; the
        new character replaces the card in the preview (issue 31).
        """
        doc = self.ctx.document
        store = self.store
        if doc.chat_id is None or store is None:
            self.window.statusBar().showMessage("Open a chat first", 5000)
            return False
        old = store.chats.get_setup(doc.chat_id).character_id
        if old == character_id:
            return False
        name = store.characters.get(character_id).name
        return self.window.commands.push("Use character", SetChatCharacterCommand(
            doc, store, doc.chat_id, old, character_id, name)).ok

    def new_chat(self, character_id: str) -> str | None:
        """Start a chat with the character (its first message, the open chat's persona) and open it."""
        state = self.setup_panel.state
        created = self.window.commands.do(
            "New chat", lambda: self._library().chats.new_for_character(
                character_id, persona_id=state.persona_id if state is not None else None))
        chat_id = created.value
        if chat_id is None:
            return None
        self.window.refresh_library()
        self.window.open_chat(chat_id)
        self.tabs.show_kind("chat")
        self.window.statusBar().showMessage(f"New chat with “{self._name('character', character_id)}”", 8000)
        return chat_id

    # ================================================================ setup editor
    def current_state(self) -> SetupState | None:
        """The open chat's setup as stored (``None`` without a library chat)."""
        doc = self.ctx.document
        if self.store is None or not doc.chat_id:
            return None
        return SetupState.load(self.store, doc.chat_id)

    def refresh_setup(self) -> None:
        """Show the open chat's setup in the Setup tab and its books in the entry editor."""
        self.window.commands.do("Setup", self._show_setup)

    def _show_setup(self) -> None:
        state = self.current_state()
        if state is None:
            self.setup_panel.set_state(None)
            self.entry_editor.set_books([])
            return
        store = self._library()
        persona = store.personas.get(state.persona_id) if state.persona_id else None
        # read with the chat (gui.document.read_chat): no second load of its messages here
        card_book = self.ctx.document.card_book_name if state.sillytavern is None else None
        self.setup_panel.set_state(state, store.lorebooks.summaries(), store.personas.summaries(), persona, card_book)
        books = store.lorebooks.summaries(self.ctx.document.chat_id)
        ids = set(self.ctx.document.lorebook_ids)
        self.entry_editor.set_books([(b.id, b.name) for b in books if b.id in ids])

    def edit_setup(self, new: SetupState, label: str) -> bool:
        """Push the setup change (undoable; saved at once)."""
        old = self.current_state()
        if old is None or old.chat_id != new.chat_id or old == new:
            return False
        if not self.window.commands.push(
                "Setup", lambda: SetChatSetupCommand(self.ctx.document, self._library(), old, new, label)).ok:
            self.refresh_setup()
            return False
        self.window.statusBar().showMessage(f"{label} (Ctrl+Z undoes it)", 6000)
        return True

    def edit_persona(self, persona_id: str, new: Persona) -> bool:
        """Change the library persona's name / description (undoable)."""
        def command() -> EditPersonaCommand:
            store = self._library()
            return EditPersonaCommand(self.ctx.document, store, persona_id, store.personas.get(persona_id), new)

        if not self.window.commands.push("Persona", command).ok:
            return False
        self.refresh_library()
        return True

    # ================================================================ entries
    def add_entry(self, lorebook_id: str, source_uid: int | str | None = None) -> LorebookEntry | None:
        """A new (or duplicated) entry in ``lorebook_id`` (undoable); it is selected once shown."""
        pushed = self.window.commands.push(
            "Lorebook", lambda: AddLorebookEntryCommand(self.ctx.document, self._library(), lorebook_id, source_uid))
        if pushed.value is None:
            return None
        cmd = pushed.value[0]
        assert isinstance(cmd, AddLorebookEntryCommand)
        if cmd.entry is not None:
            self._select_after = (lorebook_id, cmd.entry.uid)
        return cmd.entry

    def delete_entry(self, lorebook_id: str, uid: int | str) -> bool:
        """Delete entry ``uid`` (undoable: Ctrl+Z puts it back)."""
        if not self.window.commands.push(
                "Lorebook", lambda: DeleteLorebookEntryCommand(self.ctx.document, self._library(), lorebook_id, uid)).ok:
            return False
        self.window.statusBar().showMessage("Entry deleted (Ctrl+Z restores it)", 6000)
        return True

    def _load_entry(self) -> None:
        tab = self.window.lorebook_tab
        idx = tab.table.currentIndex()
        if not idx.isValid():
            self.entry_editor.load(None, None)
            return
        row = tab.model.row_at(tab.proxy.mapToSource(idx).row())
        request = self.ctx.document.request
        timers = running_timers(request.chat.metadata if request is not None else None, row.book_name, row.entry.uid)
        self.entry_editor.load(row.lorebook_id, row.entry, editable=row.editable,
                               where=f"<b>{row.book_name}</b> · entry {row.entry.uid}"
                               + ("" if row.editable else " (read-only here)"), timers=timers)

    def _on_preview_applied(self, _preview: ContextPreview | None) -> None:
        if self._select_after is not None:
            book_id, uid = self._select_after
            ids = list(self.ctx.document.lorebook_ids)
            if book_id in ids:
                self.window.lorebook_tab.select_entry(ids.index(book_id), uid)
            self._select_after = None
        self._load_entry()

    # ================================================================ import / export
    def _on_open_folder(self) -> None:
        folder = self.ask_directory("Open SillyTavern folder (data/<user> or data/)")
        if folder:
            self.import_folder(folder)

    def reload_folder(self, folder: str | Path | None = None) -> FolderImportReport | None:
        """*File → Reload SillyTavern folder*: import the folder imported last again (only what changed).

        Conflicts (changed in the folder and edited here) are asked about: keep mine, use the folder's, or later.
        """
        if self.store is None:
            return None
        folder = folder or last_synced_folder(self.store)
        if folder is None:
            self.window.statusBar().showMessage("No SillyTavern folder imported yet: File → Open SillyTavern folder…",
                                                10000)
            return None
        report = self.import_folder(folder)
        open_conflicts = [c for c in report.conflicts if c.resolution == "unresolved"] if report else []
        if open_conflicts:
            choice = self.ask_conflicts(open_conflicts)
            if choice in ("keep-local", "use-folder"):
                report = self.import_folder(folder, on_conflict=choice)
        return report

    def _ask_conflicts(self, conflicts: list[Any]) -> str:
        """Ask what to do with objects changed both in the folder and here: ``keep-local``, ``use-folder`` or ``ask``."""
        names = "\n".join(f"• {c.name} ({c.key})" for c in conflicts[:12])
        box = QMessageBox(QMessageBox.Icon.Question, "Changed in both places",
                          f"{len(conflicts)} item(s) changed in the SillyTavern folder and were edited here since the "
                          "last import. Your edits are kept until you choose.", QMessageBox.StandardButton.NoButton,
                          self.window.window())
        box.setInformativeText(names)
        mine = box.addButton("Keep my edits", QMessageBox.ButtonRole.AcceptRole)
        theirs = box.addButton("Use the folder's version", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton("Decide later", QMessageBox.ButtonRole.RejectRole)
        box.exec()
        return "keep-local" if box.clickedButton() is mine else "use-folder" if box.clickedButton() is theirs else "ask"

    def import_folder(self, folder: str | Path, *, st_user: str | None = None,
                      on_conflict: str = "ask") -> FolderImportReport | None:
        """Import a SillyTavern folder with a progress dialog, then show what was added / changed /
        unchanged / skipped. Returns the ``FolderImportReport`` (``None`` on error: nothing imported)."""
        if self.store is None:
            return None
        progress = QProgressDialog("Reading the SillyTavern folder…", "", 0, 0, self.window.window())
        progress.setWindowTitle("Import")
        progress.setCancelButton(None)
        progress.setWindowModality(Qt.WindowModality.WindowModal)
        progress.setMinimumDuration(300)

        def on_progress(stage: str, done: int, total: int) -> None:
            what = "Reading files" if stage == "read" else "Storing in the library"
            progress.setLabelText(f"{what}: {done:,} of {total:,}")
            progress.setMaximum(total)
            progress.setValue(done)

        report, err = run_folder_import(self.store, folder, st_user=st_user, on_progress=on_progress,
                                        on_conflict=on_conflict)
        progress.close()
        progress.deleteLater()
        if err is not None or report is None:
            err = err or UserError("INTERNAL_ERROR", message_for("INTERNAL_ERROR"))
            self.window.show_error(UserError(err.code, f"Could not import {Path(folder).name}: {err.text}\n"
                                             "Nothing was imported.", err.file, err.place), "Import failed")
            return None
        self.last_report = report
        self.window.refresh_library()
        self.refresh_library()
        self.ctx.document.reload()
        text = self.report_text(report)
        box = QMessageBox(QMessageBox.Icon.Information, "Import finished", text.split("\n", 1)[0],
                          QMessageBox.StandardButton.Ok, self.window.window())
        box.setInformativeText(text.split("\n", 1)[1] if "\n" in text else "")
        box.setObjectName("importSummary")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setWindowModality(Qt.WindowModality.NonModal)  # the library stays usable while it is up
        box.show()
        self.summary_box = box
        self.window.statusBar().showMessage(text.split("\n", 1)[0], 10000)
        chats = [r for r in report.added if r.kind == "chat"]
        if chats and not self.ctx.document.chat_id:
            self.window.open_chat(chats[0].id)
        return report

    @staticmethod
    def report_text(report: FolderImportReport) -> str:
        """The import summary: one headline, then what went where, by kind."""
        def count(refs: list[ImportRef]) -> str:
            by: dict[str, int] = {}
            for r in refs:
                by[r.kind] = by.get(r.kind, 0) + 1
            return ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in sorted(by.items())) or "nothing"

        lines = [f"Imported {report.folder}: {len(report.added)} added, {len(report.changed)} changed, "
                 f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped"
                 + (f", {len(report.conflicts)} changed in both places." if report.conflicts else "."),
                 f"Added: {count(report.added)} (Library → Chats, Characters, Lorebooks, Personas)",
                 f"Changed: {count(report.changed)}", f"Unchanged: {count(report.unchanged)}"]
        if report.files_changed is not None:
            lines.append(f"Files changed since the last import: {', '.join(report.files_changed[:10]) or 'none'}")
        for c in report.conflicts[:10]:
            lines.append(f"Changed in both places {c.key}: "
                         + {"unresolved": "your edits kept (choose on reload)", "kept-local": "your edits kept",
                            "used-folder": "replaced by the folder's version"}[c.resolution])
        for s in report.skipped[:10]:
            lines.append(f"Skipped {s.get('file')}: {s.get('message') or s.get('code')}")
        for folder in report.unreadable:
            lines.append(f"Could not read {folder.get('folder')}/: {folder.get('message')} (partial import)")
        # a message repeated for many files is one line with their count ("10,000 chats: …")
        for group in group_warnings((w.get("file", ""), w.get("message", "")) for w in report.warnings)[:10]:
            lines.append(f"Warning {group.line()}")
        return "\n".join(lines)

    def import_dropped(self, paths: list[str]) -> None:
        """A drop: folders import as SillyTavern folders, files as cards / worlds / chats."""
        folders = [p for p in paths if Path(p).is_dir()]
        files = [p for p in paths if not Path(p).is_dir()]
        for folder in folders:
            self.import_folder(folder)
        if files:
            self.window.import_files(files)

    def after_import(self, refs: list[ImportRef]) -> None:
        """Say where an imported card / world / persona went when no chat came with it."""
        self.refresh_library()
        if not refs or any(r.kind == "chat" for r in refs):
            return
        last = refs[-1]
        if last.kind in self.tabs.panels:
            self.tabs.show_kind(last.kind)
            self.tabs.panels[last.kind].select(last.id)
            self.window.statusBar().showMessage(
                f"{KIND_WORDS[last.kind]} “{last.name}” is in Library → {TITLES[last.kind]}"
                + (" — attach it to a chat from there or the Setup tab" if last.kind == "lorebook" else ""), 12000)

    def export(self, ids: list[str], folder: str | None = None) -> list[str]:
        """Export chats / lorebooks / characters (library ids) into a SillyTavern-shaped folder;
        asks before overwriting. Returns the files written."""
        ids = [i for i in ids if i]
        if self.store is None or not ids:
            return []
        folder = folder or self.ask_directory("Export into folder")
        if not folder:
            return []
        warnings: list[dict[str, str]] = []

        def run() -> list[Any]:
            items = plan_export(self.store, ids, warnings)
            try:
                write_export(items, folder)
            except LoomscopeError as exc:
                if exc.code != "EXPORT_TARGET_EXISTS" or not self.window.confirm(
                        "Export", f"{export_exists_text(exc)}\nOverwrite the existing files? (An existing "
                        "settings.json is merged key by key, never replaced.)"):
                    raise
                write_export(items, folder, force=True, merge=True)
            note_export(self.store, folder, items)  # back into a folder kept in step: no false conflicts
            return items

        exported = self.window.commands.do("Export", run)
        if exported.value is None:
            return []
        items = exported.value
        files = [str(Path(folder) / it["file"]) for it in items]
        note = f" — {warnings[0]['message']}" if warnings else ""  # e.g. a chat whose character was deleted
        self.window.statusBar().showMessage(f"Exported {len(files)} file(s) to {folder}{note}", 10000)
        return files

    # ================================================================ dialogs
    def _ask_text(self, title: str, label: str, default: str) -> str | None:
        text, ok = QInputDialog.getText(self.window.window(), title, label, text=default)
        return text if ok else None

    def _ask_directory(self, title: str) -> str | None:
        return ask_directory(self.window.window(), title)
