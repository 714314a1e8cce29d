"""Preparing lorebooks for activation: keys, contents and indexes, cached per book content.

Internal to :mod:`engine.lorebook`. A prepared book set holds every entry with its keys after
macro substitution (regex keys compiled, invalid ones turned into diagnostics), its content
with decorators removed, the priority order (SPEC §5 tie-breaks) and the key indexes used to
visit only entries whose keys occur in the scanned text.
"""

from __future__ import annotations

import operator
import re
import threading
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from ..cache import lru
from ..schema.lorebook import Lorebook, LorebookEntry
from ..schema.settings import WorldInfoSettings
from .jsregex import JsRegex, catastrophic_reason
from .keys import InvalidRegexKey, KeyHits, clear_matchers, compile_regex_key, is_regex_key, substitute_names

_DECORATOR_LINE = re.compile(r"^@@(?!@)(\w+)")

# (extra field camelCase, extensions snake_case, source name) of the opt-in card/persona scans.
_MATCH_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("matchPersonaDescription", "match_persona_description", "persona_description"),
    ("matchCharacterDescription", "match_character_description", "character_description"),
    ("matchCharacterPersonality", "match_character_personality", "character_personality"),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", "character_depth_prompt"),
    ("matchScenario", "match_scenario", "scenario"),
    ("matchCreatorNotes", "match_creator_notes", "creator_notes"),
)


@dataclass
class _Key:
    text: str  # after macros, trimmed (as shown in the trace)
    norm: str  # compared form (lowercased unless case-sensitive)
    cs: bool
    regex: JsRegex | None = None


@dataclass
class _Entry:
    gid: int  # index in the flattened list (book order, then entry order)
    book_index: int
    book: str
    entry_index: int
    entry: LorebookEntry
    label: str  # "<book>.<uid>", the timed-effects key (SillyTavern ``world.uid``)
    keys: list[_Key]
    secondary: list[_Key]
    invalid: list[tuple[str, str]]
    content: str
    decorators: frozenset[str]
    cs: bool
    ww: bool
    groups: list[str]
    delay_level: int
    sources: tuple[str, ...]
    char_filter: dict[str, Any] | None
    triggers: list[str]
    prio: tuple[Any, ...] = ()
    rank: int = 0
    invalid_primary: bool = False
    default_reason: tuple[str, dict[str, Any]] | None = None


@dataclass
class _Cand:
    """An entry activated in the current pass (SillyTavern ``activatedNow``)."""

    x: _Entry
    code: str
    detail: dict[str, Any]
    sticky: bool = False


@dataclass
class _Prepared:
    entries: list[_Entry]  # in book order
    by_priority: list[_Entry]
    ci_keys: frozenset[str]
    cs_keys: frozenset[str]
    max_entry_depth: int
    needs_sources: frozenset[str]
    diagnostics: list[str]
    special: list[_Entry]  # disabled / character filter / triggers: checked once per call
    delayed: list[_Entry]  # entries with a ``delay`` timed effect
    ci_index: dict[str, list[int]]  # compared primary key -> gids using it
    cs_index: dict[str, list[int]]
    ci_index2: dict[str, list[int]]  # compared secondary key -> gids using it
    cs_index2: dict[str, list[int]]
    always_visit: frozenset[int]  # constants, decorators, regex keys, delay-until-recursion
    regex_gids: frozenset[int]
    has_groups: bool
    hits_cache: dict[str, tuple[KeyHits, KeyHits]] = field(default_factory=dict)
    rank_of: list[int] = field(default_factory=list)  # gid -> rank
    # Trace records of entries that were never candidates, per global scan depth: frozen and
    # shared across calls (the trace of a big book is mostly these).
    default_trace: dict[int, list[Any]] = field(default_factory=dict)
    cs_gids: frozenset[int] = frozenset()  # entries with case-sensitive plain keys (near-miss hints)


def _extra(entry: LorebookEntry, camel: str, snake: str | None = None) -> Any:
    extra = entry.model_extra or {}
    if camel in extra:
        return extra[camel]
    if snake is not None:
        if snake in extra:
            return extra[snake]
        if snake in entry.extensions:
            return entry.extensions[snake]
    return None


