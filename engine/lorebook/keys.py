"""Key matching for World Info: macros, JS regex keys, Unicode-aware whole words, multi-key scans.

Rules borrowed from SillyTavern ``world-info.js`` (``matchKeys``, ``parseRegexFromString``;
FORMATS.md b3 item 3) with SPEC §5's deliberate differences:

* A key written ``/pattern/flags`` is a JavaScript regex, compiled with the ``regex``
  package after translation (:mod:`engine.lorebook.jsregex`) and searched under a time
  limit. Regex keys ignore the case and whole-word settings. Under the ``loomscope`` rules an
  invalid regex is reported as a diagnostic on its entry and never matches; under the
  ``sillytavern`` rules it is matched as plain text, as SillyTavern does.
* Plain keys are compared lowercased unless case-sensitive.
* Whole words are Unicode-aware: at each edge of the key whose character is a letter, digit
  or ``_`` of a *spaced* script (Latin, Cyrillic, Greek, ...), the neighbouring text character
  must not be such a character too. Keys whose edge is punctuation (``#hello``, ``Dr.``) or a
  character of a script written without spaces (Han, kana, Hangul, Thai, ...) need no
  boundary on that side, so ``小红帽`` matches inside ``我看见小红帽了``. The rule applies to
  multi-word keys as well (SillyTavern matches those as plain substrings).
"""

from __future__ import annotations

import re
import threading
import unicodedata
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from cachetools import LRUCache

from ..cache import lru, memoized
from .jsregex import JsRegex, JsRegexError, compile_js

# --------------------------------------------------------------------------- macros

_MACRO = re.compile(r"\{\{\s*(user|char)\s*\}\}|<(USER|BOT|CHAR)>", re.IGNORECASE)


def substitute_names(text: str, *, user: str, char: str) -> str:
    """Replace ``{{user}}``/``{{char}}`` (any case) and the legacy ``<USER>``/``<BOT>``/``<CHAR>``.

    A tiny local version of SillyTavern's ``substituteParams`` for the two name macros;
    other macros are left as written.
    """
    if "{" not in text and "<" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        name = (m.group(1) or m.group(2) or "").lower()
        return user if name == "user" else char

    return _MACRO.sub(repl, text)


# --------------------------------------------------------------------------- regex keys

_REGEX_FORM = re.compile(r"^/([\w\W]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")


class InvalidRegexKey(ValueError):
    """A ``/pattern/flags`` key that does not compile (message says why)."""


def is_regex_key(key: str) -> bool:
    """True when ``key`` has SillyTavern's regex form ``/pattern/flags`` (no unescaped ``/`` inside)."""
    m = _REGEX_FORM.match(key)
    return bool(m) and not _UNESCAPED_SLASH.search(m.group(1))  # type: ignore[union-attr]


@memoized(4096)
def compile_regex_key(key: str) -> JsRegex:
    r"""Compile a ``/pattern/flags`` key (JavaScript syntax) with the ``regex`` package.

    SillyTavern ``parseRegexFromString`` (``world-info.js`` lines 2231–2256): the form
    ``/pattern/flags`` with flags from ``gimsuy`` and no unescaped ``/`` inside; the first
    ``\\/`` is unescaped (the others are identity escapes in both engines). Translation and
    time limits: :mod:`engine.lorebook.jsregex`.

    Raises
    ------
    InvalidRegexKey
        When the key is not in regex form or the pattern does not compile.
    """
    m = _REGEX_FORM.match(key)
    if not m or _UNESCAPED_SLASH.search(m.group(1)):
        raise InvalidRegexKey(f"{key!r} is not a /pattern/flags key")
    pattern, flags = m.group(1), m.group(2)
    try:
        return compile_js(key, pattern.replace("\\/", "/", 1), flags)
    except JsRegexError as exc:
        raise InvalidRegexKey(f"invalid regex key {key!r}: {exc}") from None


# --------------------------------------------------------------------------- word kinds

