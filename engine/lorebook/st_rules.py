r"""World Info activation under the ``sillytavern`` rules: SillyTavern 1.12.x, quirks included.

A literal reading of SillyTavern 1.12.6 ``public/scripts/world-info.js``; each rule below names
the function and lines it comes from. :func:`engine.lorebook.activate` calls
:func:`activate_sillytavern` when ``settings.rules == "sillytavern"`` (the default).

Entry order (``getSortedEntries``, lines 3593–3640): chat books, then persona books, then the
character and global books as ``character_strategy`` says (``evenly``: one list sorted by
``order`` descending; ``character_first``: character books sorted, then global books sorted;
``global_first``: the reverse). Sorts are stable, so equal orders keep book order; entries of
a book come in JavaScript property order (integer uids ascending, then the rest).

The scan (``checkWorldInfo``, lines 3704–4145; ``WorldInfoBuffer``, lines 131–385):

* The chat is the messages without hidden ones (``coreChat``, script.js 3562), newest first,
  ``Name: text`` with ``include_names``; the first chat message has ``{{user}}``/``{{char}}``
  substituted (script.js 3557–3559). Timed effects count this chat's length.
* The text an entry scans is ``"\\x01"`` + its newest ``scan_depth`` messages joined with
  ``"\\n\\x01"``, then the injected prompts (``extra_scan_text``) and, except in a
  min-activations pass, the recursion buffer (``WorldInfoBuffer.get``, 204–241). A scan depth
  of 0 scans nothing at all, not even the recursion buffer.
* Keys (``matchKeys``, 243–277; lines 3893–3896): a key is substituted then, when non-empty,
  trimmed; a valid ``/regex/`` is searched in the raw text; an invalid one is plain text. Plain
  keys compare lowercased unless case-sensitive; with whole words a key of one word must stand
  between JavaScript ASCII ``\\W`` characters (or the text's ends), a key of several words is a
  plain substring. A ``" "`` key (empty after trimming) matches every text; ``""`` never does,
  yet still counts as a secondary key (so ``AND_ALL`` fails and ``NOT_ALL`` passes).
* Each pass visits the entries in sorted order; activated ones are sorted sticky first, then
  by that order; inclusion groups (``filterByInclusionGroups``, 4299–4386) pick winners; then
  probability (a seeded roll passes when ``roll <= probability``) and the budget: the running
  total is ``count(text of earlier passes' recursing entries) + count(this pass's contents
  each followed by "\\n")``; when it reaches the budget (``>=``) the entry and every later one of
  the pass are dropped and the scan stops recursing (lines 4001–4036, 4054–4062). Constants are
  not protected.
* Min activations widen the depth while ``depth <= min_activations_depth_max`` (so the last
  pass scans one message deeper than the maximum) and ``depth <= chat length`` (4066–4081).
* Placement (4104–4145): activated entries sorted by ``order`` descending, each ``unshift``-ed
  into its position, so lower order comes first and, for equal orders, the entry activated
  later comes first. Entries with empty content are activated but insert nothing.

Not in SillyTavern 1.12.6 and so ignored under these rules: ``ignore_budget`` and the opt-in
card/persona scans (``matchCharacterDescription``, ...).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..cache import memoized
from ..schema._construct import construct
from ..schema.character import Character, Persona
from ..schema.lorebook import Lorebook, SelectiveLogic
from ..schema.messages import ChatMessage
from ..schema.settings import WorldInfoSettings
from .budget import fill_budget
from .checks import _message_name, _static_reason
from .codes import BLOCK_REASONS
from .jsregex import JsRegex, RegexClock
from .keys import InvalidRegexKey, compile_regex_key, is_regex_key, substitute_names
from .loomscope import _Run
from .models import ActivatedEntry, ActivationResult, TraceRecord
from .prepare import _Entry, _Prepared
from .records import _default_trace, _entry_model, _record, _regex_timeout_diagnostic, _role_name
from .scan import _Scanner, _Table
from .st_hash import NO_POSITION_FIELD, no_position, parse_decorators
from .timed import _Timed, books_fingerprint, hash_function, next_timed_state

__all__ = ["SCOPES", "activate_sillytavern", "book_scope"]

#: Book scopes, SillyTavern's lore sources (``getChatLore``, ``getCharacterLore``, ``getGlobalLore``).
SCOPES = ("chat", "persona", "character", "global")
_MAX_SCAN_DEPTH = 1000  # world-info.js MAX_SCAN_DEPTH
_INITIAL, _RECURSION, _MIN = 1, 2, 3  # world-info.js scan_state
_MATCHER = "\x01"
_JOINER = "\n\x01"
_JS_WORD = "A-Za-z0-9_"


def book_scope(book: Lorebook, given: str | None = None) -> str:
    """The scope of ``book``: ``given`` when valid, else the book's ``scope`` field, else ``global``."""
    for value in (given, (book.model_extra or {}).get("scope")):
        if isinstance(value, str) and value in SCOPES:
            return value
    return "global"


@dataclass
class _StKey:
    raw: str          # as written (group scoring uses it unsubstituted)
    text: str         # substituted and trimmed ("" for a " " key: matches everything)
    regex: JsRegex | None


@dataclass
class _StEntry:
    x: _Entry
    keys: list[_StKey]        # primary keys whose substituted form is non-empty
    secondary: list[_StKey]   # every secondary key ("" ones are kept and never match)
    always: bool              # visit in every pass (regex, " ", odd keys, constants, ...)
    norms: list[str]          # compared plain forms, for the pre-filter index


def _st_key(raw: Any, user: str, char: str) -> _StKey | None:
    """A key with ``{{user}}`` / ``{{char}}`` filled in (:func:`_macro_key` with names only)."""
    return _macro_key(raw, lambda text: substitute_names(text, user=user, char=char))


