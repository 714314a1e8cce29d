"""Public pydantic types the :class:`~engine.storage.Store` returns (never ORM objects)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..schema import Character, Chat, ContextSettings, Persona
from ..schema.sillytavern import SillyTavernSetup


class ChatSummary(BaseModel):
    """One line of the chat list (``loomscope chats``).

    ``messages`` is the message count; ``character`` the attached character's name or ``None``;
    ``updated_at`` is UTC.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    character: str | None = None
    messages: int = 0
    has_audit: bool = False
    parent_id: str | None = None
    #: For a branch: the last message index copied from its parent (``None`` otherwise).
    branch_point: int | None = None
    updated_at: datetime


class StoredChat(BaseModel):
    """A chat as stored: the chat itself plus everything attached to it.

    ``character`` carries its embedded book in ``character_book``; ``lorebook_ids`` are the
    ids of the separately attached lorebooks (in order; the card's own book is not among them,
    see :meth:`engine.storage.repositories.lorebooks.LorebookRepository.ids_for_chat`) and ``lorebook_scopes`` their
    SillyTavern scopes (``chat``, ``character``, ``global``; same order). ``setup`` is the
    SillyTavern setup of a chat imported from a SillyTavern folder (``None`` otherwise).
    ``parent_id``/``branch_point`` link a branch to the chat it was forked from (the index of
    the last message copied).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    chat: Chat
    character_id: str | None = None
    character: Character | None = None
    persona_id: str | None = None
    persona: Persona | None = None
    lorebook_ids: list[str] = Field(default_factory=list)
    lorebook_scopes: list[str] = Field(default_factory=list)
    settings: ContextSettings = Field(default_factory=ContextSettings)
    setup: SillyTavernSetup | None = None
    parent_id: str | None = None
    branch_point: int | None = None
    created_at: datetime
    updated_at: datetime


class LorebookSummary(BaseModel):
    """One lorebook in the library: id, name, entry count, and the card it is embedded in."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    entries: int = 0
    character_id: str | None = None


class CharacterSummary(BaseModel):
    """One character in the library."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    lorebook_id: str | None = None


class PersonaSummary(BaseModel):
    """One persona in the library."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str


class ImportRef(BaseModel):
    """What one imported file became: ``{"kind", "id", "name"}`` (``loomscope import`` output).

    ``key`` is the identity of an object imported from a SillyTavern folder (its path relative to the user folder),
    ``None`` otherwise.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["chat", "character", "lorebook", "persona"]
    id: str
    name: str
    key: str | None = None
    #: What the import did with it (issue 30): ``added``, ``changed`` (updated in place: the same
    #: file, or the same name and content, imported before) or ``unchanged``; ``None`` where not told.
    status: Literal["added", "changed", "unchanged"] | None = None


class LorebookLink(BaseModel):
    """A lorebook linked to a chat, with the SillyTavern scope that links it.

    ``scope``: ``chat`` (the chat's own book, ``chat_metadata.world_info``), ``character`` (the
    card's ``extensions.world`` and extra books) or ``global`` (active for every chat). Scopes
    order activation as SillyTavern's ``getSortedEntries`` does: chat lore first, then character
    and global lore by ``world_info.character_strategy``.
    """

    model_config = ConfigDict(frozen=True)

    lorebook_id: str
    name: str = ""
    scope: Literal["chat", "character", "global"] = "chat"


class ChatSetup(BaseModel):
    """Everything that decides a chat's prompt besides its messages (the setup editor's model).

    ``character_id``/``persona_id`` (or ``None``), the linked ``lorebooks`` in order with their
    scopes, the context ``settings`` (model, context limit, reply reserve, World Info settings)
    and the SillyTavern ``sillytavern`` setup (Prompt Manager prompts and order, Author's Note,
    persona placement, ...; ``None`` for chats that did not come from SillyTavern).
    """

    model_config = ConfigDict(frozen=True)

    chat_id: str
    character_id: str | None = None
    persona_id: str | None = None
    lorebooks: list[LorebookLink] = Field(default_factory=list)
    settings: ContextSettings = Field(default_factory=ContextSettings)
    sillytavern: SillyTavernSetup | None = None


class SyncConflict(BaseModel):
    """An object changed both in the SillyTavern folder and in Loomscope since the last import.

    ``resolution``: ``unresolved`` (Loomscope's version kept; reported again until the writer
    chooses), ``kept-local`` (the writer chose Loomscope's version: the folder's is taken as seen)
    or ``used-folder`` (the writer chose the folder's version: Loomscope's edits were replaced).
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["chat", "character", "lorebook", "persona"]
    id: str
    name: str
    key: str
    resolution: Literal["unresolved", "kept-local", "used-folder"] = "unresolved"


class FolderImportReport(BaseModel):
    """What ``loomscope import DIR`` did with a SillyTavern folder.

    ``added``/``changed``/``unchanged``: one :class:`ImportRef` per object (character, lorebook,
    persona, chat), by identity (its file's path relative to the user folder: ``key``);
    ``skipped``: ``{"file", "code", "message", "place"}`` per file not imported (group chats,
    bad files under ``--skip-bad``, links out of the folder, links to ``secrets.json``); ``warnings``:
    ``{"file", "message"}``; ``unreadable``: ``{"folder", "message"}`` per sub-folder that exists but
    could not be listed, which makes the import ``partial`` (the CLI then exits 5). ``conflicts``:
    objects that changed in the folder AND were edited in Loomscope since they were imported
    (:class:`SyncConflict`); ``files_changed``: the folder's files found changed, added or removed
    since the last import (by path and content hash; ``None`` on a first import).
    """

    model_config = ConfigDict(frozen=True)

    folder: str
    user: str
    added: list[ImportRef] = Field(default_factory=list)
    changed: list[ImportRef] = Field(default_factory=list)
    unchanged: list[ImportRef] = Field(default_factory=list)
    skipped: list[dict[str, Any]] = Field(default_factory=list)
    warnings: list[dict[str, str]] = Field(default_factory=list)
    conflicts: list[SyncConflict] = Field(default_factory=list)
    files_changed: list[str] | None = None
    unreadable: list[dict[str, str]] = Field(default_factory=list)
    partial: bool = False


class Usage(BaseModel):
    """One chat that uses a library object (the library panels' "Used by").

    ``how``: ``character`` (the chat's character), ``persona`` (the chat's persona), or for a
    lorebook the link's scope (``chat``, ``character``, ``global``) or ``card`` (the book is
    embedded in the chat's character card).
    """

    model_config = ConfigDict(frozen=True)

    chat_id: str
    title: str
    how: str
