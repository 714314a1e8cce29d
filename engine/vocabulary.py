"""The one vocabulary: every stable code the engine emits, its words, and the status colours.

Block reasons (SPEC §3), lorebook activation trace codes (FORMATS.md Appendix A) and lorebook
lint codes are all listed here, once, as :class:`Term` rows of :data:`VOCABULARY`. The older
tables are views of it and stay importable: :data:`engine.reasons.REASON_CODES` (code →
category, meaning), :data:`engine.lorebook.codes.TRACE_CODES` and
:data:`engine.lorebook.lint.LINT_CODES` (code → meaning). The GUI reads its words and colours
from here (``gui.words``) and keeps no table of its own.

Codes are a public interface (CLI JSON, audit, API, GUI): extend, never rename.
``tests/engine/test_codes.py`` pins the block reasons and the table in ``docs/shifting.md`` generated from
them; ``tests/engine/test_reason_corpus.py`` runs the engine over a corpus and fails on any
emitted code this table does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a code's subject ended up: the three block statuses, a lorebook entry that did not
#: activate, or a lint finding.
Category = Literal["kept", "excluded", "truncated", "not_activated", "lint"]

#: Where a code appears: a block's ``reason`` (and trace ``code``), a lorebook trace record's
#: ``code``, or a lint finding's ``code``.
Scope = Literal["block", "trace", "lint"]


@dataclass(frozen=True)
class Term:
    """One stable code in words.

    Attributes
    ----------
    code:
        The UPPER_SNAKE code (``HISTORY_OLDEST_FIRST``).
    category:
        :data:`Category` of the code's subject.
    words:
        A few writer-facing words, lower case (``"oldest history goes first"``): what the GUI
        shows in table cells, the inspectors and the chat view.
    meaning:
        The full meaning, one sentence without a final stop: the reason table of ``docs/shifting.md``,
        tooltips, ``--help`` texts.
    scopes:
        Where the code appears (:data:`Scope`); a lorebook code can be both a block reason and
        a trace code.
    status:
        The key of :data:`STATUS_COLOURS` the GUI colours the code with (``"kept"``,
        ``"excluded"``, ``"truncated"``, ``"inactive"``, ``"warning"``).
    """

    code: str
    category: Category
    words: str
    meaning: str
    scopes: frozenset[Scope]
    status: str


_B: frozenset[Scope] = frozenset({"block"})
_T: frozenset[Scope] = frozenset({"trace"})
_BT: frozenset[Scope] = frozenset({"block", "trace"})
_L: frozenset[Scope] = frozenset({"lint"})

_DEFAULT_STATUS = {"kept": "kept", "excluded": "excluded", "truncated": "truncated",
                   "not_activated": "inactive", "lint": "warning"}


def _t(code: str, category: Category, words: str, meaning: str, scopes: frozenset[Scope],
       status: str | None = None) -> Term:
    return Term(code, category, words, meaning, scopes, status or _DEFAULT_STATUS[category])


#: Every code, in the documentation's order for the block reasons (kept, excluded, truncated), then the
#: trace codes of entries that did not activate, then the lint codes.
_TERMS: tuple[Term, ...] = (
    # ---------------------------------------------------------------- block reasons: kept
    _t("SYSTEM_PROMPT", "kept", "protected: system prompt", "protected: system prompt", _B),
    _t("TOOL_SCHEMAS", "kept", "protected: tool schemas", "protected: tool schemas sent with the request", _B),
    _t("CHARACTER", "kept", "protected: character", "protected: character definition", _B),
    _t("PERSONA", "kept", "protected: persona", "protected: user persona", _B),
    _t("LOREBOOK_CONSTANT", "kept", "protected: constant entry",
       "protected: constant (required) lorebook entry", _BT),
    _t("PINNED", "kept", "pinned by you", "protected: pinned by the user", _B),
    _t("CURRENT_INPUT", "kept", "protected: your input", "protected: the current user input", _B),
    _t("INSTRUCTION", "kept", "protected: instruction",
       "protected: instruction (post-history, author's note, character's note)", _B),
    _t("LOREBOOK_MATCHED", "kept", "lorebook key matched", "lorebook entry activated by a key and fits the budget",
       _B),
    _t("MEMORY", "kept", "memory fits", "memory block fits the budget", _B),
    _t("SUMMARY", "kept", "summary fits", "summary block fits the budget", _B),
    _t("EXAMPLE_DIALOGUE", "kept", "example fits", "example dialogue fits the budget", _B),
    _t("FITS_BUDGET", "kept", "fits the budget", "fits the budget", _B),
    _t("INTERCEPTOR_ADDED", "kept", "added by a plugin", "added by a plugin interceptor and fits the budget", _B),
    _t("LOREBOOK_STICKY", "kept", "still active (sticky)",
       "lorebook entry still active through its sticky timed effect (no key match needed)", _BT),
    _t("LOREBOOK_DECORATOR_ACTIVATE", "kept", "forced on by @@activate",
       "lorebook entry forced on by its @@activate decorator", _BT),
    _t("LOREBOOK_KEY_MATCH", "kept", "a primary key matched",
       "lorebook trace: a primary key matched (the block's reason is LOREBOOK_MATCHED)", _BT),
    # ---------------------------------------------------------------- block reasons: excluded
    _t("MANUAL_EXCLUDED", "excluded", "excluded by you", "excluded by the user", _B),
    _t("HIDDEN", "excluded", "hidden message", "hidden message (SillyTavern is_system), never sent", _B),
    _t("HISTORY_OLDEST_FIRST", "excluded", "oldest history first", "oldest history removed to fit the budget", _B),
    _t("TOOL_GROUP_DROPPED", "excluded", "with its tool group", "removed together with its tool group", _B),
    _t("TOOL_RESULT_ORPHANED", "excluded", "result without its call",
       "tool result whose call is not in the chat (a provider would reject it)", _B),
    _t("TOOL_PAIR_INCOMPLETE", "excluded", "incomplete tool group",
       "tool call without all its results, or a result before its call: the whole group is not sent "
       "(a provider would reject half a pair)", _B),
    _t("TOO_LARGE_FOR_BUDGET", "excluded", "too large to ever fit",
       "larger than all the room left after protected blocks; can never fit", _B),
    _t("EXAMPLES_PUSHED_OUT", "excluded", "examples go first", "example dialogue removed first to fit the budget",
       _B),
    _t("LOREBOOK_BUDGET", "excluded", "over the lorebook budget",
       "lorebook entry activated but over the lorebook token budget", _BT),
    _t("LOW_RELEVANCE", "excluded", "least relevant", "least relevant to the recent conversation", _B),
    _t("PRIORITY_LOWEST_FIRST", "excluded", "lowest priority first",
       "lowest-priority lorebook/memory block removed to fit the budget", _B),
    _t("INTERCEPTOR_REMOVED", "excluded", "removed by a plugin", "removed by a plugin interceptor", _B),
    _t("OVER_BUDGET_PROTECTED", "excluded", "protected blocks overflow",
       "not sent: the protected blocks alone exceed the budget", _B),
    # ---------------------------------------------------------------- block reasons: truncated
    _t("SUMMARIZED", "truncated", "folded into the summary", "folded into a summary", _B, "summarized"),
    _t("CUT", "truncated", "shortened to fit", "shortened to fit", _B),
    # ---------------------------------------------------------------- lorebook trace: not activated
    _t("LOREBOOK_NOT_MATCHED", "not_activated", "no key matched", "no primary key found in the scanned text", _T),
    _t("LOREBOOK_DISABLED", "not_activated", "entry is disabled", "the entry is disabled", _T),
    _t("LOREBOOK_NO_KEYS", "not_activated", "entry has no keys",
       "a non-constant entry without (usable) primary keys never fires", _T),
    _t("LOREBOOK_SECONDARY_FAILED", "not_activated", "primary key matched, secondary keys did not",
       "a primary key matched but the secondary keys' logic was not satisfied", _T),
    _t("LOREBOOK_PROBABILITY", "not_activated", "lost the probability roll",
       "matched, but the seeded probability roll failed (seed and roll given)", _T),
    _t("LOREBOOK_COOLDOWN", "not_activated", "on cooldown", "suppressed by a running cooldown timed effect", _T),
    _t("LOREBOOK_DELAY", "not_activated", "delayed (not enough messages yet)",
       "suppressed: the chat has fewer messages than the entry's delay", _T),
    _t("LOREBOOK_DELAY_UNTIL_RECURSION", "not_activated", "waits for a recursion pass that did not happen",
       "only activates in a recursion pass (of its level), none reached", _T),
    _t("LOREBOOK_EXCLUDED_FROM_RECURSION", "not_activated", "key appeared only in other entries (recursion excluded)",
       "non-recursable entry: its key appeared only in other entries' content", _T),
    _t("LOREBOOK_GROUP_LOST", "not_activated", "another entry of its inclusion group won",
       "lost its inclusion group to another entry (winner and mode given)", _T),
    _t("LOREBOOK_GROUP_ALREADY_SATISFIED", "not_activated", "its inclusion group already has an active entry",
       "its inclusion group already has an active entry from an earlier pass", _T),
    _t("LOREBOOK_INVALID_KEY", "not_activated", "invalid key (bad regex)",
       "an invalid regex key (diagnostic given) and no other key matched", _T, "warning"),
    _t("LOREBOOK_EMPTY", "not_activated", "matched, but its content is empty",
       "matched, but its content is empty after macros and decorators", _T),
    _t("LOREBOOK_FILTERED_CHARACTER", "not_activated", "filtered out for this character",
       "filtered out by its character/tag filter", _T),
    _t("LOREBOOK_FILTERED_TRIGGER", "not_activated", "not triggered by this generation type",
       "its generation-type triggers exclude this generation type", _T),
    _t("LOREBOOK_DECORATOR_SUPPRESS", "not_activated", "suppressed by @@dont_activate",
       "the content starts with the @@dont_activate decorator", _T),
    _t("LOREBOOK_REGEX_TIMEOUT", "not_activated", "a regex key ran out of time",
       "a regex key ran out of its time limit (regex_timeout_ms per search, regex_total_timeout_ms per "
       "activation) and counts as not matching; the diagnostic names the key", _T),
    _t("LOREBOOK_DUPLICATE_BOOK", "not_activated", "repeats another attached book",
       "this book repeats another attached book (same name, keys and content, e.g. a world file exported "
       "from the card's embedded book); its entries activate once, under that book", _T),
    # ---------------------------------------------------------------- lorebook lint
    _t("LINT_NO_KEYS", "lint", "no usable keys", "a keyword entry without usable primary keys can never fire", _L),
    _t("LINT_INVALID_REGEX", "lint", "invalid regex key", "a /pattern/flags key does not compile; it never matches",
       _L),
    _t("LINT_DISABLED", "lint", "disabled", "the entry is disabled and never fires", _L),
    _t("LINT_EMPTY_CONTENT", "lint", "empty content", "the entry has no content; activating it inserts nothing", _L),
    _t("LINT_PROBABILITY_ZERO", "lint", "probability 0",
       "probability is 0 with use_probability on: the entry never fires", _L),
    _t("LINT_SECONDARY_CONTRADICTION", "lint", "secondary keys contradict",
       "NOT_ANY secondary keys repeat every primary key: the entry never fires", _L),
    _t("LINT_DUPLICATE_KEY", "lint", "key shared with other entries", "the same key appears in several entries", _L),
    _t("LINT_DUPLICATE_KEY_IN_ENTRY", "lint", "key listed twice", "the same key is listed twice in one entry", _L),
    _t("LINT_CONSTANT_OVER_SHARE", "lint", "constant takes a large share",
       "one constant entry alone takes more than the given share of the budget", _L),
    _t("LINT_CONSTANTS_EXCEED_BUDGET", "lint", "constants exceed the budget",
       "the constant entries together exceed the budget: no keyword entry fits", _L),
    _t("LINT_ENTRY_OVER_BUDGET", "lint", "larger than the budget",
       "a keyword entry is larger than the whole budget: it is always dropped", _L),
    _t("LINT_COMMON_SUBSTRING", "lint", "key matches inside common words",
       "without whole words the key also matches inside common words", _L),
    _t("LINT_CATASTROPHIC_REGEX", "lint", "regex may run out of time",
       "a regex key can backtrack exponentially (nested quantifiers, a repeated alternation of overlapping "
       "branches); it may run out of its time limit and then never matches", _L),
    _t("LINT_NEGATIVE_SCAN_DEPTH", "lint", "negative scan depth",
       "the entry's or the book's scan depth is negative: no message can be scanned", _L),
    _t("LINT_PROBABILITY_RANGE", "lint", "probability out of range", "probability is outside 0-100 percent", _L),
    _t("LINT_NEGATIVE_NUMBER", "lint", "negative number",
       "depth, sticky, cooldown, delay or group weight is negative", _L),
)

#: code → :class:`Term`, every stable reason, trace and lint code.
VOCABULARY: dict[str, Term] = {t.code: t for t in _TERMS}

#: Trace meanings that say more than the shared meaning (the evidence a trace record gives).
_TRACE_MEANINGS: dict[str, str] = {
    "LOREBOOK_CONSTANT": "constant entry: always active, required (never dropped for the budget)",
    "LOREBOOK_KEY_MATCH": "a primary key matched (key, message index, depth, recursion pass given)",
    "LOREBOOK_STICKY": "sticky timed effect still running: active without a key match",
    "LOREBOOK_DECORATOR_ACTIVATE": "the content starts with the @@activate decorator",
    "LOREBOOK_BUDGET": "matched, but dropped because the lorebook token budget was full (entries are taken by "
                       "priority: order descending, then book order, then uid; constants never dropped)",
}

#: Status → ``((light foreground, light background), (dark foreground, dark background))``,
#: ``#rrggbb`` strings. Block statuses, the blocks table's ``summarized``, lorebook trace rows
#: (``inactive``, ``warning``) and audit statuses share one palette.
STATUS_COLOURS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "kept": (("#1e5e36", "#e7f5ec"), ("#9be3b4", "#1d3b28")),
    "excluded": (("#8a1f1c", "#fbe9e8"), ("#ffb3ad", "#4a1f1c")),
    "truncated": (("#7a5a00", "#fff4d6"), ("#ffd27a", "#4a3b12")),
    "summarized": (("#145a6b", "#e1f3f7"), ("#8fd8ea", "#143a44")),
    "inactive": (("#5d6470", "#f1f3f5"), ("#b8bec8", "#2a2d33")),
    "warning": (("#7a5a00", "#fff4d6"), ("#ffd27a", "#4a3b12")),
}

#: Audit status (``PromptContextAudit.status``) → :data:`STATUS_COLOURS` key.
AUDIT_STATUS: dict[str, str] = {"completed": "kept", "failed": "excluded", "cancelled": "truncated",
                                "pending": "inactive"}


def term(code: str) -> Term | None:
    """The :class:`Term` of ``code``, or ``None`` for a code the engine does not emit."""
    return VOCABULARY.get(code)


def words(code: str) -> str:
    """The writer-facing words of ``code`` (lower case); an unknown code humanized.

    ``"HISTORY_OLDEST_FIRST"`` → ``"oldest history first"``; ``"SOME_NEW_CODE"`` →
    ``"some new code"``; ``""`` → ``""``.
    """
    t = VOCABULARY.get(code)
    if t is not None:
        return t.words
    return code.replace("_", " ").strip().lower()


def meaning(code: str, scope: Scope = "block") -> str:
    """The full meaning of ``code`` (the code itself when unknown).

    Parameters
    ----------
    code:
        A stable code.
    scope:
        ``"trace"`` gives the trace record's meaning where it says more (the evidence given),
        else the shared meaning.
    """
    if scope == "trace" and code in _TRACE_MEANINGS:
        return _TRACE_MEANINGS[code]
    t = VOCABULARY.get(code)
    return t.meaning if t is not None else code


def status_colours(status: str, dark: bool = False) -> tuple[str, str]:
    """``(foreground, background)`` hex colours of ``status`` for the light or dark theme.

    ``status`` is a :data:`STATUS_COLOURS` key or an audit status (:data:`AUDIT_STATUS`);
    anything else gets the ``inactive`` colours.
    """
    key = status if status in STATUS_COLOURS else AUDIT_STATUS.get(status, "inactive")
    light, dark_pair = STATUS_COLOURS[key]
    return dark_pair if dark else light


def codes(scope: Scope) -> list[str]:
    """Every code of ``scope``, in table order."""
    return [t.code for t in _TERMS if scope in t.scopes]


def reason_codes() -> dict[str, tuple[Literal["kept", "excluded", "truncated"], str]]:
    """The block reasons as ``code → (category, meaning)`` (:data:`engine.reasons.REASON_CODES`)."""
    out: dict[str, tuple[Literal["kept", "excluded", "truncated"], str]] = {}
    for t in _TERMS:
        cat = t.category
        if "block" in t.scopes and (cat == "kept" or cat == "excluded" or cat == "truncated"):
            out[t.code] = (cat, t.meaning)
    return out


def trace_codes() -> dict[str, str]:
    """The lorebook trace codes as ``code → meaning`` (:data:`engine.lorebook.codes.TRACE_CODES`)."""
    return {c: meaning(c, "trace") for c in codes("trace")}


def lint_codes() -> dict[str, str]:
    """The lorebook lint codes as ``code → meaning`` (:data:`engine.lorebook.lint.LINT_CODES`)."""
    return {c: meaning(c) for c in codes("lint")}
