r"""Scanning texts for lorebook keys: the chat window, extra texts and the recursion buffer.

Internal to :mod:`engine.lorebook`. Plain keys are found with one multi-key pass per text
(:class:`engine.lorebook.keys.MultiKeyMatcher`), cached per prepared book set and text;
regex keys search SillyTavern's joined scan buffer (``\\x01`` + messages joined by
``\\n\\x01``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .jsregex import JsRegex, RegexClock
from .keys import KeyHits, matcher_for
from .prepare import _Key, _Prepared


@dataclass
class _Text:
    """One scanned text outside the chat window (extra scan text, card field, recursion)."""

    source: str
    text: str
    ci: KeyHits
    cs: KeyHits
    meta: dict[str, Any] = field(default_factory=dict)


class _Table:
    """Union of the key hits of several texts: key → the first text (its trace meta) holding it."""

    def __init__(self, clock: RegexClock | None = None) -> None:
        self.clock = clock
        self.texts: list[_Text] = []
        self.ci_any: dict[str, dict[str, Any]] = {}
        self.ci_whole: dict[str, dict[str, Any]] = {}
        self.cs_any: dict[str, dict[str, Any]] = {}
        self.cs_whole: dict[str, dict[str, Any]] = {}
        self._joined: str | None = None
        self._starts: list[int] = []
        self._regex_hits: dict[JsRegex, tuple[int, dict[str, Any] | None]] = {}

    def add(self, t: _Text) -> None:
        self.texts.append(t)
        meta = {"source": t.source, **t.meta}
        for keys, table in ((t.ci.any, self.ci_any), (t.ci.whole, self.ci_whole),
                            (t.cs.any, self.cs_any), (t.cs.whole, self.cs_whole)):
            for k in keys:
                table.setdefault(k, meta)

    def lookup(self, k: _Key, ww: bool) -> dict[str, Any] | None:
        if k.regex is not None:
            if self._joined is None or len(self._starts) != len(self.texts):
                self._starts = []
                pos = 0
                for t in self.texts:
                    self._starts.append(pos)
                    pos += len(t.text) + 1
                self._joined = "\n".join(t.text for t in self.texts)
            n = len(self.texts)
            done = self._regex_hits.get(k.regex)
            if done is not None and (done[1] is not None or done[0] == n):
                return dict(done[1]) if done[1] is not None else None
            # Search again only from the texts added since the last search (plus a margin).
            start = self._starts[done[0] - 1] if done is not None and done[0] > 0 else 0
            m = k.regex.search(self._joined, start, clock=self.clock,
                               where=self.texts[0].source if self.texts else "")
            found = None
            if m is not None:
                t = self.texts[max(0, bisect.bisect_right(self._starts, m.start()) - 1)]
                found = {"source": t.source, **t.meta, "matched": m.group()[:200]}
            self._regex_hits[k.regex] = (n, found)
            return dict(found) if found is not None else None
        table = (self.cs_whole if ww else self.cs_any) if k.cs else (self.ci_whole if ww else self.ci_any)
        hit = table.get(k.norm)
        return dict(hit) if hit is not None else None


_NO_HITS = KeyHits(frozenset(), frozenset())  # type: ignore[arg-type]
#: Texts whose key hits are remembered per prepared book set (chat messages, entry contents).
_HITS_CACHE_SIZE = 8192


class _Scanner:
    """Scan results over the chat window (newest first) and the other texts."""

    def __init__(self, prepared: _Prepared, window: list[tuple[int, str]],
                 clock: RegexClock | None = None) -> None:
        self.window = window
        self.clock = clock
        self.cache = prepared.hits_cache
        self.ci = matcher_for(prepared.ci_keys)
        self.cs = matcher_for(prepared.cs_keys)
        self.scanned = 0
        # key -> smallest depth (0 = newest) of an occurrence; any / whole-word
        self.ci_any: dict[str, int] = {}
        self.ci_whole: dict[str, int] = {}
        self.cs_any: dict[str, int] = {}
        self.cs_whole: dict[str, int] = {}
        self._joined: dict[int, tuple[str, list[int]]] = {}
        self._regex_hits: dict[tuple[JsRegex, int], dict[str, Any] | None] = {}

    def scan_to(self, depth: int) -> None:
        """Make sure the newest ``depth`` window messages are scanned."""
        depth = min(depth, len(self.window))
        while self.scanned < depth:
            d = self.scanned
            ci, cs = self.hits(self.window[d][1])
            for hits, any_map, whole_map in ((ci, self.ci_any, self.ci_whole), (cs, self.cs_any, self.cs_whole)):
                for k in hits.any:
                    any_map.setdefault(k, d)
                for k in hits.whole:
                    whole_map.setdefault(k, d)
            self.scanned += 1

    def hits(self, text: str) -> tuple[KeyHits, KeyHits]:
        """(case-insensitive, case-sensitive) key hits of ``text``, cached per prepared books."""
        cache = self.cache
        got = cache.get(text)
        if got is None:
            got = (self.ci.scan(text.lower()) if self.ci.keys else _NO_HITS,
                   self.cs.scan(text) if self.cs.keys else _NO_HITS)
            if len(cache) >= _HITS_CACHE_SIZE:
                cache.clear()  # simple bound; cheap to rebuild
            cache[text] = got
        return got

    def text(self, source: str, text: str, **meta: Any) -> _Text:
        ci, cs = self.hits(text)
        return _Text(source, text, ci, cs, meta)

    def regex_in_chat(self, regex: JsRegex, depth: int) -> dict[str, Any] | None:
        """First match of a regex key in the scan buffer of ``depth`` (cached per pass set)."""
        key = (regex, depth)
        if key in self._regex_hits:
            return self._regex_hits[key]
        joined, starts = self.joined(depth)
        m = regex.search(joined, clock=self.clock, where="chat")
        found = None
        if m is not None:
            d = max(0, bisect.bisect_right(starts, m.start()) - 1)
            found = {"source": "chat", "message_index": self.window[d][0], "depth": d,
                     "matched": m.group()[:200]}
        self._regex_hits[key] = found
        return found

    def joined(self, depth: int) -> tuple[str, list[int]]:
        r"""SillyTavern's scan buffer for ``depth``: ``\\x01`` + messages joined by ``\\n\\x01``."""
        depth = min(depth, len(self.window))
        hit = self._joined.get(depth)
        if hit is None:
            starts: list[int] = []
            parts: list[str] = []
            pos = 0
            for _, t in self.window[:depth]:
                starts.append(pos + 1)
                parts.append("\x01" + t)
                pos += len(t) + 2
            hit = ("\n".join(parts), starts)
            self._joined[depth] = hit
        return hit
