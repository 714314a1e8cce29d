"""Detecting what a file is (card, lorebook, chat) from its content, and inspection reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import LoomscopeImportError
from ..schema import Character, Chat, Lorebook
from ._fields import FieldReader
from ._guard import guarded
from ._io import decode_utf8, fail, parse_json, read_bytes
from .cards import PNG_SIGNATURE, card_json_from_charx, card_json_from_png, parse_card_data
from .chats import _looks_like_jsonl, chat_shape, check_message_sizes, parse_chat_document, parse_st_jsonl
from .lorebooks import lorebook_shape, parse_lorebook_data

Kind = Literal["character", "lorebook", "chat"]


class ImportedItem(BaseModel):
    """What :func:`load_any` read.

    Attributes
    ----------
    kind:
        ``"character"``, ``"lorebook"`` or ``"chat"``.
    value:
        The model read. For files holding several transcripts, the first (all are in ``chats``).
    spec:
        The shape read: ``chara_card_v1|v2|v3``, ``pygmalion``, ``sillytavern_world``,
        ``character_book_v2``, ``lorebook_v3``, ``novelai_lorebook``, ``sillytavern_jsonl``,
        ``openai_messages``, ``openai_request``, ``openai_jsonl``, ``swe_agent_traj``,
        ``tau_bench_results``, ``toolbench_answer``.
    spec_version:
        The version the file declares (``"2.0"``, NovelAI ``lorebookVersion``), if any.
    warnings:
        Things read leniently or left unmapped (one line each).
    chats:
        Every transcript, for chat files (``[value]`` when there is one).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    kind: Kind
    value: Character | Lorebook | Chat
    spec: str | None = None
    spec_version: str | None = None
    warnings: list[str] = Field(default_factory=list)
    chats: list[Chat] = Field(default_factory=list)


def _from_json(data: Any, name: str, stem: str, r: FieldReader) -> ImportedItem:
    if isinstance(data, dict):
        spec = data.get("spec")
        if (isinstance(spec, str) and spec.startswith("chara_card")) or "char_name" in data or (
                "name" in data and ("first_mes" in data or "description" in data)
                and "entries" not in data):
            char, cspec = parse_card_data(data, name, r)
            return ImportedItem(kind="character", value=char, spec=cspec,
                                spec_version=char.spec_version, warnings=r.warnings)
    if lorebook_shape(data) is not None:
        book, lspec = parse_lorebook_data(data, name, name=stem, reader=r)
        version = None
        if isinstance(data, dict):
            v = data.get("lorebookVersion", data.get("spec_version"))
            version = None if v is None else str(v)
        return ImportedItem(kind="lorebook", value=book, spec=lspec, spec_version=version,
                            warnings=r.warnings)
    if chat_shape(data) is not None:
        chats, cshape = parse_chat_document(data, name, title=stem, reader=r)
        if not chats:
            fail("IMPORT_INVALID_CHAT", "the file holds no transcripts", name, "$")
        return ImportedItem(kind="chat", value=chats[0], spec=cshape, warnings=r.warnings,
                            chats=chats)
    if isinstance(data, dict) and isinstance(data.get("spec"), str):
        fail("IMPORT_UNSUPPORTED_SPEC", f"spec {data['spec']!r} is not supported", name, "$.spec")
    fail("IMPORT_UNSUPPORTED_FORMAT",
         "not a character card, lorebook or chat Loomscope reads", name, "$")


def _load_any(path: str | Path) -> ImportedItem:
    name, raw = read_bytes(path)
    p = Path(path)
    r = FieldReader(name)
    if raw.startswith(PNG_SIGNATURE) or p.suffix.lower() == ".png":
        if not raw.startswith(PNG_SIGNATURE):
            fail("IMPORT_INVALID_PNG", "not a PNG file (bad signature)", name, "byte 0")
        data, _kw = card_json_from_png(raw, name, r)
        char, spec = parse_card_data(data, name, r)
        return ImportedItem(kind="character", value=char, spec=spec,
                            spec_version=char.spec_version, warnings=r.warnings)
    if raw[:4] == b"PK\x03\x04":
        data = card_json_from_charx(raw, name, r)
        char, spec = parse_card_data(data, name, r)
        return ImportedItem(kind="character", value=char, spec=spec,
                            spec_version=char.spec_version, warnings=r.warnings)
    text = decode_utf8(raw, name)
    if p.suffix.lower() == ".jsonl":
        chats, shape = parse_st_jsonl(text, name, title=p.stem, reader=r)
        return ImportedItem(kind="chat", value=chats[0], spec=shape, warnings=r.warnings,
                            chats=chats)

    try:
        data = parse_json(text, name)
    except LoomscopeImportError as exc:
        if exc.code == "IMPORT_INVALID_JSON" and _looks_like_jsonl(text):
            chats, shape = parse_st_jsonl(text, name, title=p.stem, reader=r)
            return ImportedItem(kind="chat", value=chats[0], spec=shape, warnings=r.warnings,
                                chats=chats)
        raise
    return _from_json(data, name, p.stem, r)


