"""JavaScript regex keys: the gaps the ``jsregex`` notes named, closed (issue 27 item 3).

Each case is ``(source, flags, text, RegExp(source, flags).test(text))`` with the verdict of
Node 20's ``RegExp`` (SillyTavern 1.12.6 ``parseRegexFromString`` builds keys with
``new RegExp(pattern, flags)``, world-info.js 2231–2256): ``i`` without ``u`` compares by
``Canonicalize`` (long s U+017F is not s, the Kelvin sign not k), ``\\W \\D \\S`` in classes are
JavaScript's, identity escapes are the letter.
"""

from __future__ import annotations

import pytest

from engine.lorebook.jsregex import compile_js, translate_js

CASES = [
    ("s", "i", "\u017f", False),
    ("S", "i", "\u017f", False),
    ("\u017f", "i", "s", False),
    ("\u017f", "i", "\u017f", True),
    ("k", "i", "\u212a", False),
    ("K", "i", "\u212a", False),
    ("\u212a", "i", "k", False),
    ("\u212a", "i", "\u212a", True),
    ("s", "iu", "\u017f", True),
    ("k", "iu", "\u212a", True),
    ("\u212a", "iu", "k", True),
    ("[a-z]", "i", "\u017f", False),
    ("[a-z]", "i", "\u212a", False),
    ("[a-z]", "i", "S", True),
    ("[^a-z]", "i", "\u017f", True),
    ("[^a-z]", "i", "S", False),
    ("[s]", "i", "\u017f", False),
    ("[\u017f]", "i", "s", False),
    ("[\u017f]", "i", "\u017f", True),
    ("\\w", "i", "\u017f", False),
    ("\\w", "i", "\u212a", False),
    ("\\W", "i", "\u017f", True),
    ("\\bs", "i", "x\u017fs", True),
    ("[\\w]", "i", "\u017f", False),
    ("[\\W]", "i", "s", False),
    ("\\x73", "i", "\u017f", False),
    ("\\u017f", "i", "S", False),
    ("\\u212a", "i", "K", False),
    ("\u00e5", "i", "\u212b", False),
    ("\u212b", "i", "\u00c5", False),
    ("\u00df", "i", "\u1e9e", False),
    ("\u1e9e", "i", "\u00df", False),
    ("\u03b8", "i", "\u03d1", True),
    ("\u03b8", "i", "\u03f4", False),
    ("\u03c9", "i", "\u2126", False),
    ("\u1f80", "i", "\u1f88", False),
    ("\u0131", "i", "I", False),
    ("i", "i", "\u0130", False),
    ("\u00e9", "i", "\u00c9", True),
    ("\u03c3", "i", "\u03c2", True),
    ("stra\u00dfe", "i", "STRASSE", False),
    ("[\\W]", "", "\u00e9", True),
    ("[\\W]", "", "_", False),
    ("[\\D]", "", "\u0663", True),
    ("[\\D]", "", "7", False),
    ("[\\S]", "", "\u00a0", False),
    ("[\\S]", "", "\u2003", False),
    ("[\\S]", "", "x", True),
    ("[^\\W]", "", "\u00e9", False),
    ("[\\W\\d]", "", "5", True),
    ("\\e", "", "e", True),
    ("\\q", "", "q", True),
    ("\\K", "", "K", True),
    ("a\\Xb", "", "aXb", True),
    ("\\e", "i", "E", True),
    ("dragon", "i", "The DRAGON", True),
    ("dra[gk]on", "i", "DRAKON", True),
    ("^\u017fun$", "i", "SUN", False),
]


@pytest.mark.parametrize(("source", "flags", "text", "expected"), CASES)
def test_matches_like_javascript(source: str, flags: str, text: str, expected: bool) -> None:
    assert bool(compile_js(source, source, flags).search(text)) is expected


def test_unicode_flag_keeps_unicode_folding() -> None:
    assert translate_js("s", "iu") == "s"
    assert translate_js("s", "i") != "s"
