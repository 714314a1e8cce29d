"""World Info activation: SillyTavern semantics, deterministic, with a per-entry trace.

Algorithm borrowed from SillyTavern 1.12.x ``world-info.js`` ``checkWorldInfo`` (FORMATS.md
b3), with SPEC §5's deliberate differences:

* Constant entries are required: the lorebook budget never drops them. The budget takes
  constants first, then the other candidates by priority, dropping the ones that do not fit
  (reason ``LOREBOOK_BUDGET``) and going on with smaller ones; an overflow does not stop
  recursion (SillyTavern breaks out of the loop and loses every remaining candidate).
* Deterministic tie-breaks: priority = ``order`` (higher first), then the book's index in
  ``books``, then ``uid`` (integers before strings), then the entry's index in its book.
* Probability rolls and weighted group choices use ``random.Random`` seeded from
  ``settings.seed``, the entry's (or group's) name and the chat length, so one entry's roll
  never depends on another's and the same preview is reproducible.
* Activation is a pure function of its inputs: timed effects (sticky, cooldown) are read
  from ``chat_metadata["timedWorldInfo"]`` and the new state is returned, never written.
* An entry whose content is empty after macros is not activated (``LOREBOOK_EMPTY``).

Token budget = ``round(budget_percent × context_limit / 100)`` (half up, at least 1), capped
by ``budget_cap`` when it is > 0. Each entry costs ``count_tokens(content)``; SillyTavern
re-counts the newline-joined text instead, which differs by a token or so per entry.
Book-level ``scan_depth``/``token_budget``/``recursive_scanning`` of imported
``character_book`` objects are ignored, as SillyTavern ignores them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema.character import Character, Persona
from ..schema.lorebook import InsertionPosition, Lorebook, SelectiveLogic
from ..schema.messages import ChatMessage
from ..schema.settings import WorldInfoSettings
from .codes import BLOCK_REASONS
from .groups import filter_groups
from .jsregex import RegexClock
from .keys import substitute_names
from .models import ActivatedEntry, ActivationResult, TraceRecord
from .prepare import _Entry, _Key, _Prepared, _prepared_for, clear_cache
from .scan import _Scanner, _Table
from .timed import _Timed, next_timed_state

__all__ = ["MAX_PASSES", "activate", "clear_cache", "compute_budget", "test_text"]

_ROLES = {0: "system", 1: "user", 2: "assistant"}
#: Upper bound on scan passes (recursion, min-activation widening, delay levels): a safety net.
MAX_PASSES = 10_000


def compute_budget(settings: WorldInfoSettings, context_limit: int) -> int:
    """The lorebook token budget (SillyTavern: ``round(pct × maxContext / 100)``, ≥ 1, then capped).

    Parameters
    ----------
    settings:
        ``budget_percent`` (0–100) and ``budget_cap`` (tokens, 0 = none).
    context_limit:
        The context the percentage applies to, in tokens.
    """
    budget = max(1, math.floor(settings.budget_percent * max(0, context_limit) / 100 + 0.5))
    if settings.budget_cap > 0:
        budget = min(budget, settings.budget_cap)
    return budget


# --------------------------------------------------------------------------- activation


@dataclass
class _Cand:
    x: _Entry
    code: str
    detail: dict[str, Any]
    sticky: bool = False


_PASS_INITIAL = "initial"
_PASS_RECURSION = "recursion"
_PASS_MIN = "min_activations"


class _Run:
    def __init__(self, prepared: _Prepared, scanner: _Scanner, settings: WorldInfoSettings,
                 extra: _Table, sources: dict[str, _Table]) -> None:
        self.p = prepared
        self.s = scanner
        self.settings = settings
        self.extra = extra
        self.sources = sources
        self.recursion = _Table(scanner.clock)
        self.skew = 0
        self.global_depth = settings.scan_depth

    def depth_of(self, x: _Entry) -> int:
        sd = x.entry.scan_depth
        return int(sd) if sd is not None else self.global_depth

    def match_key(self, x: _Entry, k: _Key, state: str, *, recursion_only: bool = False
                  ) -> dict[str, Any] | None:
        """Where key ``k`` of entry ``x`` occurs in this pass's text, or ``None``."""
        if not recursion_only:
            sd = x.entry.scan_depth
            depth = int(sd) if sd is not None else self.global_depth
            if depth > 0 and self.s.window:
                if k.regex is not None:
                    found = self.s.regex_in_chat(k.regex, depth)
                    if found is not None:
                        return dict(found)
                else:
                    s = self.s
                    table = ((s.cs_whole if x.ww else s.cs_any) if k.cs
                             else (s.ci_whole if x.ww else s.ci_any))
                    d = table.get(k.norm)
                    if d is not None and d < depth:
                        return {"source": "chat", "message_index": s.window[d][0], "depth": d}
            if self.extra.texts:
                hit = self.extra.lookup(k, x.ww)
                if hit is not None:
                    return hit
            for src in x.sources:
                t = self.sources.get(src)
                if t is not None:
                    hit = t.lookup(k, x.ww)
                    if hit is not None:
                        return hit
        if (state == _PASS_RECURSION or recursion_only) and self.recursion.texts:
            return self.recursion.lookup(k, x.ww)
        return None

    def primary(self, x: _Entry, state: str, *, recursion_only: bool = False
                ) -> tuple[_Key, dict[str, Any]] | None:
        for k in x.keys:
            hit = self.match_key(x, k, state, recursion_only=recursion_only)
            if hit is not None:
                return k, hit
        return None

    def secondary_ok(self, x: _Entry, state: str) -> tuple[bool, list[str], list[str]]:
        logic = x.entry.selective_logic
        matched: list[str] = []
        missing: list[str] = []
        for k in x.secondary:
            (matched if self.match_key(x, k, state) is not None else missing).append(k.text)
        total_raw = len(x.secondary) + sum(1 for raw, _ in x.invalid if raw in x.entry.secondary_keys)
        if logic == SelectiveLogic.AND_ANY:
            ok = bool(matched)
        elif logic == SelectiveLogic.NOT_ALL:
            ok = len(matched) < total_raw
        elif logic == SelectiveLogic.NOT_ANY:
            ok = not matched
        else:  # AND_ALL
            ok = len(matched) == total_raw
        return ok, matched, missing

    def score(self, x: _Entry, state: str) -> int:
        """Group score (SillyTavern ``getScore``): matched primaries (+ secondaries under AND logic)."""
        if not x.keys:
            return 0
        primary = sum(1 for k in x.keys if self.match_key(x, k, state) is not None)
        if not x.secondary:
            return primary
        secondary = sum(1 for k in x.secondary if self.match_key(x, k, state) is not None)
        logic = x.entry.selective_logic
        if logic == SelectiveLogic.AND_ANY:
            return primary + secondary
        if logic == SelectiveLogic.AND_ALL:
            return primary + secondary if secondary == len(x.secondary) else primary
        return primary

    def near_misses(self, x: _Entry) -> list[dict[str, Any]]:
        """Why the keys did not match, where it is cheap to tell (for the trace)."""
        out: list[dict[str, Any]] = []
        depth = self.depth_of(x)
        for k in x.keys:
            if k.regex is not None:
                if not k.regex.ignore_case and depth > 0 and self.s.window:
                    loose = k.regex.loose()
                    if loose.search(self.s.joined(depth)[0], clock=self.s.clock, where="near-miss check"):
                        out.append({"key": k.text, "why": "regex is case-sensitive (no i flag); "
                                    "it matches when case is ignored"})
                continue
            any_map = self.s.cs_any if k.cs else self.s.ci_any
            whole_map = self.s.cs_whole if k.cs else self.s.ci_whole
            d_any = any_map.get(k.norm)
            if d_any is not None and d_any < depth and x.ww:
                out.append({"key": k.text, "why": "found only inside a longer word (whole words on)",
                            "message_index": self.s.window[d_any][0]})
            elif d_any is not None and d_any >= depth:
                d = whole_map.get(k.norm, d_any) if x.ww else d_any
                out.append({"key": k.text, "why": "found beyond the scan depth", "depth": d,
                            "scan_depth": depth})
            elif (d_any is None and k.cs and depth > 0 and self.s.window
                  and k.text.lower() in self.s.joined(depth)[0].lower()):
                    out.append({"key": k.text, "why": "case-sensitive key; the text has it in another case"})
        return out