def _uid_key(uid: int | str) -> tuple[int, Any]:
    if isinstance(uid, int):
        return (0, uid)
    return (0, int(uid)) if uid.isascii() and uid.isdigit() else (1, uid)  # "³".isdigit() but int("³") fails


def _split_decorators(content: str) -> tuple[frozenset[str], str]:
    """SillyTavern decorators: leading lines ``@@name`` (``@@@`` escapes one ``@``)."""
    if not content.startswith("@@"):
        return frozenset(), content
    lines = content.split("\n")
    found: set[str] = set()
    i = 0
    while i < len(lines):
        m = _DECORATOR_LINE.match(lines[i])
        if not m:
            break
        found.add(m.group(1))
        i += 1
    rest = "\n".join(lines[i:])
    if rest.startswith("@@@"):
        rest = rest[1:]
    return frozenset(found), rest


def _prepare_key(raw: Any, *, cs: bool, user: str, char: str) -> tuple[_Key | None, str | None]:
    if not isinstance(raw, str):
        raw = str(raw)
    text = substitute_names(raw, user=user, char=char).strip()
    if not text:
        return None, None
    if text.startswith("/") and is_regex_key(text):
        try:
            return _Key(text, text, True, compile_regex_key(text)), None
        except InvalidRegexKey as exc:
            return None, str(exc)
    # Anything else, including "/a/b/" (an unescaped "/" inside), is plain text as in SillyTavern.
    return _Key(text, text if cs else text.lower(), cs), None


def _prepare(books: Sequence[Lorebook], settings: WorldInfoSettings, user: str, char: str) -> _Prepared:
    diagnostics: list[str] = []
    ci: set[str] = set()
    cs_set: set[str] = set()
    entries: list[_Entry] = []
    for bi, book in enumerate(books):
        for ei, e in enumerate(book.entries):
            entries.append(_prepare_entry(len(entries), bi, book.name, ei, e, settings, user, char,
                                          diagnostics, ci, cs_set))
    max_depth = max([0, *(e.scan_depth for b in books for e in b.entries if e.scan_depth is not None)])
    needs = frozenset(src for x in entries for src in x.sources)
    by_priority = sorted(entries, key=lambda x: x.prio)
    ci_index: dict[str, list[int]] = {}
    cs_index: dict[str, list[int]] = {}
    ci_index2: dict[str, list[int]] = {}
    cs_index2: dict[str, list[int]] = {}
    always: set[int] = set()
    regex_gids: set[int] = set()
    for rank, x in enumerate(by_priority):
        x.rank = rank
        _rank_entry(x, always)
        for keys, ci_ix, cs_ix in ((x.keys, ci_index, cs_index), (x.secondary, ci_index2, cs_index2)):
            for k in keys:
                if k.regex is not None:
                    always.add(x.gid)
                    regex_gids.add(x.gid)
                else:
                    (cs_ix if k.cs else ci_ix).setdefault(k.norm, []).append(x.gid)
    special = [x for x in entries if x.entry.disable or x.char_filter or x.triggers]
    delayed = [x for x in entries if x.entry.delay]
    prepared = _Prepared(entries, by_priority, frozenset(ci), frozenset(cs_set), max_depth,
                         needs, diagnostics, special, delayed, ci_index, cs_index, ci_index2, cs_index2,
                         frozenset(always), frozenset(regex_gids), any(x.groups for x in entries))
    prepared.rank_of = [x.rank for x in entries]
    prepared.cs_gids = frozenset(x.gid for x in entries if any(k.cs and k.regex is None for k in x.keys))
    return prepared


def _rank_entry(x: _Entry, always: set[int]) -> None:
    """What is known of an entry before any scan: an invalid primary key, always visited, why it cannot match."""
    x.invalid_primary = any(raw in x.entry.keys for raw, _ in x.invalid)
    if x.delay_level or x.entry.constant or x.decorators:
        always.add(x.gid)
    if not x.keys and not x.entry.constant:
        x.default_reason = (("LOREBOOK_INVALID_KEY", {"invalid": [{"key": k, "error": err}
                                                                   for k, err in x.invalid]})
                            if x.invalid else ("LOREBOOK_NO_KEYS", {}))


