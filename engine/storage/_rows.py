"""Row <-> pydantic conversion for the library's tables (pure functions; rows never leave the package).

Also the small shared helpers of every repository: new ids, UTC times, chunked ``IN`` lists.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from ..schema import ChatMessage, LorebookEntry
from . import _orm as orm

#: Lorebook link scopes (SillyTavern ``getSortedEntries``).
LOREBOOK_SCOPES = ("chat", "character", "global")

#: Messages inserted per statement when a chat is stored (progress is reported per batch).
MESSAGE_BATCH = 5000

#: What a stored SillyTavern setup never holds: request-only fields (lorebook scopes live on the
#: links; a group's speaker and its members' cards are filled per preview).
SETUP_NOT_STORED: dict[str, Any] = {"lorebook_scopes": True,
                                    "group": {"speaker": True, "members": {"__all__": {"character"}}}}

_RESULT_KEYS = ("tool_call_id", "toolCallId", "callId")
_FLAG_KEYS = ("pinned", "manualExcluded", "hidden")


def now() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)


def utc(value: datetime) -> datetime:
    """``value`` as UTC: SQLite returns naive datetimes; everything we store is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def new_id() -> str:
    """A new object id (32 hex digits)."""
    return uuid.uuid4().hex


def chunks(values: list[str], size: int) -> Iterator[list[str]]:
    """``values`` in lists of at most ``size`` (bound parameters per statement stay few)."""
    for start in range(0, len(values), size):
        yield values[start:start + size]


def message_row(chat_id: str, idx: int, message: ChatMessage) -> orm.MessageRow:
    """The ``messages`` ORM row of message ``idx`` of chat ``chat_id``."""
    return orm.MessageRow(**message_values(chat_id, idx, message))


def message_values(chat_id: str, idx: int, message: ChatMessage) -> dict[str, Any]:
    """The ``messages`` row of one message as column values (for ORM rows and bulk inserts)."""
    dump = message.model_dump(mode="json")
    meta: dict[str, Any] = dict(dump.pop("meta", None) or {})
    flags = {key: bool(meta.pop(key, False)) for key in _FLAG_KEYS}
    role = dump.pop("role")
    content = dump.pop("content", None)
    name = dump.pop("name", None)
    tool_calls = dump.pop("tool_calls", None)
    result_id = result_key = None
    for key in _RESULT_KEYS:
        value = dump.pop(key, None)
        if value is None:
            continue
        if result_id is None:
            result_id, result_key = str(value), key
        else:  # a second, different id key: keep it verbatim
            dump[key] = value
    swipes = None
    swipes_in = None
    if "swipes" in meta:
        swipes, swipes_in = meta.pop("swipes"), "meta"
    elif "swipes" in dump:
        swipes, swipes_in = dump.pop("swipes"), "fields"
    return dict(
        chat_id=chat_id,
        idx=idx,
        role=role,
        name=name,
        content=content,
        tool_calls=tool_calls,
        tool_result_id=result_id,
        tool_result_key=result_key,
        pinned=flags["pinned"],
        manual_excluded=flags["manualExcluded"],
        hidden=flags["hidden"],
        swipes=swipes,
        extra={"meta": meta, "fields": dump, "swipes_in": swipes_in},
    )


def message_model(row: orm.MessageRow) -> ChatMessage:
    """The :class:`ChatMessage` a ``messages`` row holds (the inverse of :func:`message_values`)."""
    extra = row.extra or {}
    data: dict[str, Any] = dict(extra.get("fields") or {})
    meta: dict[str, Any] = dict(extra.get("meta") or {})
    meta.update(pinned=row.pinned, manualExcluded=row.manual_excluded, hidden=row.hidden)
    if extra.get("swipes_in") == "meta":
        meta["swipes"] = row.swipes
    elif extra.get("swipes_in") == "fields":
        data["swipes"] = row.swipes
    data.update(role=row.role, content=row.content, meta=meta)
    if row.name is not None:
        data["name"] = row.name
    if row.tool_calls is not None:
        data["tool_calls"] = row.tool_calls
    if row.tool_result_id is not None:
        data[row.tool_result_key or "tool_call_id"] = row.tool_result_id
    return ChatMessage.model_validate(data)


def entry_row(lorebook_id: str, position: int, entry: LorebookEntry) -> orm.LorebookEntryRow:
    """The ``lorebook_entries`` row of ``entry`` at book position ``position``."""
    return orm.LorebookEntryRow(
        lorebook_id=lorebook_id,
        position=position,
        uid=str(entry.uid),
        comment=entry.comment,
        constant=entry.constant,
        disable=entry.disable,
        data=entry.model_dump(mode="json"),
    )
