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
from functools import lru_cache
from typing import Any

from ..schema.character import Character, Persona
from ..schema.lorebook import Lorebook, SelectiveLogic
from ..schema.messages import ChatMessage
from ..schema.settings import WorldInfoSettings
from .codes import BLOCK_REASONS
from .jsregex import JsRegex, RegexClock
from .keys import InvalidRegexKey, compile_regex_key, is_regex_key, substitute_names
from .models import ActivationResult, TraceRecord
from .prepare import _Entry, _Prepared
from .scan import _Scanner, _Table
from .timed import _Timed, next_timed_state

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
    raw = raw if isinstance(raw, str) else str(raw)
    sub = substitute_names(raw, user=user, char=char)
    if not sub:
        return None  # `substituted && ...` (world-info.js 3895): an empty key never matches
    text = sub.strip()
    regex = None
    if text.startswith("/") and is_regex_key(text):
        try:
            regex = compile_regex_key(text)
        except InvalidRegexKey:
            regex = None  # parseRegexFromString returns null: matched as plain text
    return _StKey(raw, text, regex)


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


@lru_cache(maxsize=8192)
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

    @property
    def x(self) -> _Entry:
        return self.s.x


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
) -> ActivationResult:
    """Run SillyTavern 1.12.6 ``checkWorldInfo`` (see the module doc for every rule).

    Parameters are those of :func:`engine.lorebook.activate` (already resolved): ``prepared``
    the prepared books, ``budget`` the lorebook budget in tokens, ``book_scopes`` one scope per
    book (``chat``/``persona``/``character``/``global``; ``None`` = the book's ``scope`` field or
    ``global``), ``clock`` the regex time limits. Never raises for bad lorebook content.
    """
    from .activation import _default_trace, _entry_model, _fast, _message_name, _Run, _static_reason

    scopes = [book_scope(b, (book_scopes[i] if book_scopes is not None and i < len(book_scopes)
                             else None)) for i, b in enumerate(books)]
    st_all = _st_entries(prepared, user_name, char_name)
    order = sorted_entries(prepared, books, scopes, settings.character_strategy)
    sidx_cache = prepared.__dict__.setdefault("_st_sidx", {})
    sidx = sidx_cache.get(id(order))
    if sidx is None or sidx[0] is not order:
        sidx_cache.clear()
        sidx = sidx_cache[id(order)] = (order, {x.gid: i for i, x in enumerate(order)})
    sidx = sidx[1]

    # coreChat: hidden messages left out; chat[0] gets its macros substituted (script.js 3557).
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
    chat_len = len(window) + history_offset - hidden_before
    inject = [substitute_names(t, user=user_name, char=char_name) for t in extra_scan_text if t]

    scanner = _Scanner(prepared, window, clock)
    extra = _Table(clock)
    for i, t in enumerate(inject):
        extra.add(scanner.text("extra", t, extra_index=i))
    recursion = _Table(clock)
    buf = _Buffer(window, inject, clock)
    timed = _Timed(chat_metadata, chat_len)
    has_timed = bool(timed.sticky or timed.cooldown)

    ci_index, cs_index, always = _indexes(prepared, st_all)
    timed_gids = {x.gid for x in prepared.delayed}
    if has_timed:
        labels = set(timed.sticky) | set(timed.cooldown)
        timed_gids.update(x.gid for x in prepared.entries if x.label in labels)

    reasons: dict[int, tuple[str, dict[str, Any]]] = {}
    static: set[int] = set()
    for x in prepared.special:
        st = _static_reason(x, char_name, character, generation_type)
        if st is not None:
            reasons[x.gid] = st
            static.add(x.gid)

    levels = sorted({x.delay_level for x in prepared.entries if x.delay_level > 0})
    current_level = levels.pop(0) if levels else 0
    state = _INITIAL
    overflowed = False
    count = 0
    activated: dict[int, _C] = {}          # allActivatedEntries, in insertion order
    tokens_of: dict[int, int] = {}
    failed_prob: set[int] = set()
    dropped: dict[int, tuple[_C, int]] = {}
    all_text = ""                          # allActivatedText
    used = 0

    def depth_of(x: _Entry) -> int:
        sd = x.entry.scan_depth
        return int(sd) if sd is not None else settings.scan_depth + buf.skew

    while state:
        if settings.max_recursion_steps and settings.max_recursion_steps <= count:
            break
        count += 1
        pass_no = count - 1
        next_state = 0
        scanner.scan_to(max(settings.scan_depth + buf.skew, prepared.max_entry_depth))
        visit: set[int] = set(always) | timed_gids
        tables = [extra] + ([recursion] if state != _MIN else [])
        for any_map, index in ((scanner.ci_any, ci_index), (scanner.cs_any, cs_index)):
            for k in any_map:
                visit.update(index.get(k, ()))
        for t in tables:
            for any_map, index in ((t.ci_any, ci_index), (t.cs_any, cs_index)):
                for k in any_map:
                    visit.update(index.get(k, ()))
        now: list[_C] = []
        for gid in sorted(visit, key=sidx.__getitem__):
            if gid in failed_prob or gid in activated or gid in static:
                continue
            s = st_all[gid]
            x = s.x
            e = x.entry
            sticky = timed.sticky_of(x) if has_timed else None
            cool = timed.cooldown_of(x) if has_timed else None
            if timed.delayed(x):
                reasons[gid] = ("LOREBOOK_DELAY", {"delay": e.delay, "chat_length": chat_len})
                continue
            if cool is not None and sticky is None:
                reasons[gid] = ("LOREBOOK_COOLDOWN", {"until": cool.get("end"), "chat_length": chat_len})
                continue
            if sticky is None and x.delay_level:
                if state != _RECURSION:
                    reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION", {"level": x.delay_level, "pass": pass_no})
                    continue
                if x.delay_level > current_level:
                    reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION", {
                        "level": x.delay_level, "current_level": current_level, "pass": pass_no})
                    continue
            if state == _RECURSION and settings.recursive and e.exclude_recursion and sticky is None:
                prev = reasons.get(gid)
                if s.keys and (prev is None or prev[0] == "LOREBOOK_NOT_MATCHED"):
                    depth = depth_of(x)
                    hit = next((h for k in s.keys if (h := buf.match(k, x, depth, state)) is not None), None)
                    if hit is not None and hit.get("source") == "recursion":
                        reasons[gid] = ("LOREBOOK_EXCLUDED_FROM_RECURSION", {
                            "key": next(k.text for k in s.keys), **hit, "pass": pass_no})
                continue
            if "activate" in x.decorators:
                now.append(_C(s, "LOREBOOK_DECORATOR_ACTIVATE", {"pass": pass_no}, sticky is not None))
                continue
            if "dont_activate" in x.decorators:
                reasons[gid] = ("LOREBOOK_DECORATOR_SUPPRESS", {})
                continue
            if e.constant:
                now.append(_C(s, "LOREBOOK_CONSTANT", {"pass": pass_no}, sticky is not None))
                continue
            if sticky is not None:
                now.append(_C(s, "LOREBOOK_STICKY", {"until": sticky.get("end"), "pass": pass_no}, True))
                continue
            if not e.keys:
                reasons[gid] = ("LOREBOOK_NO_KEYS", {})
                continue
            depth = depth_of(x)
            key = None
            where: dict[str, Any] | None = None
            for k in s.keys:
                where = buf.match(k, x, depth, state)
                if where is not None:
                    key = k
                    break
            if key is None or where is None:
                reasons[gid] = ("LOREBOOK_NOT_MATCHED", {
                    "keys": [k.text for k in s.keys], "scan_depth": depth, "pass": pass_no})
                continue
            detail: dict[str, Any] = {"key": key.text, **where, "pass": pass_no}
            if key.regex is not None:
                detail["regex"] = True
            if e.selective and e.secondary_keys:
                logic = SelectiveLogic(e.selective_logic)
                matched: list[str] = []
                missing: list[str] = []
                ok = False
                for k2 in s.secondary:
                    hit2 = buf.match(k2, x, depth, state) if k2.text != "\0never" else None
                    (matched if hit2 is not None else missing).append(k2.raw if k2.text == "\0never" else k2.text)
                    if logic == SelectiveLogic.AND_ANY and hit2 is not None:
                        ok = True
                        break
                    if logic == SelectiveLogic.NOT_ALL and hit2 is None:
                        ok = True
                        break
                if not ok:
                    ok = ((logic == SelectiveLogic.NOT_ANY and not matched)
                          or (logic == SelectiveLogic.AND_ALL and not missing))
                if not ok:
                    reasons[gid] = ("LOREBOOK_SECONDARY_FAILED", {
                        "key": key.text, **where, "logic": logic.name, "secondary_matched": matched,
                        "secondary_missing": missing, "pass": pass_no})
                    continue
                detail["logic"] = logic.name
                detail["secondary_matched"] = matched
            now.append(_C(s, "LOREBOOK_KEY_MATCH", detail))

        # Sticky first, then sorted order (world-info.js 3985–3990).
        new = sorted(now, key=lambda c: (0 if c.sticky else 1, sidx[c.x.gid]))
        text_tokens = int(count_tokens(all_text)) if all_text else 0
        _filter_groups(new, activated, buf, state, settings, reasons, depth_of, pass_no, chat_len,
                       has_timed, timed)

        new_content = ""
        reached = len(new)
        for n_i, c in enumerate(new):
            e = c.x.entry
            if e.use_probability and e.probability != 100 and not c.sticky:
                seed_text = f"{settings.seed}:{c.x.book}:{e.uid}:{chat_len}"
                roll = random.Random(seed_text).random() * 100
                if not roll <= e.probability:
                    failed_prob.add(c.x.gid)
                    reasons[c.x.gid] = ("LOREBOOK_PROBABILITY", {
                        "probability": e.probability, "roll": round(roll, 4), "seed": seed_text})
                    continue
                c.detail["probability"] = {"probability": e.probability, "roll": round(roll, 4),
                                           "seed": seed_text}
            new_content += c.x.content + "\n"
            total = text_tokens + int(count_tokens(new_content))
            if total >= budget:
                overflowed = True
                reached = n_i
                break
            used = total
            activated[c.x.gid] = c
            tokens_of[c.x.gid] = int(count_tokens(c.x.content)) if c.x.content else 0
            reasons.pop(c.x.gid, None)
            dropped.pop(c.x.gid, None)
        if overflowed and reached < len(new):
            first = True
            for c in new[reached:]:
                if c.x.gid in failed_prob or c.x.gid in activated:
                    continue
                tokens = int(count_tokens(c.x.content)) if c.x.content else 0
                dropped[c.x.gid] = (c, tokens)
                detail = {"budget": budget, "used": used, "tokens": tokens, "would_activate": c.code,
                          "match": dict(c.detail), "pass": pass_no}
                if not first:
                    detail["note"] = "not reached: SillyTavern stops at the first entry that overflows"
                reasons[c.x.gid] = ("LOREBOOK_BUDGET", detail)
                first = False

        successful = [c for c in new if c.x.gid not in failed_prob]
        for_recursion = [c for c in successful if not c.x.entry.prevent_recursion]
        if settings.recursive and not overflowed and for_recursion:
            next_state = _RECURSION
        if settings.recursive and not overflowed and state == _MIN and buf.recurse:
            next_state = _RECURSION
        if (not next_state and not overflowed and settings.min_activations > 0
                and len(activated) < settings.min_activations):
            depth_now = settings.scan_depth + buf.skew
            over_max = ((settings.min_activations_depth_max > 0 and depth_now > settings.min_activations_depth_max)
                        or depth_now > chat_len)
            if not over_max:
                next_state = _MIN
                buf.skew += 1
        if not next_state and levels:
            next_state = _RECURSION
            current_level = levels.pop(0)
        state = next_state
        if state:
            text = "\n".join(c.x.content for c in for_recursion)
            offsets: list[tuple[int, _Entry]] = []
            off = 0
            for c in for_recursion:
                offsets.append((off, c.x))
                off += len(c.x.content) + 1
            buf.recurse.append(text)
            buf.recurse_from.append(offsets)
            recursion.add(scanner.text("recursion", text, added_in_pass=pass_no))
            all_text = text + "\n" + all_text
        if count >= 10_000:
            break

    # ---------------------------------------------------------------- outputs
    ins = {gid: i for i, gid in enumerate(activated)}

    def placement(c: _C) -> tuple[Any, ...]:
        e = c.x.entry
        at_depth = int(e.position) == 4
        return (int(e.position), int(e.depth) if at_depth else 0,
                _role(e.role) if at_depth else "", float(e.order), -ins[c.x.gid])

    kept = sorted(activated.values(), key=placement)
    out_activated = [_entry_model(c, tokens_of[c.x.gid], BLOCK_REASONS[c.code])  # type: ignore[arg-type]
                     for c in kept if c.x.content]
    budget_dropped = [_entry_model(c, t, "LOREBOOK_BUDGET")  # type: ignore[arg-type]
                      for c, t in sorted(dropped.values(), key=lambda ct: sidx[ct[0].x.gid])]

    timeouts = {t["key"] for t in clock.timeouts}
    trace: list[TraceRecord] = list(_default_trace(prepared, settings.scan_depth + buf.skew))
    for gid in sorted(set(activated) | set(reasons) | _regex_gids(st_all, timeouts)):
        x = prepared.entries[gid]
        e = x.entry
        if gid in activated:
            c = activated[gid]
            detail = dict(c.detail)
            if not x.content:
                detail["empty_content"] = True
            detail["order_of_activation"] = ins[gid]
            trace[gid] = _fast(TraceRecord, {
                "book": x.book, "book_index": x.book_index, "uid": e.uid, "comment": e.comment,
                "activated": True, "code": c.code, "detail": detail, "tokens": tokens_of[gid]})
            continue
        code, detail = reasons.get(gid) or (trace[gid].code, trace[gid].detail)
        if code in ("LOREBOOK_NOT_MATCHED", "LOREBOOK_NO_KEYS", "LOREBOOK_INVALID_KEY"):
            slow = [k.text for k in st_all[gid].keys if k.regex is not None and k.text in timeouts]
            if slow:
                code, detail = "LOREBOOK_REGEX_TIMEOUT", {
                    "keys": slow, "timeout_ms": settings.regex_timeout_ms,
                    "scan_depth": depth_of(x)}
        if code == "LOREBOOK_INVALID_KEY":  # SillyTavern matches invalid regex keys as text
            code, detail = "LOREBOOK_NOT_MATCHED", {"keys": [k.text for k in st_all[gid].keys],
                                                    "scan_depth": depth_of(x)}
        trace[gid] = _fast(TraceRecord, {
            "book": x.book, "book_index": x.book_index, "uid": e.uid, "comment": e.comment,
            "activated": False, "code": code, "detail": detail,
            "tokens": dropped[gid][1] if gid in dropped else None})
    # Entries with only invalid regex keys are plain-text keys here, never "no keys".
    for s in _patchable(prepared, st_all):
        rec = trace[s.x.gid]
        if rec.code in ("LOREBOOK_NO_KEYS", "LOREBOOK_INVALID_KEY") and s.keys and not rec.activated:
            trace[s.x.gid] = _fast(TraceRecord, {**rec.__dict__, "code": "LOREBOOK_NOT_MATCHED",
                                                 "detail": {"keys": [k.text for k in s.keys],
                                                            "scan_depth": depth_of(s.x)}})

    # Near-miss hints (why a key present in the text did not count), as under the loomscope rules.
    run = _Run(prepared, scanner, settings, extra, {})
    run.global_depth = settings.scan_depth + buf.skew
    near: set[int] = set(prepared.regex_gids) | prepared.cs_gids
    for key_map, index in ((scanner.ci_any, prepared.ci_index), (scanner.cs_any, prepared.cs_index)):
        for k in key_map:
            near.update(index.get(k, ()))
    for gid in near:
        rec = trace[gid]
        if rec.code == "LOREBOOK_NOT_MATCHED" and not rec.activated:
            misses = run.near_misses(prepared.entries[gid])
            if misses:
                trace[gid] = _fast(TraceRecord, {**rec.__dict__, "detail": {**rec.detail, "near_misses": misses}})

    diagnostics = list(prepared.diagnostics)
    for t in clock.timeouts:
        owners = [s.x for s in st_all if any(k.regex is not None and k.text == t["key"] for k in s.keys)]
        for x in owners[:5]:
            diagnostics.append(f"{x.book}: uid {x.entry.uid}: LOREBOOK_REGEX_TIMEOUT: regex key {t['key']!r} "
                               f"ran out of its {t['timeout_ms']:g} ms on the {t['where'] or 'text'}; "
                               "it does not match")
    accepted_like: dict[int, Any] = {gid: c for gid, c in activated.items()}
    return _fast(ActivationResult, {
        "activated": out_activated, "budget_dropped": budget_dropped, "trace": trace,
        "budget": budget, "used_tokens": used, "diagnostics": _dedupe(diagnostics),
        "timed_effects": next_timed_state(timed, accepted_like, prepared, chat_len),
        "rules": "sillytavern", "rule_differences": [],
    })


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