def _st_entries(prepared: _Prepared, user: str, char: str) -> list[_StEntry]:
    cached = getattr(prepared, "_st_entries", None)
    if cached is not None and cached[0] == (user, char):
        return cached[1]
    out: list[_StEntry] = []
    for x in prepared.entries:
        keys = [k for k in (_st_key(r, user, char) for r in x.entry.keys) if k is not None]
        secondary: list[_StKey] = []
        for r in x.entry.secondary_keys:
            k = _st_key(r, user, char)
            secondary.append(k if k is not None else _StKey(str(r), "\0never", None))
        always = bool(x.entry.constant or x.decorators or x.delay_level)
        norms: list[str] = []
        for k in keys:
            if k.regex is not None or not k.text or "\n" in k.text or "\x01" in k.text:
                always = True
            elif k.text.startswith("/") and is_regex_key(k.text):
                always = True  # an invalid regex: plain text not in the matcher's key set
            else:
                norms.append(k.text if x.cs else k.text.lower())
        out.append(_StEntry(x, keys, secondary, always, norms))
    prepared._st_entries = ((user, char), out)  # type: ignore[attr-defined]
    return out


def _with_macro_keys(st_all: list[_StEntry], macros: Callable[[str], str]) -> list[_StEntry]:
    """``st_all`` with keys that hold macros besides the names run through ``macros``.

    ``substituteParams(key)`` (world-info.js 3901, 3933). The cached list is not changed: the
    few entries with such keys get fresh copies.
    """
    out = st_all
    for i, s in enumerate(st_all):
        raws = [str(r) for r in (*s.x.entry.keys, *s.x.entry.secondary_keys)]
        if not any("{{" in r for r in raws):
            continue
        keys = [k for k in (_macro_key(r, macros) for r in s.x.entry.keys) if k is not None]
        secondary = [k if k is not None else _StKey(str(r), "\0never", None)
                     for r in s.x.entry.secondary_keys for k in (_macro_key(r, macros),)]
        if out is st_all:
            out = list(st_all)
        out[i] = _StEntry(s.x, keys, secondary, True, [])
    return out


def _macro_key(raw: Any, macros: Callable[[str], str]) -> _StKey | None:
    """A key after ``macros`` (``substituteParams``), ``None`` when it comes out empty.

    ``substituted && ...`` (world-info.js 3895): an empty key never matches. A ``/…/`` key that
    does not compile is matched as plain text (``parseRegexFromString`` returns ``null``).
    """
    raw = raw if isinstance(raw, str) else str(raw)
    sub = macros(raw)
    if not sub:
        return None
    text = sub.strip()
    regex = None
    if text.startswith("/") and is_regex_key(text):
        try:
            regex = compile_regex_key(text)
        except InvalidRegexKey:
            regex = None
    return _StKey(raw, text, regex)


def _js_key_order(uid: int | str) -> tuple[int, int]:
    """JavaScript property order: array-index keys (integers 0..2^32-2) first, ascending."""
    text = str(uid)
    if text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0")) and int(text) < 2**32 - 1:
        return (0, int(text))
    return (1, 0)


def sorted_entries(prepared: _Prepared, books: Sequence[Lorebook], scopes: Sequence[str],
                   strategy: str) -> list[_Entry]:
    """Entries in SillyTavern's ``getSortedEntries`` order (world-info.js 3593–3640).

    Cached on ``prepared`` per (scopes, strategy).
    """
    cache: dict[tuple[Any, ...], list[_Entry]] = prepared.__dict__.setdefault("_st_order", {})
    ck = (tuple(scopes), strategy)
    hit = cache.get(ck)
    if hit is not None:
        return hit
    by_scope: dict[str, list[_Entry]] = {s: [] for s in SCOPES}
    per_book: dict[int, list[_Entry]] = {}
    for x in prepared.entries:
        per_book.setdefault(x.book_index, []).append(x)
    for bi in range(len(books)):
        keyed = []
        for x in per_book.get(bi, []):
            kind, num = _js_key_order(x.entry.uid)
            keyed.append(((kind, num if kind == 0 else x.entry_index), x))
        keyed.sort(key=lambda kx: kx[0])
        by_scope[scopes[bi]].extend(x for _, x in keyed)

    def srt(xs: list[_Entry]) -> list[_Entry]:
        return sorted(xs, key=lambda x: -float(x.entry.order))  # stable, as Array.prototype.sort

    glob, char = by_scope["global"], by_scope["character"]
    if strategy == "character_first":
        rest = srt(char) + srt(glob)
    elif strategy == "global_first":
        rest = srt(glob) + srt(char)
    else:
        rest = srt(glob + char)
    out = srt(by_scope["chat"]) + srt(by_scope["persona"]) + rest
    if len(cache) > 8:
        cache.clear()
    cache[ck] = out
    return out


@memoized(8192)
def _whole_word_pattern(key: str) -> re.Pattern[str]:
    # `(?:^|\W)(${escapeRegex(key)})(?:$|\W)` with JavaScript's ASCII \W; `$` = end of input.
    return re.compile(f"(?:^|[^{_JS_WORD}])({re.escape(key)})(?:\\Z|[^{_JS_WORD}])")


_SPLIT = re.compile(r"\s+")


