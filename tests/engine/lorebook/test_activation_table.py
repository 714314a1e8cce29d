"""Table-driven activation tests: each case states the activated uids and the trace codes.

Token counts use one token per word (``_helpers.words``). Unless a case says otherwise:
settings are ``WorldInfoSettings()`` (scan depth 2, whole words on, case-insensitive,
recursion on, include names), context limit 10,000 (budget 2,500), user ``User``, char ``Bot``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.lorebook import ActivationResult, activate
from engine.lorebook.st_hash import entry_hash
from engine.schema import InsertionPosition, Lorebook, SelectiveLogic, WorldInfoSettings

from ._helpers import book, chat, entry, tokens_of, words

AND_ANY, NOT_ALL, NOT_ANY, AND_ALL = (SelectiveLogic.AND_ANY, SelectiveLogic.NOT_ALL,
                                      SelectiveLogic.NOT_ANY, SelectiveLogic.AND_ALL)


@dataclass
class Case:
    id: str
    books: list[Lorebook]
    messages: list[Any]
    active: set[Any]
    codes: dict[Any, str]
    settings: dict[str, Any] = field(default_factory=dict)
    context_limit: int = 10_000
    kwargs: dict[str, Any] = field(default_factory=dict)
    check: Callable[[ActivationResult], None] | None = None


def one(*entries: Any) -> list[Lorebook]:
    return [book(*entries)]


def _detail(uid: Any, **expected: Any) -> Callable[[ActivationResult], None]:
    def check(r: ActivationResult) -> None:
        rec = r.trace_for(uid)
        assert rec is not None
        for k, v in expected.items():
            assert rec.detail.get(k) == v, (k, rec.detail)
    return check


def _all(*checks: Callable[[ActivationResult], None]) -> Callable[[ActivationResult], None]:
    def check(r: ActivationResult) -> None:
        for c in checks:
            c(r)
    return check


def _budget_case_a(r: ActivationResult) -> None:
    a = next(x for x in r.activated if x.uid == "A")
    assert a.constant and a.reason == "LOREBOOK_CONSTANT" and a.tokens == 600
    assert [d.uid for d in r.budget_dropped] == ["B"]
    assert r.budget_dropped[0].reason == "LOREBOOK_BUDGET" and r.budget_dropped[0].tokens == 500
    assert r.trace_for("B").tokens == 500 and r.budget == 1000 and r.used_tokens == 600


def _six_equal(r: ActivationResult) -> None:
    assert [d.uid for d in r.budget_dropped] == [3, 4, 5]
    assert all(d.tokens == 150 and d.reason == "LOREBOOK_BUDGET" for d in r.budget_dropped)
    assert [r.trace_for(u).tokens for u in (3, 4, 5)] == [150, 150, 150]
    assert r.used_tokens == 450 and r.budget == 500


def _regex_case(r: ActivationResult) -> None:
    rec = r.trace_for("studio")
    assert rec.detail["keys"] == ["/studio/"]
    assert "case" in rec.detail["near_misses"][0]["why"]
    assert r.trace_for("abc").detail["matched"] == "ABBC"


def _invalid_regex(r: ActivationResult) -> None:
    assert len(r.diagnostics) == 1 and "uid bad" in r.diagnostics[0] and "LOREBOOK_INVALID_KEY" in r.diagnostics[0]
    assert r.trace_for("bad").detail["invalid"][0]["key"] == "/([a-z/"


def _placement(r: ActivationResult) -> None:
    got = [(a.uid, a.position, a.depth, a.role) for a in r.activated]
    assert got == [
        ("b_low", InsertionPosition.BEFORE_CHAR, 4, "system"),
        ("b_high", InsertionPosition.BEFORE_CHAR, 4, "system"),
        ("after", InsertionPosition.AFTER_CHAR, 4, "system"),
        ("d0", InsertionPosition.AT_DEPTH, 0, "assistant"),
        ("d2", InsertionPosition.AT_DEPTH, 2, "user"),
    ]


def _recursion_from(uid: Any, from_uid: Any, pass_no: int) -> Callable[[ActivationResult], None]:
    def check(r: ActivationResult) -> None:
        d = r.trace_for(uid).detail
        assert d["source"] == "recursion" and d["from_uid"] == from_uid and d["pass"] == pass_no
    return check


def _group_winner(uid: Any, winner: Any, mode: str) -> Callable[[ActivationResult], None]:
    def check(r: ActivationResult) -> None:
        d = r.trace_for(uid).detail
        assert d["winner"]["uid"] == winner and d["mode"] == mode
    return check


def _timed_state(r: ActivationResult) -> None:
    assert r.timed_effects["sticky"]["book.s"] == {
        "hash": r.timed_effects["sticky"]["book.s"]["hash"], "start": 3, "end": 5, "protected": False}
    assert r.timed_effects["cooldown"]["book.s"]["end"] == 4


CASES: list[Case] = [
    # ------------------------------------------------------------ primary keys
    Case("plain-key", one(entry(1, ["sword"])), ["I draw my sword"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         check=_detail(1, key="sword", message_index=0, depth=0, source="chat", **{"pass": 0})),
    Case("no-match", one(entry(1, ["sword"])), ["I draw my bow"], set(), {1: "LOREBOOK_NOT_MATCHED"}),
    Case("any-primary-key", one(entry(1, ["axe", "bow", "sword"])), ["a bow"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         check=_detail(1, key="bow")),
    Case("case-insensitive-default", one(entry(1, ["SWORD"])), ["my Sword"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("case-sensitive-global", one(entry(1, ["Sword"])), ["my sword"], set(), {1: "LOREBOOK_NOT_MATCHED"},
         settings={"case_sensitive": True},
         check=lambda r: "another case" in r.trace_for(1).detail["near_misses"][0]["why"]),
    Case("case-sensitive-global-hit", one(entry(1, ["Sword"])), ["my Sword"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         settings={"case_sensitive": True}),
    Case("case-sensitive-entry-override", one(entry(1, ["Sword"], case_sensitive=True), entry(2, ["Sword"])),
         ["my sword"], {2}, {1: "LOREBOOK_NOT_MATCHED", 2: "LOREBOOK_KEY_MATCH"}),
    Case("case-insensitive-entry-override", one(entry(1, ["Sword"], case_sensitive=False)), ["my sword"], {1},
         {1: "LOREBOOK_KEY_MATCH"}, settings={"case_sensitive": True}),
    Case("whole-words-substring-rejected", one(entry(1, ["cat"])), ["concatenate"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}, check=lambda r: r.trace_for(1).detail["near_misses"][0]["key"] == "cat"),
    Case("whole-words-off-global", one(entry(1, ["cat"])), ["concatenate"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         settings={"match_whole_words": False}),
    Case("whole-words-off-entry", one(entry(1, ["cat"], match_whole_words=False), entry(2, ["cat"])),
         ["concatenate"], {1}, {1: "LOREBOOK_KEY_MATCH", 2: "LOREBOOK_NOT_MATCHED"}),
    Case("whole-words-on-entry", one(entry(1, ["cat"], match_whole_words=True)), ["concatenate"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}, settings={"match_whole_words": False}),
    Case("whole-word-punctuation-neighbours", one(entry(1, ["sword"])), ["(sword), yes"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("whole-word-digit-neighbour", one(entry(1, ["sword"])), ["sword2 is a file"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}),
    Case("whole-word-underscore-neighbour", one(entry(1, ["sword"])), ["my_sword"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}),
    # the "cases other tools get wrong", verbatim
    Case("cjk-key-inside-cjk-text", one(entry(1, ["小红帽"])), ["我看见小红帽了"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("key-with-inner-punctuation", one(entry(1, ["Dr. Smith"])), ["Dr. Smith said hi"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("key-starting-with-punctuation", one(entry(1, ["#hello"])), ["say #hello now"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("japanese-key-in-japanese", one(entry(1, ["霊装"])), ["彼女の霊装は美しい"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("latin-key-next-to-cjk", one(entry(1, ["Tokyo"])), ["我去Tokyo了"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("hangul-key-with-particle", one(entry(1, ["서울"])), ["서울에서 만나요"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("cyrillic-whole-word-rejected", one(entry(1, ["меч"])), ["это мечта"], set(), {1: "LOREBOOK_NOT_MATCHED"}),
    Case("cyrillic-whole-word", one(entry(1, ["меч"])), ["мой меч."], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("accented-letters-are-word-chars", one(entry(1, ["cafe"])), ["the cafés"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}),
    Case("multi-word-key-whole-words", one(entry(1, ["red dragon"])), ["two red dragons"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}),
    Case("multi-word-key", one(entry(1, ["red dragon"])), ["a red dragon!"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("nested-keys-both-found", one(entry(1, ["sword"]), entry(2, ["swordsman"]), entry(3, ["word"])),
         ["the swordsman and his sword"], {1, 2}, {1: "LOREBOOK_KEY_MATCH", 2: "LOREBOOK_KEY_MATCH",
                                                   3: "LOREBOOK_NOT_MATCHED"}),
    Case("char-macro-in-key", one(entry(1, ["{{char}}'s castle"])), ["to Bot's castle"], {1},
         {1: "LOREBOOK_KEY_MATCH"}, check=_detail(1, key="Bot's castle")),
    Case("user-macro-in-key", one(entry(1, ["{{user}}"])), [("assistant", "hello Alice")], {1},
         {1: "LOREBOOK_KEY_MATCH"}, kwargs={"user_name": "Alice"}),
    Case("key-trimmed", one(entry(1, ["  sword "])), ["a sword"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("blank-keys-only", one(entry(1, ["", "  "])), ["anything"], set(), {1: "LOREBOOK_NO_KEYS"}),
    Case("no-keys", one(entry(1, [])), ["anything"], set(), {1: "LOREBOOK_NO_KEYS"}),
    Case("include-names-prefix", one(entry(1, ["Alice"])), ["hi there"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         kwargs={"user_name": "Alice"}),
    Case("include-names-off", one(entry(1, ["Alice"])), ["hi there"], set(), {1: "LOREBOOK_NOT_MATCHED"},
         settings={"include_names": False}, kwargs={"user_name": "Alice"}),
    Case("message-name-prefix", one(entry(1, ["Narrator"])),
         [{"role": "system", "content": "night falls", "name": "Narrator"}], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    # ------------------------------------------------------------ scan depth, hidden messages
    Case("beyond-scan-depth", one(entry(1, ["sword"])), ["sword", "a", "b"], set(), {1: "LOREBOOK_NOT_MATCHED"}),
    Case("within-scan-depth", one(entry(1, ["sword"])), ["sword", "a", "b"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         settings={"scan_depth": 3}, check=_detail(1, message_index=0, depth=2)),
    Case("entry-scan-depth-override", one(entry(1, ["sword"], scan_depth=5), entry(2, ["sword"])),
         ["sword", "a", "b", "c"], {1}, {1: "LOREBOOK_KEY_MATCH", 2: "LOREBOOK_NOT_MATCHED"},
         settings={"scan_depth": 1}, check=lambda r: r.trace_for(2).detail["near_misses"][0]["why"].startswith(
             "found beyond")),
    Case("scan-depth-zero", one(entry(1, ["sword"]), entry(2, constant=True)), ["sword"], {2},
         {1: "LOREBOOK_NOT_MATCHED", 2: "LOREBOOK_CONSTANT"}, settings={"scan_depth": 0}),
    Case("hidden-message-not-scanned", one(entry(1, ["sword"])),
         [{"role": "user", "content": "sword", "meta": {"hidden": True}}, "b"], set(),
         {1: "LOREBOOK_NOT_MATCHED"}),
    Case("hidden-message-does-not-count-for-depth", one(entry(1, ["sword"])),
         ["a sword", {"role": "assistant", "content": "x", "meta": {"hidden": True}}, "c"], {1},
         {1: "LOREBOOK_KEY_MATCH"}, check=_detail(1, message_index=0, depth=1)),
    # ------------------------------------------------------------ secondary keys
    Case("and-any-ok", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=AND_ANY)),
         ["sword of ice"], {1}, {1: "LOREBOOK_KEY_MATCH"}, check=_detail(1, logic="AND_ANY")),
    Case("and-any-failed", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=AND_ANY)),
         ["sword of stone"], set(), {1: "LOREBOOK_SECONDARY_FAILED"},
         check=_detail(1, logic="AND_ANY", secondary_missing=["fire", "ice"])),
    Case("not-all-ok", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=NOT_ALL)),
         ["sword of fire"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("not-all-failed", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=NOT_ALL)),
         ["sword of fire and ice"], set(), {1: "LOREBOOK_SECONDARY_FAILED"}),
    Case("not-any-ok", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=NOT_ANY)),
         ["sword of stone"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("not-any-failed", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=NOT_ANY)),
         ["sword of ice"], set(), {1: "LOREBOOK_SECONDARY_FAILED"}, check=_detail(1, secondary_matched=["ice"])),
    Case("and-all-ok", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=AND_ALL)),
         ["sword of fire and ice"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("and-all-failed", one(entry(1, ["sword"], secondary_keys=["fire", "ice"], selective_logic=AND_ALL)),
         ["sword of fire"], set(), {1: "LOREBOOK_SECONDARY_FAILED"}),
    Case("selective-off-ignores-secondary",
         one(entry(1, ["sword"], secondary_keys=["fire"], selective=False)), ["sword"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("secondary-alone-does-not-activate", one(entry(1, ["sword"], secondary_keys=["fire"])), ["fire"],
         set(), {1: "LOREBOOK_NOT_MATCHED"}),
    # ------------------------------------------------------------ regex keys
    Case("regex-keys-issue-case", one(entry("abc", ["/ab+c/i"]), entry("studio", ["/studio/"])),
         ["Studio time", "ABBC!"], {"abc"}, {"abc": "LOREBOOK_KEY_MATCH", "studio": "LOREBOOK_NOT_MATCHED"},
         check=_regex_case),
    Case("invalid-regex-is-diagnostic", one(entry("bad", ["/([a-z/"]), entry("ok", ["sword"])), ["sword"],
         {"ok"}, {"bad": "LOREBOOK_INVALID_KEY", "ok": "LOREBOOK_KEY_MATCH"}, check=_invalid_regex),
    Case("invalid-regex-other-key-matches", one(entry(1, ["/([a-z/", "sword"])), ["sword"], {1},
         {1: "LOREBOOK_KEY_MATCH"}, check=lambda r: len(r.diagnostics) == 1),
    Case("regex-ignores-whole-words", one(entry(1, ["/cat/"])), ["concatenate"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("regex-named-group-js-syntax", one(entry(1, [r"/(?<x>ha)\k<x>/"])), ["hahaha"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("regex-dotall-flag", one(entry(1, ["/a.b/s"]), entry(2, ["/a.b/"])), ["a\nb"], {1},
         {1: "LOREBOOK_KEY_MATCH", 2: "LOREBOOK_NOT_MATCHED"}),
    Case("regex-escaped-slash", one(entry(1, [r"/and\/or/"])), ["and/or"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("regex-secondary-key", one(entry(1, ["sword"], secondary_keys=["/fi+re/"])), ["sword fiiire"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("regex-depth-reported", one(entry(1, ["/dr[a-z]+n/"])), ["dragon", "x"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         check=_detail(1, message_index=0, depth=1, matched="dragon")),
    # ------------------------------------------------------------ constant, disabled, empty, decorators
    Case("constant", one(entry(1, constant=True)), ["hi"], {1}, {1: "LOREBOOK_CONSTANT"},
         check=lambda r: r.activated[0].reason == "LOREBOOK_CONSTANT" and r.activated[0].constant),
    Case("matched-reason", one(entry(1, ["hi"])), ["hi"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         check=lambda r: r.activated[0].reason == "LOREBOOK_MATCHED" and not r.activated[0].constant),
    Case("disabled", one(entry(1, ["sword"], disable=True)), ["sword"], set(), {1: "LOREBOOK_DISABLED"}),
    Case("disabled-constant", one(entry(1, constant=True, disable=True)), ["x"], set(), {1: "LOREBOOK_DISABLED"}),
    Case("empty-content", one(entry(1, ["sword"], content="  ")), ["sword"], set(), {1: "LOREBOOK_EMPTY"}),
    Case("decorator-activate", one(entry(1, content="@@activate\nalways on")), ["x"], {1},
         {1: "LOREBOOK_DECORATOR_ACTIVATE"}, check=lambda r: r.activated[0].content == "always on"),
    Case("decorator-dont-activate", one(entry(1, ["sword"], content="@@dont_activate\ntext")), ["sword"], set(),
         {1: "LOREBOOK_DECORATOR_SUPPRESS"}),
    Case("content-macros", one(entry(1, ["x"], content="{{char}} greets {{user}}")), ["x"], {1},
         {1: "LOREBOOK_KEY_MATCH"}, check=lambda r: r.activated[0].content == "Bot greets User"),
    # ------------------------------------------------------------ probability
    Case("probability-zero", one(entry(1, ["sword"], probability=0)), ["sword"], set(),
         {1: "LOREBOOK_PROBABILITY"},
         check=lambda r: {"seed", "roll", "probability"} <= set(r.trace_for(1).detail)),
    Case("probability-hundred", one(entry(1, ["sword"], probability=100)), ["sword"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    Case("probability-off", one(entry(1, ["sword"], probability=0, use_probability=False)), ["sword"], {1},
         {1: "LOREBOOK_KEY_MATCH"}),
    # ------------------------------------------------------------ budget (the cases verbatim)
    Case("constant-never-budget-dropped",
         one(entry("A", constant=True, order=1, content=tokens_of(600)),
             entry("B", ["sword"], order=50, content=tokens_of(500))),
         ["I draw my sword"], {"A"}, {"A": "LOREBOOK_CONSTANT", "B": "LOREBOOK_BUDGET"},
         settings={"budget_percent": 100, "budget_cap": 1000}, context_limit=100_000, check=_budget_case_a),
    Case("six-equal-priority-tie-break",
         one(*[entry(u, ["sword"], content=tokens_of(150)) for u in (5, 3, 1, 0, 4, 2)]),
         ["sword"], {0, 1, 2}, {0: "LOREBOOK_KEY_MATCH", 1: "LOREBOOK_KEY_MATCH", 2: "LOREBOOK_KEY_MATCH",
                               3: "LOREBOOK_BUDGET", 4: "LOREBOOK_BUDGET", 5: "LOREBOOK_BUDGET"},
         settings={"budget_percent": 50}, context_limit=1000, check=_six_equal),
    Case("budget-keeps-trying-smaller",
         one(entry("big1", ["x"], order=3, content=tokens_of(400)),
             entry("big2", ["x"], order=2, content=tokens_of(400)),
             entry("small", ["x"], order=1, content=tokens_of(100))),
         ["x"], {"big1", "small"}, {"big2": "LOREBOOK_BUDGET"}, settings={"budget_cap": 500}),
    Case("budget-priority-order-desc",
         one(entry("low", ["x"], order=1, content=tokens_of(300)), entry("high", ["x"], order=9,
                                                                         content=tokens_of(300))),
         ["x"], {"high"}, {"low": "LOREBOOK_BUDGET"}, settings={"budget_cap": 500}),
    Case("budget-book-order-tie-break",
         [book(entry(7, ["x"], content=tokens_of(300)), name="first"),
          book(entry(7, ["x"], content=tokens_of(300)), name="second")],
         ["x"], {7}, {}, settings={"budget_cap": 500},
         check=lambda r: r.activated[0].book == "first" and r.budget_dropped[0].book == "second"),
    Case("constants-alone-exceed-budget",
         one(entry("c1", constant=True, content=tokens_of(80)), entry("c2", constant=True, content=tokens_of(80)),
             entry("k", ["x"], content=tokens_of(1))),
         ["x"], {"c1", "c2"}, {"c1": "LOREBOOK_CONSTANT", "c2": "LOREBOOK_CONSTANT", "k": "LOREBOOK_BUDGET"},
         settings={"budget_cap": 100}, check=lambda r: r.used_tokens == 160),
    Case("ignore-budget-entry",
         one(entry("big", ["x"], content=tokens_of(900), ignore_budget=True), entry("k", ["x"], content=tokens_of(50))),
         ["x"], {"big", "k"}, {}, settings={"budget_cap": 100}, check=lambda r: r.used_tokens == 50),
    # ------------------------------------------------------------ recursion
    Case("recursion-activates", one(entry("A", ["sword"], content="forged by the smith"), entry("B", ["smith"])),
         ["my sword"], {"A", "B"}, {"B": "LOREBOOK_KEY_MATCH"}, check=_recursion_from("B", "A", 1)),
    Case("recursion-off", one(entry("A", ["sword"], content="forged by the smith"), entry("B", ["smith"])),
         ["my sword"], {"A"}, {"B": "LOREBOOK_NOT_MATCHED"}, settings={"recursive": False}),
    Case("prevent-recursion", one(entry("A", ["sword"], content="the smith", prevent_recursion=True),
                                  entry("B", ["smith"])),
         ["my sword"], {"A"}, {"B": "LOREBOOK_NOT_MATCHED"}),
    Case("exclude-recursion", one(entry("A", ["sword"], content="the smith"),
                                  entry("B", ["smith"], exclude_recursion=True)),
         ["my sword"], {"A"}, {"B": "LOREBOOK_EXCLUDED_FROM_RECURSION"}, check=_detail("B", from_uid="A")),
    Case("exclude-recursion-chat-match-ok", one(entry("B", ["smith"], exclude_recursion=True)), ["the smith"],
         {"B"}, {"B": "LOREBOOK_KEY_MATCH"}),
    Case("constant-feeds-recursion", one(entry("C", constant=True, content="the old smith"), entry("B", ["smith"])),
         ["hi"], {"C", "B"}, {"B": "LOREBOOK_KEY_MATCH"}, check=_recursion_from("B", "C", 1)),
    Case("secondary-completed-by-recursion",
         one(entry("B", ["sword"], content="made of fire"), entry("A", ["shield"], secondary_keys=["fire"])),
         ["sword and shield"], {"A", "B"}, {"A": "LOREBOOK_KEY_MATCH"},
         check=_detail("A", source="chat", secondary_matched=["fire"], **{"pass": 1})),
    Case("late-constant-pushes-keyword-out",
         one(entry("k", ["x"], content=tokens_of(60) + " trigger"), entry("c", ["trigger"], constant=True,
                                                                         delay_until_recursion=1,
                                                                         content=tokens_of(60))),
         ["x"], {"c"}, {"k": "LOREBOOK_BUDGET", "c": "LOREBOOK_CONSTANT"}, settings={"budget_cap": 100},
         check=lambda r: r.used_tokens == 60 and r.budget_dropped[0].uid == "k"),
    Case("recursion-chain", one(entry(1, ["a1"], content="b2"), entry(2, ["b2"], content="c3"),
                                entry(3, ["c3"], content="end")),
         ["a1"], {1, 2, 3}, {}, check=_all(_recursion_from(2, 1, 1), _recursion_from(3, 2, 2))),
    Case("max-recursion-steps", one(entry(1, ["a1"], content="b2"), entry(2, ["b2"], content="c3"),
                                    entry(3, ["c3"], content="end")),
         ["a1"], {1, 2}, {3: "LOREBOOK_NOT_MATCHED"}, settings={"max_recursion_steps": 2}),
    Case("max-recursion-steps-one", one(entry(1, ["a1"], content="b2"), entry(2, ["b2"])),
         ["a1"], {1}, {2: "LOREBOOK_NOT_MATCHED"}, settings={"max_recursion_steps": 1}),
    Case("delay-until-recursion-waits", one(entry("A", ["sword"], content="text"),
                                            entry("D", ["sword"], delay_until_recursion=1)),
         ["sword"], {"A", "D"}, {"D": "LOREBOOK_KEY_MATCH"}, check=_detail("D", **{"pass": 1})),
    Case("delay-until-recursion-no-pass", one(entry("D", ["sword"], delay_until_recursion=1)), ["sword"], set(),
         {"D": "LOREBOOK_DELAY_UNTIL_RECURSION"}),
    Case("delay-until-recursion-levels",
         one(entry("A", ["sword"], content="x"), entry("L1", ["sword"], delay_until_recursion=1, content="y"),
             entry("L2", ["sword"], delay_until_recursion=2)),
         ["sword"], {"A", "L1", "L2"}, {},
         check=lambda r: r.trace_for("L1").detail["pass"] < r.trace_for("L2").detail["pass"]),
    # ------------------------------------------------------------ inclusion groups
    Case("group-override-highest-order",
         one(entry("lo", ["x"], group="g", group_override=True, order=1),
             entry("hi", ["x"], group="g", group_override=True, order=5), entry("plain", ["x"], group="g", order=9)),
         ["x"], {"hi"}, {"lo": "LOREBOOK_GROUP_LOST", "plain": "LOREBOOK_GROUP_LOST"},
         check=_group_winner("plain", "hi", "override")),
    Case("group-weight-zero-loses",
         one(entry("zero", ["x"], group="g", group_weight=0, order=9), entry("full", ["x"], group="g")),
         ["x"], {"full"}, {"zero": "LOREBOOK_GROUP_LOST"}, check=_group_winner("zero", "full", "weight")),
    Case("group-unmatched-member-does-not-compete",
         one(entry("a", ["x"], group="g"), entry("b", ["y"], group="g")),
         ["x"], {"a"}, {"b": "LOREBOOK_NOT_MATCHED"}),
    Case("group-already-satisfied",
         one(entry("c", constant=True, group="g", content="mentions smith"), entry("r", ["smith"], group="g")),
         ["x"], {"c"}, {"r": "LOREBOOK_GROUP_ALREADY_SATISFIED"}),
    Case("group-scoring",
         one(entry("one", ["x", "q"], group="g", order=9), entry("two", ["x", "y"], group="g")),
         ["x y"], {"two"}, {"one": "LOREBOOK_GROUP_LOST"}, settings={"use_group_scoring": True},
         check=_group_winner("one", "two", "score")),
    Case("group-scoring-entry-override",
         one(entry("one", ["x"], group="g", use_group_scoring=True, group_override=True, order=9),
             entry("two", ["x", "y"], group="g", use_group_scoring=True)),
         ["x y"], {"two"}, {"one": "LOREBOOK_GROUP_LOST"}),
    Case("groups-comma-separated",
         one(entry("a", ["x"], group="g1, g2", group_override=True), entry("b", ["x"], group="g2"),
             entry("c", ["x"], group="g3")),
         ["x"], {"a", "c"}, {"b": "LOREBOOK_GROUP_LOST"}),
    # ------------------------------------------------------------ timed effects
    Case("delay-not-reached", one(entry(1, ["x"], delay=5)), ["x", "y", "x"], set(), {1: "LOREBOOK_DELAY"}),
    Case("delay-reached", one(entry(1, ["x"], delay=3)), ["x", "y", "x"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("sticky-from-metadata", one(entry("s", ["dragon"], sticky=3)), ["a", "b", "c", "d"], {"s"},
         {"s": "LOREBOOK_STICKY"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"sticky": {"book.s": {"start": 2, "end": 5}}}}}),
    Case("sticky-chat-not-advanced", one(entry("s", ["dragon"], sticky=3)), ["a", "b"], set(),
         {"s": "LOREBOOK_NOT_MATCHED"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"sticky": {"book.s": {"start": 2, "end": 5}}}}}),
    Case("sticky-expired", one(entry("s", ["dragon"], sticky=3)), ["a", "b", "c", "d", "e"], set(),
         {"s": "LOREBOOK_NOT_MATCHED"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"sticky": {"book.s": {"start": 2, "end": 5}}}}}),
    Case("cooldown-active", one(entry("c", ["x"], cooldown=3)), ["x", "x", "x"], set(), {"c": "LOREBOOK_COOLDOWN"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"cooldown": {"book.c": {"start": 2, "end": 5}}}}}),
    Case("cooldown-over", one(entry("c", ["x"], cooldown=3)), ["x", "x", "x", "x", "x"], {"c"},
         {"c": "LOREBOOK_KEY_MATCH"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"cooldown": {"book.c": {"start": 2, "end": 5}}}}}),
    Case("sticky-end-starts-cooldown", one(entry("s", ["x"], sticky=2, cooldown=2)), ["x", "x", "x", "x"], set(),
         {"s": "LOREBOOK_COOLDOWN"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"sticky": {"book.s": {"start": 2, "end": 4}}}}}),
    Case("sticky-wins-its-group",
         one(entry("s", ["dragon"], sticky=3, group="g"), entry("o", ["x"], group="g", group_override=True, order=999)),
         ["x", "x", "x", "x"], {"s"}, {"s": "LOREBOOK_STICKY", "o": "LOREBOOK_GROUP_LOST"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"sticky": {"book.s": {"start": 2, "end": 6}}}}},
         check=_group_winner("o", "s", "sticky")),
    Case("sticky-skips-probability", one(entry("s", ["dragon"], sticky=3, probability=0)), ["a", "b", "c", "d"],
         {"s"}, {"s": "LOREBOOK_STICKY"},
         kwargs={"chat_metadata": {"timedWorldInfo": {"sticky": {"book.s": {"start": 2, "end": 6}}}}}),
    Case("sticky-beats-cooldown", one(entry("s", ["dragon"], sticky=3, cooldown=2)), ["a", "b", "c", "d"],
         {"s"}, {"s": "LOREBOOK_STICKY"},
         kwargs={"chat_metadata": {"timedWorldInfo": {
             "sticky": {"book.s": {"start": 2, "end": 6}}, "cooldown": {"book.s": {"start": 2, "end": 6}}}}}),
    Case("timed-state-written", one(entry("s", ["x"], sticky=2, cooldown=1)), ["x", "y", "x"], {"s"}, {},
         check=_timed_state),
    # ------------------------------------------------------------ min activations
    Case("min-activations-widens", one(entry(1, ["sword"])), ["sword", "a", "b", "c"], {1},
         {1: "LOREBOOK_KEY_MATCH"}, settings={"scan_depth": 1, "min_activations": 1},
         check=_detail(1, depth=3, message_index=0)),
    Case("min-activations-then-recursion",
         one(entry(1, ["sword"], content="forged by the smith"), entry(2, ["smith"], content="an old man")),
         ["sword", "a", "b"], {1, 2}, {2: "LOREBOOK_KEY_MATCH"},
         settings={"scan_depth": 1, "min_activations": 2},
         check=_all(_detail(1, depth=2, **{"pass": 2}), _recursion_from(2, 1, 3))),  # passes: 0, widen, widen, recurse
    Case("min-activations-depth-max", one(entry(1, ["sword"])), ["sword", "a", "b", "c"], set(),
         {1: "LOREBOOK_NOT_MATCHED"},
         settings={"scan_depth": 1, "min_activations": 1, "min_activations_depth_max": 3}),
    Case("min-activations-satisfied-no-widening", one(entry(1, ["sword"]), entry(2, ["axe"])),
         ["axe", "a", "sword"], {1}, {2: "LOREBOOK_NOT_MATCHED"}, settings={"scan_depth": 1, "min_activations": 1}),
    # ------------------------------------------------------------ placement, books, extra text, filters
    Case("placement-order",
         one(entry("b_high", ["x"], order=50), entry("b_low", ["x"], order=10),
             entry("after", ["x"], position=InsertionPosition.AFTER_CHAR),
             entry("d2", ["x"], position=InsertionPosition.AT_DEPTH, depth=2, role=1),
             entry("d0", ["x"], position=InsertionPosition.AT_DEPTH, depth=0, role=2)),
         ["x"], {"b_high", "b_low", "after", "d2", "d0"}, {}, check=_placement),
    Case("role-null-is-system", one(entry(1, ["x"], position=InsertionPosition.AT_DEPTH, role=None)), ["x"], {1},
         {}, check=lambda r: r.activated[0].role == "system"),
    Case("two-books-same-uid", [book(entry(0, ["x"]), name="A"), book(entry(0, ["y"]), name="B")], ["x"], {0}, {},
         check=lambda r: [(t.book, t.book_index, t.code) for t in r.trace] == [
             ("A", 0, "LOREBOOK_KEY_MATCH"), ("B", 1, "LOREBOOK_NOT_MATCHED")]),
    Case("extra-scan-text", one(entry(1, ["omen"])), ["x"], {1}, {1: "LOREBOOK_KEY_MATCH"},
         kwargs={"extra_scan_text": ["[Author's note: a dark omen]"]}, check=_detail(1, source="extra")),
    Case("character-filter-excludes",
         one(entry(1, ["x"], characterFilter={"isExclude": False, "names": ["Other"], "tags": []}),
             entry(2, ["x"], characterFilter={"isExclude": True, "names": ["Other"], "tags": []})),
         ["x"], {2}, {1: "LOREBOOK_FILTERED_CHARACTER", 2: "LOREBOOK_KEY_MATCH"}),
    Case("character-filter-tags",
         one(entry(1, ["x"], characterFilter={"isExclude": True, "names": [], "tags": ["nsfw"]}),
             entry(2, ["x"], characterFilter={"isExclude": False, "names": [], "tags": ["fantasy"]})),
         ["x"], {2}, {1: "LOREBOOK_FILTERED_CHARACTER", 2: "LOREBOOK_KEY_MATCH"},
         kwargs={"character": {"name": "Bot", "tags": ["fantasy", "nsfw"]}}),
    Case("character-filter-name-included",
         one(entry(1, ["x"], characterFilter={"isExclude": False, "names": ["Bot"], "tags": []})),
         ["x"], {1}, {1: "LOREBOOK_KEY_MATCH"}),
    Case("triggers-exclude-normal", one(entry(1, ["x"], triggers=["continue"])), ["x"], set(),
         {1: "LOREBOOK_FILTERED_TRIGGER"}),
    Case("match-persona-description-opt-in",
         one(entry(1, ["knight"], matchPersonaDescription=True), entry(2, ["knight"])),
         ["hello"], {1}, {1: "LOREBOOK_KEY_MATCH", 2: "LOREBOOK_NOT_MATCHED"},
         kwargs={"persona": {"name": "User", "description": "a wandering knight"}},
         check=_detail(1, source="persona_description")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_activation_case(case: Case, rules: str = "loomscope") -> None:
    from engine.schema import Character, Persona

    kwargs = dict(case.kwargs)
    if isinstance(kwargs.get("persona"), dict):
        kwargs["persona"] = Persona(**kwargs["persona"])
    if isinstance(kwargs.get("character"), dict):
        kwargs["character"] = Character(**kwargs["character"])
    kwargs.setdefault("char_name", "Bot")
    result = activate(case.books, chat(*case.messages), WorldInfoSettings(**{"rules": rules, **case.settings}),
                      count_tokens=words, context_limit=case.context_limit, **kwargs)
    assert {a.uid for a in result.activated} == case.active
    for uid, code in case.codes.items():
        rec = result.trace_for(uid)
        assert rec is not None, uid
        assert rec.code == code, (uid, rec.code, rec.detail)
    # every entry of every book has exactly one trace record, in book order
    expected = [(bi, e.uid) for bi, b in enumerate(case.books) for e in b.entries]
    assert [(t.book_index, t.uid) for t in result.trace] == expected
    assert {(t.book_index, t.uid) for t in result.trace if t.activated} == {
        (a.book_index, a.uid) for a in result.activated}
    if case.check is not None:
        outcome = case.check(result)
        assert outcome is None or outcome is True


def test_case_count() -> None:
    assert len(CASES) >= 60


# ----------------------------------------------------------------------------------------------
# The same cases under the ``sillytavern`` rules (the default). Every case above holds there
# too, except these, where SillyTavern 1.12.6 ``world-info.js`` decides otherwise (function and
# lines cited; the ``loomscope`` result above is the deliberate difference).
ST_DIFFERENT: dict[str, tuple[set[Any], dict[Any, str], Callable[[ActivationResult], None] | None]] = {
    # matchKeys (243–277): `(?:^|\W)(key)(?:$|\W)` with JavaScript's ASCII \W, so "т" after
    # "меч" counts as a boundary.
    "cyrillic-whole-word-rejected": ({1}, {1: "LOREBOOK_KEY_MATCH"}, None),
    # matchKeys (251–255): a key of several words is a plain substring even with whole words.
    "multi-word-key-whole-words": ({1}, {1: "LOREBOOK_KEY_MATCH"}, None),
    # checkWorldInfo (3893–3896): "  " is non-empty before trim, trims to "", and matchKeys("")
    # matches every text.
    "blank-keys-only": ({1}, {1: "LOREBOOK_KEY_MATCH"}, _detail(1, key="")),
    # parseRegexFromString (2231–2256) returns null; matchKeys then compares "/([a-z/" as text.
    "invalid-regex-is-diagnostic": ({"ok"}, {"bad": "LOREBOOK_NOT_MATCHED", "ok": "LOREBOOK_KEY_MATCH"},
                                    lambda r: len(r.diagnostics) == 1),
    # checkWorldInfo (4110–4113): only an empty string is skipped when building the prompt;
    # "  " is inserted.
    "empty-content": ({1}, {1: "LOREBOOK_KEY_MATCH"}, None),
    # checkWorldInfo (4017–4035): constants are not protected; B (order 50) is taken first, then
    # A overflows (500 + 600 >= 1000).
    "constant-never-budget-dropped": ({"B"}, {"A": "LOREBOOK_BUDGET", "B": "LOREBOOK_KEY_MATCH"},
                                      lambda r: "drops this constant" in r.trace_for("A").detail["loomscope"]["message"]),
    # checkWorldInfo (4022–4032): `break` on the first overflow: "small" is never tried.
    "budget-keeps-trying-smaller": ({"big1"}, {"big2": "LOREBOOK_BUDGET", "small": "LOREBOOK_BUDGET"}, None),
    "constants-alone-exceed-budget": ({"c1"}, {"c1": "LOREBOOK_CONSTANT", "c2": "LOREBOOK_BUDGET",
                                               "k": "LOREBOOK_BUDGET"}, None),
    # ignore_budget does not exist in 1.12.6: the 900-token entry overflows a 100-token budget.
    "ignore-budget-entry": (set(), {"big": "LOREBOOK_BUDGET", "k": "LOREBOOK_BUDGET"}, None),
    # checkWorldInfo (4001, 4022): in pass 1 the total is count(k's text) + count(c + "\n") >= 100,
    # so the late constant is dropped, not the keyword entry.
    "late-constant-pushes-keyword-out": ({"k"}, {"k": "LOREBOOK_KEY_MATCH", "c": "LOREBOOK_BUDGET"}, None),
    # filterByInclusionGroups (4338): "already activated" compares a's whole group "g1, g2" with
    # "g2", so b wins g2 on its own in the recursion pass.
    "groups-comma-separated": ({"a", "b", "c"}, {"b": "LOREBOOK_KEY_MATCH"}, _detail("b", **{"pass": 1})),
    # checkWorldInfo (4058–4062, 4139–4143): every continuing pass adds a (possibly empty)
    # recursion text, so a min-activations pass is followed by a recursion pass: 0 initial,
    # 1 widen, 2 recurse, 3 widen (sword at depth 2), 4 recurse (smith).
    "min-activations-then-recursion": ({1, 2}, {2: "LOREBOOK_KEY_MATCH"},
                                       _all(_detail(1, depth=2, **{"pass": 3}), _detail(2, from_uid=1, **{"pass": 4}))),
    # checkWorldInfo (4069–4072): widening stops only when depth > depth_max, so depth 4 is
    # scanned and "sword" (depth 3) is found.
    "min-activations-depth-max": ({1}, {1: "LOREBOOK_KEY_MATCH"}, _detail(1, depth=3)),
    # The opt-in card/persona scans are not in 1.12.6.
    "match-persona-description-opt-in": (set(), {1: "LOREBOOK_NOT_MATCHED", 2: "LOREBOOK_NOT_MATCHED"}, None),
}


def _with_hashes(case: Case) -> Case:
    """The case with each stored timed effect carrying its entry's hash.

    SillyTavern finds a stored effect by the entry's hash (``WorldInfoTimedEffects
    #checkTimedEffectOfType``, world-info.js 524); the table writes effects by key only.
    """
    tw = (case.kwargs.get("chat_metadata") or {}).get("timedWorldInfo")
    if not tw:
        return case
    hashes = {f"{b.name}.{e.uid}": entry_hash(e, b) for b in case.books for e in b.entries}
    filled = {kind: {k: {"hash": hashes[k], **v} for k, v in effects.items()} for kind, effects in tw.items()}
    kwargs = {**case.kwargs, "chat_metadata": {"timedWorldInfo": filled}}
    return Case(case.id, case.books, case.messages, case.active, case.codes, case.settings, case.context_limit,
                kwargs, case.check)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_activation_case_sillytavern(case: Case) -> None:
    if case.id in ST_DIFFERENT:
        active, codes, check = ST_DIFFERENT[case.id]
        case = Case(case.id, case.books, case.messages, active, codes, case.settings, case.context_limit,
                    case.kwargs, check)
    test_activation_case(_with_hashes(case), rules="sillytavern")


def test_st_differences_are_all_known_cases() -> None:
    assert set(ST_DIFFERENT) <= {c.id for c in CASES}
