"""The lorebook tuning report: World Info activation replayed over a chat's history.

Each generation of the chat is replayed as it would have happened: turn *k* is the generation
of the *k*-th assistant message after the first message (the greeting is not generated), and
the last turn is the next generation after the chat's end. Each turn activates the books on the
messages before it, with the timed effects (sticky, cooldown) the previous turns left, under
the request's ``world_info`` settings (``rules``, budget, scan depth, ...).

Cost is linear in chat length: each turn scans only the newest messages its scan depths can
reach (the whole prefix only when ``min_activations`` is on, which may widen to all of it).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..schema.lorebook import Lorebook
from ..schema.messages import ChatMessage
from ..schema.settings import WorldInfoSettings
from .activation import activate, compute_budget
from .jsregex import RegexClock
from .keys import InvalidRegexKey, compile_regex_key, is_regex_key, substitute_names
from .models import ActivationResult

__all__ = [
    "NEVER_FIRED_REASONS",
    "BookStats",
    "EntryStats",
    "LorebookReport",
    "TurnStats",
    "build_report",
    "report_csv",
]

#: Why an entry never fired, as the report says it.
NEVER_FIRED_REASONS: dict[str, str] = {
    "disabled": "the entry is disabled",
    "no_keys": "no usable primary keys and not constant",
    "keys_never_appear": "none of its keys appears anywhere in the chat",
    "beyond_scan_depth": "a key appears in the chat, but never within the scan depth when a turn was generated",
    "probability": "matched, but lost its probability roll every time",
    "group_lost": "matched, but lost its inclusion group every time",
    "budget": "matched, but was dropped for the budget every time",
    "secondary_keys": "a primary key matched, but the secondary keys never agreed",
    "filtered": "filtered out (character filter, generation triggers or decorator)",
    "timed": "held back by its delay, cooldown or delay-until-recursion",
    "regex_timeout": "a regex key ran out of its time limit",
    "other": "see the reason counts",
}


class EntryStats(BaseModel):
    """One entry over the replay. Turns are 1-based; tokens are the caller's profile's."""

    model_config = ConfigDict(frozen=True)

    book: str
    book_index: int
    uid: int | str
    comment: str = ""
    constant: bool = False
    turns_fired: int = 0
    first_turn: int | None = None
    last_turn: int | None = None
    fired: list[tuple[int, int]] = Field(default_factory=list)  # (turn, tokens) each time it was inserted
    total_tokens: int = 0
    budget_dropped: int = 0
    keys: dict[str, int] = Field(default_factory=dict)  # matched key -> turns it was the match
    where: list[dict[str, Any]] = Field(default_factory=list)  # first matches: turn, key, source, message
    reasons: dict[str, int] = Field(default_factory=dict)  # trace code -> turns
    never_fired: str | None = None  # a key of NEVER_FIRED_REASONS when turns_fired == 0

    @property
    def mean_tokens(self) -> float:
        """Average tokens per firing (0 when it never fired)."""
        return self.total_tokens / self.turns_fired if self.turns_fired else 0.0


class BookStats(BaseModel):
    """One book over the replay: tokens it took each turn and its share of the budget."""

    model_config = ConfigDict(frozen=True)

    book: str
    book_index: int
    entries: int
    entries_fired: int
    total_tokens: int
    tokens_per_turn: list[int]
    mean_share: float  # mean of tokens / budget over the turns (0–1)
    max_share: float


class TurnStats(BaseModel):
    """One replayed generation."""

    model_config = ConfigDict(frozen=True)

    turn: int
    message_index: int  # index of the message this generation produced (len(chat) for the next one)
    tokens: int  # lorebook tokens inserted
    budget: int
    activated: int
    dropped: int


class LorebookReport(BaseModel):
    """``loomscope lorebook-report`` output (JSON shape of ``--format json``)."""

    model_config = ConfigDict(frozen=True)

    rules: str
    messages: int
    budget: int
    turns: list[TurnStats]
    books: list[BookStats]
    entries: list[EntryStats]
    diagnostics: list[str] = Field(default_factory=list)


def _turn_points(messages: Sequence[ChatMessage]) -> list[int]:
    points = [i for i in range(1, len(messages)) if messages[i].role == "assistant"]
    points.append(len(messages))
    return points


@dataclass
class _EntryTally:
    """What the replay saw of one entry so far."""

    fired: list[tuple[int, int]] = field(default_factory=list)  # (turn, tokens)
    keys: Counter[str] = field(default_factory=Counter)
    where: list[dict[str, Any]] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


def _scan_depth_needed(books: Sequence[Lorebook], settings: WorldInfoSettings) -> int:
    """Messages (not hidden) a turn must see: the deepest scan depth of the settings or any entry (1–1000)."""
    depth = max([settings.scan_depth, 1] + [int(e.scan_depth) for b in books for e in b.entries
                                            if e.scan_depth is not None])
    return min(depth, 1000)


def _turn_start(messages: Sequence[ChatMessage], end: int, depth_needed: int) -> int:
    """Index of the oldest message a turn ending at ``end`` scans (``depth_needed`` visible messages back)."""
    start, seen = end, 0
    while start > 0 and seen < depth_needed:
        start -= 1
        if not messages[start].meta.hidden:
            seen += 1
    return start


def _tally_turn(t: int, r: ActivationResult, order: list[tuple[int, int]],
                per: dict[tuple[int, int], _EntryTally], index_of: dict[tuple[int, int | str], int],
                n_books: int, max_where: int) -> list[int]:
    """Fold turn ``t``'s activation into the tallies; returns the tokens each book took."""
    used = [0] * n_books
    for a in r.activated:
        entry_index = index_of.get((a.book_index, a.uid))
        if entry_index is None:
            continue
        per[(a.book_index, entry_index)].fired.append((t, a.tokens))
        used[a.book_index] += a.tokens
    # one trace record per entry, in book order (ActivationResult.trace)
    for slot, rec in zip(order, r.trace):
        p = per[slot]
        p.reasons[rec.code] += 1
        if rec.code == "LOREBOOK_BUDGET":
            p.dropped += 1
        if rec.activated and rec.detail.get("key") is not None:
            key = str(rec.detail["key"])
            p.keys[key] += 1
            if len(p.where) < max_where:
                p.where.append({"turn": t, "key": key, "source": rec.detail.get("source"),
                                "message_index": rec.detail.get("message_index"),
                                "depth": rec.detail.get("depth"),
                                "from_uid": rec.detail.get("from_uid")})
    return used


