"""The trace-code table (pinned), key helpers and small API pieces."""

from __future__ import annotations

import re

import pytest

from engine.lorebook import BLOCK_REASONS, TRACE_CODES, activate, clear_cache, compute_budget
from engine.lorebook import test_text as run_test_text
from engine.lorebook.keys import (
    SPACED,
    UNSEGMENTED,
    InvalidRegexKey,
    MultiKeyMatcher,
    compile_regex_key,
    is_regex_key,
    substitute_names,
    whole_word_at,
    word_kind,
)
from engine.schema import ChatMessage, WorldInfoSettings

from ._helpers import book, entry, words


def test_trace_codes_pinned() -> None:
    assert sorted(TRACE_CODES) == sorted([
        "LOREBOOK_CONSTANT", "LOREBOOK_KEY_MATCH", "LOREBOOK_STICKY", "LOREBOOK_DECORATOR_ACTIVATE",
        "LOREBOOK_NOT_MATCHED", "LOREBOOK_DISABLED", "LOREBOOK_NO_KEYS", "LOREBOOK_SECONDARY_FAILED",
        "LOREBOOK_PROBABILITY", "LOREBOOK_BUDGET", "LOREBOOK_COOLDOWN", "LOREBOOK_DELAY",
        "LOREBOOK_DELAY_UNTIL_RECURSION", "LOREBOOK_EXCLUDED_FROM_RECURSION", "LOREBOOK_GROUP_LOST",
        "LOREBOOK_GROUP_ALREADY_SATISFIED", "LOREBOOK_INVALID_KEY", "LOREBOOK_EMPTY",
        "LOREBOOK_FILTERED_CHARACTER", "LOREBOOK_FILTERED_TRIGGER", "LOREBOOK_DECORATOR_SUPPRESS",
        "LOREBOOK_DUPLICATE_BOOK", "LOREBOOK_REGEX_TIMEOUT",
    ])
    assert all(re.fullmatch(r"LOREBOOK_[A-Z_]+", c) and TRACE_CODES[c] for c in TRACE_CODES)
    # block reasons of kept entries: the SPEC §3 kept reasons plus sticky/decorator
    assert BLOCK_REASONS == {"LOREBOOK_CONSTANT": "LOREBOOK_CONSTANT", "LOREBOOK_KEY_MATCH": "LOREBOOK_MATCHED",
                             "LOREBOOK_STICKY": "LOREBOOK_STICKY",
                             "LOREBOOK_DECORATOR_ACTIVATE": "LOREBOOK_DECORATOR_ACTIVATE"}


@pytest.mark.parametrize(("pct", "limit", "cap", "expected"), [
    (25, 8192, 0, 2048), (25, 1002, 0, 251), (25, 1006, 0, 252), (0, 8192, 0, 1), (100, 1000, 300, 300),
    (10, 100, 50, 10), (25, 0, 0, 1)])
def test_compute_budget(pct: float, limit: int, cap: int, expected: int) -> None:
    assert compute_budget(WorldInfoSettings(budget_percent=pct, budget_cap=cap), limit) == expected


@pytest.mark.parametrize(("key", "regex"), [
    ("/abc/", True), ("/a+b/gi", True), ("/a/b/", False), (r"/a\/b/", True), ("abc", False), ("/abc", False),
    ("//", False), ("/abc/x", False)])
def test_is_regex_key(key: str, regex: bool) -> None:
    assert is_regex_key(key) is regex


def test_compile_regex_key_translates_js() -> None:
    assert compile_regex_key("/AB/i").search("xaby")
    assert compile_regex_key("/^b/m").search("a\nb")
    assert compile_regex_key("/a.b/s").search("a\nb")
    assert compile_regex_key(r"/(?<n>ha)\k<n>/").search("haha")
    assert compile_regex_key("/a[^]b/").search("a\nb")
    assert compile_regex_key(r"/\u{1F600}/u").search("smile 😀")
    assert not compile_regex_key("/x/g").ignore_case
    with pytest.raises(InvalidRegexKey):
        compile_regex_key("/([a-z/")
    with pytest.raises(InvalidRegexKey):
        compile_regex_key("plain")


def test_word_kinds() -> None:
    assert word_kind("a") == SPACED and word_kind("é") == SPACED and word_kind("7") == SPACED
    assert word_kind("_") == SPACED and word_kind("ж") == SPACED
    for ch in "小ひカ한ไ":
        assert word_kind(ch) == UNSEGMENTED, ch
    for ch in " .,#-'「」\x01":
        assert word_kind(ch) == 0, ch


@pytest.mark.parametrize(("text", "start", "end", "whole"), [
    ("a cat.", 2, 5, True), ("concat", 3, 6, False), ("cats", 0, 3, False), ("我看见小红帽了", 3, 6, True),
    ("say #hello now", 4, 10, True), ("x#hello", 1, 7, True), ("去Tokyo了", 1, 6, True)])
def test_whole_word_at(text: str, start: int, end: int, whole: bool) -> None:
    assert whole_word_at(text, start, end) is whole


def test_multi_key_matcher_finds_overlapping_and_nested_keys() -> None:
    m = MultiKeyMatcher(["sword", "swordsman", "word", "man", "an", "小红", "红帽"])
    hits = m.scan("the swordsman 小红帽")
    assert hits.any == {"sword", "swordsman", "word", "man", "an", "小红", "红帽"}
    assert hits.whole == {"swordsman", "小红", "红帽"}
    assert MultiKeyMatcher([]).scan("anything").any == set()