class _Buffer:
    """``WorldInfoBuffer``: the texts scanned in one pass, cached per depth."""

    def __init__(self, window: list[tuple[int, str]], inject: list[str], clock: RegexClock) -> None:
        self.window = window
        self.inject = inject
        self.recurse: list[str] = []
        self.recurse_from: list[list[tuple[int, _Entry]]] = []  # per recursion text: (offset, entry)
        self.skew = 0
        self.clock = clock
        self._cache: dict[tuple[int, bool, int], tuple[str, str, list[tuple[int, dict[str, Any]]]]] = {}
        self._regex_cache: dict[tuple[int, int, bool, int], Any] = {}

    def get(self, depth: int, state: int) -> tuple[str, str, list[tuple[int, dict[str, Any]]]]:
        """(text, lowercased text, [(start offset, source meta)]) for ``depth`` in ``state``."""
        if depth <= 0:
            return "", "", []
        depth = min(depth, _MAX_SCAN_DEPTH)
        with_rec = state != _MIN and bool(self.recurse)
        key = (depth, with_rec, len(self.recurse) if with_rec else 0)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        parts: list[str] = []
        starts: list[tuple[int, dict[str, Any]]] = []
        pos = 1
        for d, (i, t) in enumerate(self.window[:depth]):
            starts.append((pos, {"source": "chat", "message_index": i, "depth": d}))
            parts.append(t)
            pos += len(t) + 2
        if not parts:
            parts.append("")
        for j, t in enumerate(self.inject):
            starts.append((pos, {"source": "extra", "extra_index": j}))
            parts.append(t)
            pos += len(t) + 2
        if with_rec:
            for j, t in enumerate(self.recurse):
                starts.append((pos, {"source": "recursion", "recursion_index": j, "added_in_pass": j}))
                parts.append(t)
                pos += len(t) + 2
        text = _MATCHER + _JOINER.join(parts)
        hit = (text, text.lower(), starts)
        self._cache[key] = hit
        return hit

    def where(self, starts: list[tuple[int, dict[str, Any]]], pos: int) -> dict[str, Any]:
        meta: dict[str, Any] = {"source": "chat"}
        begin = 0
        for s, m in starts:
            if s <= pos:
                meta, begin = m, s
            else:
                break
        out = dict(meta)
        if out.get("source") == "recursion":
            src = None
            for off, x in self.recurse_from[out["recursion_index"]]:
                if off <= pos - begin:
                    src = x
            if src is not None:
                out.update(from_book=src.book, from_uid=src.entry.uid, from_comment=src.entry.comment,
                           added_in_pass=out.get("added_in_pass"))
        return out

    def match(self, key: _StKey, x: _Entry, depth: int, state: int,
              *, raw: bool = False) -> dict[str, Any] | None:
        """``matchKeys``: where ``key`` occurs in the entry's text, or ``None``."""
        text, lower, starts = self.get(depth, state)
        needle = key.raw if raw else key.text
        regex = key.regex if not raw else _raw_regex(needle)
        if regex is not None:
            ck = (id(regex), depth, state != _MIN, len(self.recurse))
            if ck in self._regex_cache:
                m = self._regex_cache[ck]
            else:
                m = regex.search(text, clock=self.clock, where=f"scan depth {depth}")
                self._regex_cache[ck] = m
            if m is None:
                return None
            return {**self.where(starts, m.start()), "matched": m.group()[:200]}
        hay = text if x.cs else lower
        k = needle if x.cs else needle.lower()
        if x.ww and len(_SPLIT.split(k)) <= 1:
            # a whole-word match holds the key itself, so it starts no earlier than one character
            # before the key's first occurrence: str.find skips the slow search of the whole window
            # (``^`` still means the start of the text with a search position)
            first = hay.find(k)
            m2 = _whole_word_pattern(k).search(hay, max(0, first - 1)) if first >= 0 else None
            pos = m2.start(1) if m2 is not None else -1
        else:
            pos = hay.find(k)
        if pos < 0:
            return None
        return self.where(starts, pos)


def _raw_regex(needle: str) -> JsRegex | None:
    if needle.startswith("/") and is_regex_key(needle):
        try:
            return compile_regex_key(needle)
        except InvalidRegexKey:
            return None
    return None


@dataclass
class _C:
    """An entry activated in the current pass (``activatedNow``)."""

    s: _StEntry
    code: str
    detail: dict[str, Any]
    sticky: bool = False
    content: str | None = None  # after SillyTavern's macros (world-info.js 4027), once substituted

    @property
    def x(self) -> _Entry:
        return self.s.x

    @property
    def text(self) -> str:
        """The content as SillyTavern uses it: macros substituted, else the prepared content."""
        return self.content if self.content is not None else self.x.content


def activate_sillytavern(
    books: Sequence[Lorebook],
    messages: Sequence[ChatMessage],
    settings: WorldInfoSettings,
    prepared: _Prepared,
    *,
    count_tokens: Callable[[str], int],
    budget: int,
    user_name: str,
    char_name: str,
    character: Character | None,
    persona: Persona | None,
    chat_metadata: dict[str, Any] | None,
    extra_scan_text: Sequence[str],
    generation_type: str,
    book_scopes: Sequence[str | None] | None,
    clock: RegexClock,
    history_offset: int = 0,
    hidden_before: int = 0,
    macros: Callable[[str], str] | None = None,
    character_avatar: str | None = None,
    character_tag_ids: Sequence[str] | None = None,
) -> ActivationResult:
    """Run SillyTavern 1.12.6 ``checkWorldInfo`` (see the module doc for every rule).

    Parameters are those of :func:`engine.lorebook.activate` (already resolved): ``prepared``
    the prepared books, ``budget`` the lorebook budget in tokens, ``book_scopes`` one scope per
    book (``chat``/``persona``/``character``/``global``; ``None`` = the book's ``scope`` field or
    ``global``), ``clock`` the regex time limits, ``macros`` SillyTavern's ``substituteParams``
    (:func:`engine.assembly.macros.macro_function`; ``None``: ``{{user}}`` / ``{{char}}`` only),
    run on each entry's content when it passes its probability roll and on keys holding other
    macros, ``character_avatar`` / ``character_tag_ids`` the card's file name and ``tag_map``
    entry for character filters (:func:`engine.lorebook.checks._static_reason`). Never raises for
    bad lorebook content.
    """
    scopes = [book_scope(b, (book_scopes[i] if book_scopes is not None and i < len(book_scopes)
                             else None)) for i, b in enumerate(books)]
    st_all = _st_entries(prepared, user_name, char_name)
    if macros is not None:
        st_all = _with_macro_keys(st_all, macros)
    order = sorted_entries(prepared, books, scopes, settings.character_strategy)
    window = _core_chat(messages, settings, user_name, char_name, history_offset)
    chat_len = len(window) + history_offset - hidden_before
    inject = [substitute_names(t, user=user_name, char=char_name) for t in extra_scan_text if t]
    scan = _StScan(prepared, settings, st_all, _sort_index(prepared, order), window, inject, clock,
                   count_tokens=count_tokens, budget=budget,
                   timed=_Timed(chat_metadata, chat_len, order, hash_function(prepared, books)),
                   chat_len=chat_len)
    scan.macros = macros
    scan.no_position = _no_position_gids(prepared, books)
    scan.apply_static_checks(char_name, character, generation_type, avatar=character_avatar,
                             tag_ids=character_tag_ids)
    scan.run_passes()
    return scan.result()


def _with_content(model: ActivatedEntry, c: _C) -> ActivatedEntry:
    """``model`` with the content after macros (when they changed it)."""
    if c.content is None or c.content == model.content:
        return model
    return construct(ActivatedEntry, {**model.__dict__, "content": c.content})


