"""Long lorebook keys (issue 25 item 3).

A key of 600+ characters made every preview fail with ``RecursionError``: the multi-key trie pattern was built
by a recursive function, one level per character. It is now built with an explicit stack, and a trie that would
nest deeper than ``re`` compiles safely becomes a flat alternation (longest key first).
"""

from __future__ import annotations

import re

import pytest

import engine
from engine.lorebook import keys as lorebook_keys
from engine.lorebook.keys import MultiKeyMatcher, _trie_pattern
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, PreviewRequest


def _request(keys: list[str], text: str) -> PreviewRequest:
    book = Lorebook(name="W", entries=[LorebookEntry(uid=i, keys=[k], content=f"lore {i}") for i, k in enumerate(keys)])
    return PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content=text)]), lorebooks=[book],
                          settings=ContextSettings(model="gpt-4o", context_limit=8000))


def _activated(preview) -> set[str]:
    return {b.text for b in preview.blocks if b.text.startswith("lore ")}


@pytest.mark.parametrize("length", [600, 2_000, 20_000])
def test_a_long_key_activates_and_does_not_crash(length: int) -> None:
    key = ("storm " * (length // 6 + 1))[:length].strip()
    got = engine.preview(_request([key, "missing words"], f"Look: {key}!"))
    assert _activated(got) == {"lore 0"}


def test_keys_that_are_prefixes_of_each_other_nest_deeper_than_re_allows() -> None:
    keys = ["a" * n for n in range(1, 700)]  # key i: i + 1 characters; 699 nested groups as a trie
    got = engine.preview(_request([*keys, "b" * 900], "x " + "a" * 300 + " y"))
    assert _activated(got) == {"lore 299"}  # whole words: only the 300-character key stands alone


def test_the_flat_fallback_finds_what_the_trie_finds() -> None:
    keys = ["ab", "abc", "abcd", "b", "bcd", "x" * 5, "x" * 40]
    text = "zabcd bcd " + "x" * 41
    trie = MultiKeyMatcher(keys).scan(text)
    deep = keys + ["q" * n for n in range(1, lorebook_keys.MAX_TRIE_NESTING + 5)]
    assert "|" in _trie_pattern(deep) and not _trie_pattern(deep).startswith("(?:")  # flat
    flat = MultiKeyMatcher(deep).scan(text)
    assert flat.any == trie.any == {k for k in keys if k in text}
    assert flat.whole == trie.whole


def test_the_trie_pattern_is_unchanged_for_ordinary_keys() -> None:
    assert _trie_pattern(["ab", "abc", "b"]) == "(?:ab(?:c)?|b)"
    assert re.fullmatch(_trie_pattern(["sea", "seaside"]), "seaside")