#: Ranges of scripts written without spaces between words (keys need no word boundary there).
_UNSEGMENTED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo ext, Katakana ext
    (0x3400, 0x4DBF),  # CJK ext A
    (0x4E00, 0x9FFF),  # CJK unified
    (0xA960, 0xA97F),  # Hangul Jamo ext A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo ext B
    (0xF900, 0xFAFF),  # CJK compatibility
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3FFFF),  # CJK ext B..
)

SPACED = 1
UNSEGMENTED = 2


@memoized(65536)
def word_kind(ch: str) -> int:
    r"""0 for non-word characters, ``UNSEGMENTED`` for CJK-like scripts, ``SPACED`` otherwise.

    Word characters are letters, digits, ``_`` and combining marks (Unicode categories
    L*, N*, M*, Pc) — the Unicode reading of ``\\w``.
    """
    cp = ord(ch)
    for lo, hi in _UNSEGMENTED_RANGES:
        if lo <= cp <= hi:
            return UNSEGMENTED
    cat = unicodedata.category(ch)
    if cat[0] in "LNM" or cat == "Pc":
        return SPACED
    return 0


def whole_word_at(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a key occurrence) stands as a whole word (module rules)."""
    if start > 0 and word_kind(text[start]) == SPACED and word_kind(text[start - 1]) == SPACED:
        return False
    return not (end < len(text) and word_kind(text[end - 1]) == SPACED and word_kind(text[end]) == SPACED)


# --------------------------------------------------------------------------- multi-key scan


#: Deepest nesting of groups a trie pattern may have. Each key that is a prefix of a longer one adds
#: a level; ``re`` compiles nested groups recursively, so a deeper trie (a 600-character key with
#: many prefixes of itself) becomes one flat alternation instead (issue 25 item 3).
MAX_TRIE_NESTING = 64


def _trie_pattern(words: Iterable[str]) -> str:
    """One regex matching the longest of ``words`` at a position, without recursion.

    A trie of the words, written bottom-up with an explicit stack; a run of single-child nodes is one
    literal. When the pattern would nest deeper than :data:`MAX_TRIE_NESTING` groups, the words are
    one flat alternation, longest first (``re`` takes the first alternative that matches, so the
    longest key at a position still wins).
    """
    keys = [w for w in words if w]
    root: dict[str, dict] = {}
    for w in keys:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    # post-order over the trie: (node, pattern, nesting) of every child is known before its parent
    done: dict[int, tuple[str, int]] = {}
    stack: list[tuple[dict[str, dict], bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = [(ch, child) for ch, child in sorted(node.items()) if ch]
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for _, child in children)
            continue
        branches = [(re.escape(ch) + done[id(child)][0], done.pop(id(child))[1]) for ch, child in children]
        if not branches:
            done[id(node)] = ("", 0)
            continue
        depth = max(d for _, d in branches)
        if len(branches) == 1:
            body = branches[0][0]
        else:
            body, depth = "(?:" + "|".join(b for b, _ in branches) + ")", depth + 1
        if "" in node:
            body, depth = f"(?:{body})?", depth + 1
        done[id(node)] = (body, depth)
    pattern, nesting = done[id(root)]
    if nesting > MAX_TRIE_NESTING:
        return "|".join(re.escape(w) for w in sorted(set(keys), key=lambda w: (-len(w), w)))
    return pattern


@dataclass
class KeyHits:
    """Occurrences of the keys of one scan in one text: key → (any occurrence, whole-word one)."""

    any: set[str]
    whole: set[str]


class MultiKeyMatcher:
    """Finds every occurrence of many literal keys in one pass over a text.

    Keys are compiled into one trie-shaped regex (matching runs in C); the regex returns
    the longest key at each position, and every shorter key on the same trie path is read
    off in Python, so overlapping and nested keys are all found. Keys must already be in
    the case they are compared in (lowercase them for case-insensitive scans).
    """

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = frozenset(k for k in keys if k)
        self._ends: set[str] = set(self.keys)
        self._pattern = re.compile(_trie_pattern(sorted(self.keys))) if self.keys else None
        self._prefix_lens = sorted({len(k) for k in self.keys})
        self._hits: dict[str, KeyHits] = {}

    def scan_cached(self, text: str) -> KeyHits:
        """:meth:`scan`, remembered per text (bounded; thread-safe enough: dict operations only)."""
        cache = self._hits
        got = cache.get(text)
        if got is None:
            got = self.scan(text)
            if len(cache) >= _SHARD_HITS_SIZE:
                cache.clear()
            cache[text] = got
        return got

    def scan(self, text: str) -> KeyHits:
        """All keys occurring in ``text``, and those with a whole-word occurrence."""
        any_: set[str] = set()
        whole: set[str] = set()
        pat = self._pattern
        if pat is None or not text:
            return KeyHits(any_, whole)
        ends = self._ends
        search = pat.search
        m = search(text, 0)
        while m is not None:
            s = m.start()
            longest = m.group()
            for n in self._prefix_lens:
                if n > len(longest):
                    break
                k = longest[:n]
                if k in ends:
                    any_.add(k)
                    if k not in whole and whole_word_at(text, s, s + n):
                        whole.add(k)
            m = search(text, s + 1)
        return KeyHits(any_, whole)


#: Compiled shard matchers kept (a 5,000-entry book has about 20 shards), least recently used out.
_MATCHER_CACHE_SIZE = 256
_MATCHER_CACHE: LRUCache[frozenset[str], MultiKeyMatcher] = lru(_MATCHER_CACHE_SIZE)
_MATCHER_LOCK = threading.Lock()
#: Keys per shard: compiling a trie regex is the slow part, so keys are split into shards by a
#: stable hash and each shard is compiled and cached on its own; editing one key recompiles
#: one shard, not the whole book.
SHARD_KEYS = 512
#: Texts whose hits each shard remembers (chat messages and entry contents recur across calls).
_SHARD_HITS_SIZE = 4096


def _shard_matcher(keys: frozenset[str]) -> MultiKeyMatcher:
    with _MATCHER_LOCK:
        hit = _MATCHER_CACHE.get(keys)  # a hit becomes the most recently used
    if hit is not None:
        return hit
    matcher = MultiKeyMatcher(keys)
    with _MATCHER_LOCK:
        _MATCHER_CACHE[keys] = matcher
    return matcher


class ShardedMatcher:
    """A :class:`MultiKeyMatcher` split into cached shards, with per-shard hit caches.

    The shard count is the next power of two of ``len(keys) / SHARD_KEYS`` and a key's shard
    is ``crc32(key) % count``, so an edit that changes a few keys leaves the other shards (and
    their compiled patterns and cached hits) untouched.
    """

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = frozenset(k for k in keys if k)
        count = 1
        while count * SHARD_KEYS < len(self.keys):
            count *= 2
        buckets: list[list[str]] = [[] for _ in range(count)]
        for k in self.keys:
            buckets[zlib.crc32(k.encode("utf-8", "surrogatepass")) % count].append(k)
        self.shards = [_shard_matcher(frozenset(b)) for b in buckets if b]

    def scan(self, text: str) -> KeyHits:
        """All keys occurring in ``text``, and those with a whole-word occurrence."""
        if len(self.shards) == 1:
            return self.shards[0].scan_cached(text)
        any_: set[str] = set()
        whole: set[str] = set()
        for shard in self.shards:
            hits = shard.scan_cached(text)
            any_ |= hits.any
            whole |= hits.whole
        return KeyHits(any_, whole)


#: Whole key sets' matchers kept, least recently used out.
_SHARDED_CACHE_SIZE = 32
_SHARDED_CACHE: LRUCache[frozenset[str], ShardedMatcher] = lru(_SHARDED_CACHE_SIZE)


def matcher_for(keys: frozenset[str]) -> ShardedMatcher:
    """A matcher for this exact key set, built from cached shards (compiling is the slow part)."""
    with _MATCHER_LOCK:
        hit = _SHARDED_CACHE.get(keys)  # a frozenset caches its hash: cheap for the same object
    if hit is not None:
        return hit
    matcher = ShardedMatcher(keys)
    with _MATCHER_LOCK:
        _SHARDED_CACHE[keys] = matcher
    return matcher


def clear_matchers() -> None:
    """Forget the compiled multi-key matchers."""
    with _MATCHER_LOCK:
        _MATCHER_CACHE.clear()
        _SHARDED_CACHE.clear()