def build_report(
    books: Sequence[Lorebook],
    messages: Sequence[ChatMessage],
    settings: WorldInfoSettings,
    *,
    count_tokens: Callable[[str], int],
    context_limit: int,
    user_name: str = "User",
    char_name: str = "",
    character: Any = None,
    persona: Any = None,
    book_scopes: Sequence[str | None] | None = None,
    max_where: int = 5,
) -> LorebookReport:
    """Replay activation over ``messages`` turn by turn (see the module doc).

    Parameters are those of :func:`engine.lorebook.activate`; ``context_limit`` is the tokens
    the budget percentage applies to. ``max_where`` bounds the match locations kept per entry.
    Returns a :class:`LorebookReport`; never raises for bad lorebook content.
    """
    hidden_prefix = [0]
    for m in messages:
        hidden_prefix.append(hidden_prefix[-1] + (1 if m.meta.hidden else 0))
    depth_needed = _scan_depth_needed(books, settings)
    whole_prefix = settings.min_activations > 0
    order = [(bi, ei) for bi, b in enumerate(books) for ei in range(len(b.entries))]
    per = {slot: _EntryTally() for slot in order}
    index_of = {(bi, e.uid): ei for bi, b in enumerate(books) for ei, e in enumerate(b.entries)}
    book_tokens: list[list[int]] = [[] for _ in books]
    turns: list[TurnStats] = []
    state: dict[str, Any] = {}
    diagnostics: list[str] = []
    budget = compute_budget(settings, context_limit)
    for t, end in enumerate(_turn_points(messages), 1):
        start = 0 if whole_prefix else _turn_start(messages, end, depth_needed)
        r = activate(books, messages[start:end], settings, count_tokens=count_tokens,
                     context_limit=context_limit, user_name=user_name, char_name=char_name,
                     character=character, persona=persona, chat_metadata={"timedWorldInfo": state},
                     book_scopes=book_scopes, compare_rules=False, history_offset=start,
                     hidden_before=hidden_prefix[start])
        state = r.timed_effects
        budget = r.budget
        for d in r.diagnostics:
            if d not in diagnostics and len(diagnostics) < 200:
                diagnostics.append(d)
        used = _tally_turn(t, r, order, per, index_of, len(books), max_where)
        for bi, n in enumerate(used):
            book_tokens[bi].append(n)
        turns.append(TurnStats(turn=t, message_index=end, tokens=sum(used), budget=r.budget,
                               activated=len(r.activated), dropped=len(r.budget_dropped)))
    appears = _key_presence(books, messages, settings, user_name, char_name)
    entries = _entry_stats(books, order, per, appears)
    return LorebookReport(rules=settings.rules, messages=len(messages), budget=budget, turns=turns,
                          books=_book_stats(books, book_tokens, entries, budget), entries=entries,
                          diagnostics=diagnostics)