def _no_position_gids(prepared: _Prepared, books: Sequence[Lorebook]) -> frozenset[int]:
    """Entries the world file gave no ``position`` (:func:`engine.lorebook.st_hash.no_position`), cached."""
    flagged = {i for i, b in enumerate(books) if (b.model_extra or {}).get(NO_POSITION_FIELD)}
    if not flagged:
        return frozenset()
    key = books_fingerprint(books)
    cached = prepared.__dict__.get("_st_no_position")
    if cached is not None and cached[0] == key:
        return cached[1]
    out = frozenset(x.gid for x in prepared.entries if x.book_index in flagged
                    and no_position(x.entry, books[x.book_index]))
    prepared.__dict__["_st_no_position"] = (key, out)
    return out


def _sort_index(prepared: _Prepared, order: list[_Entry]) -> dict[int, int]:
    """The position of each gid in ``order`` (``sortedEntries.indexOf``), cached on ``prepared``."""
    sidx_cache = prepared.__dict__.setdefault("_st_sidx", {})
    sidx = sidx_cache.get(id(order))
    if sidx is None or sidx[0] is not order:
        sidx_cache.clear()
        sidx = sidx_cache[id(order)] = (order, {x.gid: i for i, x in enumerate(order)})
    return sidx[1]


def _core_chat(messages: Sequence[ChatMessage], settings: WorldInfoSettings, user_name: str,
               char_name: str, history_offset: int) -> list[tuple[int, str]]:
    """The scanned chat, newest first (``WorldInfoBuffer``'s chat, world-info.js 131–160).

    ``coreChat``: hidden messages left out; chat[0] gets its macros substituted (script.js
    3557); with ``include_names`` each message reads ``Name: text`` (script.js 3662).
    """
    window: list[tuple[int, str]] = []
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.meta.hidden:
            continue
        text = m.text()
        if i + history_offset == 0:
            text = substitute_names(text, user=user_name, char=char_name)
        if settings.include_names:
            name = _message_name(m, user_name, char_name)
            if name:
                text = f"{name}: {text}"  # `${x.name}: ${x.mes}` (script.js 3662)
        window.append((i + history_offset, text.strip()))
    return window