def _prepare_keys(book: str, e: LorebookEntry, *, cs: bool, settings: WorldInfoSettings, user: str, char: str,
                  diagnostics: list[str], ci: set[str],
                  cs_set: set[str]) -> tuple[list[_Key], list[_Key], list[tuple[str, str]]]:
    """Primary and secondary keys after macros (regexes compiled); invalid ones and risky regexes in diagnostics.

    Returns (primary keys, secondary keys, invalid ``(raw key, error)``); the compared form of
    every plain key is added to ``ci`` or ``cs_set``.
    """
    keys: list[_Key] = []
    secondary: list[_Key] = []
    invalid: list[tuple[str, str]] = []
    for target, raws in ((keys, e.keys), (secondary, e.secondary_keys if e.selective else [])):
        for raw in raws:
            k, err = _prepare_key(raw, cs=cs, user=user, char=char)
            if err is not None:
                invalid.append((str(raw), err))
                diagnostics.append(f"{book}: uid {e.uid}: LOREBOOK_INVALID_KEY: {err}")
            if k is None:
                continue
            if k.regex is not None:
                why = catastrophic_reason(k.regex.source)
                if why is not None:
                    diagnostics.append(
                        f"{book}: uid {e.uid}: regex key {k.text!r} can take exponential time "
                        f"({why}): SillyTavern's JavaScript engine may freeze on it; Loomscope stops "
                        f"each search after {settings.regex_timeout_ms:g} ms")
            target.append(k)
            if k.regex is None:
                (cs_set if cs else ci).add(k.norm)
    return keys, secondary, invalid


def _st_options(e: LorebookEntry) -> tuple[tuple[str, ...], dict[str, Any] | None, Any]:
    """The optional SillyTavern fields: extra scan sources, the character filter, the generation triggers."""
    if not (e.__pydantic_extra__ or e.extensions):  # the optional SillyTavern fields live there
        return (), None, None
    sources = tuple(src for camel, snake, src in _MATCH_SOURCES if _extra(e, camel, snake))
    cf = _extra(e, "characterFilter", "character_filter")
    names = _extra(e, "characterFilterNames", "character_filter_names")
    tags = _extra(e, "characterFilterTags", "character_filter_tags")
    if not isinstance(cf, dict):
        cf = None
    if names or tags:
        cf = {"names": list(names or []), "tags": list(tags or []),
              "isExclude": bool(_extra(e, "characterFilterExclude", "character_filter_exclude"))}
    return sources, cf, _extra(e, "triggers", "triggers")


def _prepare_entry(gid: int, bi: int, book: str, ei: int, e: LorebookEntry, settings: WorldInfoSettings,
                   user: str, char: str, diagnostics: list[str], ci: set[str], cs_set: set[str]) -> _Entry:
    """One entry ready for activation (keys, content without decorators, groups, options, priority)."""
    cs = settings.case_sensitive if e.case_sensitive is None else bool(e.case_sensitive)
    ww = settings.match_whole_words if e.match_whole_words is None else bool(e.match_whole_words)
    keys, secondary, invalid = _prepare_keys(book, e, cs=cs, settings=settings, user=user, char=char,
                                             diagnostics=diagnostics, ci=ci, cs_set=cs_set)
    decorators, body = _split_decorators(e.content or "")
    sources, cf, trig = _st_options(e)
    groups = [g.strip() for g in re.split(r",\s*", e.group) if g.strip()] if e.group else []
    delay = e.delay_until_recursion
    delay_level = int(delay) if isinstance(delay, (int, float)) and delay > 0 else 0
    return _Entry(
        gid=gid, book_index=bi, book=book, entry_index=ei, entry=e,
        label=f"{book}.{e.uid}", keys=keys, secondary=secondary, invalid=invalid,
        content=substitute_names(body, user=user, char=char), decorators=decorators, cs=cs, ww=ww, groups=groups,
        delay_level=delay_level, sources=sources, char_filter=cf,
        triggers=[str(t) for t in trig] if isinstance(trig, list) else [],
        prio=(-float(e.order), bi, _uid_key(e.uid), ei),
    )


