"""Undoable edits (STYLE.md 6): pin, manual exclude, lorebook entry edits, compaction summaries.

Each command applies its change through :class:`~gui.document.ChatDocument`, which saves to the
library and triggers the debounced preview. Redo/undo are symmetric: they set an explicit
value, never toggle, so replaying a stack is idempotent.
"""

from __future__ import annotations

from PySide6.QtGui import QUndoCommand

from engine.schema import ContextSettings, LorebookEntry

from .document import ChatDocument


class SetMessageFlagCommand(QUndoCommand):
    """Set ``pinned`` or ``manual_excluded`` of one message (``flag`` is the keyword name)."""

    def __init__(self, document: ChatDocument, index: int, flag: str, value: bool) -> None:
        if flag not in ("pinned", "manual_excluded"):
            raise ValueError(f"unknown message flag {flag!r}")
        pinned, excluded = document.message_flags(index)
        self._old = pinned if flag == "pinned" else excluded
        verb = {("pinned", True): "Pin", ("pinned", False): "Unpin",
                ("manual_excluded", True): "Exclude", ("manual_excluded", False): "Include"}[(flag, value)]
        super().__init__(f"{verb} message {index}")
        self._document = document
        self._chat_id = document.chat_id
        self._index = index
        self._flag = flag
        self._value = value

    def _apply(self, value: bool) -> None:
        if self._document.chat_id != self._chat_id:
            return  # another chat is open now; its library state is not ours to touch
        self._document.set_message_flags(self._index, **{self._flag: value})

    def redo(self) -> None:  # noqa: D102 - Qt override
        self._apply(self._value)

    def undo(self) -> None:  # noqa: D102 - Qt override
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

    def redo(self) -> None:  # noqa: D102 - Qt override
        self._document.update_lorebook_entry(self._lorebook_id, self._new)

    def undo(self) -> None:  # noqa: D102 - Qt override
        self._document.update_lorebook_entry(self._lorebook_id, self._old)


class SetSettingsCommand(QUndoCommand):
    """Replace the chat's context settings (used with exclusions: switching to ``manual``)."""

    def __init__(self, document: ChatDocument, new: ContextSettings, label: str = "Change settings") -> None:
        super().__init__(label)
        assert document.request is not None
        self._document = document
        self._chat_id = document.chat_id
        self._old = document.request.settings
        self._new = new

    def redo(self) -> None:  # noqa: D102 - Qt override
        if self._document.chat_id == self._chat_id:
            self._document.set_settings(self._new)

    def undo(self) -> None:  # noqa: D102 - Qt override
        if self._document.chat_id == self._chat_id:
            self._document.set_settings(self._old)


class CompactionSummaryCommand(QUndoCommand):
    """A compaction summary coming or going, undoable.

    ``present=True`` ("Compact messages #a–#b", pushed after a generation compacted): redo keeps
    the summary, undo removes it (the messages are sent verbatim again). ``present=False``
    ("Remove summary of messages #a–#b"): redo removes it, undo restores it.
    """

    def __init__(self, document: ChatDocument, summary: object, *, present: bool) -> None:
        first, last = getattr(summary, "first", "?"), getattr(summary, "last", "?")
        super().__init__(f"Compact messages #{first}–#{last}" if present
                         else f"Remove summary of messages #{first}–#{last}")
        self._document = document
        self._chat_id = document.chat_id
        self._summary = summary
        self._present = present

    def _set(self, present: bool) -> None:
        if self._document.chat_id != self._chat_id:
            return  # another chat is open now
        current = self._document.compaction_summary()
        if present and (current is None or current.id != self._summary.id):  # type: ignore[attr-defined]
            self._document.restore_compaction_summary(self._summary)
        elif not present and current is not None and current.id == self._summary.id:  # type: ignore[attr-defined]
            self._document.remove_compaction_summary()

    def redo(self) -> None:  # noqa: D102 - Qt override
        self._set(self._present)

    def undo(self) -> None:  # noqa: D102 - Qt override
        self._set(not self._present)
