r"""JavaScript regular expressions for World Info keys, run under a time limit.

SillyTavern keys written ``/pattern/flags`` are JavaScript ``RegExp`` objects
(``world-info.js`` ``parseRegexFromString``, lines 2231–2256; used by ``matchKeys``, lines
243–277). Python's ``re`` differs from JavaScript in ways that change results and cannot
stop a runaway match, so keys are compiled with the `regex <https://pypi.org/project/regex/>`_
package, which supports variable-width lookbehind, ``\\p{…}`` properties and a per-call
``timeout``, after translating the JavaScript syntax:

* ``\\w \\W \\d \\D \\b \\B`` are ASCII, as in JavaScript (``\\w`` = ``[A-Za-z0-9_]``); ``\\s \\S``
  use JavaScript's whitespace set (Unicode spaces, ``\\ufeff``, line terminators).
* ``.`` excludes JavaScript's line terminators (``\\n \\r \\u2028 \\u2029``) unless ``s``; ``$``
  without ``m`` matches only at the very end (Python's ``$`` also matches before a final ``\\n``);
  ``^``/``$`` under ``m`` treat ``\\r \\u2028 \\u2029`` as line ends too.
* ``\\p{…}``/``\\P{…}`` are properties only under ``u``; without it they are the letters ``p``/``P``
  as in JavaScript. ``\\u{…}`` (``u``) becomes a code point. ``[^]`` matches anything, ``[]``
  nothing. Named groups ``(?<n>…)`` and ``\\k<n>`` keep their meaning.
* Flags ``i m s u`` map to ignore case, multi-line, dot-all and Unicode escapes. ``g`` changes
  nothing: SillyTavern builds a fresh ``RegExp`` for every ``test()``, so ``lastIndex`` is
  always 0. ``y`` (sticky) therefore only matches at the start of the scanned text.

* ``i`` without ``u`` compares as JavaScript's ``Canonicalize`` (ECMA-262 22.2.2.7.3): by
  ``toUpperCase``, never mapping a non-ASCII character to an ASCII one, so long s (U+017F) is not ``s``,
  the Kelvin sign not ``k``, ``ẞ`` not ``ß``, ``ϴ`` not ``θ``, ``ᾀ`` not ``ᾈ``. The ~80 characters
  where the ``regex`` package's case folding differs (:func:`_fold_tables`) are matched
  explicitly: a literal one becomes the class of its JavaScript equivalents, a character class
  lets them through only where JavaScript would, ``\\w \\d \\s \\b`` (and negations) match
  case-sensitively (their sets are closed under JavaScript's folding).
* ``\\W \\D \\S`` inside a character class are JavaScript's (the complements of the ASCII
  word / digit sets and of JavaScript's space set), not Python's Unicode ones.
* Without ``u``, an escaped letter with no meaning in JavaScript (``\\e``, ``\\K``, ``\\q``) is
  the letter itself (an identity escape), not the ``regex`` package's escape.

Known remaining difference: without ``u`` JavaScript matches UTF-16 code units, so ``.`` or
``[^a]`` matches half of an astral character (an emoji); here they match the whole character.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import regex

from ..cache import memoized

__all__ = ["JsRegex", "JsRegexError", "RegexClock", "compile_js", "translate_js"]

_WORD = "A-Za-z0-9_"
_JS_SPACE = ("\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f"
             "\\u3000\\ufeff")
_LINE_END = "\\n\\r\\u2028\\u2029"
_B = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NB = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"


class JsRegexError(ValueError):
    """A JavaScript pattern that does not compile (message says why)."""


def translate_js(pattern: str, flags: str) -> str:
    """Translate a JavaScript ``RegExp`` source to the ``regex`` package's syntax (see module doc).

    Raises
    ------
    JsRegexError
        On an unterminated escape at the end of the pattern.
    """
    unicode = "u" in flags
    dotall = "s" in flags
    multiline = "m" in flags
    fold = "i" in flags and not unicode  # JavaScript's Canonicalize, not Unicode case folding
    out: list[str] = []
    i = 0
    n = len(pattern)
    in_class = False
    class_at = 0
    while i < n:
        ch = pattern[i]
        hexed = _HEX_ESCAPE.match(pattern, i) if fold and not in_class and ch == "\\" else None
        if hexed is not None:  # \xHH / \uHHHH: a literal character, folded as JavaScript folds it
            cp = int(hexed.group(1) or hexed.group(2), 16)
            piece = _fold_literal(chr(cp)) if cp in _fold_tables()[0] else hexed.group(0)
            i = hexed.end()
        elif ch == "\\":
            start = i
            piece, i = _translate_escape(pattern, i, unicode=unicode, in_class=in_class)
            if fold and not in_class:
                piece = _fold_escape(pattern[start:i], piece)
        elif in_class:
            in_class = ch != "]"
            piece = "\\[" if ch == "[" else ch  # "[" is a literal in JavaScript; a nested set in some engines
            i += 1
            if fold and not in_class:
                out[class_at:] = [_fold_class("".join(out[class_at:]) + "]")]
                continue
        elif ch == "[":
            class_at = len(out)
            piece, i, in_class = _translate_class_start(pattern, i)
        else:
            piece = _translate_char(ch, dotall=dotall, multiline=multiline)
            if fold and len(ch) == 1 and ord(ch) in _fold_tables()[0]:
                piece = _fold_literal(ch)
            i += 1
        out.append(piece)
    return "".join(out)


#: ``\w`` and friends inside a class, and outside one (JavaScript's ASCII word and its space set).
#: Inside a class the negations are written out as the complements' ranges.
_CLASS_ESCAPES = {"w": _WORD, "d": "0-9", "s": _JS_SPACE,
                  "W": "\\x00-\\x2f\\x3a-\\x40\\x5b-\\x5e\\x60\\x7b-\\U0010ffff",
                  "D": "\\x00-\\x2f\\x3a-\\U0010ffff",
                  "S": ("\\x00-\\x08\\x0e-\\x1f\\x21-\\x9f\\xa1-\\u167f\\u1681-\\u1fff\\u200b-\\u2027"
                        "\\u202a-\\u202e\\u2030-\\u205e\\u2060-\\u2fff\\u3001-\\ufefe\\uff00-\\U0010ffff")}
_HEX_ESCAPE = regex.compile(r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4}))")
#: Escapes that mean something in JavaScript; another escaped ASCII letter is the letter (no ``u``).
_JS_LETTER_ESCAPES = set("dDwWsSbBfnrtvcxukpP")
_ESCAPES = {"w": f"[{_WORD}]", "W": f"[^{_WORD}]", "d": "[0-9]", "D": "[^0-9]",
            "s": f"[{_JS_SPACE}]", "S": f"[^{_JS_SPACE}]", "b": _B, "B": _NB}


def _translate_escape(pattern: str, i: int, *, unicode: bool, in_class: bool) -> tuple[str, int]:
    """The escape at ``pattern[i]`` (a backslash) translated, and the index after it."""
    n = len(pattern)
    if i + 1 >= n:
        raise JsRegexError("\\ at end of pattern")
    nxt = pattern[i + 1]
    if nxt in "pP":
        if not unicode:
            return nxt, i + 2  # identity escape outside Unicode mode
        j = pattern.find("}", i + 2) if i + 2 < n and pattern[i + 2] == "{" else -1
        if j < 0:
            raise JsRegexError("invalid property name")
        return pattern[i:j + 1], j + 1
    if nxt == "u" and unicode and i + 2 < n and pattern[i + 2] == "{":
        j = pattern.find("}", i + 3)
        if j < 0:
            raise JsRegexError("invalid Unicode escape")
        try:
            cp = int(pattern[i + 3:j], 16)
        except ValueError:
            raise JsRegexError("invalid Unicode escape") from None
        return f"\\U{cp:08x}", j + 1
    if nxt == "k" and i + 2 < n and pattern[i + 2] == "<":
        j = pattern.find(">", i + 3)
        if j > 0:
            return f"(?P={pattern[i + 3:j]})", j + 1
    rep = (_CLASS_ESCAPES if in_class else _ESCAPES).get(nxt)
    if rep is None and in_class and nxt == "b":
        rep = "\\x08"  # [\b] is a backspace in JavaScript
    if rep is None and not unicode and nxt.isascii() and nxt.isalpha() and nxt not in _JS_LETTER_ESCAPES:
        rep = nxt  # an identity escape: "\e" is "e" (the regex package would read \K, \X, \N, ...)
    return (rep if rep is not None else "\\" + nxt), i + 2


@memoized(1)
def _fold_tables() -> tuple[frozenset[int], dict[int, frozenset[int]], str]:
    """Where the ``regex`` package's ignore-case differs from JavaScript's non-Unicode one.

    Returns (the characters whose matches differ, each one's JavaScript equivalents, a class of
    them). Characters are grouped by their case mappings; within a group, ``regex``'s verdict
    (``(?i)c`` matches ``d``) is compared with JavaScript's ``Canonicalize(c) == Canonicalize(d)``
    (``toUpperCase``, kept when it is several characters or maps non-ASCII to ASCII). Built on
    first use (about 0.2 s), from the running Python's Unicode tables.
    """
    def canon(c: int) -> int:
        u = chr(c).upper()
        if len(u) != 1 or (c >= 128 and ord(u) < 128):
            return c
        return ord(u)

    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    by_fold: dict[str, int] = {}
    for c in range(0x10000):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        for m in (ch.lower(), ch.upper(), ch.casefold()):
            if m == ch:
                continue
            # one-character mappings, the same multi-character folding, and a multi-character
            # mapping's first character (regex folds "İ" with "i")
            links = [ord(m)] if len(m) == 1 else [by_fold.setdefault(m, c), ord(m[0])]
            for other in links:
                ra, rb = find(c), find(other)
                if ra != rb:
                    parent[ra] = rb
    groups: dict[int, set[int]] = {}
    for c in list(parent):
        groups.setdefault(find(c), {find(c)}).add(c)
    pairs: set[tuple[int, int]] = set()
    for g in groups.values():
        for c in g:
            p = regex.compile(regex.escape(chr(c)), regex.IGNORECASE)
            pairs.update((c, d) for d in g if bool(p.fullmatch(chr(d))) != (canon(c) == canon(d)))
    bad = frozenset(x for pair in pairs for x in pair)
    same = {c: frozenset(d for d in groups[find(c)] if canon(d) == canon(c)) | {c} for c in bad}
    return bad, same, "".join(f"\\u{c:04x}" for c in sorted(bad))


def _fold_literal(ch: str) -> str:
    """A literal character whose case matches differ: the class of its JavaScript equivalents."""
    same = _fold_tables()[1][ord(ch)]
    return "(?-i:[" + "".join(f"\\u{c:04x}" for c in sorted(same)) + "])"


def _fold_escape(written: str, piece: str) -> str:
    r"""An escape under JavaScript's folding: ``\w``-style sets case-sensitive, an escaped character as a literal."""
    if written[1:] in ("w", "W", "d", "D", "s", "S", "b", "B"):
        return f"(?-i:{piece})"
    if len(written) == 2 and ord(written[1]) in _fold_tables()[0]:
        return _fold_literal(written[1])
    return piece