class _StScan:
    """One ``checkWorldInfo`` call: its buffer, the pass loop's state and its steps.

    ``activated`` is ``allActivatedEntries`` (insertion order), ``failed_prob``
    ``failedProbabilityChecks``, ``all_text`` ``allActivatedText``; ``reasons`` holds each
    entry's latest reason for not activating, ``static`` the entries filtered before the scan,
    ``dropped`` the budget-dropped entries with their tokens.
    """

    def __init__(self, prepared: _Prepared, settings: WorldInfoSettings, st_all: list[_StEntry],
                 sidx: dict[int, int], window: list[tuple[int, str]], inject: list[str], clock: RegexClock,
                 *, count_tokens: Callable[[str], int], budget: int, timed: _Timed, chat_len: int) -> None:
        self.prepared = prepared
        self.settings = settings
        self.st_all = st_all
        self.sidx = sidx
        self.clock = clock
        self.count_tokens = count_tokens
        self.budget = budget
        self.chat_len = chat_len
        self.scanner = _Scanner(prepared, window, clock)
        self.extra = _Table(clock)
        for i, t in enumerate(inject):
            self.extra.add(self.scanner.text("extra", t, extra_index=i))
        self.recursion = _Table(clock)
        self.buf = _Buffer(window, inject, clock)
        self.timed = timed
        self.has_timed = timed.has_active
        self.ci_index, self.cs_index, self.always = _indexes(prepared, st_all)
        self.timed_gids = {x.gid for x in prepared.delayed}
        if self.has_timed:
            self.timed_gids.update(timed.timed_gids())
        self.reasons: dict[int, tuple[str, dict[str, Any]]] = {}
        self.static: set[int] = set()
        self.levels = sorted({x.delay_level for x in prepared.entries if x.delay_level > 0})
        self.current_level = self.levels.pop(0) if self.levels else 0
        self.state = _INITIAL
        self.overflowed = False
        self.count = 0
        self.activated: dict[int, _C] = {}          # allActivatedEntries, in insertion order
        self.tokens_of: dict[int, int] = {}
        self.failed_prob: set[int] = set()
        self.dropped: dict[int, tuple[_C, int]] = {}
        self.all_text = ""                          # allActivatedText
        self.used = 0
        self.macros: Callable[[str], str] | None = None
        self.no_position: frozenset[int] = frozenset()  # entries the world file gave no position

    def depth_of(self, x: _Entry) -> int:
        """The entry's scan depth (its own, else the global one widened by min activations)."""
        sd = x.entry.scan_depth
        return int(sd) if sd is not None else self.settings.scan_depth + self.buf.skew

    def apply_static_checks(self, char_name: str, character: Character | None, generation_type: str,
                            *, avatar: str | None = None, tag_ids: Sequence[str] | None = None) -> None:
        """Disabled and filtered entries (world-info.js 3796–3829): never visited."""
        for x in self.prepared.special:
            st = _static_reason(x, char_name, character, generation_type, avatar=avatar, tag_ids=tag_ids)
            if st is not None:
                self.reasons[x.gid] = st
                self.static.add(x.gid)

    # ---------------------------------------------------------------- the pass loop
    def run_passes(self) -> None:
        """``while (scanState)`` (world-info.js 3761–4111): scan → groups → budget → next state."""
        settings = self.settings
        while self.state:
            if settings.max_recursion_steps and settings.max_recursion_steps <= self.count:
                break
            self.count += 1
            pass_no = self.count - 1
            now = self.scan_entries(pass_no)
            # Sticky first, then sorted order (world-info.js 3985–3990).
            new = sorted(now, key=lambda c: (0 if c.sticky else 1, self.sidx[c.x.gid]))
            text_tokens = int(self.count_tokens(self.all_text)) if self.all_text else 0
            _filter_groups(self, new, pass_no)
            self.take_budget(new, text_tokens, pass_no)
            self.next_state(new, pass_no)
            if self.count >= 10_000:
                break

    def visit(self) -> set[int]:
        """The entries whose keys can match this pass's text, plus always-visited and timed ones."""
        visit: set[int] = set(self.always) | self.timed_gids
        tables = [self.extra] + ([self.recursion] if self.state != _MIN else [])
        for any_map, index in ((self.scanner.ci_any, self.ci_index), (self.scanner.cs_any, self.cs_index)):
            for k in any_map:
                visit.update(index.get(k, ()))
        for t in tables:
            for hits, index in ((t.ci_any, self.ci_index), (t.cs_any, self.cs_index)):
                for k in hits:
                    visit.update(index.get(k, ()))
        return visit

    def scan_entries(self, pass_no: int) -> list[_C]:
        """``for (let entry of sortedEntries)`` (world-info.js 3780–3983): ``activatedNow``."""
        self.scanner.scan_to(max(self.settings.scan_depth + self.buf.skew, self.prepared.max_entry_depth))
        now: list[_C] = []
        for gid in sorted(self.visit(), key=self.sidx.__getitem__):
            if gid in self.failed_prob or gid in self.activated or gid in self.static:
                continue
            c = self.check_entry(self.st_all[gid], pass_no)
            if c is not None:
                now.append(c)
        return now

    def check_entry(self, s: _StEntry, pass_no: int) -> _C | None:
        """One entry of the scan: timed effects, recursion flags, decorators, constant, sticky, keys."""
        x = s.x
        e = x.entry
        sticky = self.timed.sticky_of(x) if self.has_timed else None
        if self.held_back(s, sticky, pass_no):
            return None
        if "activate" in x.decorators:
            return _C(s, "LOREBOOK_DECORATOR_ACTIVATE", {"pass": pass_no}, sticky is not None)
        if "dont_activate" in x.decorators:
            self.reasons[x.gid] = ("LOREBOOK_DECORATOR_SUPPRESS", {})
            return None
        if e.constant:
            return _C(s, "LOREBOOK_CONSTANT", {"pass": pass_no}, sticky is not None)
        if sticky is not None:
            return _C(s, "LOREBOOK_STICKY", {"until": sticky.get("end"), "pass": pass_no}, True)
        if not e.keys:
            self.reasons[x.gid] = ("LOREBOOK_NO_KEYS", {})
            return None
        return self.match_keys(s, pass_no)

    def held_back(self, s: _StEntry, sticky: dict[str, Any] | None, pass_no: int) -> bool:
        """Delay, cooldown, delay until recursion, exclude recursion (world-info.js 3831–3859).

        Records the reason; ``True`` when the entry sits this pass out.
        """
        x, timed, state = s.x, self.timed, self.state
        gid = x.gid
        cool = timed.cooldown_of(x) if self.has_timed else None
        if timed.delayed(x):
            self.reasons[gid] = ("LOREBOOK_DELAY", {"delay": x.entry.delay, "chat_length": self.chat_len})
            return True
        if cool is not None and sticky is None:
            self.reasons[gid] = ("LOREBOOK_COOLDOWN", {"until": cool.get("end"), "chat_length": self.chat_len})
            return True
        if sticky is None and x.delay_level:
            if state != _RECURSION:
                self.reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION", {"level": x.delay_level, "pass": pass_no})
                return True
            if x.delay_level > self.current_level:
                self.reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION", {
                    "level": x.delay_level, "current_level": self.current_level, "pass": pass_no})
                return True
        if state == _RECURSION and self.settings.recursive and x.entry.exclude_recursion and sticky is None:
            prev = self.reasons.get(gid)
            if s.keys and (prev is None or prev[0] == "LOREBOOK_NOT_MATCHED"):
                depth = self.depth_of(x)
                hit = next((h for k in s.keys if (h := self.buf.match(k, x, depth, state)) is not None), None)
                if hit is not None and hit.get("source") == "recursion":
                    self.reasons[gid] = ("LOREBOOK_EXCLUDED_FROM_RECURSION", {
                        "key": next(k.text for k in s.keys), **hit, "pass": pass_no})
            return True
        return False

    def match_keys(self, s: _StEntry, pass_no: int) -> _C | None:
        """Primary keys, then secondary keys by selective logic (world-info.js 3891–3975)."""
        x, gid = s.x, s.x.gid
        depth = self.depth_of(x)
        key = None
        where: dict[str, Any] | None = None
        for k in s.keys:
            where = self.buf.match(k, x, depth, self.state)
            if where is not None:
                key = k
                break
        if key is None or where is None:
            self.reasons[gid] = ("LOREBOOK_NOT_MATCHED", {
                "keys": [k.text for k in s.keys], "scan_depth": depth, "pass": pass_no})
            return None
        detail: dict[str, Any] = {"key": key.text, **where, "pass": pass_no}
        if key.regex is not None:
            detail["regex"] = True
        e = x.entry
        if e.selective and e.secondary_keys:
            logic = SelectiveLogic(e.selective_logic)
            ok, matched, missing = self.match_secondary(s, depth, logic)
            if not ok:
                self.reasons[gid] = ("LOREBOOK_SECONDARY_FAILED", {
                    "key": key.text, **where, "logic": logic.name, "secondary_matched": matched,
                    "secondary_missing": missing, "pass": pass_no})
                return None
            detail["logic"] = logic.name
            detail["secondary_matched"] = matched
        return _C(s, "LOREBOOK_KEY_MATCH", detail)

    def match_secondary(self, s: _StEntry, depth: int, logic: SelectiveLogic) -> tuple[bool, list[str], list[str]]:
        """``matchSecondaryKeys`` (world-info.js 3925–3962): (passes, matched keys, missing keys).

        AND_ANY stops at the first match and NOT_ALL at the first miss, as SillyTavern does.
        """
        matched: list[str] = []
        missing: list[str] = []
        for k2 in s.secondary:
            hit2 = self.buf.match(k2, s.x, depth, self.state) if k2.text != "\0never" else None
            (matched if hit2 is not None else missing).append(k2.raw if k2.text == "\0never" else k2.text)
            if logic == SelectiveLogic.AND_ANY and hit2 is not None:
                return True, matched, missing
            if logic == SelectiveLogic.NOT_ALL and hit2 is None:
                return True, matched, missing
        ok = ((logic == SelectiveLogic.NOT_ANY and not matched)
              or (logic == SelectiveLogic.AND_ALL and not missing))
        return ok, matched, missing

    def roll_probability(self, c: _C) -> str | None:
        """``verifyProbability`` (world-info.js 3997–4019), seeded: the content, or ``None`` on a failed roll."""
        e = c.x.entry
        if e.use_probability and e.probability != 100 and not c.sticky:
            seed_text = f"{self.settings.seed}:{c.x.book}:{e.uid}:{self.chat_len}"
            roll = random.Random(seed_text).random() * 100
            if not roll <= e.probability:
                self.failed_prob.add(c.x.gid)
                self.reasons[c.x.gid] = ("LOREBOOK_PROBABILITY", {
                    "probability": e.probability, "roll": round(roll, 4), "seed": seed_text})
                return None
            c.detail["probability"] = {"probability": e.probability, "roll": round(roll, 4), "seed": seed_text}
        if self.macros is not None:
            # `entry.content = substituteParams(entry.content)` (world-info.js 4027): every macro,
            # before the budget count and the recursion buffer
            c.content = self.macros(parse_decorators(c.x.entry.content or "")[1])
        return c.text

    def take_budget(self, new: list[_C], text_tokens: int, pass_no: int) -> None:
        """Probability and budget (world-info.js 3996–4043, :func:`engine.lorebook.budget.fill_budget`)."""
        fill = fill_budget(new, content=self.roll_probability, scanned_tokens=text_tokens,
                           budget=self.budget, count=self.count_tokens)
        if fill.used is not None:
            self.used = fill.used
        for c, _text in fill.kept:
            self.activated[c.x.gid] = c
            self.tokens_of[c.x.gid] = int(self.count_tokens(c.text)) if c.text else 0
            self.reasons.pop(c.x.gid, None)
            self.dropped.pop(c.x.gid, None)
        if fill.overflow_at is not None:
            self.overflowed = True
            self.record_overflow(new[fill.overflow_at:], pass_no)

    def record_overflow(self, rest: list[_C], pass_no: int) -> None:
        """``LOREBOOK_BUDGET`` for the entry that reached the budget and every later one of the pass."""
        first = True
        for c in rest:
            if c.x.gid in self.failed_prob or c.x.gid in self.activated:
                continue
            tokens = int(self.count_tokens(c.text)) if c.text else 0
            self.dropped[c.x.gid] = (c, tokens)
            detail = {"budget": self.budget, "used": self.used, "tokens": tokens, "would_activate": c.code,
                      "match": dict(c.detail), "pass": pass_no}
            if not first:
                detail["note"] = "not reached: SillyTavern stops at the first entry that overflows"
            self.reasons[c.x.gid] = ("LOREBOOK_BUDGET", detail)
            first = False

    def next_state(self, new: list[_C], pass_no: int) -> None:
        """The next scan state and the recursion buffer (world-info.js 4045–4111)."""
        settings = self.settings
        next_state = 0
        successful = [c for c in new if c.x.gid not in self.failed_prob]
        for_recursion = [c for c in successful if not c.x.entry.prevent_recursion]
        if settings.recursive and not self.overflowed and for_recursion:
            next_state = _RECURSION
        if settings.recursive and not self.overflowed and self.state == _MIN and self.buf.recurse:
            next_state = _RECURSION
        if (not next_state and not self.overflowed and settings.min_activations > 0
                and len(self.activated) < settings.min_activations):
            depth_now = settings.scan_depth + self.buf.skew
            over_max = ((settings.min_activations_depth_max > 0 and depth_now > settings.min_activations_depth_max)
                        or depth_now > self.chat_len)
            if not over_max:
                next_state = _MIN
                self.buf.skew += 1
        if not next_state and self.levels:
            next_state = _RECURSION
            self.current_level = self.levels.pop(0)
        self.state = next_state
        if self.state:
            self.add_recursion(for_recursion, pass_no)

    def add_recursion(self, for_recursion: list[_C], pass_no: int) -> None:
        """``buffer.addRecurse`` and ``allActivatedText`` (world-info.js 4102–4108)."""
        text = "\n".join(c.text for c in for_recursion)
        offsets: list[tuple[int, _Entry]] = []
        off = 0
        for c in for_recursion:
            offsets.append((off, c.x))
            off += len(c.text) + 1
        self.buf.recurse.append(text)
        self.buf.recurse_from.append(offsets)
        self.recursion.add(self.scanner.text("recursion", text, added_in_pass=pass_no))
        self.all_text = text + "\n" + self.all_text

    # ---------------------------------------------------------------- outputs
    def result(self) -> ActivationResult:
        """The :class:`ActivationResult`: entries in placement order (world-info.js 4113–4145), the trace."""
        ins = {gid: i for i, gid in enumerate(self.activated)}

        def placement(c: _C) -> tuple[Any, ...]:
            e = c.x.entry
            at_depth = int(e.position) == 4
            return (int(e.position), int(e.depth) if at_depth else 0,
                    _role_name(e.role) if at_depth else "", float(e.order), -ins[c.x.gid])

        kept = sorted(self.activated.values(), key=placement)
        for c in kept:
            if c.x.gid in self.no_position:
                # `switch (entry.position)` has no case for undefined (world-info.js 4133–4173): activated,
                # counted in the budget and the recursion, placed nowhere
                c.detail["no_position"] = True
        out_activated = [_with_content(_entry_model(c, self.tokens_of[c.x.gid], BLOCK_REASONS[c.code]), c)
                         for c in kept if c.text]
        budget_dropped = [_entry_model(c, t, "LOREBOOK_BUDGET")
                          for c, t in sorted(self.dropped.values(), key=lambda ct: self.sidx[ct[0].x.gid])]
        trace = self.trace(ins)
        self.add_near_misses(trace)
        return construct(ActivationResult, {
            "activated": out_activated, "budget_dropped": budget_dropped, "trace": trace,
            "budget": self.budget, "used_tokens": self.used, "diagnostics": self.diagnostics(),
            "timed_effects": next_timed_state(self.timed, self.activated, self.prepared, self.chat_len),
            "rules": "sillytavern", "rule_differences": [],
        })

    def trace(self, ins: dict[int, int]) -> list[TraceRecord]:
        """One record per entry: the cached defaults with the entries that moved replaced."""
        prepared, st_all, settings = self.prepared, self.st_all, self.settings
        timeouts = {t["key"] for t in self.clock.timeouts}
        trace: list[TraceRecord] = list(_default_trace(prepared, settings.scan_depth + self.buf.skew))
        for gid in sorted(set(self.activated) | set(self.reasons) | _regex_gids(st_all, timeouts)):
            x = prepared.entries[gid]
            if gid in self.activated:
                c = self.activated[gid]
                detail = dict(c.detail)
                if not c.text:
                    detail["empty_content"] = True
                detail["order_of_activation"] = ins[gid]
                trace[gid] = _record(x, activated=True, code=c.code, detail=detail, tokens=self.tokens_of[gid])
                continue
            code, detail = self.reasons.get(gid) or (trace[gid].code, trace[gid].detail)
            if code in ("LOREBOOK_NOT_MATCHED", "LOREBOOK_NO_KEYS", "LOREBOOK_INVALID_KEY"):
                slow = [k.text for k in st_all[gid].keys if k.regex is not None and k.text in timeouts]
                if slow:
                    code, detail = "LOREBOOK_REGEX_TIMEOUT", {
                        "keys": slow, "timeout_ms": settings.regex_timeout_ms, "scan_depth": self.depth_of(x)}
            if code == "LOREBOOK_INVALID_KEY":  # SillyTavern matches invalid regex keys as text
                code, detail = "LOREBOOK_NOT_MATCHED", {"keys": [k.text for k in st_all[gid].keys],
                                                        "scan_depth": self.depth_of(x)}
            trace[gid] = _record(x, activated=False, code=code, detail=detail,
                                 tokens=self.dropped[gid][1] if gid in self.dropped else None)
        # Entries with only invalid regex keys are plain-text keys here, never "no keys".
        for s in _patchable(prepared, st_all):
            rec = trace[s.x.gid]
            if rec.code in ("LOREBOOK_NO_KEYS", "LOREBOOK_INVALID_KEY") and s.keys and not rec.activated:
                trace[s.x.gid] = construct(TraceRecord, {**rec.__dict__, "code": "LOREBOOK_NOT_MATCHED",
                                                     "detail": {"keys": [k.text for k in s.keys],
                                                                "scan_depth": self.depth_of(s.x)}})
        return trace

    def add_near_misses(self, trace: list[TraceRecord]) -> None:
        """Near-miss hints (why a key present in the text did not count), as under the loomscope rules."""
        prepared, scanner = self.prepared, self.scanner
        run = _Run(prepared, scanner, self.settings, self.extra, {})
        run.global_depth = self.settings.scan_depth + self.buf.skew
        near: set[int] = set(prepared.regex_gids) | prepared.cs_gids
        for key_map, index in ((scanner.ci_any, prepared.ci_index), (scanner.cs_any, prepared.cs_index)):
            for k in key_map:
                near.update(index.get(k, ()))
        for gid in near:
            rec = trace[gid]
            if rec.code == "LOREBOOK_NOT_MATCHED" and not rec.activated:
                misses = run.near_misses(prepared.entries[gid])
                if misses:
                    trace[gid] = construct(TraceRecord, {**rec.__dict__, "detail": {**rec.detail, "near_misses": misses}})

    def diagnostics(self) -> list[str]:
        """The prepared books' diagnostics, then one per entry (at most 5) whose regex key ran out of time."""
        diagnostics = list(self.prepared.diagnostics)
        for t in self.clock.timeouts:
            owners = [s.x for s in self.st_all if any(k.regex is not None and k.text == t["key"] for k in s.keys)]
            diagnostics.extend(_regex_timeout_diagnostic(x, t["key"], t) for x in owners[:5])
        return _dedupe(diagnostics)


