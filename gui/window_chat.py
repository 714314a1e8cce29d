"""The main window's chat opening: the library list, reading a chat on a worker, and the views of a
chat just opened (split from :mod:`gui.main_window`).

A chat is read on a worker (:class:`~gui.preview.loader.ChatLoader`): the window closes the current
chat at once, shows the new title and stays responsive while the messages load; the document
takes the chat when it arrives (only the latest request counts), and its first preview follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.schema.audit import PromptContextAudit

    from .document import LoadedChat
    from .errors import UserError
    from .preview.loader import ChatLoader
    from .window_parts import OpenerWindow

#: The ``QSettings`` key of the chat opened last (the next start opens it again).
LAST_CHAT_KEY = "library/last_chat"


class ChatOpener:
    """Opens chats from the library for one window.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.OpenerWindow`): its context, command runner, library
        panel, header labels, the views a chat just opened resets, its preview presenter, the
        audit it shows, errors and its title.
    loader:
        Reads chats on a worker; ``None`` without a library (chats then open on the UI thread).
    """

    def __init__(self, window: OpenerWindow, loader: ChatLoader | None) -> None:
        self._window = window
        self.loader = loader
        #: Chat titles by id from the library list (a chat being opened shows its title at once).
        self._chat_titles: dict[str, str] = {}
        #: ``(chat id, audit)`` read with the chat on the loader's worker, while the document takes it.
        self._loaded_audit: tuple[str, PromptContextAudit | None] | None = None
        if loader is not None:
            loader.loaded.connect(self.loaded)
            loader.failed.connect(self.failed)

    def refresh_library(self) -> None:
        """Re-read the chat list from the store."""
        w = self._window
        if w.ctx.store is None:
            return
        chats = w.commands.do("Library", w.ctx.store.chats.summaries)
        if not chats.ok or chats.value is None:
            return
        self._chat_titles = {c.id: c.title for c in chats.value}
        opening = self.loader.pending_chat() if self.loader is not None else None
        w.library.set_chats(chats.value, current=opening or w.ctx.document.chat_id)
        setup = getattr(w, "library_setup", None)  # built after the window's parts
        if setup is not None:
            setup.refresh_library()

    def start(self, chat_id: str | None = None) -> None:
        """Fill the library and open ``chat_id`` (else the last chat, else the most recent)."""
        w = self._window
        self.refresh_library()
        ids = w.library.chat_ids()
        wanted = chat_id or str(w.ctx.settings.value(LAST_CHAT_KEY, "") or "")
        if wanted and wanted in ids:
            self.open_chat(wanted)
        elif chat_id:
            self.open_chat(chat_id)  # not listed: shows CHAT_NOT_FOUND
        elif ids:
            self.open_chat(ids[0])

    def open_chat(self, chat_id: str | None) -> None:
        """Open ``chat_id`` (from the store); the preview follows. ``None`` closes the chat."""
        w = self._window
        doc = w.ctx.document
        opening = self.loader.pending_chat() if self.loader is not None else None
        if chat_id is not None and chat_id == (opening or doc.chat_id):
            return
        # the undo stack survives: its commands reopen their own chat when undone (gui/undo.py)
        if chat_id is None or self.loader is None:
            if self.loader is not None:
                self.loader.cancel()
            w.commands.do("Open chat", doc.load_chat, chat_id)
            return
        if doc.chat_id is not None:
            doc.load_chat(None)  # nothing can be edited in the old chat while the new one loads
        if w.ctx.gc_policy is not None:  # no collections over the growing heap while it loads
            w.ctx.gc_policy.hold(self.loader)
        self.loader.load(chat_id)
        title = self._chat_titles.get(chat_id, "")
        w.title_label.setText(title or "(opening…)")
        w.setWindowTitle(f"Loomscope — {title}" if title else "Loomscope")
        w.status_label.setText("opening chat…")
        w.library.select_chat(chat_id, emit=False)

    def is_loading(self) -> bool:
        """``True`` while a chat is being read on the worker."""
        return self.loader is not None and self.loader.is_busy()

    def loaded(self, loaded: LoadedChat) -> None:
        """The loader read a chat: the document takes it (:meth:`chat_loaded` follows)."""
        w = self._window
        if loaded.audit_read:
            self._loaded_audit = (loaded.chat_id, loaded.audit)
        try:
            w.ctx.document.apply_loaded(loaded)
        finally:
            self._loaded_audit = None
        w.library.select_chat(loaded.chat_id, emit=False)
        w.ctx.settings.setValue(LAST_CHAT_KEY, loaded.chat_id)

    def failed(self, chat_id: str, error: UserError) -> None:
        """The loader could not read ``chat_id``: say so (the header clears when no chat is open)."""
        w = self._window
        if w.ctx.document.chat_id is None:
            w.title_label.setText("(no chat)")
            w.setWindowTitle("Loomscope")
            w.status_label.clear()
        w.show_error(error, "Open chat")

    def chat_loaded(self, chat_id: str) -> None:
        """The document holds chat ``chat_id`` now (``""``: none): its title, library row, settings
        and audit; the preview presenter forgets another chat's preview."""
        w = self._window
        doc = w.ctx.document
        w.presenter.chat_opened(chat_id)
        if chat_id:
            w.library.select_chat(chat_id, emit=False)
        w.blocks_panel.table.clearSelection()
        w.blocks_panel.table.setCurrentIndex(w.blocks_panel.proxy.index(-1, -1))
        w.title_label.setText(doc.title or "(no chat)")
        w.setWindowTitle(f"Loomscope — {doc.title}" if doc.title else "Loomscope")
        w.audit = None
        if doc.request is not None:
            w.settings_panel.set_settings(doc.request.settings)
        if self._loaded_audit is not None and self._loaded_audit[0] == chat_id:
            w.audit = self._loaded_audit[1]  # read with the chat, on the loader's worker
        elif w.ctx.store is not None and chat_id:
            w.audit = w.commands.do("Audit", w.ctx.store.audits.get, chat_id).value
        w.chat_view.model.clear_finished_progress()
        w.audit_tab.set_state(w.audit, w.presenter.preview)
