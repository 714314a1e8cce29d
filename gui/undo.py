"""Undoable edits (STYLE.md 6): pin, exclude, hide, message text, delete, settings, lorebook entries,
compaction summaries.

Each command applies its change through :class:`~gui.document.ChatDocument`, which saves to the
library and triggers the debounced preview. Redo/undo are symmetric: they set an explicit
value, never toggle, so replaying a stack is idempotent.

The undo stack outlives a chat switch: a command made in another chat first reopens that chat
(``ChatDocument.ensure_open``), so the writer sees what is undone. Lorebook entries belong to
the library (shared by chats), so their edits undo in whichever chat is open.
"""

from __future__ import annotations

import time

from PySide6.QtGui import QUndoCommand

from engine.compaction.state import CompactionSummary
from engine.schema import ChatMessage, ContextSettings, LorebookEntry

from .document import ChatDocument

#: Settings edits closer together than this (seconds) undo as one step (a spin box's steps).
SETTINGS_MERGE_S = 1.5
_SETTINGS_COMMAND_ID = 16


class SetMessageFlagCommand(QUndoCommand):
    """Set ``pinned``, ``manual_excluded`` or ``hidden`` of one message (``flag`` is the keyword name)."""

    def __init__(self, document: ChatDocument, index: int, flag: str, value: bool) -> None:
        if flag not in ("pinned", "manual_excluded", "hidden"):
            raise ValueError(f"unknown message flag {flag!r}")
        self._old = document.message_flag(index, flag)
        verb = {("pinned", True): "Pin", ("pinned", False): "Unpin",
                ("manual_excluded", True): "Exclude", ("manual_excluded", False): "Include",
                ("hidden", True): "Hide", ("hidden", False): "Unhide"}[(flag, value)]
        super().__init__(f"{verb} message {index}")
        self._document = document
        self._chat_id = document.chat_id
        self._index = index
        self._flag = flag
        self._value = value

    def _apply(self, value: bool) -> None:
        if not self._document.ensure_open(self._chat_id):
            return  # an in-memory chat that is gone: nothing to change
        self._document.set_message_flags(self._index, **{self._flag: value})

    def redo(self) -> None:
        self._apply(self._value)

    def undo(self) -> None:
        self._apply(self._old)


class EditLorebookEntryCommand(QUndoCommand):
    """Replace one lorebook entry (matched by ``uid``) with a new version."""

    def __init__(self, document: ChatDocument, lorebook_id: str, old: LorebookEntry,
                 new: LorebookEntry) -> None:
        label = new.comment or (new.keys[0] if new.keys else str(new.uid))
        super().__init__(f"Edit lorebook entry {label!r}")
        self._document = document
        self._lorebook_id = lorebook_id
        self._old = old
        self._new = new

    def redo(self) -> None:
        self._document.update_lorebook_entry(self._lorebook_id, self._new)

    def undo(self) -> None:
        self._document.update_lorebook_entry(self._lorebook_id, self._old)


class SetSettingsCommand(QUndoCommand):
    """Replace the chat's context settings (the Settings tab; exclusions switching to ``manual``).

    With ``merge``, consecutive edits of the same chat less than :data:`SETTINGS_MERGE_S` apart
    become one undo step (every step of a spin box is an edit).
    """

    def __init__(self, document: ChatDocument, new: ContextSettings, label: str = "Change settings",
                 *, merge: bool = False) -> None:
        super().__init__(label)
        assert document.request is not None
        self._document = document
        self._chat_id = document.chat_id
        self._old = document.request.settings
        self._new = new
        self._merge = merge
        self._at = time.monotonic()

    def id(self) -> int:
        return _SETTINGS_COMMAND_ID if self._merge else -1

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, SetSettingsCommand) or not other._merge or other._chat_id != self._chat_id \
                or other._at - self._at > SETTINGS_MERGE_S:
            return False
        self._new = other._new
        self._at = other._at
        return True

    def redo(self) -> None:
        if self._document.ensure_open(self._chat_id):
            self._document.set_settings(self._new)

    def undo(self) -> None:
        if self._document.ensure_open(self._chat_id):
            self._document.set_settings(self._old)


class EditMessageCommand(QUndoCommand):
    """Replace one message (its text edited in the chat view)."""

    def __init__(self, document: ChatDocument, index: int, new: ChatMessage) -> None:
        super().__init__(f"Edit message {index}")
        self._document = document
        self._chat_id = document.chat_id
        self._index = index
        self._old = document.messages()[index]
        self._new = new

    def redo(self) -> None:
        if self._document.ensure_open(self._chat_id):
            self._document.replace_message(self._index, self._new)

    def undo(self) -> None:
        if self._document.ensure_open(self._chat_id):
            self._document.replace_message(self._index, self._old)


class DeleteMessageCommand(QUndoCommand):
    """Delete one message; undo puts it back in its place with its flags."""

    def __init__(self, document: ChatDocument, index: int) -> None:
        super().__init__(f"Delete message {index}")
        self._document = document
        self._chat_id = document.chat_id
        self._index = index
        self._message = document.messages()[index]

    def redo(self) -> None:
        if self._document.ensure_open(self._chat_id):
            self._document.delete_message(self._index)

    def undo(self) -> None:
        if self._document.ensure_open(self._chat_id):
            self._document.insert_message(self._index, self._message)


class CompactionSummaryCommand(QUndoCommand):
    """A compaction summary coming or going, undoable.

    ``present=True`` ("Compact messages #a–#b", pushed after a generation compacted): redo keeps
    the summary, undo removes it (the messages are sent verbatim again). ``present=False``
    ("Remove summary of messages #a–#b"): redo removes it, undo restores it.
    """

    def __init__(self, document: ChatDocument, summary: CompactionSummary, *, present: bool) -> None:
        first, last = summary.first, summary.last
        super().__init__(f"Compact messages #{first}–#{last}" if present
                         else f"Remove summary of messages #{first}–#{last}")
        self._document = document
        self._chat_id = document.chat_id
        self._summary = summary
        self._present = present

    def _set(self, present: bool) -> None:
        if not self._document.ensure_open(self._chat_id):
            return  # the chat is gone
        current = self._document.compaction_summary()
        if present and (current is None or current.id != self._summary.id):
            self._document.restore_compaction_summary(self._summary)
        elif not present and current is not None and current.id == self._summary.id:
            self._document.remove_compaction_summary()

    def redo(self) -> None:
        self._set(self._present)

    def undo(self) -> None:
        self._set(not self._present)