def _fold_class(cls: str) -> str:
    """A translated character class under JavaScript's folding.

    Characters outside :func:`_fold_tables`'s set match as the ``regex`` package folds them
    (the same as JavaScript for them); one inside matches when JavaScript's class holds one of
    its equivalents (or, negated, holds none).
    """
    bad, same, bad_class = _fold_tables()
    negated = cls.startswith("[^")
    try:
        positive = regex.compile("[" + cls[2:] if negated else cls)
    except (regex.error, OverflowError, ValueError, RecursionError):
        return cls  # compile_js reports the error
    allowed = [c for c in sorted(bad)
               if any(positive.fullmatch(chr(d)) for d in same[c]) != negated]
    guarded = f"(?![{bad_class}]){cls}"
    if not allowed:
        return guarded
    return "(?:" + guarded + "|(?-i:[" + "".join(f"\\u{c:04x}" for c in allowed) + "]))"


def _translate_class_start(pattern: str, i: int) -> tuple[str, int, bool]:
    """The ``[`` at ``pattern[i]`` translated: (text, index after it, whether a class is now open)."""
    if pattern.startswith("[^]", i):
        return "[\\s\\S]", i + 3, False
    if pattern.startswith("[]", i):
        return "(?!)", i + 2, False
    parts = ["["]
    i += 1
    if i < len(pattern) and pattern[i] == "^":
        parts.append("^")
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # cannot happen after the checks above; kept literal
        parts.append("\\]")
        i += 1
    return "".join(parts), i, True