def _indexes(prepared: _Prepared, st_all: list[_StEntry]
             ) -> tuple[dict[str, list[int]], dict[str, list[int]], list[int]]:
    """Primary plain key -> gids (case-insensitive, case-sensitive) and the always-visited gids.

    Cached on ``prepared`` for this ``st_all``.
    """
    cached = prepared.__dict__.get("_st_indexes")
    if cached is not None and cached[0] is st_all:
        return cached[1]
    ci_index: dict[str, list[int]] = {}
    cs_index: dict[str, list[int]] = {}
    always: list[int] = []
    for s in st_all:
        if s.always:
            always.append(s.x.gid)
        for n in s.norms:
            (cs_index if s.x.cs else ci_index).setdefault(n, []).append(s.x.gid)
    prepared.__dict__["_st_indexes"] = (st_all, (ci_index, cs_index, always))
    return ci_index, cs_index, always


def _patchable(prepared: _Prepared, st_all: list[_StEntry]) -> list[_StEntry]:
    """Entries whose default record says "no keys" but that have SillyTavern keys (cached)."""
    cached = prepared.__dict__.get("_st_patch")
    if cached is not None and cached[0] is st_all:
        return cached[1]
    out = [st for st in st_all if st.keys and st.x.default_reason is not None]
    prepared.__dict__["_st_patch"] = (st_all, out)
    return out


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _regex_gids(st_all: list[_StEntry], timeouts: set[str]) -> set[int]:
    if not timeouts:
        return set()
    return {s.x.gid for s in st_all if any(k.regex is not None and k.text in timeouts for k in s.keys)}


