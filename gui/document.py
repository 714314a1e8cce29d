"""The open chat as document state: the request the preview runs on, and the edits to it.

Edits never mutate the current :class:`~engine.schema.PreviewRequest` in place: each one
builds a new request (copy-on-write of the touched message / lorebook), so a request handed
to a preview worker is a frozen snapshot even though pydantic models are mutable. Every edit
is saved through the store (when there is one) before the document changes, so a failed
write leaves both unchanged.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from engine.assembly.st_group import with_speaker
from engine.compaction.options import CHAT_KEY
from engine.compaction.state import CompactionState
from engine.errors import LoomscopeError
from engine.schema import ChatMessage, ContextSettings, LorebookEntry, PreviewRequest
from engine.schema.audit import PromptContextAudit
from engine.schema.sillytavern import GroupSetup

if TYPE_CHECKING:
    from engine.compaction.state import CompactionSummary
    from engine.storage import Store


@dataclass(frozen=True)
class LoadedChat:
    """A chat read from the library, ready to become the document (built by :func:`read_chat`).

    ``lorebook_ids`` is parallel to ``request.lorebooks``; ``card_book_name`` names the
    character card's own book when the request carries one (``None`` otherwise). ``audit`` is
    the chat's stored audit when ``audit_read`` (read along, so the window need not).
    """

    chat_id: str
    request: PreviewRequest
    title: str
    parent_id: str | None
    lorebook_ids: tuple[str, ...]
    card_book_name: str | None
    audit: PromptContextAudit | None = None
    audit_read: bool = False


def read_chat(store: Store, chat_id: str, *, audit: bool = False) -> LoadedChat:
    """Read chat ``chat_id`` and everything its preview needs from ``store`` (with ``audit``,
    its stored audit too; a failure there leaves ``audit_read`` false instead of raising).

    Touches no Qt object, so it runs on a worker thread (``gui.preview.loader``); the store
    opens its own session per call (STYLE.md 10). Raises the store's ``CHAT_NOT_FOUND``.
    """
    request = store.chats.build_request(chat_id)
    # the rest from queries that do not load the messages again (a 5,000-message chat: half the read)
    setup = store.chats.get_setup(chat_id)
    # a SillyTavern chat has only its linked worlds (no card book); otherwise the card's own
    # book first, then attached ones: the order of request.lorebooks
    if request.sillytavern is not None:
        ids = [link.lorebook_id for link in setup.lorebooks]
    else:
        ids = list(store.lorebooks.ids_for_chat(chat_id))
    card_book = None
    if request.sillytavern is None and setup.character_id is not None:
        with contextlib.suppress(LoomscopeError):
            character = store.characters.get(setup.character_id)
            if character.character_book is not None:
                card_book = character.character_book.name or "card book"
    parent_id = next((c.parent_id for c in store.chats.summaries() if c.id == chat_id), None)
    stored_audit, audit_read = None, False
    if audit:
        with contextlib.suppress(LoomscopeError):  # the window reads it again and shows the error
            stored_audit, audit_read = store.audits.get(chat_id), True
    return LoadedChat(chat_id=chat_id, request=request, title=request.chat.title,
                      parent_id=parent_id, lorebook_ids=tuple(ids),
                      card_book_name=card_book, audit=stored_audit, audit_read=audit_read)


def _with_group_speaker(request: PreviewRequest | None, speaker: str | None) -> PreviewRequest | None:
    """``request`` with its group's speaker set to ``speaker`` (``None``: SillyTavern's pick).

    A speaker no longer in the group (a re-import removed the member) falls back to ``None``.
    """
    setup = request.sillytavern if request is not None else None
    if request is None or setup is None or setup.group is None:
        return request
    if speaker is not None and all(m.name != speaker or m.character is None for m in setup.group.members):
        speaker = None
    if speaker is not None:
        return with_speaker(request, speaker)
    group = setup.group.model_copy(update={"speaker": None})
    return request.model_copy(update={"sillytavern": setup.model_copy(update={"group": group})})


class ChatDocument(QObject):
    """The currently open chat.

    Signals
    -------
    chat_loaded(str chat_id)   # a different chat (or none: ``""``) is open
    request_changed()          # anything the preview depends on changed
    setup_changed()            # anything but the messages changed: settings, lorebooks, setup, chat
    messages_changed()         # the message list changed (rows came, went or were all replaced)
    message_changed(int index) # one message changed in place (its flags or text); no row moved
    flags_changed(int index)   # a click changed a message's pin / exclude / hidden flag (before
                               # request_changed: the window previews it at once, no debounce)
    lorebooks_changed()        # a lorebook entry changed
    """

    chat_loaded = Signal(str)
    request_changed = Signal()
    setup_changed = Signal()
    messages_changed = Signal()
    message_changed = Signal(int)
    flags_changed = Signal(int)
    lorebooks_changed = Signal()

    def __init__(self, store: Store | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.chat_id: str | None = None
        self.title: str = ""
        self.request: PreviewRequest | None = None
        self.lorebook_ids: list[str] = []
        self.parent_id: str | None = None
        #: The character card's own book's name when the chat uses it (the Setup tab shows it).
        self.card_book_name: str | None = None
        #: A group chat's next speaker picked by the writer (``None``: SillyTavern's pick); never saved.
        self.group_speaker: str | None = None

    # -- loading -------------------------------------------------------------------------
    def load_chat(self, chat_id: str | None) -> None:
        """Open ``chat_id`` from the store (``None`` closes the document)."""
        if chat_id is None or self.store is None:
            self.parent_id = self.card_book_name = None
            self._set(None, None, [], "")
            return
        self.apply_loaded(read_chat(self.store, chat_id))

    def apply_loaded(self, loaded: LoadedChat) -> None:
        """Make ``loaded`` (read by :func:`read_chat`, possibly on a worker) the open chat."""
        self.parent_id = loaded.parent_id
        self.card_book_name = loaded.card_book_name
        self._set(loaded.chat_id, loaded.request, list(loaded.lorebook_ids), loaded.title)

    def ensure_open(self, chat_id: str | None) -> bool:
        """Open ``chat_id`` unless it is open already (an undo of an edit made in another chat
        brings that chat back); ``False`` when it cannot be (no chat, or no library)."""
        if chat_id == self.chat_id:
            return True
        if chat_id is None or self.store is None:
            return False
        self.load_chat(chat_id)
        return True

    def reload(self) -> None:
        """Re-read the open chat from the store (after a generation, branch or import)."""
        if self.store is not None and self.chat_id is not None:
            loaded = read_chat(self.store, self.chat_id)
            self.request = _with_group_speaker(loaded.request, self.group_speaker)
            self.lorebook_ids = list(loaded.lorebook_ids)
            self.card_book_name = loaded.card_book_name
            self.messages_changed.emit()
            self.lorebooks_changed.emit()
            self.setup_changed.emit()
            self.request_changed.emit()

    def _set(self, chat_id: str | None, request: PreviewRequest | None, ids: list[str], title: str) -> None:
        self.group_speaker = None
        self.chat_id = chat_id
        self.request = request
        self.lorebook_ids = ids
        self.title = title
        self.chat_loaded.emit(chat_id or "")
        self.messages_changed.emit()
        self.lorebooks_changed.emit()
        self.setup_changed.emit()
        self.request_changed.emit()

    def snapshot(self) -> PreviewRequest | None:
        """The frozen request for the preview worker (never mutated after this call)."""
        return self.request

    def group(self) -> GroupSetup | None:
        """The open chat's group (a SillyTavern group chat), else ``None``."""
        req = self.request
        return req.sillytavern.group if req is not None and req.sillytavern is not None else None

    def set_group_speaker(self, speaker: str | None) -> None:
        """Preview the group chat's prompt for member ``speaker`` (``None``: SillyTavern's pick); not saved."""
        group = self.group()
        if self.request is None or group is None or speaker == group.speaker:
            return
        self.group_speaker = speaker
        self.request = _with_group_speaker(self.request, speaker)
        self.request_changed.emit()

    def _saved_to(self) -> tuple[Store, str] | None:
        """The library and chat id an edit is saved to first; ``None`` for an in-memory chat."""
        if self.store is None or self.chat_id is None:
            return None
        return self.store, self.chat_id

    # -- messages ------------------------------------------------------------------------
    def messages(self) -> list[ChatMessage]:
        """The chat's messages (read-only use)."""
        return [] if self.request is None else self.request.chat.messages

    def message_flag(self, index: int, flag: str) -> bool:
        """One flag of message ``index``: ``pinned``, ``manual_excluded`` or ``hidden``."""
        meta = self.messages()[index].meta
        return bool({"pinned": meta.pinned, "manual_excluded": meta.manualExcluded,
                     "hidden": meta.hidden}[flag])

    def set_message_flags(self, index: int, *, pinned: bool | None = None,
                          manual_excluded: bool | None = None, hidden: bool | None = None) -> None:
        """Set a message's pin / manual-exclude / hidden flags, saved to the library first."""
        if self.request is None:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.messages.set_flags(chat_id, index, pinned=pinned, manual_excluded=manual_excluded, hidden=hidden)
        msgs = list(self.request.chat.messages)
        msg = msgs[index]
        update: dict[str, bool] = {}
        if pinned is not None:
            update["pinned"] = pinned
        if manual_excluded is not None:
            update["manualExcluded"] = manual_excluded
        if hidden is not None:
            update["hidden"] = hidden
        msgs[index] = msg.model_copy(update={"meta": msg.meta.model_copy(update=update)})
        self._replace_chat(messages=msgs)
        self.message_changed.emit(index)
        self.flags_changed.emit(index)
        self.request_changed.emit()

    def append_message(self, message: ChatMessage) -> int:
        """Append ``message`` (the composer); returns its index."""
        if self.request is None:
            raise RuntimeError("no chat is open")
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            index = int(store.messages.append(chat_id, message))
        else:
            index = len(self.request.chat.messages)
        self._replace_chat(messages=[*self.request.chat.messages, message])
        self.messages_changed.emit()
        self.request_changed.emit()
        return index

    def replace_message(self, index: int, message: ChatMessage) -> None:
        """Replace message ``index`` (an edit of its text), saved to the library first."""
        if self.request is None:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.messages.update(chat_id, index, message)
        msgs = list(self.request.chat.messages)
        msgs[index] = message
        self._replace_chat(messages=msgs)
        self.message_changed.emit(index)
        self.request_changed.emit()

    def delete_message(self, index: int) -> None:
        """Delete message ``index`` (later ones move up), saved to the library first."""
        if self.request is None:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.messages.delete(chat_id, index)
        msgs = list(self.request.chat.messages)
        del msgs[index]
        self._replace_chat(messages=msgs)
        self.messages_changed.emit()
        self.request_changed.emit()

    def insert_message(self, index: int, message: ChatMessage) -> None:
        """Insert ``message`` at ``index`` (undo of a delete), saved to the library first."""
        if self.request is None:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.messages.insert(chat_id, index, message)
        msgs = list(self.request.chat.messages)
        msgs.insert(index, message)
        self._replace_chat(messages=msgs)
        self.messages_changed.emit()
        self.request_changed.emit()

    def _replace_chat(self, **update: Any) -> None:
        assert self.request is not None
        chat = self.request.chat.model_copy(update=update)
        self.request = self.request.model_copy(update={"chat": chat})

    # -- compaction summary ----------------------------------------------------------------
    def compaction_summary(self) -> CompactionSummary | None:
        """The chat's active compaction summary (``CompactionSummary``) or ``None``."""
        return None if self.request is None else CompactionState.of_chat(self.request.chat).summary

    def _set_compaction(self, state: CompactionState) -> None:
        self._replace_chat(**{CHAT_KEY: state.dump()})
        self.messages_changed.emit()
        self.request_changed.emit()

    def remove_compaction_summary(self) -> CompactionSummary | None:
        """Remove the active compaction summary (saved first); its messages are sent verbatim
        again. Returns the removed summary (``None`` when there was none)."""
        if self.request is None:
            return None
        state = CompactionState.of_chat(self.request.chat)
        if state.summary is None:
            return None
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.compaction.remove_summary(chat_id)
        removed = state.summary
        self._set_compaction(state.with_summary_removed())
        return removed

    def restore_compaction_summary(self, summary: CompactionSummary) -> None:
        """Make ``summary`` the active compaction summary again (saved first)."""
        if self.request is None:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.compaction.restore_summary(chat_id, summary)
        state = CompactionState.of_chat(self.request.chat)
        removed = [s for s in state.removed if s.id != summary.id]
        self._set_compaction(state.model_copy(update={"summary": summary, "removed": removed, "stall": None}))

    def reset_compaction_failures(self) -> None:
        """Clear the compaction failure count (saved first), so auto-compaction runs again."""
        if self.request is None:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.compaction.reset_failures(chat_id)
        state = CompactionState.of_chat(self.request.chat)
        self._set_compaction(state.model_copy(update={"failures": 0, "stall": None}))

    # -- settings ------------------------------------------------------------------------
    def set_settings(self, settings: ContextSettings) -> None:
        """Replace the chat's context settings (saved to the library)."""
        if self.request is None or settings == self.request.settings:
            return
        if (saved := self._saved_to()) is not None:
            store, chat_id = saved
            store.chats.save_settings(chat_id, settings)
        self.request = self.request.model_copy(update={"settings": settings})
        self.setup_changed.emit()
        self.request_changed.emit()

    # -- lorebooks -----------------------------------------------------------------------
    def update_lorebook_entry(self, lorebook_id: str, entry: LorebookEntry) -> None:
        """Replace the entry with ``entry.uid`` in lorebook ``lorebook_id`` (saved to the library)."""
        if self.request is None:
            return
        if self.store is None:
            return
        self.store.lorebooks.update_entry(lorebook_id, entry)
        if self.chat_id is not None:
            # lorebooks are shared between chats and the card's book: rebuild from the library
            self.request = self.store.chats.build_request(self.chat_id)
        self.lorebooks_changed.emit()
        self.setup_changed.emit()
        self.request_changed.emit()