def _translate_char(ch: str, *, dotall: bool, multiline: bool) -> str:
    """One character outside a class: ``.``, ``$`` and ``^`` with JavaScript's line ends; others as they are."""
    if ch == "." and not dotall:
        return f"[^{_LINE_END}]"
    if ch == "$":
        return f"(?=[{_LINE_END}]|\\Z)" if multiline else "\\Z"
    if ch == "^" and multiline:
        return f"(?:(?<=[{_LINE_END}])|\\A)"
    return ch


@dataclass
class RegexClock:
    """Time limits for the regex searches of one activation.

    ``per_search`` bounds one search (seconds); ``total`` bounds all searches together
    (seconds). :attr:`timeouts` lists every search that ran out, in order.
    """

    per_search: float = 0.05
    total: float = 0.5
    spent: float = 0.0
    timeouts: list[dict[str, Any]] = field(default_factory=list)
    #: (pattern key, text hash) of searches that ran out: not run again on the same text
    exhausted: set[tuple[str, int]] = field(default_factory=set)

    def remaining(self) -> float:
        """Seconds left for the next search (never more than ``per_search``)."""
        return max(0.0, min(self.per_search, self.total - self.spent))


@dataclass(eq=False)
class JsRegex:
    """A compiled ``/pattern/flags`` key. Use :meth:`search`, which never runs unbounded."""

    key: str
    source: str
    flags: str
    compiled: Any  # regex.Pattern

    @property
    def ignore_case(self) -> bool:
        """Whether the key has the ``i`` flag."""
        return "i" in self.flags

    def search(self, text: str, pos: int = 0, *, clock: RegexClock | None = None,
               where: str = "") -> Any:
        """The first match in ``text`` from ``pos`` (``y``: only at ``pos``), or ``None``.

        With a ``clock`` the search runs under ``clock.remaining()`` seconds; running out
        returns ``None`` (no match) and appends ``{"key", "where", "timeout_ms"}`` to
        ``clock.timeouts``. Without one, a 1-second limit still applies.
        """
        limit = clock.remaining() if clock is not None else 1.0
        mark = (self.key + "/" + self.flags, hash(text)) if clock is not None else None
        if mark is not None and mark in clock.exhausted:  # type: ignore[union-attr]
            limit = 0.0
        if limit <= 0:
            if clock is not None:
                clock.timeouts.append({"key": self.key, "where": where, "timeout_ms": 0.0,
                                       "skipped": True})
            return None
        started = time.perf_counter()
        try:
            # concurrent=True releases the GIL while matching: other threads (the HTTP
            # server's event loop) keep running during a slow search.
            if "y" in self.flags:
                return self.compiled.match(text, pos, concurrent=True, timeout=limit)
            return self.compiled.search(text, pos, concurrent=True, timeout=limit)
        except TimeoutError:
            if clock is not None:
                clock.timeouts.append({"key": self.key, "where": where,
                                       "timeout_ms": round(limit * 1000, 1)})
                clock.exhausted.add(mark)  # type: ignore[arg-type]
            return None
        finally:
            if clock is not None:
                clock.spent += time.perf_counter() - started

    def loose(self) -> JsRegex:
        """The same regex ignoring case (for near-miss hints)."""
        return compile_js(self.key, self.source, self.flags + ("" if "i" in self.flags else "i"))


