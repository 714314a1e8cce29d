"""World Info activation under the ``loomscope`` rules: SillyTavern's scan, SPEC §5's differences.

Internal to :mod:`engine.lorebook`; :func:`engine.lorebook.activate` calls
:func:`_activate_loomscope` when ``settings.rules == "loomscope"`` (and, to mark differences,
alongside the ``sillytavern`` rules). The steps follow SillyTavern 1.12.6 ``checkWorldInfo``
(world-info.js 3704–4145): each pass scans the entries whose keys occur in its text
(:meth:`_LoomscopeScan.candidates`), sorts them sticky first then by priority, filters
inclusion groups (:func:`engine.lorebook.groups.filter_groups`), rolls probability, takes the
budget and feeds the accepted entries to the recursion buffer, then decides the next pass
(recursion, min-activations widening, the next delay level). SPEC §5's differences are listed
in the module doc of :mod:`engine.lorebook.activation`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from ..schema._construct import construct
from ..schema.character import Character, Persona
from ..schema.lorebook import InsertionPosition, Lorebook, SelectiveLogic
from ..schema.messages import ChatMessage
from ..schema.settings import WorldInfoSettings
from .budget import compute_budget
from .checks import _message_name, _static_reason
from .codes import BLOCK_REASONS
from .groups import filter_groups
from .jsregex import RegexClock
from .keys import substitute_names
from .models import ActivatedEntry, ActivationResult, TraceRecord
from .prepare import _Cand, _Entry, _Key, _Prepared, _prepared_for
from .records import _default_trace, _entry_model, _record, _regex_timeout_diagnostic, _role_name
from .scan import _Scanner, _Table
from .timed import _Timed, hash_function, next_timed_state

#: Upper bound on scan passes (recursion, min-activation widening, delay levels): a safety net.
MAX_PASSES = 10_000

_PASS_INITIAL = "initial"
_PASS_RECURSION = "recursion"
_PASS_MIN = "min_activations"

Reason = tuple[str, dict[str, Any]]


class _Run:
    """Key matching for one activation: the chat window, extra and card texts, recursion text.

    Shared with the ``sillytavern`` rules for near-miss hints.
    """

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
    clock:
        The regex time limits (a fresh one from ``settings`` when ``None``).
    history_offset:
        ``messages`` is the tail of a chat that starts this many messages earlier.

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
    chat_len = len(messages) + history_offset
    window = _scan_window(messages, settings, user_name, char_name, history_offset)
    clock = clock or RegexClock(settings.regex_timeout_ms / 1000, settings.regex_total_timeout_ms / 1000)
    scanner = _Scanner(prepared, window, clock)
    extra = _extra_table(scanner, extra_scan_text, user_name, char_name, clock)
    sources = _source_tables(prepared, scanner, character, persona, user_name, char_name, clock)
    scan = _LoomscopeScan(prepared, _Run(prepared, scanner, settings, extra, sources), settings,
                          budget=compute_budget(settings, context_limit), count_tokens=count_tokens,
                          timed=_Timed(chat_metadata, chat_len, prepared.entries,
                                                       hash_function(prepared, books), by_hash=False),
                          chat_len=chat_len)
    scan.apply_static_checks(char_name, character, generation_type)
    scan.run_passes()
    scan.drop_after_late_constants()
    return scan.result(clock)


def _scan_window(messages: Sequence[ChatMessage], settings: WorldInfoSettings, user_name: str,
                 char_name: str, history_offset: int) -> list[tuple[int, str]]:
    """The scanned chat, newest first: ``(message index, text)`` of each visible message.

    With ``include_names`` a message reads ``Name: text`` (SillyTavern ``Generate``).
    """
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
    return window


def _extra_table(scanner: _Scanner, extra_scan_text: Sequence[str], user_name: str, char_name: str,
                 clock: RegexClock) -> _Table:
    """The extra scan texts (SillyTavern ``WorldInfoBuffer.addInject``), macros substituted."""
    extra = _Table(clock)
    for i, t in enumerate(extra_scan_text):
        if t:
            extra.add(scanner.text("extra", substitute_names(t, user=user_name, char=char_name),
                                   extra_index=i))
    return extra


def _source_tables(prepared: _Prepared, scanner: _Scanner, character: Character | None,
                   persona: Persona | None, user_name: str, char_name: str,
                   clock: RegexClock) -> dict[str, _Table]:
    """The card and persona fields that entries opt in to scan (``matchCharacterDescription``, ...)."""
    sources: dict[str, _Table] = {}
    if not prepared.needs_sources:
        return sources
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
    return sources


class _LoomscopeScan:
    """One activation under the ``loomscope`` rules: the pass loop's state and its steps.

    ``reasons`` holds each entry's latest reason for not activating; ``final`` the entries
    whose reason can no longer change (never visited again); ``accepted`` the activated
    candidates in activation order with their tokens in ``accepted_tokens``; ``dropped`` the
    budget-dropped ones with their tokens; ``active_groups`` the inclusion groups that have an
    activated member.
    """

    def __init__(self, prepared: _Prepared, run: _Run, settings: WorldInfoSettings, *, budget: int,
                 count_tokens: Callable[[str], int], timed: _Timed, chat_len: int) -> None:
        self.prepared = prepared
        self.run = run
        self.scanner = run.s
        self.settings = settings
        self.budget = budget
        self.count_tokens = count_tokens
        self.timed = timed
        self.has_timed = timed.has_active
        self.chat_len = chat_len
        self.seed = settings.seed
        self.reasons: dict[int, Reason] = {}
        self.final: set[int] = set()
        self.accepted: dict[int, _Cand] = {}
        self.accepted_tokens: dict[int, int] = {}
        self.dropped: dict[int, tuple[_Cand, int]] = {}
        self.active_groups: dict[str, _Entry] = {}
        self.used = 0
        self.timed_gids: set[int] = set()
        if self.has_timed:
            self.timed_gids = timed.timed_gids()
            self.timed_gids.update(x.gid for x in prepared.delayed)
        self.delay_levels = sorted({x.delay_level for x in prepared.entries if x.delay_level > 0})
        self.current_level = self.delay_levels.pop(0) if self.delay_levels else 0
        self.state = _PASS_INITIAL
        self.pass_no = 0
        # Recursion passes re-check only the entries whose inputs changed since their last check:
        # keys found in recursion text not yet seen by a full pass, regex keys, delayed entries.
        self.seen_recursion = 0

    def settle(self, gid: int, code: str, detail: dict[str, Any]) -> None:
        """Record a reason that no later pass can change (the entry is not visited again)."""
        self.reasons[gid] = (code, detail)
        self.final.add(gid)

    # ---------------------------------------------------------------- before the passes
    def apply_static_checks(self, char_name: str, character: Character | None, generation_type: str) -> None:
        """Disabled, character-filtered and trigger-filtered entries; ``delay`` without timed state."""
        for x in self.prepared.special:
            st = _static_reason(x, char_name, character, generation_type)
            if st is not None:
                self.settle(x.gid, *st)
        if not self.has_timed:
            for x in self.prepared.delayed:
                if self.timed.delayed(x):
                    self.settle(x.gid, "LOREBOOK_DELAY", {"delay": x.entry.delay, "chat_length": self.chat_len})

    # ---------------------------------------------------------------- the pass loop
    def run_passes(self) -> None:
        """``checkWorldInfo``'s ``while (scanState)`` loop (world-info.js 3761–4111)."""
        settings = self.settings
        while self.state and self.pass_no < MAX_PASSES:
            if settings.max_recursion_steps and self.pass_no >= settings.max_recursion_steps:
                break
            cands = self.candidates()
            # Sticky entries first, then priority order (SillyTavern sorts activatedNow so).
            if self.has_timed:
                cands.sort(key=lambda c: (0 if c.sticky else 1, c.x.rank))
            if self.prepared.has_groups:
                cands = filter_groups(cands, self)
            accepted = self.take_budget(self.roll_probability(cands))
            self.next_pass(self.feed_recursion(accepted))

    def candidates(self) -> list[_Cand]:
        """The entries this pass activates before groups, probability and budget (``activatedNow``)."""
        run = self.run
        run.global_depth = self.settings.scan_depth + run.skew
        self.scanner.scan_to(max(run.global_depth, self.prepared.max_entry_depth))
        entries = self.prepared.entries
        cands: list[_Cand] = []
        for gid in sorted(self.affected(), key=self.prepared.rank_of.__getitem__):
            cand = self.check_entry(entries[gid])
            if cand is not None:
                cands.append(cand)
        return cands

    def affected(self) -> set[int]:
        """The entries this pass visits: only those whose inputs can match.

        Those with a key (primary or secondary) somewhere in this pass's text, plus constants,
        decorators, regex keys, delayed and timed entries. Every other entry cannot match:
        ``LOREBOOK_NOT_MATCHED`` by default.
        """
        prepared, scanner, run = self.prepared, self.scanner, self.run
        affected = set(prepared.always_visit)
        affected.update(self.timed_gids)
        if self.state == _PASS_RECURSION:
            new_texts = run.recursion.texts[self.seen_recursion:]
            self.seen_recursion = len(run.recursion.texts)
        else:
            new_texts = []
            for key_map, index in ((scanner.ci_any, prepared.ci_index), (scanner.cs_any, prepared.cs_index)):
                for k in key_map:
                    affected.update(index.get(k, ()))
            new_texts.extend(run.extra.texts)
            for table in run.sources.values():
                new_texts.extend(table.texts)
        # Recursion text can also complete the secondary keys of an entry whose primary key
        # matched the chat earlier; a full pass needs a primary key somewhere.
        indexes = ((prepared.ci_index, prepared.cs_index, prepared.ci_index2, prepared.cs_index2)
                   if self.state == _PASS_RECURSION else (prepared.ci_index, prepared.cs_index))
        for t in new_texts:
            for i, index in enumerate(indexes):
                hits = t.ci if i % 2 == 0 else t.cs
                for k in hits.any:
                    affected.update(index.get(k, ()))
        affected.difference_update(self.accepted)
        affected.difference_update(self.final)
        return affected

    def check_entry(self, x: _Entry) -> _Cand | None:
        """One entry of ``checkWorldInfo``'s entry loop (world-info.js 3780–3983), or ``None``."""
        sticky = None
        if self.has_timed:
            sticky = self.timed.sticky_of(x)
            if self.timed.delayed(x):
                self.settle(x.gid, "LOREBOOK_DELAY", {"delay": x.entry.delay, "chat_length": self.chat_len})
                return None
        if sticky is None and self.held_back(x):
            return None
        if x.decorators and "dont_activate" in x.decorators:
            self.settle(x.gid, "LOREBOOK_DECORATOR_SUPPRESS", {})
            return None
        pass_no = self.pass_no
        if "activate" in x.decorators:
            cand = _Cand(x, "LOREBOOK_DECORATOR_ACTIVATE", {"pass": pass_no})
        elif x.entry.constant:
            cand = _Cand(x, "LOREBOOK_CONSTANT", {"pass": pass_no})
        elif sticky is not None:
            cand = _Cand(x, "LOREBOOK_STICKY", {"until": sticky.get("end"), "pass": pass_no}, sticky=True)
        else:
            matched = self.match_keys(x)
            if matched is None:
                return None
            cand = matched
        if not x.content.strip():
            self.settle(x.gid, "LOREBOOK_EMPTY", {"would_activate": cand.code})
            return None
        return cand

    def held_back(self, x: _Entry) -> bool:
        """Cooldown, delay until recursion and exclude-recursion (world-info.js 3841–3859).

        Not applied to sticky entries. Records the reason; ``True`` when ``x`` sits this pass out.
        """
        gid, pass_no = x.gid, self.pass_no
        if self.has_timed:
            cool = self.timed.cooldown_of(x)
            if cool is not None:
                self.settle(gid, "LOREBOOK_COOLDOWN", {"until": cool.get("end"), "chat_length": self.chat_len})
                return True
        if x.delay_level:
            if self.state != _PASS_RECURSION:
                self.reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION", {"level": x.delay_level, "pass": pass_no})
                return True
            if x.delay_level > self.current_level:
                self.reasons[gid] = ("LOREBOOK_DELAY_UNTIL_RECURSION",
                                     {"level": x.delay_level, "current_level": self.current_level, "pass": pass_no})
                return True
        if self.state == _PASS_RECURSION and self.settings.recursive and x.entry.exclude_recursion:
            # Report it only when its key shows up in recursion text and nothing in the
            # chat explains the miss better (a failed secondary check stays the reason).
            prev = self.reasons.get(gid)
            hit = (self.run.primary(x, self.state, recursion_only=True)
                   if x.keys and (prev is None or prev[0] == "LOREBOOK_NOT_MATCHED") else None)
            if hit is not None:
                self.reasons[gid] = ("LOREBOOK_EXCLUDED_FROM_RECURSION",
                                     {"key": hit[0].text, **hit[1], "pass": pass_no})
            return True
        return False

    def match_keys(self, x: _Entry) -> _Cand | None:
        """Primary then secondary keys (world-info.js 3891–3975): a key-match candidate or ``None``."""
        run, gid, pass_no, state = self.run, x.gid, self.pass_no, self.state
        if not x.keys:
            if x.invalid:
                self.settle(gid, "LOREBOOK_INVALID_KEY", {"invalid": [
                    {"key": k, "error": err} for k, err in x.invalid]})
            else:
                self.settle(gid, "LOREBOOK_NO_KEYS", {})
            return None
        hit = run.primary(x, state)
        if hit is None:
            detail = {"keys": [k.text for k in x.keys], "scan_depth": run.depth_of(x), "pass": pass_no}
            if x.invalid_primary:
                detail = {"invalid": [{"key": k, "error": err} for k, err in x.invalid], **detail}
                self.reasons[gid] = ("LOREBOOK_INVALID_KEY", detail)
            else:
                self.reasons[gid] = ("LOREBOOK_NOT_MATCHED", detail)
            return None
        key, where = hit
        detail = {"key": key.text, **where, "pass": pass_no}
        if key.regex is not None:
            detail["regex"] = True
        if x.entry.selective and x.entry.secondary_keys:
            ok, matched, missing = run.secondary_ok(x, state)
            logic = SelectiveLogic(x.entry.selective_logic).name
            if not ok:
                self.reasons[gid] = ("LOREBOOK_SECONDARY_FAILED", {
                    "key": key.text, **where, "logic": logic,
                    "secondary_matched": matched, "secondary_missing": missing, "pass": pass_no})
                return None
            detail["logic"] = logic
            detail["secondary_matched"] = matched
        return _Cand(x, "LOREBOOK_KEY_MATCH", detail)

    def roll_probability(self, cands: list[_Cand]) -> list[_Cand]:
        """Seeded probability rolls (``verifyProbability``, world-info.js 3997–4019); sticky entries skip them."""
        survivors: list[_Cand] = []
        for c in cands:
            e = c.x.entry
            if not c.sticky and e.use_probability and e.probability < 100:
                seed_text = f"{self.seed}:{c.x.book}:{e.uid}:{self.chat_len}"
                roll = random.Random(seed_text).random() * 100
                if roll >= e.probability:
                    self.settle(c.x.gid, "LOREBOOK_PROBABILITY", {
                        "probability": e.probability, "roll": round(roll, 4), "seed": seed_text})
                    continue
                c.detail["probability"] = {"probability": e.probability, "roll": round(roll, 4),
                                           "seed": seed_text}
            survivors.append(c)
        return survivors

    def take_budget(self, survivors: list[_Cand]) -> list[_Cand]:
        """The budget: constants first (never dropped), then in priority order.

        An entry that does not fit is dropped (``LOREBOOK_BUDGET``) and smaller ones are still
        tried (SillyTavern stops at the first overflow, world-info.js 4030–4040). Returns the
        newly accepted candidates.
        """
        survivors.sort(key=lambda c: 0 if c.x.entry.constant else 1)
        new_accepted: list[_Cand] = []
        for c in survivors:
            tokens = int(self.count_tokens(c.x.content))
            e = c.x.entry
            if e.constant or e.ignore_budget:
                if not e.ignore_budget:
                    self.used += tokens
            elif self.used + tokens > self.budget:
                self.dropped[c.x.gid] = (c, tokens)
                self.settle(c.x.gid, "LOREBOOK_BUDGET", {
                    "budget": self.budget, "used": self.used, "tokens": tokens, "would_activate": c.code,
                    "match": dict(c.detail)})
                continue
            else:
                self.used += tokens
            self.accepted[c.x.gid] = c
            self.accepted_tokens[c.x.gid] = tokens
            new_accepted.append(c)
            for g in c.x.groups:
                self.active_groups.setdefault(g, c.x)
        return new_accepted

    def feed_recursion(self, accepted: list[_Cand]) -> list[_Cand]:
        """Add the accepted entries' contents to the recursion buffer (``buffer.addRecurse``).

        Returns the entries that feed recursion (not ``prevent_recursion``).
        """
        feeding = [c for c in accepted if not c.x.entry.prevent_recursion]
        if self.settings.recursive:
            for c in feeding:
                self.run.recursion.add(self.scanner.text(
                    "recursion", c.x.content, from_book=c.x.book, from_uid=c.x.entry.uid,
                    from_comment=c.x.entry.comment, added_in_pass=self.pass_no))
        return feeding

    def next_pass(self, feeding: list[_Cand]) -> None:
        """The next scan state (world-info.js 4062–4099).

        Recursion, a wider min-activations pass, the next delay-until-recursion level, or none.
        """
        settings, state = self.settings, self.state
        next_state = ""
        if settings.recursive and feeding:
            next_state = _PASS_RECURSION
        if settings.recursive and state == _PASS_MIN and self.run.recursion.texts:
            next_state = _PASS_RECURSION  # SillyTavern: recurse before widening again
        if state != _PASS_RECURSION:
            self.seen_recursion = 0  # a full pass without recursion text: the next recursion pass rechecks all
        if (not next_state and settings.min_activations > 0
                and len(self.accepted) < settings.min_activations):
            limit = len(self.scanner.window)
            if settings.min_activations_depth_max > 0:
                limit = min(limit, settings.min_activations_depth_max)
            if self.run.global_depth < limit:
                self.run.skew += 1
                next_state = _PASS_MIN
        if not next_state and self.delay_levels:
            next_state = _PASS_RECURSION
            self.current_level = self.delay_levels.pop(0)
            self.seen_recursion = 0  # delayed entries see the whole recursion buffer for the first time
        self.state = next_state
        self.pass_no += 1

    # ---------------------------------------------------------------- after the passes
    def drop_after_late_constants(self) -> None:
        """Fit the budget again after a late constant.

        A constant that activated in a late pass (delay-until-recursion, sticky) may push the
        total over the budget: drop keyword entries, lowest priority first, until it fits.
        """
        if self.used <= self.budget:
            return
        for c in sorted(self.accepted.values(), key=lambda c: -c.x.rank):
            if self.used <= self.budget:
                break
            e = c.x.entry
            if e.constant or e.ignore_budget:
                continue
            gid = c.x.gid
            tokens = self.accepted_tokens.pop(gid)
            del self.accepted[gid]
            self.used -= tokens
            self.dropped[gid] = (c, tokens)
            self.reasons[gid] = ("LOREBOOK_BUDGET", {
                "budget": self.budget, "used": self.used, "tokens": tokens, "would_activate": c.code,
                "match": dict(c.detail), "note": "dropped after a later constant entry"})

    def result(self, clock: RegexClock) -> ActivationResult:
        """The :class:`ActivationResult`: entries in placement order, the trace, diagnostics."""
        kept = sorted(self.accepted.values(), key=_placement)
        activated = [_entry_model(c, self.accepted_tokens[c.x.gid], BLOCK_REASONS[c.code]) for c in kept]
        budget_dropped: list[ActivatedEntry] = [
            _entry_model(c, t, "LOREBOOK_BUDGET") for c, t in sorted(self.dropped.values(), key=lambda ct: ct[0].x.rank)]
        trace = self.trace()
        diagnostics = list(self.prepared.diagnostics)
        if clock.timeouts:
            self.mark_timeouts(trace, diagnostics, clock)
        return construct(ActivationResult, {
            "activated": activated, "budget_dropped": budget_dropped, "trace": trace, "budget": self.budget,
            "used_tokens": self.used, "diagnostics": diagnostics, "rules": "loomscope", "rule_differences": [],
            "timed_effects": next_timed_state(self.timed, self.accepted, self.prepared, self.chat_len),
        })

    def trace(self) -> list[TraceRecord]:
        """One record per entry: the cached defaults with the entries that moved replaced."""
        prepared, scanner, accepted, reasons = self.prepared, self.scanner, self.accepted, self.reasons
        near_gids: set[int] = set(prepared.regex_gids) | prepared.cs_gids
        for key_map, index in ((scanner.ci_any, prepared.ci_index), (scanner.cs_any, prepared.cs_index)):
            for k in key_map:
                near_gids.update(index.get(k, ()))
        trace: list[TraceRecord] = list(_default_trace(prepared, self.run.global_depth))
        for gid in sorted(set(accepted) | set(reasons) | near_gids):
            x = prepared.entries[gid]
            if gid in accepted:
                trace[gid] = _record(x, activated=True, code=accepted[gid].code,
                                     detail=dict(accepted[gid].detail), tokens=self.accepted_tokens[gid])
                continue
            got = reasons.get(gid)
            if got is None:
                got = trace[gid].code, trace[gid].detail
            code, detail = got
            if code == "LOREBOOK_NOT_MATCHED" and gid in near_gids:
                misses = self.run.near_misses(x)
                if misses:
                    detail = {**detail, "near_misses": misses}
                elif got is not reasons.get(gid):
                    continue  # the cached default record already says it
            trace[gid] = _record(x, activated=False, code=code, detail=detail,
                                 tokens=self.dropped[gid][1] if gid in self.dropped else None)
        return trace

    def mark_timeouts(self, trace: list[TraceRecord], diagnostics: list[str], clock: RegexClock) -> None:
        """``LOREBOOK_REGEX_TIMEOUT`` for unmatched entries whose regex key ran out of time, and a diagnostic."""
        slow_keys = {t["key"] for t in clock.timeouts}
        for gid in self.prepared.regex_gids:
            x = self.prepared.entries[gid]
            slow = [k.text for k in x.keys if k.regex is not None and k.text in slow_keys]
            rec = trace[gid]
            if slow and not rec.activated and rec.code in ("LOREBOOK_NOT_MATCHED", "LOREBOOK_INVALID_KEY"):
                trace[gid] = construct(TraceRecord, {**rec.__dict__, "code": "LOREBOOK_REGEX_TIMEOUT", "detail": {
                    "keys": slow, "timeout_ms": self.settings.regex_timeout_ms, "scan_depth": self.run.depth_of(x)}})
            for key in slow:
                t = next(t for t in clock.timeouts if t["key"] == key)
                diagnostics.append(_regex_timeout_diagnostic(x, key, t))


def _placement(c: _Cand) -> tuple[Any, ...]:
    """SillyTavern placement: bucket by position (depth/role for AT_DEPTH), lower order first.

    Equal orders in reverse priority (SillyTavern ``unshift``s entries sorted by priority).
    """
    e = c.x.entry
    at_depth = e.position == InsertionPosition.AT_DEPTH
    return (int(e.position), int(e.depth) if at_depth else 0,
            _role_name(e.role) if at_depth else "", float(e.order), -c.x.rank)
