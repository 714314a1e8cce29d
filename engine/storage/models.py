"""Public pydantic types the :class:`~engine.storage.Store` returns (never ORM objects)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..schema import Character, Chat, ContextSettings, Persona


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
    see :meth:`engine.storage.Store.lorebook_ids_for_chat`). ``parent_id``/``branch_point``
    link a branch to the chat it was forked from (the index of the last message copied).
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
    settings: ContextSettings = Field(default_factory=ContextSettings)
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
    """What one imported file became: ``{"kind", "id", "name"}`` (``loomscope import`` output)."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["chat", "character", "lorebook", "persona"]
    id: str
    name: str