@memoized(4096)
def compile_js(key: str, source: str, flags: str) -> JsRegex:
    """Compile JavaScript ``source`` with ``flags`` (``gimsuy``) as :class:`JsRegex`.

    Raises
    ------
    JsRegexError
        When the pattern does not compile, or a flag repeats (JavaScript rejects both).
    """
    if len(set(flags)) != len(flags):
        raise JsRegexError(f"repeated flag in {flags!r}")
    re_flags = regex.V0
    if "i" in flags:
        re_flags |= regex.IGNORECASE
    if "s" in flags:
        re_flags |= regex.DOTALL
    try:
        compiled = regex.compile(translate_js(source, flags), re_flags)
    except (regex.error, OverflowError, ValueError, RecursionError) as exc:
        raise JsRegexError(str(exc)) from None
    return JsRegex(key, source, flags, compiled)


_QUANT = regex.compile(r"\+|\*|\{(\d+),(\d*)\}")


def _quantifier_at(pattern: str, i: int) -> tuple[bool, int]:
    """(is an unbounded-ish quantifier, its length) at ``pattern[i]``; (False, 0) when none."""
    m = _QUANT.match(pattern, i)
    if m is None:
        return False, 0
    if m.group(0) in "+*":
        return True, 1
    hi = m.group(2)
    return (hi == "" or int(hi) >= 10), len(m.group(0))


