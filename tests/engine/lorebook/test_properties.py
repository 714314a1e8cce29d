"""Property tests: the indexed engine agrees with a naive re-implementation of the algorithm,
and the result invariants hold (trace coverage, budget, determinism, cache safety)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.lorebook import activate, compute_budget
from engine.lorebook.keys import whole_word_at
from engine.schema import ChatMessage, Lorebook, LorebookEntry, SelectiveLogic, WorldInfoSettings

from ._helpers import words

VOCAB = ["ash", "Ash", "oak", "oaken", "elm", "fir", "fire", "小红", "红帽", "#tag", "Dr. X", "x2", "Ö"]
SEPARATORS = [" ", ", ", "", "\n", ". "]


def occurs(text: str, key: str, cs: bool, ww: bool) -> bool:
    t, k = (text, key) if cs else (text.lower(), key.lower())
    i = t.find(k)
    while i != -1:
        if not ww or whole_word_at(t, i, i + len(k)):
            return True
        i = t.find(k, i + 1)
    return False


def reference(entries: list[LorebookEntry], messages: list[str], s: WorldInfoSettings) -> dict[Any, int]:
    """Naive SillyTavern loop: every pass re-checks every entry against every text (uid -> pass)."""
    window = [m.strip() for m in reversed(messages)]
    prio = sorted(entries, key=lambda e: (-e.order, e.uid))
    active: dict[Any, int] = {}
    final: set[Any] = set()
    recursion: list[str] = []
    levels = sorted({e.delay_until_recursion for e in entries if e.delay_until_recursion > 0})
    current = levels.pop(0) if levels else 0
    state, p = "initial", 0
    while state:
        if s.max_recursion_steps and p >= s.max_recursion_steps:
            break
        new: list[LorebookEntry] = []
        for e in prio:
            if e.uid in active or e.uid in final:
                continue
            if e.disable:
                final.add(e.uid)
                continue
            if e.delay_until_recursion and (state != "recursion" or e.delay_until_recursion > current):
                continue
            if state == "recursion" and s.recursive and e.exclude_recursion:
                continue
            if e.constant:
                new.append(e)
                continue
            keys = [k.strip() for k in e.keys if k.strip()]
            if not keys:
                continue
            cs = s.case_sensitive if e.case_sensitive is None else e.case_sensitive
            ww = s.match_whole_words if e.match_whole_words is None else e.match_whole_words
            depth = s.scan_depth if e.scan_depth is None else e.scan_depth
            texts = window[:depth] + (recursion if state == "recursion" and s.recursive else [])

            def found(k: str) -> bool:
                return any(occurs(t, k, cs, ww) for t in texts)

            if not any(found(k) for k in keys):
                continue
            sec = [k.strip() for k in e.secondary_keys if k.strip()] if e.selective else []
            if sec:
                hits = [found(k) for k in sec]
                logic = e.selective_logic
                ok = (any(hits) if logic == SelectiveLogic.AND_ANY else not all(hits) if logic == SelectiveLogic.NOT_ALL
                      else not any(hits) if logic == SelectiveLogic.NOT_ANY else all(hits))
                if not ok:
                    continue
            new.append(e)
        for e in new:
            active[e.uid] = p
        feed = [e for e in new if not e.prevent_recursion]
        if s.recursive:
            recursion.extend(e.content for e in feed)
        nxt = "recursion" if s.recursive and feed else ""
        if not nxt and levels:
            nxt, current = "recursion", levels.pop(0)
        state, p = nxt, p + 1
    return active


text_st = st.lists(st.tuples(st.sampled_from(VOCAB), st.sampled_from(SEPARATORS)), max_size=6).map(
    lambda parts: "".join(w + sep for w, sep in parts))
entry_st = st.fixed_dictionaries({
    "keys": st.lists(st.sampled_from([*VOCAB, " ", ""]), max_size=3),
    "secondary_keys": st.lists(st.sampled_from(VOCAB), max_size=2),
    "selective_logic": st.sampled_from(list(SelectiveLogic)),
    "selective": st.booleans(),
    "constant": st.sampled_from([False, False, False, True]),
    "disable": st.sampled_from([False, False, False, True]),
    "exclude_recursion": st.booleans(),
    "prevent_recursion": st.booleans(),
    "delay_until_recursion": st.sampled_from([0, 0, 0, 1, 2]),
    "scan_depth": st.none() | st.integers(0, 4),
    "case_sensitive": st.none() | st.booleans(),
    "match_whole_words": st.none() | st.booleans(),
    "order": st.sampled_from([1, 50, 100]),
    "content": text_st.filter(lambda t: t.strip() != ""),
})
settings_st = st.fixed_dictionaries({
    "scan_depth": st.integers(0, 4), "recursive": st.booleans(), "case_sensitive": st.booleans(),
    "match_whole_words": st.booleans(), "max_recursion_steps": st.sampled_from([0, 0, 1, 2, 3]),
    "include_names": st.just(False),
})


def build(entry_dicts: list[dict[str, Any]]) -> list[LorebookEntry]:
    return [LorebookEntry(uid=i, **d) for i, d in enumerate(entry_dicts)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry_st, min_size=1, max_size=10), st.lists(text_st, max_size=5), settings_st)
def test_engine_matches_naive_reference(entry_dicts: list[dict[str, Any]], msgs: list[str],
                                        s: dict[str, Any]) -> None:
    entries = build(entry_dicts)
    wi = WorldInfoSettings(**s, rules="loomscope")
    result = activate([Lorebook(name="b", entries=entries)],
                      [ChatMessage(role="user", content=m) for m in msgs], wi,
                      count_tokens=words, context_limit=10**7)
    got = {a.uid: a.trace["pass"] for a in result.activated}
    assert got == reference(entries, msgs, wi)


@settings(max_examples=150, deadline=None)
@given(st.lists(entry_st, min_size=1, max_size=10), st.lists(text_st, max_size=5), settings_st,
       st.integers(1, 40), st.integers(0, 3))
def test_result_invariants(entry_dicts: list[dict[str, Any]], msgs: list[str], s: dict[str, Any],
                           cap: int, seed: int) -> None:
    entries = build(entry_dicts)
    for i, e in enumerate(entries):
        if i % 3 == 1:
            e.group = "g"
        if i % 5 == 2:
            e.probability = 50
    wi = WorldInfoSettings(**s, budget_cap=cap, seed=seed, rules="loomscope")
    books = [Lorebook(name="b", entries=entries)]
    chat = [ChatMessage(role="user", content=m) for m in msgs]
    r = activate(books, chat, wi, count_tokens=words, context_limit=1000)
    # one trace record per entry, in book order; activated records match the activated list
    assert [t.uid for t in r.trace] == [e.uid for e in entries]
    assert {t.uid for t in r.trace if t.activated} == {a.uid for a in r.activated}
    assert {t.uid for t in r.trace if t.code == "LOREBOOK_BUDGET"} == {d.uid for d in r.budget_dropped}
    # the budget holds except for constants, which are never dropped
    const_tokens = sum(a.tokens for a in r.activated if a.constant)
    assert r.budget == compute_budget(wi, 1000)
    assert r.used_tokens == sum(a.tokens for a in r.activated)
    assert r.used_tokens - const_tokens <= max(0, r.budget - const_tokens) or all(
        a.constant for a in r.activated)
    assert not any(d.constant for d in r.budget_dropped)
    # at most one member of group "g" is active
    assert sum(1 for a in r.activated if entries[a.uid].group == "g") <= 1
    # pure and deterministic, and independent of the prepared-book cache
    again = activate([Lorebook(name="b", entries=[e.model_copy(deep=True) for e in entries])], chat, wi,
                     count_tokens=words, context_limit=1000)
    assert again.model_dump() == r.model_dump()


ascii_word = st.text(alphabet="abc_1", min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(ascii_word, min_size=1, max_size=8), st.text(alphabet="abc_1 .,-#", max_size=60))
def test_matcher_agrees_with_regex_on_ascii(keys: list[str], text: str) -> None:
    """On ASCII text the multi-key pass finds exactly what per-key regexes find: any occurrence,
    and occurrences bounded by non-word characters (SillyTavern's single-word rule)."""
    from engine.lorebook.keys import MultiKeyMatcher

    hits = MultiKeyMatcher(keys).scan(text)
    for k in set(keys):
        assert (k in hits.any) == (k in text)
        bounded = re.search(r"(?<!\w)" + re.escape(k) + r"(?!\w)", text) is not None
        assert (k in hits.whole) == bounded, (k, text)