def _filter_groups(scan: _StScan, new: list[_C], pass_no: int) -> None:
    r"""``filterByInclusionGroups`` (world-info.js 4299–4386), in place on ``new``.

    Kept quirks: groups split on ``/,\\s*/`` without trimming; ``removeEntry`` of an entry no
    longer in the list removes the *last* entry (``splice(-1, 1)``); "already activated"
    compares an activated entry's whole ``group`` string with the group name.
    """
    grouped: dict[str, list[_C]] = {}
    for c in new:
        if c.x.entry.group:
            for g in re.split(r",\s*", c.x.entry.group):
                if g:
                    grouped.setdefault(g, []).append(c)
    if not grouped:
        return
    groups = _StGroups(scan, new, grouped, pass_no)
    groups.by_timed_effects()
    groups.by_scoring()
    for g, group in grouped.items():
        if not groups.has_sticky[g]:
            groups.pick_winner(g, group)


def _winner_info(c: _C) -> dict[str, Any]:
    return {"book": c.x.book, "uid": c.x.entry.uid, "comment": c.x.entry.comment}


class _StGroups:
    """One pass's inclusion groups (``filterByInclusionGroups``'s closure state)."""

    def __init__(self, scan: _StScan, new: list[_C], grouped: dict[str, list[_C]], pass_no: int) -> None:
        self.scan = scan
        self.new = new
        self.grouped = grouped
        self.pass_no = pass_no
        self.reasons = scan.reasons
        self.has_sticky: dict[str, bool] = {}

    def remove(self, c: _C, code: str, detail: dict[str, Any]) -> None:
        """``removeEntry`` (world-info.js 4305–4312), with its ``splice(-1, 1)`` quirk."""
        new, reasons = self.new, self.reasons
        if c in new:
            new.remove(c)
            prev = reasons.get(c.x.gid)
            if (code == "LOREBOOK_GROUP_ALREADY_SATISFIED" and prev is not None and prev[0] == "LOREBOOK_GROUP_LOST"
                    and prev[1].get("group") == detail.get("group")):
                return  # lost this group in an earlier pass: that is the better explanation
            reasons[c.x.gid] = (code, detail)
        elif new:
            victim = new.pop()  # splice(indexOf(entry) = -1, 1): SillyTavern drops the last entry
            reasons[victim.x.gid] = ("LOREBOOK_GROUP_LOST", {
                **detail, "quirk": "removed by SillyTavern's splice(-1, 1) while removing "
                                   f"{c.x.book} uid {c.x.entry.uid} a second time"})

    def by_timed_effects(self) -> None:
        """``filterGroupsByTimedEffects`` (world-info.js 4248–4297): sticky members win; cooldown/delay lose."""
        scan, pass_no = self.scan, self.pass_no
        for g, group in self.grouped.items():
            self.has_sticky[g] = False
            stickies = [c for c in group if c.sticky]
            if stickies:
                for c in group:
                    if c not in stickies:
                        self.remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "sticky", "pass": pass_no,
                                                               "winner": _winner_info(stickies[0])})
                self.has_sticky[g] = True
            if scan.has_timed:
                for c in group:
                    if scan.timed.cooldown_of(c.x) is not None or scan.timed.delayed(c.x):
                        self.remove(c, "LOREBOOK_COOLDOWN", {"group": g, "pass": pass_no})

    def by_scoring(self) -> None:
        """``filterGroupsByScoring`` (world-info.js 4203–4246): members below the best score lose."""
        scan, settings, pass_no = self.scan, self.scan.settings, self.pass_no
        for g, group in self.grouped.items():
            if not settings.use_group_scoring and not any(c.x.entry.use_group_scoring for c in group):
                continue
            if self.has_sticky[g]:
                continue
            scores = [_score(c, scan.buf, scan.state, scan.depth_of) for c in group]
            best = max(scores) if scores else 0
            top = next((c for c, sc in zip(group, scores, strict=True) if sc == best), None)
            i = 0
            while i < len(group):
                c = group[i]
                scored = c.x.entry.use_group_scoring if c.x.entry.use_group_scoring is not None \
                    else settings.use_group_scoring
                if scored and scores[i] < best:
                    self.remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "score", "score": scores[i],
                                                           "best_score": best, "pass": pass_no,
                                                           "winner": _winner_info(top) if top is not None else None})
                    del group[i]
                    del scores[i]
                    continue
                i += 1

    def pick_winner(self, g: str, group: list[_C]) -> None:
        """Already activated, ``group_override``, or a weighted roll (world-info.js 4340–4384)."""
        pass_no = self.pass_no
        already = next((a for a in self.scan.activated.values() if a.x.entry.group == g), None)
        if already is not None:
            for c in group:
                self.remove(c, "LOREBOOK_GROUP_ALREADY_SATISFIED", {"group": g, "mode": "already_active",
                                                                     "pass": pass_no, "winner": _winner_info(already)})
            return
        if len(group) <= 1:
            return
        prios = sorted((c for c in group if c.x.entry.group_override), key=lambda c: -float(c.x.entry.order))
        if prios:
            for c in group:
                if c is not prios[0]:
                    self.remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "override", "pass": pass_no,
                                                           "winner": _winner_info(prios[0])})
            return
        self.weighted_roll(g, group)

    def weighted_roll(self, g: str, group: list[_C]) -> None:
        """The weighted choice by ``group_weight``, seeded (SillyTavern rolls ``Math.random``)."""
        pass_no = self.pass_no
        weights = [float(c.x.entry.group_weight) for c in group]
        total = sum(weights)
        seed_text = f"{self.scan.settings.seed}:group:{g}:{self.scan.chat_len}:{pass_no}"
        roll = random.Random(seed_text).random() * total
        acc = 0.0
        winner = None
        for c, w in zip(group, weights, strict=True):
            acc += w
            if roll <= acc:
                winner = c
                break
        if winner is None:
            return
        for c in group:
            if c is not winner:
                self.remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "weight", "pass": pass_no,
                                                       "roll": round(roll, 4), "total_weight": total,
                                                       "seed": seed_text, "winner": _winner_info(winner)})


def _score(c: _C, buf: _Buffer, state: int, depth_of: Callable[[_Entry], int]) -> int:
    """``WorldInfoBuffer.getScore`` (world-info.js 336–384): raw keys, unsubstituted, untrimmed."""
    x = c.x
    e = x.entry
    depth = depth_of(x)
    keys = [str(k) for k in e.keys]
    if not keys:
        return 0
    probe = _StKey
    primary = sum(1 for k in keys if buf.match(probe(k, k, None), x, depth, state, raw=True) is not None)
    secondary_keys = [str(k) for k in e.secondary_keys]
    if secondary_keys:
        secondary = sum(1 for k in secondary_keys
                        if buf.match(probe(k, k, None), x, depth, state, raw=True) is not None)
        if e.selective_logic == SelectiveLogic.AND_ANY:
            return primary + secondary
        if e.selective_logic == SelectiveLogic.AND_ALL:
            return primary + secondary if secondary == len(secondary_keys) else primary
    return primary