@dataclass
class _Group:
    """An open group while scanning a pattern: whether it holds a repeat, its alternatives so far."""

    start: int  # where the current alternative begins
    has_inner_repeat: bool = False
    alternatives: list[str] = field(default_factory=list)


def _group_body_start(source: str, i: int) -> int:
    """Index after the ``(`` at ``source[i]`` and its ``?:`` / lookaround / name prefix."""
    j = i + 1
    if source.startswith("?", j):
        m = regex.match(r"\?(?:[:=!]|<[=!]|<[A-Za-z_]\w*>)", source[j:])
        j += len(m.group(0)) if m else 1
    return j


def _class_end(source: str, i: int) -> int:
    """Index after the character class opening at ``source[i]``."""
    n = len(source)
    j = i + 1
    if j < n and source[j] == "^":
        j += 1
    if j < n and source[j] == "]":
        j += 1
    while j < n and source[j] != "]":
        j += 2 if source[j] == "\\" else 1
    return j + 1


def _repeated_group_reason(group: _Group) -> str | None:
    """Why repeating ``group`` can backtrack exponentially, or ``None``."""
    if group.has_inner_repeat:
        return "a repeated group contains another repeat (nested quantifiers)"
    alts = group.alternatives
    for ia, a in enumerate(alts):
        for ib, b in enumerate(alts):
            if ia != ib and (a == b or (a and b.startswith(a)) or _classy(a, b)):
                return "a repeated alternation has branches that match the same text"
    return None


def catastrophic_reason(source: str) -> str | None:
    r"""Why the JavaScript pattern ``source`` can backtrack exponentially, or ``None``.

    Flags two shapes (the classic ReDoS patterns): a repeated group that itself contains a
    repeat (``(a+)+``, ``(\\w+\\s?)*``, ``(.*)*``), and a repeated alternation whose branches can
    match the same text (``(a|aa)+``, ``(a|a)*``, ``(\\w|\\d)+``). A heuristic: it may miss exotic
    cases and flags some patterns that a given engine optimizes.
    """
    stack: list[_Group] = []
    i = 0
    n = len(source)
    while i < n:
        ch = source[i]
        if ch == "(":
            i = _group_body_start(source, i)
            stack.append(_Group(start=i))
            continue
        if ch == "|" and stack:
            group = stack[-1]
            group.alternatives.append(source[group.start:i])
            group.start = i + 1
            i += 1
            continue
        if ch == ")" and stack:
            group = stack.pop()
            group.alternatives.append(source[group.start:i])
            rep, ln = _quantifier_at(source, i + 1)
            i += 1 + ln
            why = _repeated_group_reason(group) if rep else None
            if why is not None:
                return why
            if (rep or group.has_inner_repeat) and stack:
                stack[-1].has_inner_repeat = True
            continue
        # one atom: an escape, a character class or a character, perhaps repeated
        i = i + 2 if ch == "\\" else _class_end(source, i) if ch == "[" else i + 1
        rep, ln = _quantifier_at(source, i)
        if rep and stack:
            stack[-1].has_inner_repeat = True
        i += ln
    return None


_OVERLAP = [{"\\w", "\\d"}, {"\\w", "[a-z]"}, {"\\w", "[A-Za-z]"}, {".", "\\w"}, {".", "\\d"}, {".", "\\s"}]


def _classy(a: str, b: str) -> bool:
    r"""Two single-class branches that overlap (``\\w|\\d``, ``.|\\s``, ...)."""
    return {a, b} in _OVERLAP
