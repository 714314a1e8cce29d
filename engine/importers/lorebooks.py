"""Lorebooks: SillyTavern world JSON, V2/V3 ``character_book`` / ``lorebook_v3``, NovelAI ``.lorebook``.

All shapes map onto :class:`engine.schema.Lorebook` / :class:`~engine.schema.LorebookEntry`
(snake_case fields). Fields Loomscope does not model are kept under their original names as
pydantic extra fields of the entry or the book, so :func:`export_world_json` writes them back.

Sources of the mapping (FORMATS.md b1, b4, b6):

- SillyTavern world entry fields: ``newWorldInfoEntryDefinition`` (camelCase) — ``key`` →
  ``keys``, ``keysecondary`` → ``secondary_keys``, ``selectiveLogic`` → ``selective_logic``, ...
- ``character_book`` → world: SillyTavern ``convertCharacterBook`` — ``insertion_order`` →
  ``order``, ``enabled`` → not ``disable``, ``extensions.position`` (else ``before_char`` → 0,
  anything else → 1), the other ST fields from ``extensions`` with ST's defaults (``??``: a
  ``null`` takes the default). The entry ``extensions`` object is kept verbatim as ST does.
- NovelAI: ``keys``, ``text`` → ``content``, ``enabled``, ``displayName`` → ``comment``,
  ``forceActivation`` → ``constant``; everything else is kept unmapped (with a warning).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..schema import InsertionPosition, Lorebook, LorebookEntry, SelectiveLogic
from ._fields import FieldReader
from ._guard import guarded
from ._io import MAX_ENTRIES, atomic_write_text, decode_utf8, parse_json_document, read_bytes, reject_binary

#: SillyTavern world entry key → (LorebookEntry field, reader kind, default).
WORLD_FIELDS: dict[str, tuple[str, str, Any]] = {
    "key": ("keys", "keys", None),
    "keysecondary": ("secondary_keys", "keys", None),
    "comment": ("comment", "str", ""),
    "content": ("content", "str", ""),
    "constant": ("constant", "bool", False),
    "selective": ("selective", "bool", True),
    "selectiveLogic": ("selective_logic", "logic", None),
    "order": ("order", "num", 100),
    "position": ("position", "position", None),
    "disable": ("disable", "bool", False),
    "depth": ("depth", "int", 4),
    "role": ("role", "role", None),
    "probability": ("probability", "num", 100),
    "useProbability": ("use_probability", "bool", True),
    "scanDepth": ("scan_depth", "opt_int", None),
    "caseSensitive": ("case_sensitive", "opt_bool", None),
    "matchWholeWords": ("match_whole_words", "opt_bool", None),
    "useGroupScoring": ("use_group_scoring", "opt_bool", None),
    "group": ("group", "str", ""),
    "groupOverride": ("group_override", "bool", False),
    "groupWeight": ("group_weight", "num", 100),
    "excludeRecursion": ("exclude_recursion", "bool", False),
    "preventRecursion": ("prevent_recursion", "bool", False),
    "delayUntilRecursion": ("delay_until_recursion", "recursion_delay", None),
    "sticky": ("sticky", "off_int", None),
    "cooldown": ("cooldown", "off_int", None),
    "delay": ("delay", "off_int", None),
    "ignoreBudget": ("ignore_budget", "bool", False),
    "vectorized": ("vectorized", "bool", False),
    "extensions": ("extensions", "dict", None),
}

#: ``character_book`` entry ``extensions`` key → world key (SillyTavern ``convertCharacterBook``).
BOOK_EXTENSION_FIELDS: dict[str, str] = {
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "delay_until_recursion": "delayUntilRecursion",
    "probability": "probability",
    "useProbability": "useProbability",
    "depth": "depth",
    "selectiveLogic": "selectiveLogic",
    "group": "group",
    "group_override": "groupOverride",
    "group_weight": "groupWeight",
    "scan_depth": "scanDepth",
    "case_sensitive": "caseSensitive",
    "match_whole_words": "matchWholeWords",
    "use_group_scoring": "useGroupScoring",
    "role": "role",
    "vectorized": "vectorized",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
}

#: ``character_book`` entry keys consumed by the mapping (not kept as extras).
_BOOK_MAPPED = {"keys", "secondary_keys", "content", "comment", "constant", "selective",
                "insertion_order", "enabled", "position", "extensions", "id"}

_ROLE_NAMES = {"system": 0, "user": 1, "assistant": 2}
_POSITION_NAMES = {"before_char": 0, "after_char": 1}


def _read_world_field(r: FieldReader, d: dict[str, Any], key: str, path: str) -> tuple[str, Any]:
    field, kind, default = WORLD_FIELDS[key]
    if kind == "keys":
        return field, r.keys(d, key, path)
    if kind == "str":
        return field, r.string(d, key, path, default)
    if kind == "bool":
        return field, r.boolean(d, key, path, default)
    if kind == "num":
        return field, r.number(d, key, path, default)
    if kind == "int":
        return field, r.integer(d, key, path, default)
    if kind == "opt_int":
        return field, r.opt_int(d, key, path)
    if kind == "off_int":
        return field, r.off_int(d, key, path)
    if kind == "opt_bool":
        return field, r.opt_bool(d, key, path)
    if kind == "dict":
        return field, dict(r.dict_field(d, key, path))
    if kind == "recursion_delay":
        v = d.get(key)
        if v is None or v is False:
            return field, 0
        if v is True:
            return field, 1
        n = r.integer(d, key, path, 0)
        if n < 0:
            r.fail("IMPORT_INVALID_LOREBOOK", f"{key} must not be negative", f"{path}.{key}")
        return field, n
    if kind == "logic":
        v = d.get(key)
        if v is None:
            return field, SelectiveLogic.AND_ANY
        n = r.integer(d, key, path, 0)
        if n not in {m.value for m in SelectiveLogic}:
            r.fail("IMPORT_INVALID_LOREBOOK", f"unknown selectiveLogic {n}", f"{path}.{key}")
        return field, SelectiveLogic(n)
    if kind == "position":
        v = d.get(key)
        if v is None:
            return field, InsertionPosition.BEFORE_CHAR
        if isinstance(v, str) and v in _POSITION_NAMES:
            return field, InsertionPosition(_POSITION_NAMES[v])
        n = r.integer(d, key, path, 0)
        if n not in {m.value for m in InsertionPosition}:
            r.fail("IMPORT_INVALID_LOREBOOK", f"unknown position {n}", f"{path}.{key}")
        return field, InsertionPosition(n)
    if kind == "role":
        v = d.get(key)
        if v is None:
            return field, None
        if isinstance(v, str) and v.lower() in _ROLE_NAMES:
            return field, _ROLE_NAMES[v.lower()]
        n = r.integer(d, key, path, 0)
        if n not in (0, 1, 2):
            r.fail("IMPORT_INVALID_LOREBOOK", f"unknown role {n} (0 system, 1 user, 2 assistant)",
                   f"{path}.{key}")
        return field, n
    raise AssertionError(kind)  # pragma: no cover - table is static


def _uid(r: FieldReader, raw: Any, fallback: int | str, path: str) -> int | str:
    if raw is None:
        return fallback
    if isinstance(raw, bool):
        r.wrong(f"{path}.uid", "integer or string", raw)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else raw
    r.wrong(f"{path}.uid", "integer or string", raw)


def _world_entry(r: FieldReader, raw: Any, path: str, fallback_uid: int | str) -> LorebookEntry:
    d = r.obj(raw, path)
    values: dict[str, Any] = {"uid": _uid(r, d.get("uid"), fallback_uid, path)}
    extras: dict[str, Any] = {}
    for key, value in d.items():
        if key == "uid":
            continue
        if key in WORLD_FIELDS:
            field, v = _read_world_field(r, d, key, path)
            values[field] = v
        elif key in LorebookEntry.model_fields:
            # a snake_case key that collides with our field names: keep it under another name
            extras[f"st_{key}"] = value
        else:
            extras[key] = value
    return LorebookEntry(**values, **extras)


def _book_entry(r: FieldReader, raw: Any, path: str, index: int) -> LorebookEntry:
    """Map one V2/V3 ``character_book`` entry (SillyTavern ``convertCharacterBook``)."""
    d = r.obj(raw, path)
    ext = dict(r.dict_field(d, "extensions", path))
    ext_path = f"{path}.extensions"
    raw_id = d.get("id")
    values: dict[str, Any] = {
        "uid": _uid(r, raw_id, index, path),
        "keys": r.keys(d, "keys", path),
        "secondary_keys": r.keys(d, "secondary_keys", path),
        "comment": r.string(d, "comment", path),
        "content": r.string(d, "content", path),
        "constant": r.boolean(d, "constant", path, False),
        "selective": r.boolean(d, "selective", path, False),
        "order": r.number(d, "insertion_order", path, 100),
        "disable": not r.boolean(d, "enabled", path, True),
        "extensions": ext,
    }
    if ext.get("position") is not None:
        values["position"] = _read_world_field(r, {"position": ext["position"]}, "position", ext_path)[1]
    else:
        spec_pos = d.get("position")
        if spec_pos is not None and not isinstance(spec_pos, str):
            r.wrong(f"{path}.position", "string", spec_pos)
        values["position"] = (InsertionPosition.BEFORE_CHAR if spec_pos == "before_char"
                              else InsertionPosition.AFTER_CHAR)
    for ext_key, world_key in BOOK_EXTENSION_FIELDS.items():
        if ext.get(ext_key) is not None:
            field, v = _read_world_field(r, {world_key: ext[ext_key]}, world_key, ext_path)
            values[field] = v
    if "role" not in values:
        values["role"] = 0  # ST: entry.extensions?.role ?? SYSTEM
    extras = {k: v for k, v in d.items() if k not in _BOOK_MAPPED}
    for k in list(extras):
        if k in LorebookEntry.model_fields:
            extras[f"book_{k}"] = extras.pop(k)
    return LorebookEntry(**values, **extras)


def _check_count(r: FieldReader, n: int, place: str) -> None:
    if n > MAX_ENTRIES:
        r.fail("IMPORT_TOO_LARGE", f"{n:,} entries; the limit is {MAX_ENTRIES:,}", place)


def parse_character_book(r: FieldReader, data: Any, path: str = "$", *, name: str = "") -> Lorebook:
    """Read a V2/V3 ``character_book`` object (embedded or standalone) into a :class:`Lorebook`.

    Book-level ``scan_depth``, ``token_budget``, ``recursive_scanning`` are kept on the model
    (SillyTavern ignores them on import; Loomscope shows them). Raises ``IMPORT_WRONG_TYPE`` /
    ``IMPORT_INVALID_LOREBOOK`` / ``IMPORT_TOO_LARGE`` with JSON paths.
    """
    d = r.obj(data, path)
    entries_raw = d.get("entries")
    if entries_raw is None:
        entries_raw = []
    if not isinstance(entries_raw, list):
        r.wrong(f"{path}.entries", "array", entries_raw)
    _check_count(r, len(entries_raw), f"{path}.entries")
    entries = [_book_entry(r, e, f"{path}.entries[{i}]", i) for i, e in enumerate(entries_raw)]
    book_name = r.string(d, "name", path) or name
    extras = {k: v for k, v in d.items()
              if k not in {"name", "description", "entries", "scan_depth", "token_budget",
                           "recursive_scanning", "extensions"}}
    return Lorebook(
        name=book_name,
        description=r.string(d, "description", path),
        entries=entries,
        scan_depth=r.opt_int(d, "scan_depth", path),
        token_budget=r.opt_int(d, "token_budget", path),
        recursive_scanning=r.opt_bool(d, "recursive_scanning", path),
        extensions=dict(r.dict_field(d, "extensions", path)),
        **extras,
    )


def parse_world(r: FieldReader, d: dict[str, Any], *, name: str) -> Lorebook:
    """Read a SillyTavern world JSON object (``entries`` keyed by uid, or a list of world entries)."""
    entries_raw = d.get("entries")
    entries: list[LorebookEntry] = []
    if isinstance(entries_raw, dict):
        _check_count(r, len(entries_raw), "$.entries")
        for key, raw in entries_raw.items():
            path = f'$.entries["{key}"]'
            fallback: int | str = int(key) if key.isascii() and key.isdigit() and len(key) < 19 else key
            entry = _world_entry(r, raw, path, fallback)
            if isinstance(raw, dict) and raw.get("uid") is not None and str(entry.uid) != key:
                r.warn(f"{path}: uid {entry.uid} differs from its key {key!r}; the uid is used")
            entries.append(entry)
    elif isinstance(entries_raw, list):
        _check_count(r, len(entries_raw), "$.entries")
        entries = [_world_entry(r, raw, f"$.entries[{i}]", i) for i, raw in enumerate(entries_raw)]
    else:
        r.wrong("$.entries", "object keyed by uid", entries_raw)
    seen: set[str] = set()
    for e in entries:
        if str(e.uid) in seen:
            r.warn(f"uid {e.uid} appears more than once; an export gives the later entry a new uid")
        seen.add(str(e.uid))
    extras = {k: v for k, v in d.items()
              if k not in {"entries", "name", "description", "scan_depth", "token_budget",
                           "recursive_scanning", "extensions"}}
    orig = d.get("originalData")
    if isinstance(orig, dict) and isinstance(orig.get("entries"), list) and len(orig["entries"]) != len(entries):
        r.warn(f"originalData holds {len(orig['entries'])} entries but entries holds "
               f"{len(entries)}; entries is used (as SillyTavern does)")
    given = d.get("name")
    book_name = given if isinstance(given, str) and given else name
    return Lorebook(
        name=book_name,
        description=r.string(d, "description", "$"),
        entries=entries,
        scan_depth=r.opt_int(d, "scan_depth", "$"),
        token_budget=r.opt_int(d, "token_budget", "$"),
        recursive_scanning=r.opt_bool(d, "recursive_scanning", "$"),
        extensions=dict(r.dict_field(d, "extensions", "$")),
        **extras,
    )


_NOVELAI_MAPPED = {"keys", "text", "enabled", "displayName", "forceActivation"}


def parse_novelai(r: FieldReader, d: dict[str, Any], *, name: str) -> Lorebook:
    """Read a NovelAI ``.lorebook`` (``lorebookVersion``, ``entries`` list).

    Mapped: ``keys``, ``text`` → ``content``, ``enabled`` → not ``disable``, ``displayName`` →
    ``comment``, ``forceActivation`` → ``constant``. NovelAI's context settings
    (``contextConfig``, ``searchRange``, bias groups, categories) have no World Info meaning
    here; they are kept unmapped and a warning says so.
    """
    version = d.get("lorebookVersion")
    if isinstance(version, bool) or not isinstance(version, int):
        r.wrong("$.lorebookVersion", "integer", version)
    if version > 6:
        r.warn(f"NovelAI lorebookVersion {version} is newer than those seen (1-6); read as version 6")
    entries_raw = d.get("entries")
    if entries_raw is None:
        entries_raw = []
    if not isinstance(entries_raw, list):
        r.wrong("$.entries", "array", entries_raw)
    _check_count(r, len(entries_raw), "$.entries")
    entries: list[LorebookEntry] = []
    for i, raw in enumerate(entries_raw):
        path = f"$.entries[{i}]"
        e = r.obj(raw, path)
        extras = {k: v for k, v in e.items() if k not in _NOVELAI_MAPPED}
        for k in list(extras):
            if k in LorebookEntry.model_fields:
                extras[f"nai_{k}"] = extras.pop(k)
        entries.append(LorebookEntry(
            uid=i,
            keys=r.keys(e, "keys", path),
            content=r.string(e, "text", path),
            disable=not r.boolean(e, "enabled", path, True),
            comment=r.string(e, "displayName", path),
            constant=r.boolean(e, "forceActivation", path, False),
            selective=False,
            **extras,
        ))
        if not e.get("keys") and not e.get("text"):
            r.warn(f"{path}: empty placeholder entry ({e.get('displayName') or 'no name'})")
    r.warn("NovelAI lorebook: only keys, text, enabled, displayName and forceActivation are mapped; "
           "contextConfig, searchRange and bias groups are kept but have no effect")
    # book-level NovelAI fields (lorebookVersion, settings, categories) are kept together so a
    # world export does not look like a NovelAI file any more
    extras = {k: v for k, v in d.items() if k not in {"entries", "name"}}
    return Lorebook(name=name, entries=entries, novelai_fields=extras)


def lorebook_shape(data: Any) -> str | None:
    """Which lorebook shape ``data`` is, or ``None`` when it is not a lorebook Loomscope reads.

    Returns one of ``"lorebook_v3"``, ``"novelai_lorebook"``, ``"sillytavern_world"``,
    ``"character_book_v2"``.
    """
    if not isinstance(data, dict):
        return None
    if data.get("spec") == "lorebook_v3":
        return "lorebook_v3"
    if "lorebookVersion" in data and not isinstance(data.get("entries"), dict):
        return "novelai_lorebook"
    if data.get("kind") == "memory":
        return None  # Agnai memory book: not supported
    entries = data.get("entries")
    if isinstance(entries, dict):
        return "sillytavern_world"
    if isinstance(entries, list):
        first = next((e for e in entries if isinstance(e, dict)), None)
        if first is None:
            return "character_book_v2" if not entries else None
        if any(k in first for k in ("keys", "insertion_order", "enabled")):
            return "character_book_v2"
        if any(k in first for k in ("key", "uid", "keysecondary")):
            return "sillytavern_world"
    return None


def parse_lorebook_data(data: Any, file: str | None, *, name: str = "",
                        reader: FieldReader | None = None) -> tuple[Lorebook, str]:
    """Read parsed JSON as a lorebook. Returns ``(book, spec)``.

    Raises ``IMPORT_UNSUPPORTED_FORMAT`` for other shapes (Agnai, RisuAI, KoboldAI Lite, ...),
    ``IMPORT_UNSUPPORTED_SPEC`` for a ``lorebook_v3`` with an unknown major version.
    """
    r = reader or FieldReader(file)
    shape = lorebook_shape(data)
    if shape is None:
        kind = "Agnai memory book" if isinstance(data, dict) and data.get("kind") == "memory" \
            else "this JSON shape"
        r.fail("IMPORT_UNSUPPORTED_FORMAT",
               f"{kind} is not a lorebook format Loomscope reads (SillyTavern world JSON, "
               "V2/V3 character_book, NovelAI .lorebook)", "$")
    if shape == "lorebook_v3":
        version = data.get("spec_version")
        if version is not None and not str(version).startswith("3"):
            r.fail("IMPORT_UNSUPPORTED_SPEC", f"lorebook_v3 spec_version {version!r} is not supported",
                   "$.spec_version")
        inner = data.get("data")
        book = parse_character_book(r, inner, "$.data", name=name)
        return book, shape
    if shape == "novelai_lorebook":
        return parse_novelai(r, data, name=name), shape
    if shape == "sillytavern_world":
        return parse_world(r, data, name=name), shape
    return parse_character_book(r, data, "$", name=name), shape


def load_lorebook_with_info(path: str | Path) -> tuple[Lorebook, str, list[str]]:
    """Like :func:`load_lorebook` but also returns ``(spec, warnings)``."""
    name, raw = read_bytes(path)
    reject_binary(raw, name, "lorebook")
    text = decode_utf8(raw, name)
    data = parse_json_document(text, name, "lorebook")
    r = FieldReader(name)
    book, spec = parse_lorebook_data(data, name, name=Path(path).stem, reader=r)
    return book, spec, r.warnings


def load_lorebook(path: str | Path) -> Lorebook:
    """Read a lorebook file.

    Parameters
    ----------
    path:
        SillyTavern world JSON (``{"entries": {"<uid>": {...}}}``), a standalone V2
        ``character_book`` or V3 ``{"spec": "lorebook_v3", "data": {...}}``, or a NovelAI
        ``.lorebook``. The book name is the file stem unless the file names it.

    Returns
    -------
    Lorebook
        Entries in file order; unknown fields kept as extras (written back by
        :func:`export_world_json`).

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_FILE_NOT_FOUND``, ``IMPORT_EMPTY_FILE``, ``IMPORT_TOO_LARGE`` (file over 64 MiB or
        more than 100,000 entries), ``IMPORT_INVALID_UTF8``, ``IMPORT_INVALID_JSON``,
        ``IMPORT_TOO_DEEP``, ``IMPORT_WRONG_TYPE``, ``IMPORT_INVALID_LOREBOOK``,
        ``IMPORT_UNSUPPORTED_SPEC``, ``IMPORT_UNSUPPORTED_FORMAT``. Nothing else.
    """
    return guarded(path, lambda: load_lorebook_with_info(path)[0])


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------

#: LorebookEntry field → SillyTavern world key (inverse of :data:`WORLD_FIELDS`).
_EXPORT_KEYS: dict[str, str] = {field: key for key, (field, _k, _d) in WORLD_FIELDS.items()}


def _export_value(field: str, value: Any) -> Any:
    if isinstance(value, (SelectiveLogic, InsertionPosition)):
        return int(value)
    if field == "delay_until_recursion":
        return value if value else False
    if field in ("order", "probability", "group_weight") and isinstance(value, float) \
            and value.is_integer():
        return int(value)
    return value


def export_world_entry(entry: LorebookEntry) -> dict[str, Any]:
    """One entry in SillyTavern world shape (camelCase keys; extras written back as read)."""
    out: dict[str, Any] = {"uid": entry.uid}
    for field in LorebookEntry.model_fields:
        if field == "uid":
            continue
        out[_EXPORT_KEYS[field]] = _export_value(field, getattr(entry, field))
    for key, value in (entry.model_extra or {}).items():
        if key.startswith("st_") and key[3:] in LorebookEntry.model_fields:
            key = key[3:]
        out.setdefault(key, value)
    return out


def export_world_json(book: Lorebook) -> dict[str, Any]:
    """The lorebook as a SillyTavern world JSON object (``{"entries": {"<uid>": {...}}, ...}``).

    Every known field is written in SillyTavern's camelCase names; unknown entry and book
    fields (``displayIndex``, ``characterFilter``, ``originalData``, ...) are written back as
    read. Book settings (description, scan depth, budget, recursion, extensions) are written
    only when set. A repeated uid (possible in list-shaped input) gets the next free uid so
    that no entry is lost. ``load → export → load`` gives an equal :class:`Lorebook` (the name comes
    from the file name, as in SillyTavern).
    """
    entries: dict[str, Any] = {}
    numeric = [int(e.uid) for e in book.entries
               if isinstance(e.uid, int) or (isinstance(e.uid, str) and e.uid.isascii() and e.uid.isdigit())]
    next_uid = max(numeric, default=-1) + 1
    for e in book.entries:
        data = export_world_entry(e)
        if str(e.uid) in entries:
            # SillyTavern keys entries by uid: a repeated uid would overwrite an entry, so the
            # later one gets the next free uid (nothing is dropped)
            data["uid"] = next_uid
            next_uid += 1
        entries[str(data["uid"])] = data
    out: dict[str, Any] = {"entries": entries}
    if book.description:
        out["description"] = book.description
    for key in ("scan_depth", "token_budget", "recursive_scanning"):
        if getattr(book, key) is not None:
            out[key] = getattr(book, key)
    if book.extensions:
        out["extensions"] = book.extensions
    for key, value in (book.model_extra or {}).items():
        out.setdefault(key, value)
    return out


def write_world_json(book: Lorebook, path: str | Path) -> None:
    """Write :func:`export_world_json` to ``path`` atomically (temp file + ``os.replace``)."""
    atomic_write_text(path, json.dumps(export_world_json(book), ensure_ascii=False, indent=4) + "\n")