def _role_name(role: Any) -> str:
    if isinstance(role, str) and role in ("system", "user", "assistant"):
        return role
    try:
        return _ROLES.get(int(role), "system")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "system"


def _message_name(m: ChatMessage, user_name: str, char_name: str) -> str:
    if m.name:
        return m.name
    if m.role == "user":
        return user_name
    if m.role == "assistant":
        return char_name
    return ""


def _static_reason(x: _Entry, char_name: str, character: Character | None, generation_type: str
                   ) -> tuple[str, dict[str, Any]] | None:
    e = x.entry
    if e.disable:
        return "LOREBOOK_DISABLED", {}
    cf = x.char_filter
    if cf:
        names = [str(n) for n in cf.get("names") or []]
        exclude = bool(cf.get("isExclude"))
        if names:
            candidates = {char_name} | ({character.name} if character else set())
            included = any(n in candidates for n in names)
            if included == exclude:
                return "LOREBOOK_FILTERED_CHARACTER", {"names": names, "exclude": exclude}
        tags = [str(t) for t in cf.get("tags") or []]
        if tags and character is not None:
            has = any(t in tags for t in character.tags)
            if has == exclude:
                return "LOREBOOK_FILTERED_CHARACTER", {"tags": tags, "exclude": exclude}
    if x.triggers and generation_type not in x.triggers:
        return "LOREBOOK_FILTERED_TRIGGER", {"triggers": x.triggers, "generation_type": generation_type}
    return None