#: Book sets whose prepared entries are kept (least recently used out).
_PREPARED_CACHE_SIZE = 16
#: Per key: the entry lists (kept alive so their ids stay unique), a value snapshot per book, the result.
_CachedPrepared = tuple[tuple[tuple[LorebookEntry, ...], ...], list[tuple[Any, ...]], _Prepared]
_PREPARED_CACHE: LRUCache[tuple[Any, ...], _CachedPrepared] = lru(_PREPARED_CACHE_SIZE)
# activate() runs on preview worker threads: cache bookkeeping is guarded (results are pure).
_CACHE_LOCK = threading.Lock()


_UID = operator.attrgetter("uid")


def _copy_value(v: Any) -> Any:
    return v.copy() if isinstance(v, (list, dict)) else v


#: Field order of ``LorebookEntry.__dict__`` and the positions of its list/dict fields.
_FIELD_ORDER = tuple(LorebookEntry.model_fields)
_MUTABLE_POS = tuple(i for i, f in enumerate(LorebookEntry.model_fields.values())
                     if typing.get_origin(f.annotation) in (list, dict) or f.annotation in (list, dict))


def _snapshot_values(d: dict[str, Any]) -> tuple[Any, ...]:
    if tuple(d) == _FIELD_ORDER:  # the usual layout: copy only the known list/dict fields
        vals = list(d.values())
        for i in _MUTABLE_POS:
            vals[i] = _copy_value(vals[i])
        return tuple(vals)
    return tuple(map(_copy_value, d.values()))


def _snapshot(book: Lorebook) -> tuple[Any, ...]:
    """Field values of every entry, with list/dict values copied (detects in-place edits)."""
    return (book.name,
            [_snapshot_values(d) for d in map(vars, book.entries)],
            [_copy_value(e.__pydantic_extra__) for e in book.entries])


def _unchanged(book: Lorebook, snap: tuple[Any, ...]) -> bool:
    # Tuple/list equality runs in C and compares by identity first, so an unchanged book is
    # cheap to confirm; a list edited in place differs from its copy in the snapshot.
    entries = book.entries
    return (book.name == snap[0]
            and list(map(tuple, map(dict.values, map(vars, entries)))) == snap[1]
            and [e.__pydantic_extra__ for e in entries] == snap[2])


def _prepared_for(books: Sequence[Lorebook], settings: WorldInfoSettings, user: str, char: str) -> _Prepared:
    """Prepared entries for ``books``, cached by shape and checked against a value snapshot.

    The key is the books' names and their entries' uids; the snapshot comparison then checks
    every field value by equality (identity first, so unchanged objects are cheap). A new
    ``Lorebook`` wrapper or a deserialized copy with the same content therefore hits, and any
    change to an entry (assignment or in-place list/dict edit) is a miss.
    """
    key = (tuple((b.name, tuple(map(_UID, b.entries))) for b in books), user, char,
           settings.case_sensitive, settings.match_whole_words, settings.regex_timeout_ms)
    with _CACHE_LOCK:
        hit = _PREPARED_CACHE.get(key)  # a hit becomes the most recently used
    if hit is not None:
        _refs, snaps, prepared = hit
        if all(_unchanged(b, snap) for b, snap in zip(books, snaps)):
            return prepared
    prepared = _prepare(books, settings, user, char)
    entry: _CachedPrepared = (tuple(tuple(b.entries) for b in books), [_snapshot(b) for b in books], prepared)
    with _CACHE_LOCK:
        _PREPARED_CACHE[key] = entry
    return prepared


def clear_cache() -> None:
    """Forget prepared books and compiled matchers (frees memory; results never depend on it)."""
    with _CACHE_LOCK:
        _PREPARED_CACHE.clear()
    clear_matchers()