def _role(role: Any) -> str:
    from .activation import _role_name
    return _role_name(role)


def _filter_groups(new: list[_C], activated: dict[int, _C], buf: _Buffer, state: int,
                   settings: WorldInfoSettings, reasons: dict[int, tuple[str, dict[str, Any]]],
                   depth_of: Callable[[_Entry], int], pass_no: int, chat_len: int,
                   has_timed: bool, timed: _Timed) -> None:
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

    def remove(c: _C, code: str, detail: dict[str, Any]) -> None:
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

    def info(c: _C) -> dict[str, Any]:
        return {"book": c.x.book, "uid": c.x.entry.uid, "comment": c.x.entry.comment}

    # filterGroupsByTimedEffects (4248–4297)
    has_sticky: dict[str, bool] = {}
    for g, group in grouped.items():
        has_sticky[g] = False
        stickies = [c for c in group if c.sticky]
        if stickies:
            for c in group:
                if c not in stickies:
                    remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "sticky", "pass": pass_no,
                                                      "winner": info(stickies[0])})
            has_sticky[g] = True
        if has_timed:
            for c in group:
                if timed.cooldown_of(c.x) is not None or timed.delayed(c.x):
                    remove(c, "LOREBOOK_COOLDOWN", {"group": g, "pass": pass_no})

    # filterGroupsByScoring (4203–4246)
    for g, group in grouped.items():
        if not settings.use_group_scoring and not any(c.x.entry.use_group_scoring for c in group):
            continue
        if has_sticky[g]:
            continue
        scores = [_score(c, buf, state, depth_of) for c in group]
        best = max(scores) if scores else 0
        top = next((c for c, sc in zip(group, scores) if sc == best), None)
        i = 0
        while i < len(group):
            c = group[i]
            scored = c.x.entry.use_group_scoring if c.x.entry.use_group_scoring is not None \
                else settings.use_group_scoring
            if scored and scores[i] < best:
                remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "score", "score": scores[i],
                                                  "best_score": best, "pass": pass_no,
                                                  "winner": info(top) if top is not None else None})
                del group[i]
                del scores[i]
                continue
            i += 1

    for g, group in grouped.items():
        if has_sticky[g]:
            continue
        already = next((a for a in activated.values() if a.x.entry.group == g), None)
        if already is not None:
            for c in group:
                remove(c, "LOREBOOK_GROUP_ALREADY_SATISFIED", {"group": g, "mode": "already_active",
                                                                "pass": pass_no, "winner": info(already)})
            continue
        if len(group) <= 1:
            continue
        prios = sorted((c for c in group if c.x.entry.group_override), key=lambda c: -float(c.x.entry.order))
        if prios:
            for c in group:
                if c is not prios[0]:
                    remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "override", "pass": pass_no,
                                                      "winner": info(prios[0])})
            continue
        weights = [float(c.x.entry.group_weight) for c in group]
        total = sum(weights)
        seed_text = f"{settings.seed}:group:{g}:{chat_len}:{pass_no}"
        roll = random.Random(seed_text).random() * total
        acc = 0.0
        winner = None
        for c, w in zip(group, weights):
            acc += w
            if roll <= acc:
                winner = c
                break
        if winner is None:
            continue
        for c in group:
            if c is not winner:
                remove(c, "LOREBOOK_GROUP_LOST", {"group": g, "mode": "weight", "pass": pass_no,
                                                  "roll": round(roll, 4), "total_weight": total,
                                                  "seed": seed_text, "winner": info(winner)})


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
