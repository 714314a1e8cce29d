"""World Info contents go through SillyTavern's whole macro engine before the budget and recursion.

SillyTavern 1.12.6 ``checkWorldInfo`` (world-info.js 4026–4028): ``entry.content =
substituteParams(entry.content)`` for each entry that passed its probability roll, before its
tokens are added to the budget total and before its text enters the recursion buffer. The
substituted texts below were produced by ``substituteParams`` → ``evaluateMacros`` under Node
(user ``Ana``, char ``Mira``, persona ``A sailor.``, description ``Mira is a mage.``).
"""

from __future__ import annotations

from engine.assembly.macros import MacroContext, macro_function
from engine.lorebook import activate
from engine.schema import WorldInfoSettings

from ._helpers import book, chat, entry, words


def _run(entries, *, variables=None, settings=None, context_limit=10_000):
    ctx = MacroContext(user="Ana", char="Mira", values={"persona": "A sailor.", "description": "Mira is a mage."},
                       variables=variables if variables is not None else {})
    r = activate([book(*entries)], chat("hello there"), WorldInfoSettings(rules="sillytavern", **(settings or {})),
                 count_tokens=words, context_limit=context_limit, user_name="Ana", char_name="Mira",
                 macros=macro_function(ctx))
    return r, ctx


def test_comment_text_never_triggers_recursion() -> None:
    r, _ = _run([entry("a", [], "The castle stands.{{// the dragon sleeps below}}", constant=True),
                 entry("b", ["dragon"], "Dragon lore.")], settings={"recursive": True})
    assert {str(a.uid): a.content for a in r.activated} == {"a": "The castle stands."}
    assert r.trace_for("b").code == "LOREBOOK_NOT_MATCHED"


def test_comment_text_costs_no_budget() -> None:
    # budget 25 % of 100 = 25 words; the comment alone is 41
    r, _ = _run([entry("a", [], "a b c{{// " + "w " * 40 + "}}", constant=True)],
                settings={"budget_percent": 25}, context_limit=100)
    assert [(a.content, a.tokens) for a in r.activated] == [("a b c", 3)]


def test_getvar_value_enters_recursion() -> None:
    r, _ = _run([entry("a", [], "Mood: {{getvar::mood}}", constant=True), entry("c", ["angry"], "Anger lore.")],
                  variables={"mood": "angry"}, settings={"recursive": True})
    assert {str(a.uid): a.content for a in r.activated} == {"a": "Mood: angry", "c": "Anger lore."}
    assert r.trace_for("c").detail["source"] == "recursion"


def test_trim_newline_persona_description() -> None:
    r, _ = _run([entry("a", [], "\n{{trim}}\nHe knows {{persona}}.{{newline}}{{description}}", constant=True)])
    assert [a.content for a in r.activated] == ["He knows A sailor..\nMira is a mage."]


def test_setvar_in_one_entry_is_read_by_a_later_one() -> None:
    """Entries are substituted in pass order (order 200 before 100), sharing chat_metadata.variables."""
    r, ctx = _run([entry("b", [], "Seen: {{getvar::seen}}", constant=True, order=100),
                   entry("a", [], "{{setvar::seen::yes}}Gate.", constant=True, order=200)])
    assert {str(a.uid): a.content for a in r.activated} == {"a": "Gate.", "b": "Seen: yes"}
    assert ctx.variables == {"seen": "yes"}


def test_without_macros_only_names_are_substituted() -> None:
    r = activate([book(entry("a", [], "{{user}}{{// x}}", constant=True))], chat("hi"),
                 WorldInfoSettings(rules="sillytavern"), count_tokens=words, context_limit=10_000,
                 user_name="Ana", char_name="Mira")
    assert [a.content for a in r.activated] == ["Ana{{// x}}"]