def activate(
    books: Sequence[Lorebook],
    messages: Sequence[ChatMessage],
    settings: WorldInfoSettings,
    *,
    count_tokens: Callable[[str], int],
    context_limit: int,
    user_name: str = "User",
    char_name: str = "",
    character: Character | None = None,
    persona: Persona | None = None,
    chat_metadata: dict[str, Any] | None = None,
    extra_scan_text: Sequence[str] = (),
    generation_type: str = "normal",
    book_scopes: Sequence[str | None] | None = None,
    compare_rules: bool = True,
    history_offset: int = 0,
    hidden_before: int = 0,
) -> ActivationResult:
    """Activate World Info entries for a chat under ``settings.rules``.

    ``"sillytavern"`` (the default) reproduces SillyTavern 1.12.x ``checkWorldInfo`` exactly
    (:mod:`engine.lorebook.st_rules`); ``"loomscope"`` applies Loomscope's rules (module doc of
    :mod:`engine.lorebook.activation`). Both return the same result shape.

    Parameters
    ----------
    books, messages, settings, count_tokens, context_limit, user_name, char_name, character,
    persona, chat_metadata, extra_scan_text, generation_type:
        As described for :func:`_activate_loomscope` below.
    book_scopes:
        One scope per book: ``"chat"``, ``"persona"``, ``"character"`` or ``"global"`` (SillyTavern's
        lore sources, ranked by ``settings.character_strategy``); ``None`` for a book (or the
        whole argument) uses the book's ``scope`` field, else ``"global"``. Only the
        ``sillytavern`` rules rank by scope.
    compare_rules:
        Under ``sillytavern``, also run the ``loomscope`` rules and mark every entry whose
        outcome differs (``trace[...].detail["loomscope"]`` and ``rule_differences``). Costs a
        second activation; the lorebook report turns it off.
    history_offset, hidden_before:
        For replays of long chats (the lorebook report): ``messages`` is the tail of a chat
        that starts ``history_offset`` messages earlier, ``hidden_before`` of which are hidden.
        Message indexes in the trace and the chat length (timed effects, seeds) count them; only
        the tail is scanned, so pass at least the scan depth's worth of visible messages.

    Returns
    -------
    ActivationResult
        With ``rules`` set to the rule set used.

    Notes
    -----
    Regex keys run under ``settings.regex_timeout_ms`` per search and
    ``settings.regex_total_timeout_ms`` per call; a key that runs out does not match, its
    entry's trace code is ``LOREBOOK_REGEX_TIMEOUT`` (when nothing else matched) and a
    diagnostic names it. Never raises for bad lorebook content.
    """
    clock = RegexClock(settings.regex_timeout_ms / 1000, settings.regex_total_timeout_ms / 1000)
    if settings.rules == "loomscope":
        return _activate_loomscope(
            books, messages, settings, count_tokens=count_tokens, context_limit=context_limit,
            user_name=user_name, char_name=char_name, character=character, persona=persona,
            chat_metadata=chat_metadata, extra_scan_text=extra_scan_text,
            generation_type=generation_type, clock=clock, history_offset=history_offset)
    from .st_rules import activate_sillytavern

    prepared = _prepared_for(books, settings, user_name, char_name)
    result = activate_sillytavern(
        books, messages, settings, prepared, count_tokens=count_tokens,
        budget=compute_budget(settings, context_limit), user_name=user_name, char_name=char_name,
        character=character, persona=persona, chat_metadata=chat_metadata,
        extra_scan_text=extra_scan_text, generation_type=generation_type,
        book_scopes=book_scopes, clock=clock, history_offset=history_offset, hidden_before=hidden_before)
    if not compare_rules:
        return result
    other = _activate_loomscope(
        books, messages, settings, count_tokens=count_tokens, context_limit=context_limit,
        user_name=user_name, char_name=char_name, character=character, persona=persona,
        chat_metadata=chat_metadata, extra_scan_text=extra_scan_text,
        generation_type=generation_type, history_offset=history_offset,
        clock=_shared_clock(clock))
    return compare_results(result, other)


def _shared_clock(clock: RegexClock) -> RegexClock:
    """The comparison run's clock (one time budget per preview).

    It shares the main run's total and exhausted searches, with its own list of timeouts (it reports none).
    """
    return RegexClock(clock.per_search, clock.total, spent=clock.spent, exhausted=clock.exhausted)


