"""Regex keys: JavaScript semantics (checked against Node 18's RegExp) and time limits.

Expected values were taken from JavaScript itself (``/\\p{Lu}{3}/u.test("abcDEFg") === true``,
``/\\bcafé\\b/.test("un café") === false``, ...); SillyTavern runs keys with ``RegExp.test``
(``matchKeys``, world-info.js 243–249).
"""

from __future__ import annotations

import time

import pytest

from engine.lorebook import activate
from engine.lorebook.jsregex import RegexClock, translate_js
from engine.lorebook.keys import compile_regex_key
from engine.pipeline import preview
from engine.schema import ChatMessage, Lorebook, LorebookEntry, PreviewRequest, WorldInfoSettings
from engine.schema.messages import Chat

from ._helpers import book, chat, entry, words

# (key, text, JavaScript's answer)
JS_CASES = [
    (r"/\p{Lu}{3}/u", "abcDEFg", True),
    (r"/\p{Lu}{3}/u", "abcDeFg", False),
    (r"/\p{Lu}{3}/", "DEF", False),          # no u: \p is the letter p
    (r"/\p{Lu}{3}/", "p{Lu}}}", True),
    (r"/(?<=ab+)c/", "abbbc", True),          # variable-width lookbehind
    (r"/(?<=ab+)c/", "ac", False),
    (r"/\bcafé\b/", "un café", False),        # \b is ASCII: é is not a word character
    (r"/\bcafé\b/", "cafés", True),
    (r"/\bcafé\b/", "café au lait", False),
    (r"/\w+/", "ééé", False),
    (r"/\d/", "٣", False),                    # Arabic-Indic digit: not \d in JavaScript
    (r"/(?<who>ha)\k<who>/", "haha", True),   # named groups
    (r"/x$/", "x\n", False),                  # $ without m: only the very end
    (r"/^b/m", "a\rb", True),                 # \r ends a line in JavaScript
    (r"/a.b/", "a\rb", False),                # . excludes \r
    (r"/a.b/s", "a\rb", True),
    (r"/a[^]b/", "a\nb", True),
    (r"/a[]b/", "ab", False),
    (r"/\s/", "\u00a0", True),
    (r"/é/i", "É", True),
    (r"/^x/y", "yx", False),                  # sticky: only at lastIndex 0
    (r"/x/g", "yx", True),                    # g: a fresh RegExp per test(), lastIndex 0
    (r"/\u{1F600}/u", "smile 😀", True),
]


@pytest.mark.parametrize("key,text,expected", JS_CASES)
def test_js_semantics(key: str, text: str, expected: bool) -> None:
    assert (compile_regex_key(key).search(text) is not None) is expected


@pytest.mark.parametrize("rules", ["sillytavern", "loomscope"])
def test_js_keys_in_activation(rules: str) -> None:
    b = book(entry(1, [r"/\p{Lu}{3}/u"]), entry(2, [r"/(?<=ab+)c/"]), entry(3, [r"/\bcafé\b/"]))
    s = WorldInfoSettings(rules=rules, include_names=False)
    r = activate([b], chat("ABC abbbc"), s, count_tokens=words, context_limit=10_000)
    assert {a.uid for a in r.activated} == {1, 2}
    r = activate([b], chat("un café"), s, count_tokens=words, context_limit=10_000)
    assert {a.uid for a in r.activated} == set()
    r = activate([b], chat("cafés"), s, count_tokens=words, context_limit=10_000)
    assert {a.uid for a in r.activated} == {3}


def test_translation_shapes() -> None:
    assert translate_js(r"\w", "") == "[A-Za-z0-9_]"
    assert translate_js(r"[\w-]", "") == "[A-Za-z0-9_-]"
    assert translate_js(r"\p{L}", "u") == r"\p{L}"
    assert translate_js("a$", "") == "a\\Z"


CATASTROPHIC = "/(a|aa)+$/"  # exponential for the regex package on "aaa…!"
TEXT = "a" * 40 + "!"


def test_search_times_out_and_is_recorded() -> None:
    clock = RegexClock(per_search=0.05, total=0.5)
    started = time.perf_counter()
    assert compile_regex_key(CATASTROPHIC).search(TEXT, clock=clock, where="chat") is None
    assert time.perf_counter() - started < 5  # bounded (about 0.05-0.1 s), not minutes
    assert clock.timeouts and clock.timeouts[0]["key"] == CATASTROPHIC


def test_total_budget_skips_later_searches() -> None:
    clock = RegexClock(per_search=0.05, total=0.08)
    for _ in range(10):
        compile_regex_key(CATASTROPHIC).search(TEXT, clock=clock)
    assert any(t.get("skipped") for t in clock.timeouts)
    assert clock.spent < 1.0


@pytest.mark.parametrize("rules", ["sillytavern", "loomscope"])
def test_timeout_code_and_diagnostic(rules: str) -> None:
    b = book(entry("slow", [CATASTROPHIC]), entry("ok", ["!"], match_whole_words=False))
    r = activate([b], chat(TEXT), WorldInfoSettings(rules=rules), count_tokens=words, context_limit=10_000)
    rec = r.trace_for("slow")
    assert rec.code == "LOREBOOK_REGEX_TIMEOUT" and rec.detail["keys"] == [CATASTROPHIC]
    assert any("LOREBOOK_REGEX_TIMEOUT" in d and "uid slow" in d for d in r.diagnostics)
    assert {a.uid for a in r.activated} == {"ok"}


def _slow_request(key: str, **wi: object) -> PreviewRequest:
    lore = Lorebook(name="slow", entries=[LorebookEntry(uid=0, keys=[key], content="never")])
    return PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content=TEXT)]), lorebooks=[lore],
                          settings={"world_info": wi})


def test_issue_pattern_preview_finishes() -> None:
    """``/(a+)+$/`` against 40 "a" and "!": the regex package does not backtrack exponentially on
    it, so it simply does not match; the catastrophic variant times out with the code."""
    p = preview(_slow_request("/(a+)+$/"))
    assert [t.code for t in p.lorebook_trace] == ["LOREBOOK_NOT_MATCHED"]
    started = time.perf_counter()
    p = preview(_slow_request(CATASTROPHIC))
    assert time.perf_counter() - started < 5
    assert [t.code for t in p.lorebook_trace] == ["LOREBOOK_REGEX_TIMEOUT"]
    assert any("LOREBOOK_REGEX_TIMEOUT" in d for d in p.diagnostics)


def test_catastrophic_key_gets_a_diagnostic_even_when_it_finishes() -> None:
    """``/(a+)+$/`` would freeze SillyTavern's JavaScript engine; the preview says so."""
    p = preview(_slow_request("/(a+)+$/"))
    assert any("can take exponential time" in d and "freeze" in d for d in p.diagnostics)