def _entry_stats(books: Sequence[Lorebook], order: list[tuple[int, int]], per: dict[tuple[int, int], _EntryTally],
                 appears: dict[tuple[int, int], bool]) -> list[EntryStats]:
    """Each entry's stats, in book order, with why it never fired."""
    entries: list[EntryStats] = []
    for bi, ei in order:
        e = books[bi].entries[ei]
        p = per[(bi, ei)]
        fired = p.fired
        never = None if fired else _never_reason(p.reasons, appears.get((bi, ei), False))
        entries.append(EntryStats(
            book=books[bi].name, book_index=bi, uid=e.uid, comment=e.comment, constant=e.constant,
            turns_fired=len(fired), first_turn=fired[0][0] if fired else None,
            last_turn=fired[-1][0] if fired else None, fired=fired, total_tokens=sum(n for _, n in fired),
            budget_dropped=p.dropped, keys=dict(p.keys.most_common()), where=p.where,
            reasons=dict(p.reasons.most_common()), never_fired=never))
    return entries


def _book_stats(books: Sequence[Lorebook], book_tokens: list[list[int]], entries: list[EntryStats],
                budget: int) -> list[BookStats]:
    """Each book's tokens per turn and its share of the budget."""
    book_stats = []
    for bi, b in enumerate(books):
        series = book_tokens[bi]
        shares = [n / budget for n in series] if budget else [0.0 for _ in series]
        book_stats.append(BookStats(
            book=b.name, book_index=bi, entries=len(b.entries),
            entries_fired=sum(1 for s in entries if s.book_index == bi and s.turns_fired),
            total_tokens=sum(series), tokens_per_turn=series,
            mean_share=round(sum(shares) / len(shares), 4) if shares else 0.0,
            max_share=round(max(shares), 4) if shares else 0.0))
    return book_stats


def _never_reason(reasons: Counter[str], appears: bool) -> str:
    codes = set(reasons)
    if "LOREBOOK_DISABLED" in codes:
        return "disabled"
    if codes & {"LOREBOOK_NO_KEYS", "LOREBOOK_INVALID_KEY"} and len(codes) == 1:
        return "no_keys"
    if "LOREBOOK_BUDGET" in codes:
        return "budget"
    if "LOREBOOK_PROBABILITY" in codes:
        return "probability"
    if codes & {"LOREBOOK_GROUP_LOST", "LOREBOOK_GROUP_ALREADY_SATISFIED"}:
        return "group_lost"
    if "LOREBOOK_SECONDARY_FAILED" in codes:
        return "secondary_keys"
    if "LOREBOOK_REGEX_TIMEOUT" in codes:
        return "regex_timeout"
    if codes & {"LOREBOOK_FILTERED_CHARACTER", "LOREBOOK_FILTERED_TRIGGER", "LOREBOOK_DECORATOR_SUPPRESS"}:
        return "filtered"
    if codes & {"LOREBOOK_DELAY", "LOREBOOK_COOLDOWN", "LOREBOOK_DELAY_UNTIL_RECURSION",
                "LOREBOOK_EXCLUDED_FROM_RECURSION"}:
        return "timed"
    if not codes or codes <= {"LOREBOOK_NOT_MATCHED"}:
        return "beyond_scan_depth" if appears else "keys_never_appear"
    return "other"


def _key_presence(books: Sequence[Lorebook], messages: Sequence[ChatMessage], settings: WorldInfoSettings,
                  user: str, char: str) -> dict[tuple[int, int], bool]:
    """Whether any primary key of each entry appears anywhere in the chat.

    Keys match as substrings; regex keys are searched under the usual time limits. One pass per key over the joined
    chat.
    """
    text = "\n".join(m.text() for m in messages)
    lower = text.lower()
    clock = RegexClock(settings.regex_timeout_ms / 1000, settings.regex_total_timeout_ms / 1000)
    out: dict[tuple[int, int], bool] = {}
    for bi, b in enumerate(books):
        for ei, e in enumerate(b.entries):
            cs = settings.case_sensitive if e.case_sensitive is None else bool(e.case_sensitive)
            found = False
            for raw in e.keys:
                k = substitute_names(str(raw), user=user, char=char).strip()
                if not k:
                    continue
                if k.startswith("/") and is_regex_key(k):
                    try:
                        if compile_regex_key(k).search(text, clock=clock, where="whole chat") is not None:
                            found = True
                            break
                        continue
                    except InvalidRegexKey:
                        pass
                if (k in text) if cs else (k.lower() in lower):
                    found = True
                    break
            out[(bi, ei)] = found
    return out


CSV_COLUMNS = ("book", "uid", "comment", "constant", "turns_fired", "turns", "first_turn", "last_turn",
               "mean_tokens", "total_tokens", "budget_dropped", "top_key", "never_fired")


def report_csv(report: LorebookReport) -> str:
    """One CSV row per entry (columns :data:`CSV_COLUMNS`), header first."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for s in report.entries:
        top = next(iter(s.keys), "")
        w.writerow([s.book, s.uid, s.comment, int(s.constant), s.turns_fired, len(report.turns),
                    s.first_turn if s.first_turn is not None else "", s.last_turn if s.last_turn is not None else "",
                    round(s.mean_tokens, 1), s.total_tokens, s.budget_dropped, top, s.never_fired or ""])
    return buf.getvalue()
