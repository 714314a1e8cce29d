"""Typed SQLAlchemy 2.0 ORM classes. Private to ``engine.storage``: nothing outside it sees them.

Layout (one row per object; whole pydantic payloads in JSON columns so that unknown fields of
imported third-party data survive a round trip; queryable flags in their own columns):

- ``characters``: a card without its embedded book (that book is a ``lorebooks`` row whose
  ``character_id`` points back).
- ``personas``.
- ``lorebooks`` and ``lorebook_entries`` (entries in book order, ``uid`` as text for matching).
- ``chats`` (settings, tools, metadata; ``parent_id``/``branch_point`` for branches),
  ``messages`` (order, role, name, content, swipes, tool calls and result ids, pinned,
  manual-excluded, hidden), ``chat_lorebooks`` (attached books, in order, with their
  SillyTavern scope), ``chats.setup`` (SillyTavern setup, migration 0002).
- ``import_sources``: identities of objects imported from a SillyTavern folder (migration 0002).
- ``audits``: at most one per chat (primary key ``chat_id``), deleted with the chat.
- ``library_meta``: key/value facts about the library (``seeded``).

Every foreign key that belongs to a chat cascades on delete (``ON DELETE CASCADE``; SQLite
needs ``PRAGMA foreign_keys=ON``, set on every connection in :mod:`engine.storage.database`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Constraint names stable across backends (Alembic needs names to alter them later).
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base with a naming convention."""

    metadata = MetaData(naming_convention=NAMING)


class CharacterRow(Base):
    __tablename__ = "characters"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # the card PNG as imported (migration 0002), for a lossless export
    avatar: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)


class PersonaRow(Base):
    __tablename__ = "personas"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LorebookRow(Base):
    __tablename__ = "lorebooks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(Text, default="")
    # book-level fields (description, scan_depth, token_budget, extensions, unknown keys)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    character_id: Mapped[str | None] = mapped_column(
        ForeignKey("characters.id", ondelete="CASCADE"), index=True, nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class LorebookEntryRow(Base):
    __tablename__ = "lorebook_entries"
    __table_args__ = (UniqueConstraint("lorebook_id", "position", name="uq_lorebook_entries_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    lorebook_id: Mapped[str] = mapped_column(
        ForeignKey("lorebooks.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    uid: Mapped[str] = mapped_column(Text)
    comment: Mapped[str] = mapped_column(Text, default="")
    constant: Mapped[bool] = mapped_column(Boolean, default=False)
    disable: Mapped[bool] = mapped_column(Boolean, default=False)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class ChatRow(Base):
    __tablename__ = "chats"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    title: Mapped[str] = mapped_column(Text, default="")
    character_id: Mapped[str | None] = mapped_column(
        ForeignKey("characters.id", ondelete="SET NULL"), index=True, nullable=True
    )
    persona_id: Mapped[str | None] = mapped_column(
        ForeignKey("personas.id", ondelete="SET NULL"), nullable=True
    )
    parent_id: Mapped[str | None] = mapped_column(
        ForeignKey("chats.id", ondelete="SET NULL"), index=True, nullable=True
    )
    branch_point: Mapped[int | None] = mapped_column(Integer, nullable=True)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    # Chat fields other than messages (tools, user_name, character_name, metadata, unknown keys)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # SillyTavern setup of a chat imported from a SillyTavern folder (migration 0002)
    setup: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("chat_id", "idx", name="uq_messages_chat_idx"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    chat_id: Mapped[str] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(Text, nullable=True)
    content: Mapped[Any] = mapped_column(JSON, nullable=True)
    tool_calls: Mapped[Any] = mapped_column(JSON, nullable=True)
    # the id a tool result answers, and the key it was imported under
    tool_result_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    tool_result_key: Mapped[str | None] = mapped_column(String(16), nullable=True)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    manual_excluded: Mapped[bool] = mapped_column(Boolean, default=False)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    swipes: Mapped[Any] = mapped_column(JSON, nullable=True)
    # other meta keys and unknown message fields: {"meta": {...}, "fields": {...}}
    extra: Mapped[dict[str, Any]] = mapped_column(JSON)


class ChatLorebookRow(Base):
    __tablename__ = "chat_lorebooks"

    chat_id: Mapped[str] = mapped_column(
        ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True
    )
    lorebook_id: Mapped[str] = mapped_column(
        ForeignKey("lorebooks.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, default=0)
    # chat / character / global (migration 0002): which SillyTavern scope linked the book
    scope: Mapped[str] = mapped_column(String(16), default="chat", server_default="chat")


class ImportSourceRow(Base):
    __tablename__ = "import_sources"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    object_id: Mapped[str] = mapped_column(String(32))
    digest: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuditRow(Base):
    __tablename__ = "audits"

    chat_id: Mapped[str] = mapped_column(
        ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True
    )
    generation_id: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


class LibraryMetaRow(Base):
    __tablename__ = "library_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
