"""Lorebook lint: entries that can never fire, duplicate keys, budget hogs, over-broad keys."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..schema.lorebook import Lorebook, LorebookEntry, SelectiveLogic
from ..schema.settings import WorldInfoSettings
from ..vocabulary import lint_codes
from .activation import compute_budget
from .common_words import COMMON_WORDS
from .jsregex import catastrophic_reason
from .keys import InvalidRegexKey, compile_regex_key, is_regex_key, substitute_names
from .models import LintFinding

#: Every lint code with its meaning: the lint view of :data:`engine.vocabulary.VOCABULARY`. Pinned by a test.
LINT_CODES: dict[str, str] = lint_codes()

#: Entry fields that count messages, turns or a weight and must not be negative (SillyTavern reads
#: them as ``Number``; a negative value silently disables the feature or misplaces the entry).
_NON_NEGATIVE_FIELDS = ("depth", "sticky", "cooldown", "delay", "group_weight", "delay_until_recursion")


def _fmt(value: float) -> str:
    """``150`` for ``150.0``, ``-0.5`` for ``-0.5`` (as written in the file, without a trailing ``.0``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def number_findings(book: Lorebook) -> list[LintFinding]:
    """Numbers out of range in ``book`` and its entries, in book order.

    Codes ``LINT_NEGATIVE_SCAN_DEPTH``, ``LINT_PROBABILITY_RANGE``, ``LINT_NEGATIVE_NUMBER``; the message gives the
    number as written.

    - a negative ``scan_depth`` (book or entry): SillyTavern's buffer then scans no message (error);
    - ``probability`` below 0 or above 100 (percent; SillyTavern rolls ``Math.random() * 100``):
      below 0 never fires, above 100 is always on and probably a typo (error / warning);
    - a negative ``depth``, ``sticky``, ``cooldown``, ``delay``, ``delay_until_recursion`` or
      ``group_weight`` (messages, turns, levels, weight) (error).
    """
    out: list[LintFinding] = []
    if book.scan_depth is not None and book.scan_depth < 0:
        out.append(_finding("LINT_NEGATIVE_SCAN_DEPTH", "error", None,
                            f"the book's scan depth is {_fmt(book.scan_depth)}: no message is scanned",
                            field="scan_depth", value=book.scan_depth))
    for e in book.entries:
        if e.scan_depth is not None and e.scan_depth < 0:
            out.append(_finding("LINT_NEGATIVE_SCAN_DEPTH", "error", e,
                                f"scan depth {_fmt(e.scan_depth)} is negative: no message is scanned",
                                field="scan_depth", value=e.scan_depth))
        p = e.probability
        if p is not None and (p < 0 or p > 100):
            below = p < 0
            out.append(_finding(
                "LINT_PROBABILITY_RANGE", "error" if below and e.use_probability else "warning", e,
                f"probability {_fmt(p)} is outside 0-100 percent"
                + (": the entry never fires" if below and e.use_probability else
                   "" if below else ": the entry always fires (did you mean a percentage?)"),
                field="probability", value=p))
        for name in _NON_NEGATIVE_FIELDS:
            value = getattr(e, name, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                out.append(_finding("LINT_NEGATIVE_NUMBER", "error", e,
                                    f"{name.replace('_', ' ')} {_fmt(value)} is negative",
                                    field=name, value=value))
    return out

_LETTERS = re.compile(r"^[a-z']+$")


def _finding(code: str, severity: str, e: LorebookEntry | None, message: str, **detail: object) -> LintFinding:
    return LintFinding(code=code, severity=severity,  # type: ignore[arg-type]
                       uid=e.uid if e is not None else None, comment=e.comment if e is not None else "",
                       message=message, detail=dict(detail))


def _invalid_message(message: str, settings: WorldInfoSettings) -> str:
    if settings.rules == "sillytavern":
        return f"{message} (SillyTavern then matches the key as plain text)"
    return message


def _check_catastrophic(out: list[LintFinding], e: LorebookEntry, key: str, source: str, *,
                        secondary: bool) -> None:
    """Report a regex key that can backtrack exponentially (``LINT_CATASTROPHIC_REGEX``, error)."""
    why = catastrophic_reason(source)
    if why is not None:
        out.append(_finding("LINT_CATASTROPHIC_REGEX", "error", e,
                            f"regex key {key!r} can take exponential time: {why}; it may run out of its "
                            "time limit and then never match (rewrite it without nested repeats)",
                            key=key, secondary=secondary, reason=why))


def lint_lorebook(
    book: Lorebook,
    *,
    context_limit: int,
    count_tokens: Callable[[str], int],
    settings: WorldInfoSettings | None = None,
    constant_share_percent: float = 50.0,
    user_name: str = "User",
    char_name: str = "",
) -> list[LintFinding]:
    """Find problems in a lorebook without running it against a chat.

    Parameters
    ----------
    book:
        The lorebook to check.
    context_limit:
        Tokens the budget percentage applies to (as for :func:`engine.lorebook.activate`).
    count_tokens:
        Tokens of a text under the caller's profile.
    settings:
        World Info settings for the budget and the whole-word / case defaults
        (``WorldInfoSettings()`` when ``None``).
    constant_share_percent:
        A constant entry taking more than this share of the budget is reported (percent).
    user_name, char_name:
        Substituted for ``{{user}}``/``{{char}}`` in keys before comparing them.

    Returns
    -------
    list[LintFinding]
        Per entry in book order (codes in :data:`LINT_CODES`), then book-wide findings.
        Severity ``error`` = the entry can never fire as intended; ``warning`` = likely
        unintended; ``info`` = worth knowing.
    """
    settings = settings or WorldInfoSettings()
    lint = _Lint(settings, compute_budget(settings, context_limit), count_tokens, constant_share_percent,
                 user_name, char_name)
    for e in book.entries:
        lint.check_entry(e)
    lint.check_duplicate_keys()
    lint.check_constants_total()
    out = lint.out
    out.extend(number_findings(book))
    order = {id(e): i for i, e in enumerate(book.entries)}
    index_of_uid = {e.uid: order[id(e)] for e in book.entries}
    out.sort(key=lambda f: (f.uid is None, index_of_uid.get(f.uid, 0) if f.uid is not None else 0))
    return out


@dataclass
class _Lint:
    """One lint run over a book: the settings it judges by and the findings so far (in check order)."""

    settings: WorldInfoSettings
    budget: int  # tokens
    count_tokens: Callable[[str], int]
    constant_share_percent: float
    user_name: str
    char_name: str
    out: list[LintFinding] = field(default_factory=list)
    key_owners: dict[str, list[LorebookEntry]] = field(default_factory=dict)  # lowercased key -> entries
    constants: list[LorebookEntry] = field(default_factory=list)
    constants_total: int = 0  # tokens

    def _key(self, raw: object) -> str:
        return substitute_names(str(raw), user=self.user_name, char=self.char_name).strip()

    def check_entry(self, e: LorebookEntry) -> None:
        """Every per-entry check, in the order the findings are listed."""
        if e.disable:
            self.out.append(_finding("LINT_DISABLED", "info", e, "disabled: never fires"))
        usable = self.check_primary_keys(e)
        self.check_secondary_keys(e)
        self.check_never_fires(e, usable)
        if not e.disable:
            self.check_tokens(e)

    def _check_regex(self, e: LorebookEntry, key: str, *, secondary: bool) -> bool:
        """An invalid or catastrophic regex key; ``True`` when it compiles (then it is usable)."""
        try:
            compiled = compile_regex_key(key)
        except InvalidRegexKey as exc:
            detail: dict[str, object] = {"key": key, "secondary": True} if secondary else {"key": key}
            self.out.append(_finding("LINT_INVALID_REGEX", "error", e, _invalid_message(str(exc), self.settings),
                                     **detail))
            return False
        _check_catastrophic(self.out, e, key, compiled.source, secondary=secondary)
        return True

    def check_primary_keys(self, e: LorebookEntry) -> list[str]:
        """Bad regexes, keys listed twice, keys inside common words; returns the usable keys."""
        cs = self.settings.case_sensitive if e.case_sensitive is None else bool(e.case_sensitive)
        ww = self.settings.match_whole_words if e.match_whole_words is None else bool(e.match_whole_words)
        usable: list[str] = []
        seen_in_entry: set[str] = set()
        for raw in e.keys:
            key = self._key(raw)
            if not key:
                continue
            if key.startswith("/") and is_regex_key(key):
                if self._check_regex(e, key, secondary=False):
                    usable.append(key)
                continue
            norm = key if cs else key.lower()
            if norm in seen_in_entry:
                self.out.append(_finding("LINT_DUPLICATE_KEY_IN_ENTRY", "info", e, f"key {key!r} is listed twice",
                                         key=key))
                continue
            seen_in_entry.add(norm)
            usable.append(key)
            self.key_owners.setdefault(key.lower(), []).append(e)
            if not ww:
                self.check_common_substring(e, key)
        return usable

    def check_common_substring(self, e: LorebookEntry, key: str) -> None:
        """A plain key (whole words off) that also matches inside common words or is very short."""
        low = key.lower()
        if _LETTERS.match(low):
            inside = [w for w in COMMON_WORDS if low in w and w != low]
            if inside or len(low) <= 2:
                self.out.append(_finding(
                    "LINT_COMMON_SUBSTRING", "warning", e,
                    f"key {key!r} also matches inside {', '.join(inside[:5]) or 'many words'} "
                    "(whole words off)", key=key, examples=inside[:10]))

    def check_secondary_keys(self, e: LorebookEntry) -> None:
        """Bad regexes among the secondary keys."""
        for raw in e.secondary_keys:
            key = self._key(raw)
            if key.startswith("/") and is_regex_key(key):
                self._check_regex(e, key, secondary=True)

    def check_never_fires(self, e: LorebookEntry, usable: list[str]) -> None:
        """No usable keys, empty content, probability 0, primary keys all negated by NOT_ANY."""
        out = self.out
        if not e.constant and not e.disable and not usable:
            out.append(_finding("LINT_NO_KEYS", "error", e, "no usable primary keys and not constant: never fires"))
        if not (e.content or "").strip():
            out.append(_finding("LINT_EMPTY_CONTENT", "warning", e, "empty content"))
        if e.use_probability and e.probability == 0 and not e.disable:  # below 0: LINT_PROBABILITY_RANGE
            out.append(_finding("LINT_PROBABILITY_ZERO", "error", e, "probability 0: never fires"))
        if (e.selective and e.selective_logic == SelectiveLogic.NOT_ANY and usable and e.secondary_keys
                and {k.lower() for k in usable} <= {str(k).strip().lower() for k in e.secondary_keys}):
            out.append(_finding("LINT_SECONDARY_CONTRADICTION", "error", e,
                                "every primary key is also a NOT_ANY secondary key: never fires"))

    def check_tokens(self, e: LorebookEntry) -> None:
        """A constant entry over its share of the budget, or a keyword entry over the whole budget."""
        budget = self.budget
        tokens = self.count_tokens(substitute_names(e.content or "", user=self.user_name, char=self.char_name))
        if e.constant:
            self.constants.append(e)
            self.constants_total += tokens
            if tokens * 100 > self.constant_share_percent * budget:
                self.out.append(_finding(
                    "LINT_CONSTANT_OVER_SHARE", "warning", e,
                    f"constant entry takes {tokens} tokens, {tokens * 100 / budget:.0f}% of the "
                    f"{budget}-token budget (limit {self.constant_share_percent:g}%)",
                    tokens=tokens, budget=budget, share_percent=round(tokens * 100 / budget, 1)))
        elif tokens > budget and not e.ignore_budget:
            self.out.append(_finding("LINT_ENTRY_OVER_BUDGET", "warning", e,
                                     f"{tokens} tokens exceed the {budget}-token budget: always dropped",
                                     tokens=tokens, budget=budget))

    def check_duplicate_keys(self) -> None:
        """The same plain key in several entries (one finding per entry, naming the others)."""
        for key, owners in self.key_owners.items():
            uniq = {id(o): o for o in owners}
            if len(uniq) > 1:
                uids = [o.uid for o in uniq.values()]
                for o in uniq.values():
                    # other entries named by title (SillyTavern ``comment``) and uid, as writers know them
                    others = ", ".join(f"“{x.comment}” #{x.uid}" if x.comment else f"#{x.uid}"
                                       for x in uniq.values() if x.uid != o.uid)
                    self.out.append(_finding("LINT_DUPLICATE_KEY", "warning", o,
                                             f"key {key!r} also in {others}", key=key, uids=uids))

    def check_constants_total(self) -> None:
        """Constant entries that together exceed the budget (book-wide)."""
        if self.constants and self.constants_total > self.budget:
            self.out.append(_finding(
                "LINT_CONSTANTS_EXCEED_BUDGET", "error", None,
                f"{len(self.constants)} constant entries take {self.constants_total} tokens, over the "
                f"{self.budget}-token budget: every keyword entry will be dropped",
                tokens=self.constants_total, budget=self.budget, uids=[c.uid for c in self.constants]))
