"""Case table: each rule where SillyTavern 1.12.6 and the loomscope rules differ, under both.

Every case is written from ``public/scripts/world-info.js`` (and ``script.js``) of SillyTavern
1.12.6; the comment names the function and lines. ``st`` is the expected outcome under
``rules="sillytavern"`` (the default), ``ls`` under ``rules="loomscope"``. Outcomes are the
uids of the inserted entries in insertion order, plus trace codes where they matter. Tokens:
one per word (``_helpers.words``) unless a case says otherwise.

The four examples from the issue, in words:

* equal-order-across-passes: "sword" activates entry 2 (pass 0), whose content "the smith"
  activates entry 1 (pass 1). Both have order 100. SillyTavern places the later one first
  (1, 2); the loomscope rules place equal orders in reverse priority (2, 1).
* character-first-vs-evenly: a global book's entry (order 100) and the character book's entry
  (order 50) both match and only one fits the budget. ``character_first`` (SillyTavern's
  default) ranks the character book first, so its entry is kept; ``evenly`` ranks by order,
  so the global entry is kept.
* exactly-fills-budget: an entry whose text plus its newline costs exactly the budget is
  dropped by SillyTavern (``>=``) and kept by the loomscope rules (``>``).
* scan-depth-0-with-recursion: a constant's content names another entry's key. With scan
  depth 0 SillyTavern scans nothing, not even the recursion buffer, so only the constant is
  active; the loomscope rules still scan recursion text and activate the other entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.lorebook import ActivationResult, activate
from engine.schema import ChatMessage, Lorebook, SelectiveLogic, WorldInfoSettings

from ._helpers import book, chat, entry, tokens_of, words


def chars(text: str) -> int:
    """A tokenizer where a joined text costs more than its parts: one token per character."""
    return len(text)


@dataclass
class Rule:
    id: str
    books: list[Lorebook]
    messages: list[Any]
    st: list[Any]
    ls: list[Any]
    settings: dict[str, Any] = field(default_factory=dict)
    st_codes: dict[Any, str] = field(default_factory=dict)
    ls_codes: dict[Any, str] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    count: Callable[[str], int] = words
    context_limit: int = 10_000
    st_check: Callable[[ActivationResult], Any] | None = None


def _note(uid: Any, text: str) -> Callable[[ActivationResult], Any]:
    def check(r: ActivationResult) -> None:
        assert text in r.trace_for(uid).detail["loomscope"]["message"], r.trace_for(uid).detail
    return check


RULES: list[Rule] = [
    # --- ordering ---------------------------------------------------------------------------
    # checkWorldInfo 4104–4145: allActivatedEntries (insertion order) sorted by order desc, each
    # unshift-ed: equal orders come out in reverse activation order.
    Rule("equal-order-across-passes",
         [book(entry(1, ["smith"]), entry(2, ["sword"], content="the smith"))], ["a sword"],
         st=[1, 2], ls=[2, 1],
         st_check=lambda r: r.rule_differences and r.rule_differences[-1]["what"] == "placement"),
    # same pass: newEntries follow sortedEntries (3985–3990), so the later entry is placed first
    Rule("equal-order-same-pass", [book(entry(1, ["x"]), entry(2, ["x"]))], ["x"], st=[2, 1], ls=[2, 1]),
    # getSortedEntries 3593–3622: character_first = character lore sorted, then global sorted
    Rule("character-first-vs-evenly",
         [book(entry("g", ["x"], order=100, content=tokens_of(4)), name="global"),
          book(entry("c", ["x"], order=50, content=tokens_of(4)), name="char")],
         ["x"], st=["c"], ls=["g"], settings={"budget_cap": 6},
         kwargs={"book_scopes": ["global", "character"]},
         st_codes={"g": "LOREBOOK_BUDGET"}, ls_codes={"c": "LOREBOOK_BUDGET"}),
    Rule("evenly-ranks-by-order",
         [book(entry("g", ["x"], order=100, content=tokens_of(4)), name="global"),
          book(entry("c", ["x"], order=50, content=tokens_of(4)), name="char")],
         ["x"], st=["g"], ls=["g"], settings={"budget_cap": 6, "character_strategy": 0},
         kwargs={"book_scopes": ["global", "character"]}, st_codes={"c": "LOREBOOK_BUDGET"}),
    Rule("global-first",
         [book(entry("c", ["x"], order=100, content=tokens_of(4)), name="char"),
          book(entry("g", ["x"], order=50, content=tokens_of(4)), name="global")],
         ["x"], st=["g"], ls=["c"], settings={"budget_cap": 6, "character_strategy": "global_first"},
         kwargs={"book_scopes": ["character", "global"]}),
    # the book's own ``scope`` field is read when no scopes are given
    Rule("scope-field",
         [book(entry("g", ["x"], order=100, content=tokens_of(4)), name="global"),
          Lorebook(name="char", scope="character", entries=[entry("c", ["x"], order=50, content=tokens_of(4))])],
         ["x"], st=["c"], ls=["g"], settings={"budget_cap": 6}),
    # getSortedEntries 3618: chat lore always goes first
    Rule("chat-lore-first",
         [book(entry("g", ["x"], order=100, content=tokens_of(4)), name="global"),
          book(entry("t", ["x"], order=1, content=tokens_of(4)), name="chat")],
         ["x"], st=["t"], ls=["g"], settings={"budget_cap": 6}, kwargs={"book_scopes": ["global", "chat"]}),
    # --- budget -------------------------------------------------------------------------------
    # checkWorldInfo 4022: `(textToScanTokens + count(newContent)) >= budget`
    Rule("exactly-fills-budget", [book(entry(1, ["x"], content=tokens_of(10)))], ["x"],
         st=[], ls=[1], settings={"budget_cap": 10}, st_codes={1: "LOREBOOK_BUDGET"},
         ls_codes={1: "LOREBOOK_KEY_MATCH"}),
    Rule("one-under-budget", [book(entry(1, ["x"], content=tokens_of(9)))], ["x"],
         st=[1], ls=[1], settings={"budget_cap": 10}),
    # 4022–4032: `break` — no smaller entry is tried after the overflow...
    Rule("overflow-stops",
         [book(entry("big", ["x"], order=3, content=tokens_of(8)), entry("small", ["x"], order=1, content="s"))],
         ["x"], st=[], ls=["small"], settings={"budget_cap": 5},
         st_codes={"big": "LOREBOOK_BUDGET", "small": "LOREBOOK_BUDGET"},
         st_check=_note("small", "stopped at an earlier entry")),
    # ...and 4054–4057: no further recursion once overflowed
    Rule("overflow-stops-recursion",
         [book(entry("a", ["x"], order=3, content="dragon"), entry("b", ["x"], order=2, content=tokens_of(9)),
               entry("d", ["dragon"], order=1, content="d"))],
         ["x"], st=["a"], ls=["d", "a"], settings={"budget_cap": 5},
         st_codes={"d": "LOREBOOK_NOT_MATCHED"}, ls_codes={"d": "LOREBOOK_KEY_MATCH"}),
    # constants are ordinary entries for the budget (no special case in 4001–4036)
    Rule("constant-dropped",
         [book(entry("k", ["x"], order=100, content=tokens_of(4)), entry("c", constant=True, order=1,
                                                                       content=tokens_of(4)))],
         ["x"], st=["k"], ls=["c"], settings={"budget_cap": 6},
         st_codes={"c": "LOREBOOK_BUDGET"}, ls_codes={"c": "LOREBOOK_CONSTANT", "k": "LOREBOOK_BUDGET"},
         st_check=_note("c", "SillyTavern drops this constant over the budget; the loomscope rules keep it")),
    # 4001 + 4139–4143: textToScanTokens counts allActivatedText, which holds only the earlier
    # passes' recursing entries; a preventRecursion entry of pass 0 is not counted in pass 1.
    Rule("total-omits-prevent-recursion",
         [book(entry("p", ["x"], order=3, content=tokens_of(6), prevent_recursion=True),
               entry("r", ["x"], order=2, content="the smith"),
               entry("t", ["smith"], order=1, content="w w w"))],
         ["x"], st=["t", "r", "p"], ls=["r", "p"], settings={"budget_cap": 9},
         ls_codes={"t": "LOREBOOK_BUDGET"}),
    # 4019–4022: the cost is a count of the joined text ("a\n" + "b\n"), not a sum of entries
    Rule("recount-of-joined-text",
         [book(entry("a", ["x"], order=2, content="aaaa"), entry("b", ["x"], order=1, content="bbbb"))],
         ["x"], st=["a"], ls=["b", "a"], settings={"budget_cap": 10}, count=chars,
         st_codes={"b": "LOREBOOK_BUDGET"}),
    # --- scanning -----------------------------------------------------------------------------
    # WorldInfoBuffer.get 204–208: depth <= 0 returns '' (recursion buffer included)
    Rule("scan-depth-0-with-recursion",
         [book(entry("c", constant=True, content="a dragon sleeps"), entry("d", ["dragon"]))],
         ["dragon"], st=["c"], ls=["d", "c"], settings={"scan_depth": 0},
         st_codes={"d": "LOREBOOK_NOT_MATCHED"}, ls_codes={"d": "LOREBOOK_KEY_MATCH"}),
    # WorldInfoTimedEffects #checkDelayEffect 566–581 on chatForWI (script.js 3562: no hidden messages)
    Rule("delay-counts-visible-messages",
         [book(entry(1, ["x"], delay=3))],
         ["a", {"role": "assistant", "content": "hidden", "meta": {"hidden": True}}, "x"],
         st=[], ls=[1], st_codes={1: "LOREBOOK_DELAY"}),
    # script.js 3557–3559: chat[0].mes = substituteParams(chat[0].mes) before scanning
    Rule("first-message-macros", [book(entry(1, ["Alice"]))], ["Hello {{user}}", "hi"],
         st=[1], ls=[], kwargs={"user_name": "Alice"}, settings={"include_names": False}),
    # checkWorldInfo 4066–4081: widening continues while depth <= depth_max
    Rule("min-activations-one-deeper", [book(entry(1, ["sword"]))], ["sword", "a", "b", "c"],
         st=[1], ls=[], settings={"scan_depth": 1, "min_activations": 1, "min_activations_depth_max": 3}),
    # --- keys ---------------------------------------------------------------------------------
    # matchKeys 251–255: a multi-word key is a substring even with whole words
    Rule("multi-word-key-substring", [book(entry(1, ["red dragon"]))], ["two red dragons"], st=[1], ls=[]),
    # matchKeys 258: JavaScript \W is ASCII: "é" is a boundary, "ß" too
    Rule("ascii-word-boundary", [book(entry(1, ["caf"]), entry(2, ["stra"]))], ["un café, die straße"],
         st=[2, 1], ls=[]),
    # parseRegexFromString 2248–2255 returns null on a syntax error; matchKeys compares the text
    Rule("invalid-regex-as-text", [book(entry(1, ["/([a-z/"]))], ["see /([a-z/ here"],
         st=[1], ls=[], ls_codes={1: "LOREBOOK_INVALID_KEY"}),
    # 3893–3896: " " is truthy, trims to "", and matchKeys(text, "") is true
    Rule("space-key-matches-everything", [book(entry(1, [" "]))], ["anything"], st=[1], ls=[],
         ls_codes={1: "LOREBOOK_NO_KEYS"}),
    # matchSecondaryKeys 3921–3953: "" is falsy, so it is a missing secondary key
    Rule("empty-secondary-and-all",
         [book(entry(1, ["x"], secondary_keys=["", "sword"], selective_logic=SelectiveLogic.AND_ALL))],
         ["x sword"], st=[], ls=[1], st_codes={1: "LOREBOOK_SECONDARY_FAILED"}),
    Rule("empty-secondary-not-all",
         [book(entry(1, ["x"], secondary_keys=["sword", ""], selective_logic=SelectiveLogic.NOT_ALL))],
         ["x sword"], st=[1], ls=[], ls_codes={1: "LOREBOOK_SECONDARY_FAILED"}),
    # filterByInclusionGroups 4338: `x.group === key` compares the whole group string
    Rule("group-already-active-whole-string",
         [book(entry("a", ["x"], group="g1, g2", group_override=True, content="the smith"),
               entry("b", ["smith"], group="g2"))],
         ["x"], st=["b", "a"], ls=["a"], ls_codes={"b": "LOREBOOK_GROUP_ALREADY_SATISFIED"}),
    # getScore 336–384 scores the raw keys: "{{char}}" is not substituted there, so A scores 1
    # (a tie with B, decided by weight) where the loomscope rules score it 2 and it wins.
    Rule("group-scoring-raw-keys",
         [book(entry("A", ["{{char}}", "sword"], group="g", group_weight=0),
               entry("B", ["sword"], group="g"))],
         ["Bot has a sword"], st=["B"], ls=["A"], settings={"use_group_scoring": True},
         st_codes={"A": "LOREBOOK_GROUP_LOST"}, ls_codes={"B": "LOREBOOK_GROUP_LOST"},
         st_check=lambda r: r.trace_for("A").detail["mode"] == "weight"),
    # checkWorldInfo 4110–4113: empty content is skipped only when building the prompt; the
    # entry is activated (timed effects are set for it, 4147)
    Rule("empty-content-still-activates", [book(entry(1, ["x"], content="", sticky=2))], ["x"],
         st=[], ls=[], ls_codes={1: "LOREBOOK_EMPTY"},
         st_check=lambda r: (r.trace_for(1).activated and r.trace_for(1).detail["empty_content"]
                             and "book.1" in r.timed_effects["sticky"])),
]


def _run(rule: Rule, rules: str) -> ActivationResult:
    kwargs = {"char_name": "Bot", **rule.kwargs}
    msgs = chat(*rule.messages)
    return activate(rule.books, msgs, WorldInfoSettings(**{**rule.settings, "rules": rules}),
                    count_tokens=rule.count, context_limit=rule.context_limit, **kwargs)


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_sillytavern_rule(rule: Rule) -> None:
    r = _run(rule, "sillytavern")
    assert r.rules == "sillytavern"
    assert [a.uid for a in r.activated] == rule.st
    for uid, code in rule.st_codes.items():
        assert r.trace_for(uid).code == code, (uid, r.trace_for(uid))
    if rule.st_check is not None:
        assert rule.st_check(r) in (None, True)
    # where the outcome differs from the loomscope rules, the trace says so
    ls_active = {a.uid for a in _run(rule, "loomscope").activated}
    for rec in r.trace:
        inserted = rec.uid in {a.uid for a in r.activated}
        if (rec.uid in ls_active) != inserted and not (rec.activated and not inserted):
            assert "loomscope" in rec.detail, rec


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_loomscope_rule(rule: Rule) -> None:
    r = _run(rule, "loomscope")
    assert r.rules == "loomscope" and r.rule_differences == []
    assert [a.uid for a in r.activated] == rule.ls
    for uid, code in rule.ls_codes.items():
        assert r.trace_for(uid).code == code, (uid, r.trace_for(uid))


def test_rules_and_strategy_settings() -> None:
    s = WorldInfoSettings()
    assert s.rules == "sillytavern" and s.character_strategy == "character_first"
    assert [WorldInfoSettings(character_strategy=n).character_strategy for n in (0, 1, 2, "2")] == [
        "evenly", "character_first", "global_first", "global_first"]
    with pytest.raises(ValueError):
        WorldInfoSettings(character_strategy=7)
    with pytest.raises(ValueError):
        WorldInfoSettings(rules="risu")


def test_compare_rules_off_leaves_no_notes() -> None:
    rule = next(r for r in RULES if r.id == "constant-dropped")
    r = activate(rule.books, chat(*rule.messages), WorldInfoSettings(budget_cap=6), count_tokens=words,
                 context_limit=10_000, compare_rules=False)
    assert r.rule_differences == [] and "loomscope" not in r.trace_for("c").detail


def test_hidden_message_not_scanned_and_not_counted() -> None:
    msgs = [ChatMessage(role="user", content="sword"),
            ChatMessage.model_validate({"role": "user", "content": "axe", "meta": {"hidden": True}})]
    r = activate([book(entry(1, ["axe"]), entry(2, ["sword"]))], msgs, WorldInfoSettings(),
                 count_tokens=words, context_limit=10_000)
    assert [a.uid for a in r.activated] == [2]
