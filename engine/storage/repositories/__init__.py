"""One repository per area of the library, each over the shared :class:`~engine.storage.unit.Database`.

Every public method is one unit of work: it takes and returns pydantic models and never hands out
ORM rows. :class:`~engine.storage.Store` exposes them as ``store.chats``, ``store.messages``,
``store.characters``, ``store.personas``, ``store.lorebooks``, ``store.audits``, ``store.compaction``
and ``store.sync``.
"""

from __future__ import annotations

from .audits import AuditRepository
from .characters import CharacterRepository
from .chats import ChatRepository
from .compaction import CompactionRepository
from .lorebooks import LorebookRepository
from .messages import MessageRepository
from .personas import PersonaRepository
from .sync import SyncRepository

__all__ = [
    "AuditRepository", "CharacterRepository", "ChatRepository", "CompactionRepository", "LorebookRepository",
    "MessageRepository", "PersonaRepository", "SyncRepository",
]