def load_any(path: str | Path) -> ImportedItem:
    """Read a card, lorebook or chat file, deciding the kind from its content.

    PNG or ``.charx`` zip → card; ``.jsonl`` (or several JSON objects, one per line) → chat; JSON: a ``spec``
    ``chara_card_*``, ``char_name`` or ``name`` with card fields → card; SillyTavern world,
    ``character_book``, ``lorebook_v3``, NovelAI → lorebook; OpenAI messages and their wrappers →
    chat; anything else → ``IMPORT_UNSUPPORTED_FORMAT``.

    Raises
    ------
    LoomscopeImportError
        Any ``IMPORT_*`` code of the specific loaders; nothing else.
    """
    return guarded(path, lambda: _sized(_load_any(path), str(path)))


def _sized(item: ImportedItem, file: str) -> ImportedItem:
    """Chats with a message over the size limit are refused (``IMPORT_TOO_LARGE``, issue 15)."""
    if item.kind == "chat":
        chats = item.chats or ([item.value] if isinstance(item.value, Chat) else [])
        check_message_sizes(chats, file)
    return item


class InspectReport(BaseModel):
    """What ``loomscope inspect FILE`` prints: what was read, counted as SillyTavern shows it.

    Counts are ``None`` when they do not apply to the kind. ``tool_calls`` counts OpenAI
    ``tool_calls`` entries plus legacy ``function_call`` messages; ``tool_results`` counts
    ``tool``/``function`` messages; ``swipes`` counts swipe alternatives stored on messages;
    ``hidden`` counts hidden (SillyTavern ``is_system``) messages; ``greetings`` counts the
    card's first message plus alternate greetings. For files with several
    transcripts, message counts are totals over all of them.
    """

    model_config = ConfigDict(frozen=True)

    file: str
    kind: Kind
    spec: str | None = None
    spec_version: str | None = None
    name: str = ""
    entries: int | None = None
    enabled_entries: int | None = None
    constant_entries: int | None = None
    lorebook_name: str | None = None
    transcripts: int | None = None
    messages: int | None = None
    user_messages: int | None = None
    assistant_messages: int | None = None
    tool_calls: int | None = None
    tool_results: int | None = None
    swipes: int | None = None
    hidden: int | None = None
    tools: int | None = None
    user_name: str | None = None
    character_name: str | None = None
    depth_prompt: bool | None = None
    greetings: int | None = None
    tags: list[str] | None = None
    warnings: list[str] = Field(default_factory=list)


def _book_counts(book: Lorebook) -> dict[str, int]:
    return {"entries": len(book.entries),
            "enabled_entries": sum(1 for e in book.entries if not e.disable),
            "constant_entries": sum(1 for e in book.entries if e.constant)}


def chat_counts(chats: list[Chat]) -> dict[str, int]:
    """Message, tool-call, swipe and hidden counts summed over ``chats``."""
    c = {"messages": 0, "user_messages": 0, "assistant_messages": 0, "tool_calls": 0,
         "tool_results": 0, "swipes": 0, "hidden": 0}
    for chat in chats:
        for m in chat.messages:
            c["messages"] += 1
            c["user_messages"] += m.role == "user"
            c["assistant_messages"] += m.role == "assistant"
            c["tool_calls"] += len(m.tool_calls or [])
            if isinstance((m.model_extra or {}).get("function_call"), dict):
                c["tool_calls"] += 1
            c["tool_results"] += m.role in ("tool", "function")
            c["hidden"] += m.meta.hidden
            swipes = (m.meta.model_extra or {}).get("swipes")
            if isinstance(swipes, list):
                c["swipes"] += len(swipes)
    return c


def inspect_file(path: str | Path) -> InspectReport:
    """Read a file with :func:`load_any` and summarize it (kind, spec, name, counts, warnings).

    Raises the same :class:`~engine.errors.LoomscopeImportError` codes as :func:`load_any`.
    """
    item = load_any(path)
    base: dict[str, Any] = {"file": str(path), "kind": item.kind, "spec": item.spec,
                            "spec_version": item.spec_version, "warnings": list(item.warnings)}
    v = item.value
    if isinstance(v, Character):
        base["name"] = v.name
        base["depth_prompt"] = v.depth_prompt() is not None
        base["greetings"] = (1 if v.first_mes else 0) + len(v.alternate_greetings)
        base["tags"] = list(v.tags)
        if v.character_book is not None:
            base.update(_book_counts(v.character_book))
            base["lorebook_name"] = v.character_book.name
        else:
            base["entries"] = 0
    elif isinstance(v, Lorebook):
        base["name"] = v.name
        base.update(_book_counts(v))
    else:
        chats = item.chats or [v]
        base["name"] = v.title
        base["transcripts"] = len(chats)
        base["tools"] = len(v.tools)
        base["user_name"] = v.user_name
        base["character_name"] = v.character_name
        base.update(chat_counts(chats))
    return InspectReport(**base)
