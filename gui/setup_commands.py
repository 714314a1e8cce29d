"""Undoable edits of a chat's prompt setup and of the library (issue 18).

Every command writes through the :class:`~engine.storage.Store` first and then re-reads the open
chat (``ChatDocument.reload``) when it is the chat the command was made for, so the preview
follows. Redo/undo set explicit values (never toggle), so replaying a stack is idempotent; a
command made for one chat never touches another chat's state.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtGui import QUndoCommand

from engine.errors import NotFoundError
from engine.schema import ContextSettings, LorebookEntry, Persona
from engine.schema.sillytavern import SillyTavernSetup

if TYPE_CHECKING:
    from engine.storage import Store

    from .document import ChatDocument


@dataclass(frozen=True)
class SetupState:
    """What the setup editor edits for one chat.

    ``links``: ``(lorebook_id, scope)`` pairs in order (scope ``chat``, ``character`` or
    ``global``, SillyTavern ``getSortedEntries``); ``persona_id`` or ``None``; the context
    ``settings`` (model, context limit, reply reserve, World Info); the SillyTavern setup
    (Prompt Manager prompts and order, Author's Note, persona placement) or ``None`` for a chat
    assembled by the stage template.
    """

    chat_id: str
    settings: ContextSettings
    sillytavern: SillyTavernSetup | None
    links: tuple[tuple[str, str], ...] = ()
    persona_id: str | None = None
    names: dict[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def load(cls, store: Store, chat_id: str) -> SetupState:
        """Read the chat's setup from the library (``Store.chats.get_setup``)."""
        setup = store.chats.get_setup(chat_id)
        return cls(chat_id=chat_id, settings=setup.settings, sillytavern=setup.sillytavern,
                   links=tuple((link.lorebook_id, link.scope) for link in setup.lorebooks),
                   persona_id=setup.persona_id,
                   names={link.lorebook_id: link.name for link in setup.lorebooks})

    def replace(self, **update: Any) -> SetupState:
        """A copy with ``update`` applied (field names as keywords; an unknown name raises ``TypeError``)."""
        return dataclasses.replace(self, **update)


def save_setup(store: Store, old: SetupState | None, new: SetupState) -> None:
    """Write the parts of ``new`` that differ from ``old`` (everything when ``old`` is ``None``)."""
    if old is None or old.settings != new.settings:
        store.chats.save_settings(new.chat_id, new.settings)
    if old is None or old.sillytavern != new.sillytavern:
        store.chats.save_setup(new.chat_id, new.sillytavern)
    if old is None or old.links != new.links:
        store.chats.set_lorebook_links(new.chat_id, list(new.links))
    if old is None or old.persona_id != new.persona_id:
        store.chats.set_persona(new.chat_id, new.persona_id)


def _reload(document: ChatDocument, chat_id: str | None) -> None:
    if chat_id is None or document.chat_id == chat_id:
        document.reload()


class SetChatSetupCommand(QUndoCommand):
    """Replace a chat's setup (lorebook links and scopes, persona choice, settings, SillyTavern setup)."""

    def __init__(self, document: ChatDocument, store: Store, old: SetupState, new: SetupState, label: str) -> None:
        super().__init__(label)
        self._document, self._store, self._old, self._new = document, store, old, new

    def _apply(self, before: SetupState, after: SetupState) -> None:
        save_setup(self._store, before, after)
        _reload(self._document, after.chat_id)

    def redo(self) -> None:
        self._apply(self._old, self._new)

    def undo(self) -> None:
        self._apply(self._new, self._old)


class EditPersonaCommand(QUndoCommand):
    """Change a library persona's name / description (every chat using it follows)."""

    def __init__(self, document: ChatDocument, store: Store, persona_id: str, old: Persona, new: Persona) -> None:
        super().__init__(f"Edit persona {new.name!r}")
        self._document, self._store, self._id, self._old, self._new = document, store, persona_id, old, new

    def redo(self) -> None:
        self._store.personas.update(self._id, self._new)
        _reload(self._document, None)

    def undo(self) -> None:
        self._store.personas.update(self._id, self._old)
        _reload(self._document, None)


class AddLorebookEntryCommand(QUndoCommand):
    """Create an entry (blank, or a copy of ``source_uid``) in a library lorebook.

    The first redo lets the store pick the uid (``Store.lorebooks.add_entry`` /
    ``duplicate_lorebook_entry``); later redos put the same entry back at the same place.
    """

    def __init__(self, document: ChatDocument, store: Store, lorebook_id: str, source_uid: int | str | None = None,
                 template: LorebookEntry | None = None) -> None:
        super().__init__("Duplicate lorebook entry" if source_uid is not None else "New lorebook entry")
        self._document, self._store, self._book = document, store, lorebook_id
        self._source, self._template = source_uid, template
        self.entry: LorebookEntry | None = None
        self._index = 0

    def redo(self) -> None:
        if self.entry is None:
            if self._source is not None:
                self.entry = self._store.lorebooks.duplicate_entry(self._book, self._source)
            else:
                self.entry = self._store.lorebooks.add_entry(self._book, self._template)
            uids = [str(e.uid) for e in self._store.lorebooks.get(self._book).entries]
            self._index = uids.index(str(self.entry.uid))
        else:
            self._store.lorebooks.insert_entry(self._book, self.entry, self._index)
        _reload(self._document, None)

    def undo(self) -> None:
        if self.entry is not None:
            self._store.lorebooks.delete_entry(self._book, self.entry.uid)
        _reload(self._document, None)


class DeleteLorebookEntryCommand(QUndoCommand):
    """Delete an entry from a library lorebook; undo puts it back at its place in the book."""

    def __init__(self, document: ChatDocument, store: Store, lorebook_id: str, uid: int | str) -> None:
        book = store.lorebooks.get(lorebook_id)
        found = next(((i, e) for i, e in enumerate(book.entries) if str(e.uid) == str(uid)), None)
        if found is None:
            raise NotFoundError("LOREBOOK_ENTRY_NOT_FOUND", f"the lorebook has no entry {uid}",
                                file=lorebook_id, place=f"entry {uid}")
        entry = found[1]
        label = entry.comment or (entry.keys[0] if entry.keys else str(uid))
        super().__init__(f"Delete lorebook entry {label!r}")
        self._document, self._store, self._book = document, store, lorebook_id
        self._index, self.entry = found

    def redo(self) -> None:
        self._store.lorebooks.delete_entry(self._book, self.entry.uid)
        _reload(self._document, None)

    def undo(self) -> None:
        self._store.lorebooks.insert_entry(self._book, self.entry, self._index)
        _reload(self._document, None)


class SetChatCharacterCommand(QUndoCommand):
    """Give a chat a character (or take it away): ``Store.chats.set_character``, then the chat re-reads."""

    def __init__(self, document: ChatDocument, store: Store, chat_id: str, old: str | None, new: str | None,
                 name: str) -> None:
        super().__init__(f"Use character {name!r} in the chat")
        self._document, self._store, self._chat, self._old, self._new = document, store, chat_id, old, new

    def redo(self) -> None:
        self._store.chats.set_character(self._chat, self._new)
        _reload(self._document, self._chat)

    def undo(self) -> None:
        self._store.chats.set_character(self._chat, self._old)
        _reload(self._document, self._chat)