def compare_results(st: ActivationResult, ls: ActivationResult) -> ActivationResult:
    """``st`` with every difference from the ``loomscope`` result ``ls`` marked.

    Each entry whose activation or reason differs gets ``detail["loomscope"] = {"activated",
    "code", "message"}`` in its trace record; ``rule_differences`` lists the same notes plus a
    placement note when both activate the same entries in another order.
    """
    other = {(r.book_index, r.uid): r for r in ls.trace}
    diffs: list[dict[str, Any]] = []
    trace = list(st.trace)
    for i, rec in enumerate(trace):
        o = other.get((rec.book_index, rec.uid))
        if o is None or o.activated == rec.activated:
            continue
        message = _difference_message(rec, o)
        if message is None:
            continue
        note = {"activated": o.activated, "code": o.code, "message": message}
        trace[i] = _fast(TraceRecord, {**rec.__dict__, "detail": {**rec.detail, "loomscope": note}})
        diffs.append({"book": rec.book, "uid": rec.uid, "comment": rec.comment,
                      "what": "activation", "message": message})
    st_order = [(a.book_index, a.uid) for a in st.activated]
    ls_order = [(a.book_index, a.uid) for a in ls.activated]
    if st_order != ls_order and sorted(st_order, key=str) == sorted(ls_order, key=str):
        diffs.append({"book": "", "uid": None, "comment": "", "what": "placement",
                      "message": "SillyTavern places these entries in another order than the loomscope "
                                 "rules (equal orders: SillyTavern puts the entry activated later first)",
                      "sillytavern": [list(k) for k in st_order], "loomscope": [list(k) for k in ls_order]})
    return _fast(ActivationResult, {**st.__dict__, "trace": trace, "rule_differences": diffs})


def _difference_message(st: TraceRecord, ls: TraceRecord) -> str | None:
    if st.code == "LOREBOOK_BUDGET" and ls.activated:
        if ls.code == "LOREBOOK_CONSTANT":
            return "SillyTavern drops this constant over the budget; the loomscope rules keep it"
        if "not reached" in str(st.detail.get("note", "")):
            return ("SillyTavern stopped at an earlier entry that overflowed the budget; the loomscope "
                    "rules still fit this one")
        return "SillyTavern drops this entry when the running total reaches the budget; the loomscope rules keep it"
    if st.activated and not ls.activated:
        if ls.code == "LOREBOOK_EMPTY":
            return ("SillyTavern activates this entry with empty content (it inserts nothing but counts for "
                    "timed effects and groups); the loomscope rules skip it")
        return f"the loomscope rules would not activate this entry ({ls.code})"
    return f"the loomscope rules would activate this entry (SillyTavern: {st.code})"


