"""The main window's edits of the open chat: pin, exclude, hide, edit, delete and send messages,
lorebook entry and settings edits (split from :mod:`gui.main_window`).

Each is an undo command on the document (STYLE.md 6), pushed through the window's command
runner (:class:`gui.commands.CommandRunner`), so a failed save is shown once and nothing changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.resolve import honours_exclusions
from engine.schema import ChatMessage, ContextSettings, LorebookEntry

from .undo import (
    DeleteMessageCommand,
    EditLorebookEntryCommand,
    EditMessageCommand,
    SetMessageFlagCommand,
    SetSettingsCommand,
)

if TYPE_CHECKING:
    from .window_parts import EditsWindow

#: The strategy that honours hand exclusions (SPEC §3).
MANUAL_STRATEGY = "manual"
#: Why Pin is off on a chat from a SillyTavern folder (issue 31).
ST_NO_PINNING = ("SillyTavern has no pinning: this chat is assembled exactly as SillyTavern sends it, "
                 "so a pin would change nothing")
#: How long the status bar keeps what an edit did (milliseconds).
EDIT_STATUS_MS = 8000


class ChatEdits:
    """The writer's edits of the open chat, each undoable and saved.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.EditsWindow`): its context, command runner,
        settings panel, chat view, ``ask_text`` (read at each use: tests replace it), library
        refresh and status bar.
    """

    def __init__(self, window: EditsWindow) -> None:
        self._window = window

    def _message_index_ok(self, message_index: int) -> bool:
        doc = self._window.ctx.document
        return doc.request is not None and 0 <= message_index < len(doc.messages())

    def _push_flag(self, message_index: int, flag: str, value: bool) -> None:
        if self._message_index_ok(message_index):
            doc = self._window.ctx.document
            self._window.commands.push("Save", SetMessageFlagCommand(doc, message_index, flag, value))

    def set_pinned(self, message_index: int, value: bool) -> None:
        """Pin / unpin a message (undoable, saved).

        A chat from a SillyTavern folder is assembled exactly as SillyTavern sends it, and
        SillyTavern has no pinning: pinning is refused there with the reason (unpinning a pin
        an earlier version stored still works).
        """
        request = self._window.ctx.document.request
        if value and request is not None and request.sillytavern is not None:
            self._window.statusBar().showMessage(ST_NO_PINNING, EDIT_STATUS_MS)
            return
        self._push_flag(message_index, "pinned", value)

    def _switches_to_manual(self, value: bool) -> bool:
        """Whether excluding (``value`` true) needs the chat switched to :data:`MANUAL_STRATEGY`.

        The pipeline's own rule (registry flag and the honor_manual option); an unknown strategy
        (the preview reports UNKNOWN_STRATEGY) is treated as not honouring exclusions.
        """
        req = self._window.ctx.document.request
        strategies = self._window.ctx.registries.strategies
        if not value or req is None or MANUAL_STRATEGY not in strategies:
            return False
        sillytavern = req.sillytavern is not None
        known = sillytavern or req.settings.strategy in strategies
        return not (known and honours_exclusions(req.settings, strategies, sillytavern=sillytavern))

    def set_excluded(self, message_index: int, value: bool) -> None:
        """Exclude / include a message by hand (undoable, saved).

        Hand exclusions take effect under every strategy whose registry entry says it honours
        them (``StrategyInfo.honors_manual``: manual, summarize, vector-recall, compact); excluding
        a message while a strategy that ignores them (truncate, or a plugin's) is active switches
        the chat to ``manual`` in the same undo step, so the writer sees the exclusion at once.
        """
        if not self._switches_to_manual(value):
            self._push_flag(message_index, "manual_excluded", value)
            return
        w = self._window
        doc = w.ctx.document
        req = doc.request
        if req is None or not self._message_index_ok(message_index):
            return
        pushed = w.commands.push(
            "Save",
            SetSettingsCommand(doc, req.settings.model_copy(update={"strategy": MANUAL_STRATEGY}),
                               "Switch to the manual strategy"),
            lambda: SetMessageFlagCommand(doc, message_index, "manual_excluded", value),
            macro=f"Exclude message {message_index}")
        if not pushed.ok or doc.request is None:
            return  # the error is shown; the strategy did not switch
        w.settings_panel.set_settings(doc.request.settings)
        w.statusBar().showMessage(
            f"Strategy switched to “{MANUAL_STRATEGY}” so hand exclusions apply (Ctrl+Z undoes both)", EDIT_STATUS_MS)

    def set_hidden(self, message_index: int, value: bool) -> None:
        """Hide / unhide a message (never sent while hidden, SillyTavern ``is_system``; undoable)."""
        self._push_flag(message_index, "hidden", value)

    def edit_message(self, message_index: int, text: str | None = None) -> bool:
        """Replace a message's text (undoable, saved). ``text`` ``None`` asks in a dialog.

        Returns ``True`` when the text changed.
        """
        if not self._message_index_ok(message_index):
            return False
        doc = self._window.ctx.document
        old = doc.messages()[message_index]
        if text is None:
            text = self._window.ask_text(f"Edit message {message_index}", old.text())
            if text is None:
                return False
        if text == old.text():
            return False
        new = old.model_copy(update={"content": text})
        return self._window.commands.push("Edit message", EditMessageCommand(doc, message_index, new)).ok

    def delete_message(self, message_index: int) -> bool:
        """Delete one message (undoable with Ctrl+Z, saved); ``True`` when deleted."""
        if not self._message_index_ok(message_index):
            return False
        w = self._window
        if not w.commands.push("Delete message", DeleteMessageCommand(w.ctx.document, message_index)).ok:
            return False
        w.refresh_library()
        w.statusBar().showMessage(f"Deleted message {message_index} (Ctrl+Z brings it back)", EDIT_STATUS_MS)
        return True

    def edit_lorebook_entry(self, lorebook_id: str, old: LorebookEntry, new: LorebookEntry) -> None:
        """A lorebook entry edit from the Lorebook tab (undoable, saved)."""
        doc = self._window.ctx.document
        self._window.commands.push("Lorebook", EditLorebookEntryCommand(doc, lorebook_id, old, new))

    def append_user_message(self, text: str) -> None:
        """The composer's Send: append a user message (then the chat shows its end)."""
        w = self._window
        doc = w.ctx.document
        if doc.request is None:
            return
        if not w.commands.do("Send", doc.append_message, ChatMessage(role="user", content=text)).ok:
            return
        w.refresh_library()
        w.chat_view.list.scrollToBottom()

    def edit_settings(self, settings: ContextSettings) -> None:
        """The settings panel's edit: undoable; a burst of edits (a spin box's steps) is one undo step."""
        doc = self._window.ctx.document
        if doc.request is None or settings == doc.request.settings:
            return
        self._window.commands.push("Settings", SetSettingsCommand(doc, settings, "Change settings", merge=True))