def test_substitute_names() -> None:
    assert substitute_names("{{user}} meets {{ CHAR }} <USER> <BOT>", user="U", char="C") == "U meets C U C"
    assert substitute_names("{{random}}", user="U", char="C") == "{{random}}"


def test_test_text_box() -> None:
    r = run_test_text([book(entry(1, ["sword"]), entry(2, ["axe"]))], "a sword", WorldInfoSettings(),
                      count_tokens=words, context_limit=1000)
    assert r.activated_uids() == [1] and r.trace_for(2).code == "LOREBOOK_NOT_MATCHED"


def test_cache_sees_in_place_edits() -> None:
    b = book(entry(1, ["sword"]), entry(2, ["axe"]))
    msgs = [ChatMessage(role="user", content="an axe")]
    s = WorldInfoSettings()
    assert activate([b], msgs, s, count_tokens=words, context_limit=1000).activated_uids() == [2]
    b.entries[0].keys.append("axe")  # in-place list edit
    assert sorted(activate([b], msgs, s, count_tokens=words, context_limit=1000).activated_uids()) == [1, 2]
    b.entries[1].content = "changed text"  # assignment
    r = activate([b], msgs, s, count_tokens=words, context_limit=1000)
    assert next(a for a in r.activated if a.uid == 2).content == "changed text"
    b.entries[1].disable = True
    assert activate([b], msgs, s, count_tokens=words, context_limit=1000).activated_uids() == [1]
    clear_cache()
    assert activate([b], msgs, s, count_tokens=words, context_limit=1000).activated_uids() == [1]


def test_results_are_frozen_and_serialize() -> None:
    r = run_test_text([book(entry(1, ["sword"]))], "sword", WorldInfoSettings(), count_tokens=words,
                      context_limit=1000)
    with pytest.raises(Exception):
        r.activated[0].tokens = 5  # type: ignore[misc]
    data = r.model_dump(mode="json")
    assert data["activated"][0]["position"] == 0 and data["trace"][0]["code"] == "LOREBOOK_KEY_MATCH"
    assert type(r).model_validate_json(r.model_dump_json()) == r


def test_probability_is_seeded_and_independent() -> None:
    s = WorldInfoSettings(seed=7)
    msgs = [ChatMessage(role="user", content="sword")]
    b1 = book(entry(1, ["sword"], probability=50))
    b2 = book(entry(1, ["sword"], probability=50), entry(2, ["sword"], probability=50))
    r1 = activate([b1], msgs, s, count_tokens=words, context_limit=1000)
    r2 = activate([b2], msgs, s, count_tokens=words, context_limit=1000)
    # entry 1's roll does not depend on entry 2 being there
    assert (1 in r1.activated_uids()) == (1 in r2.activated_uids())
    fired = 0
    for seed in range(200):
        r = activate([b1], msgs, WorldInfoSettings(seed=seed), count_tokens=words, context_limit=1000)
        fired += bool(r.activated)
        again = activate([b1], msgs, WorldInfoSettings(seed=seed), count_tokens=words, context_limit=1000)
        assert again.activated_uids() == r.activated_uids()
    assert 60 <= fired <= 140


def test_group_weights_are_seeded() -> None:
    b = book(entry("a", ["x"], group="g"), entry("b", ["x"], group="g"))
    msgs = [ChatMessage(role="user", content="x")]
    winners = {activate([b], msgs, WorldInfoSettings(seed=s), count_tokens=words,
                        context_limit=1000).activated_uids()[0] for s in range(40)}
    assert winners == {"a", "b"}
    r = activate([b], msgs, WorldInfoSettings(seed=3), count_tokens=words, context_limit=1000)
    loser = "a" if r.activated_uids() == ["b"] else "b"
    d = r.trace_for(loser).detail
    assert d["mode"] == "weight" and d["total_weight"] == 200 and "seed" in d and "roll" in d


def test_concurrent_activations_agree() -> None:
    """Preview workers call activate from several threads; shared caches must not corrupt results."""
    from concurrent.futures import ThreadPoolExecutor

    books = [book(*[entry(i, [f"k{i}", f"w{i % 7}"], content=f"text k{(i * 3) % 50}") for i in range(60)])]
    chats = [[ChatMessage(role="user", content=f"k{j} and w{j % 7} then k{j + 5}")] for j in range(40)]
    s = WorldInfoSettings()
    clear_cache()
    expected = [activate(books, c, s, count_tokens=words, context_limit=1000).model_dump() for c in chats]
    clear_cache()
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda c: activate(books, c, s, count_tokens=words, context_limit=1000).model_dump(),
                            chats * 3))
    assert got == expected * 3


def test_prepared_cache_hits_equal_copies_and_misses_changes() -> None:
    from engine.lorebook.activation import _prepared_for

    b = book(*[entry(i, [f"k{i}"]) for i in range(20)])
    s = WorldInfoSettings()
    first = _prepared_for([b], s, "User", "Bot")
    assert _prepared_for([b.model_copy(deep=True)], s, "User", "Bot") is first  # same content: hit
    assert _prepared_for([b.model_copy(update={"name": "other"})], s, "User", "Bot") is not first
    changed = b.model_copy(deep=True)
    changed.entries[5].order = 7
    assert _prepared_for([changed], s, "User", "Bot") is not first
    assert _prepared_for([b], s, "User", "Someone") is not _prepared_for([b], s, "User", "Bot")