def _activate_loomscope(
    books: Sequence[Lorebook],
    messages: Sequence[ChatMessage],
    settings: WorldInfoSettings,
    *,
    count_tokens: Callable[[str], int],
    context_limit: int,
    user_name: str = "User",
    char_name: str = "",
    character: Character | None = None,
    persona: Persona | None = None,
    chat_metadata: dict[str, Any] | None = None,
    extra_scan_text: Sequence[str] = (),
    generation_type: str = "normal",
    clock: RegexClock | None = None,
    history_offset: int = 0,
) -> ActivationResult:
    """Activate World Info entries under the ``loomscope`` rules (SPEC §5 differences).

    Parameters
    ----------
    books:
        Lorebooks in priority order (chat lore, persona lore, character lore, global lore,
        as SillyTavern sorts them); ``book_index`` in the result is the index here.
    messages:
        The whole chat, oldest first. Messages with ``meta.hidden`` are not scanned. The scan
        window is the newest ``scan_depth`` remaining messages (per-entry ``scan_depth``
        overrides); with ``include_names`` each is scanned as ``Name: text``.
    settings:
        Global World Info settings (scan depth, budget, recursion, matching defaults, seed).
    count_tokens:
        Tokens of a text (the caller's profile); called once per candidate entry.
    context_limit:
        Tokens the budget percentage applies to.
    user_name, char_name:
        For ``{{user}}``/``{{char}}`` in keys and content, and the ``Name:`` prefixes.
    character, persona:
        Scanned only for entries that opt in (``matchCharacterDescription``, ...); the
        character's tags and name serve character filters.
    chat_metadata:
        SillyTavern ``chat_metadata``; only ``timedWorldInfo`` (sticky/cooldown) is read.
    extra_scan_text:
        Further texts scanned with the chat (SillyTavern: prompts flagged ``scan``, e.g. the
        Author's Note).
    generation_type:
        For entries with ``triggers`` (``normal``, ``continue``, ``impersonate``, ...).

    Returns
    -------
    ActivationResult
        Kept entries in insertion order, budget-dropped entries, one trace record per entry,
        the budget and used tokens (tokens), diagnostics and the new timed-effects state.

    Notes
    -----
    Never raises for bad lorebook content: invalid regex keys become diagnostics and
    ``LOREBOOK_INVALID_KEY`` trace records.
    """
    prepared = _prepared_for(books, settings, user_name, char_name)
    budget = compute_budget(settings, context_limit)
    chat_len = len(messages) + history_offset

    window: list[tuple[int, str]] = []
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.meta.hidden:
            continue
        text = m.text()
        if settings.include_names:
            name = _message_name(m, user_name, char_name)
            if name:
                text = f"{name}: {text}"
        window.append((i + history_offset, text.strip()))

    clock = clock or RegexClock(settings.regex_timeout_ms / 1000, settings.regex_total_timeout_ms / 1000)
    scanner = _Scanner(prepared, window, clock)
    extra = _Table(clock)
    for i, t in enumerate(extra_scan_text):
        if t:
            extra.add(scanner.text("extra", substitute_names(t, user=user_name, char=char_name),
                                   extra_index=i))
    sources: dict[str, _Table] = {}
    if prepared.needs_sources:
        raw_sources = {
            "persona_description": persona.description if persona else "",
            "character_description": character.description if character else "",
            "character_personality": character.personality if character else "",
            "character_depth_prompt": (dp.prompt if character and (dp := character.depth_prompt()) else ""),
            "scenario": character.scenario if character else "",
            "creator_notes": character.creator_notes if character else "",
        }
        for src in prepared.needs_sources:
            text = substitute_names(raw_sources.get(src, ""), user=user_name, char=char_name)
            if text:
                sources[src] = _Table(clock)
                sources[src].add(scanner.text(src, text))

    run = _Run(prepared, scanner, settings, extra, sources)
    timed = _Timed(chat_metadata, chat_len)
    has_timed = bool(timed.sticky or timed.cooldown)

    reasons: dict[int, tuple[str, dict[str, Any]]] = {}
    final: set[int] = set()
    accepted: dict[int, _Cand] = {}
    accepted_tokens: dict[int, int] = {}
    dropped: dict[int, tuple[_Cand, int]] = {}
    active_groups: dict[str, _Entry] = {}
    used = 0
    for x in prepared.special:
        st = _static_reason(x, char_name, character, generation_type)
        if st is not None:
            reasons[x.gid] = st
            final.add(x.gid)
    if not has_timed:
        for x in prepared.delayed:
            if timed.delayed(x):
                reasons[x.gid] = ("LOREBOOK_DELAY", {"delay": x.entry.delay, "chat_length": chat_len})
                final.add(x.gid)

    entries = prepared.entries
    rank_of = prepared.rank_of
    timed_gids: set[int] = set()
    if has_timed:
        labels = set(timed.sticky) | set(timed.cooldown)
        timed_gids = {x.gid for x in entries if x.label in labels}
        timed_gids.update(x.gid for x in prepared.delayed)

    delay_levels = sorted({x.delay_level for x in prepared.entries if x.delay_level > 0})
    current_level = delay_levels.pop(0) if delay_levels else 0
    state = _PASS_INITIAL
    pass_no = 0
    seed = settings.seed
    # Recursion passes re-check only the entries whose inputs changed since their last check:
    # keys found in recursion text not yet seen by a full pass, regex keys, delayed entries.
    seen_recursion = 0

    while state and pass_no < MAX_PASSES:
        if settings.max_recursion_steps and pass_no >= settings.max_recursion_steps:
            break
        run.global_depth = settings.scan_depth + run.skew
        scanner.scan_to(max(run.global_depth, prepared.max_entry_depth))
        # Only entries whose inputs can match are visited: those with a key (primary or
        # secondary) somewhere in this pass's text, plus constants, decorators, regex keys,
        # delayed and timed entries. Every other entry cannot match: NOT_MATCHED by default.
        affected = set(prepared.always_visit)
        affected.update(timed_gids)
        if state == _PASS_RECURSION:
            new_texts = run.recursion.texts[seen_recursion:]
            seen_recursion = len(run.recursion.texts)
        else:
            new_texts = []
            for key_map, index in ((scanner.ci_any, prepared.ci_index), (scanner.cs_any, prepared.cs_index)):
                for k in key_map:
                    affected.update(index.get(k, ()))
            new_texts.extend(extra.texts)
            for table in sources.values():
                new_texts.extend(table.texts)
        # Recursion text can also complete the secondary keys of an entry whose primary key
        # matched the chat earlier; a full pass needs a primary key somewhere.
        indexes = ((prepared.ci_index, prepared.cs_index, prepared.ci_index2, prepared.cs_index2)
                   if state == _PASS_RECURSION else (prepared.ci_index, prepared.cs_index))
        for t in new_texts:
            for i, index in enumerate(indexes):
                hits = t.ci if i % 2 == 0 else t.cs
                for k in hits.any:
                    affected.update(index.get(k, ()))
        affected.difference_update(accepted)
        affected.difference_update(final)
        cands: list[_Cand] = []
        for gid in sorted(affected, key=rank_of.__getitem__):
            x = entries[gid]
            sticky = None
            if has_timed:
                sticky = timed.sticky_of(x)
                if timed.delayed(x):
                    reasons[gid] = ("LOREBOOK_DELAY", {"delay": x.entry.delay, "chat_length": chat_len})
                    final.add(gid)
                    continue
            if sticky is None:
                if has_timed:
                    cool = timed.cooldown_of(x)
                    if cool is not None:
                        reasons[gid] = ("LOREBOOK_COOLDOWN", {"until": cool.get("end"), "chat_length": chat_len})
                        final.add(gid)
                        continue
                if x.delay_level:
                    if state != _PASS_RECURSION:
                        reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION", {"level": x.delay_level, "pass": pass_no})
                        continue
                    if x.delay_level > current_level:
                        reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION",
                                        {"level": x.delay_level, "current_level": current_level, "pass": pass_no})
                        continue
                if state == _PASS_RECURSION and settings.recursive and x.entry.exclude_recursion:
                    # Report it only when its key shows up in recursion text and nothing in the
                    # chat explains the miss better (a failed secondary check stays the reason).
                    prev = reasons.get(gid)
                    hit = (run.primary(x, state, recursion_only=True)
                           if x.keys and (prev is None or prev[0] == "LOREBOOK_NOT_MATCHED") else None)
                    if hit is not None:
                        reasons[gid] = ("LOREBOOK_EXCLUDED_FROM_RECURSION",
                                        {"key": hit[0].text, **hit[1], "pass": pass_no})
                    continue
            if x.decorators and "dont_activate" in x.decorators:
                reasons[gid] = ("LOREBOOK_DECORATOR_SUPPRESS", {})
                final.add(gid)
                continue
            cand: _Cand | None = None
            if "activate" in x.decorators:
                cand = _Cand(x, "LOREBOOK_DECORATOR_ACTIVATE", {"pass": pass_no})
            elif x.entry.constant:
                cand = _Cand(x, "LOREBOOK_CONSTANT", {"pass": pass_no})
            elif sticky is not None:
                cand = _Cand(x, "LOREBOOK_STICKY", {"until": sticky.get("end"), "pass": pass_no}, sticky=True)
            else:
                if not x.keys:
                    if x.invalid:
                        reasons[gid] = ("LOREBOOK_INVALID_KEY", {"invalid": [
                            {"key": k, "error": err} for k, err in x.invalid]})
                    else:
                        reasons[gid] = ("LOREBOOK_NO_KEYS", {})
                    final.add(gid)
                    continue
                hit = run.primary(x, state)
                if hit is None:
                    if x.invalid_primary:
                        reasons[gid] = ("LOREBOOK_INVALID_KEY", {
                            "invalid": [{"key": k, "error": err} for k, err in x.invalid],
                            "keys": [k.text for k in x.keys], "scan_depth": run.depth_of(x), "pass": pass_no})
                    else:
                        reasons[gid] = ("LOREBOOK_NOT_MATCHED", {
                            "keys": [k.text for k in x.keys], "scan_depth": run.depth_of(x), "pass": pass_no})
                    continue
                key, where = hit
                detail = {"key": key.text, **where, "pass": pass_no}
                if key.regex is not None:
                    detail["regex"] = True
                if x.entry.selective and x.entry.secondary_keys:
                    ok, matched, missing = run.secondary_ok(x, state)
                    logic = SelectiveLogic(x.entry.selective_logic).name
                    if not ok:
                        reasons[gid] = ("LOREBOOK_SECONDARY_FAILED", {
                            "key": key.text, **where, "logic": logic,
                            "secondary_matched": matched, "secondary_missing": missing, "pass": pass_no})
                        continue
                    detail["logic"] = logic
                    detail["secondary_matched"] = matched
                cand = _Cand(x, "LOREBOOK_KEY_MATCH", detail)
            if not x.content.strip():
                reasons[gid] = ("LOREBOOK_EMPTY", {"would_activate": cand.code})
                final.add(gid)
                continue
            cands.append(cand)

        # Sticky entries first, then priority order (SillyTavern sorts activatedNow so).
        if has_timed:
            cands.sort(key=lambda c: (0 if c.sticky else 1, c.x.rank))
        if prepared.has_groups:
            cands = filter_groups(cands, run, state, settings, active_groups, reasons, final,
                                   seed, chat_len, pass_no)

        survivors: list[_Cand] = []
        for c in cands:
            e = c.x.entry
            if not c.sticky and e.use_probability and e.probability < 100:
                seed_text = f"{seed}:{c.x.book}:{e.uid}:{chat_len}"
                roll = random.Random(seed_text).random() * 100
                if roll >= e.probability:
                    reasons[c.x.gid] = ("LOREBOOK_PROBABILITY", {
                        "probability": e.probability, "roll": round(roll, 4), "seed": seed_text})
                    final.add(c.x.gid)
                    continue
                c.detail["probability"] = {"probability": e.probability, "roll": round(roll, 4),
                                           "seed": seed_text}
            survivors.append(c)

        # Budget: constants first (never dropped), then in the order above.
        survivors.sort(key=lambda c: 0 if c.x.entry.constant else 1)
        new_accepted: list[_Cand] = []
        for c in survivors:
            tokens = int(count_tokens(c.x.content))
            e = c.x.entry
            if e.constant or e.ignore_budget:
                if not e.ignore_budget:
                    used += tokens
            elif used + tokens > budget:
                dropped[c.x.gid] = (c, tokens)
                reasons[c.x.gid] = ("LOREBOOK_BUDGET", {
                    "budget": budget, "used": used, "tokens": tokens, "would_activate": c.code,
                    "match": dict(c.detail)})
                final.add(c.x.gid)
                continue
            else:
                used += tokens
            accepted[c.x.gid] = c
            accepted_tokens[c.x.gid] = tokens
            new_accepted.append(c)
            for g in c.x.groups:
                active_groups.setdefault(g, c.x)

        feeding = [c for c in new_accepted if not c.x.entry.prevent_recursion]
        if settings.recursive:
            for c in feeding:
                run.recursion.add(scanner.text(
                    "recursion", c.x.content, from_book=c.x.book, from_uid=c.x.entry.uid,
                    from_comment=c.x.entry.comment, added_in_pass=pass_no))

        next_state = ""
        if settings.recursive and feeding:
            next_state = _PASS_RECURSION
        if settings.recursive and state == _PASS_MIN and run.recursion.texts:
            next_state = _PASS_RECURSION  # SillyTavern: recurse before widening again
        if state != _PASS_RECURSION:
            seen_recursion = 0  # a full pass without recursion text: the next recursion pass rechecks all
        if not next_state and settings.min_activations > 0 and len(accepted) < settings.min_activations:
            limit = len(window)
            if settings.min_activations_depth_max > 0:
                limit = min(limit, settings.min_activations_depth_max)
            if run.global_depth < limit:
                run.skew += 1
                next_state = _PASS_MIN
        if not next_state and delay_levels:
            next_state = _PASS_RECURSION
            current_level = delay_levels.pop(0)
            seen_recursion = 0  # delayed entries see the whole recursion buffer for the first time
        state = next_state
        pass_no += 1

    # A constant that activated in a late pass (delay-until-recursion, sticky) may push the
    # total over the budget: drop keyword entries, lowest priority first, until it fits.
    if used > budget:
        for c in sorted(accepted.values(), key=lambda c: -c.x.rank):
            if used <= budget:
                break
            e = c.x.entry
            if e.constant or e.ignore_budget:
                continue
            gid = c.x.gid
            tokens = accepted_tokens.pop(gid)
            del accepted[gid]
            used -= tokens
            dropped[gid] = (c, tokens)
            reasons[gid] = ("LOREBOOK_BUDGET", {"budget": budget, "used": used, "tokens": tokens,
                                                "would_activate": c.code, "match": dict(c.detail),
                                                "note": "dropped after a later constant entry"})

    # ---------------------------------------------------------------- outputs
    kept = sorted(accepted.values(), key=_placement)
    activated = [_entry_model(c, accepted_tokens[c.x.gid], BLOCK_REASONS[c.code]) for c in kept]
    budget_dropped = [_entry_model(c, t, "LOREBOOK_BUDGET")
                      for c, t in sorted(dropped.values(), key=lambda ct: ct[0].x.rank)]

    global_depth = run.global_depth
    near_gids: set[int] = set(prepared.regex_gids) | prepared.cs_gids
    for key_map, index in ((scanner.ci_any, prepared.ci_index), (scanner.cs_any, prepared.cs_index)):
        for k in key_map:
            near_gids.update(index.get(k, ()))
    # Start from the cached "never a candidate" records and replace the entries that moved.
    trace: list[TraceRecord] = list(_default_trace(prepared, global_depth))
    for gid in sorted(set(accepted) | set(reasons) | near_gids):
        x = entries[gid]
        e = x.entry
        if gid in accepted:
            trace[gid] = _fast(TraceRecord, {
                "book": x.book, "book_index": x.book_index, "uid": e.uid, "comment": e.comment,
                "activated": True, "code": accepted[gid].code, "detail": dict(accepted[gid].detail),
                "tokens": accepted_tokens[gid]})
            continue
        got = reasons.get(gid)
        if got is None:
            got = trace[gid].code, trace[gid].detail
        code, detail = got
        if code == "LOREBOOK_NOT_MATCHED" and gid in near_gids:
            misses = run.near_misses(x)
            if misses:
                detail = {**detail, "near_misses": misses}
            elif got is not reasons.get(gid):
                continue  # the cached default record already says it
        trace[gid] = _fast(TraceRecord, {
            "book": x.book, "book_index": x.book_index, "uid": e.uid, "comment": e.comment,
            "activated": False, "code": code, "detail": detail,
            "tokens": dropped[gid][1] if gid in dropped else None})

    diagnostics = list(prepared.diagnostics)
    if clock.timeouts:
        slow_keys = {t["key"] for t in clock.timeouts}
        for gid in prepared.regex_gids:
            x = entries[gid]
            slow = [k.text for k in x.keys if k.regex is not None and k.text in slow_keys]
            rec = trace[gid]
            if slow and not rec.activated and rec.code in ("LOREBOOK_NOT_MATCHED", "LOREBOOK_INVALID_KEY"):
                trace[gid] = _fast(TraceRecord, {**rec.__dict__, "code": "LOREBOOK_REGEX_TIMEOUT", "detail": {
                    "keys": slow, "timeout_ms": settings.regex_timeout_ms, "scan_depth": run.depth_of(x)}})
            for key in slow:
                t = next(t for t in clock.timeouts if t["key"] == key)
                diagnostics.append(f"{x.book}: uid {x.entry.uid}: LOREBOOK_REGEX_TIMEOUT: regex key {key!r} ran out "
                                   f"of its {t['timeout_ms']:g} ms on the {t['where'] or 'text'}; it does not match")
    return _fast(ActivationResult, {
        "activated": activated, "budget_dropped": budget_dropped, "trace": trace, "budget": budget,
        "used_tokens": used, "diagnostics": diagnostics, "rules": "loomscope", "rule_differences": [],
        "timed_effects": next_timed_state(timed, accepted, prepared, chat_len),
    })


def _default_trace(prepared: _Prepared, global_depth: int) -> list[TraceRecord]:
    """Trace records of entries that were never candidates (cached per global scan depth)."""
    cached = prepared.default_trace.get(global_depth)
    if cached is not None:
        return cached
    out: list[TraceRecord] = []
    for x in prepared.entries:
        e = x.entry
        depth = global_depth if e.scan_depth is None else int(e.scan_depth)
        code, detail = x.default_reason or ("LOREBOOK_NOT_MATCHED", {
            "keys": [k.text for k in x.keys], "scan_depth": depth})
        out.append(_fast(TraceRecord, {
            "book": x.book, "book_index": x.book_index, "uid": e.uid, "comment": e.comment,
            "activated": False, "code": code, "detail": detail, "tokens": None}))
    if len(prepared.default_trace) > 8:
        prepared.default_trace.clear()
    prepared.default_trace[global_depth] = out
    return out


_new = object.__new__
_set = object.__setattr__
_FIELDS: dict[type, frozenset[str]] = {}


def _fast(cls: type[Any], values: dict[str, Any]) -> Any:
    """Build a frozen result model from already-valid values without re-validation.

    Like ``model_construct`` but without its per-field default handling (every field is
    given): the trace has one record per entry, so this is on the hot path.
    """
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = frozenset(cls.model_fields)
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", fields)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


def _entry_model(c: _Cand, tokens: int, reason: str) -> ActivatedEntry:
    e = c.x.entry
    return _fast(ActivatedEntry, {
        "book": c.x.book, "book_index": c.x.book_index, "uid": e.uid, "comment": e.comment,
        "content": c.x.content,
        "position": e.position if type(e.position) is InsertionPosition else InsertionPosition(e.position),
        "depth": int(e.depth),
        "role": _role_name(e.role), "order": float(e.order), "constant": bool(e.constant),
        "reason": reason, "tokens": tokens, "trace": {"code": c.code, **c.detail},
    })


def _placement(c: _Cand) -> tuple[Any, ...]:
    """SillyTavern placement: bucket by position (depth/role for AT_DEPTH), lower order first.

    Equal orders come in reverse priority (SillyTavern ``unshift``s entries sorted by priority).
    """
    e = c.x.entry
    at_depth = e.position == InsertionPosition.AT_DEPTH
    return (int(e.position), int(e.depth) if at_depth else 0,
            _role_name(e.role) if at_depth else "", float(e.order), -c.x.rank)


def test_text(
    books: Sequence[Lorebook],
    text: str,
    settings: WorldInfoSettings,
    *,
    count_tokens: Callable[[str], int],
    context_limit: int,
    user_name: str = "User",
    char_name: str = "",
    character: Character | None = None,
    persona: Persona | None = None,
) -> ActivationResult:
    """Activate ``books`` against ``text`` taken as one user message (the GUI's "test text" box).

    Same parameters and result as :func:`activate`; the message is named ``user_name``
    when ``include_names`` is on.
    """
    return activate(books, [ChatMessage(role="user", content=text)], settings,
                    count_tokens=count_tokens, context_limit=context_limit, user_name=user_name,
                    char_name=char_name, character=character, persona=persona)


test_text.__test__ = False  # type: ignore[attr-defined]  # not a pytest test when imported
