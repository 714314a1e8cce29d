"""Stable reason codes for every inclusion and exclusion of a prompt block (SPEC §3).

Codes are a public interface (CLI JSON, audit, GUI): extend, never rename. The README's
table is generated from :data:`REASON_CODES`; ``tests/engine/test_codes.py`` pins the list and
``tests/engine/test_reason_corpus.py`` runs the engine over a corpus and fails on any code a
block carries (as its reason or its trace ``code``) that is not listed here.
Lorebook entries that did not activate are not blocks: their codes live in the activation
trace (``engine.lorebook``).
"""

from __future__ import annotations

from typing import Literal

Category = Literal["kept", "excluded", "truncated"]

#: code → (category, meaning in words). The words are what the GUI shows.
REASON_CODES: dict[str, tuple[Category, str]] = {
    # kept
    "SYSTEM_PROMPT": ("kept", "protected: system prompt"),
    "TOOL_SCHEMAS": ("kept", "protected: tool schemas sent with the request"),
    "CHARACTER": ("kept", "protected: character definition"),
    "PERSONA": ("kept", "protected: user persona"),
    "LOREBOOK_CONSTANT": ("kept", "protected: constant (required) lorebook entry"),
    "PINNED": ("kept", "protected: pinned by the user"),
    "CURRENT_INPUT": ("kept", "protected: the current user input"),
    "INSTRUCTION": ("kept", "protected: instruction (post-history, author's note, character's note)"),
    "LOREBOOK_MATCHED": ("kept", "lorebook entry activated by a key and fits the budget"),
    "MEMORY": ("kept", "memory block fits the budget"),
    "SUMMARY": ("kept", "summary block fits the budget"),
    "EXAMPLE_DIALOGUE": ("kept", "example dialogue fits the budget"),
    "FITS_BUDGET": ("kept", "fits the budget"),
    "INTERCEPTOR_ADDED": ("kept", "added by a plugin interceptor and fits the budget"),
    "LOREBOOK_STICKY": ("kept", "lorebook entry still active through its sticky timed effect (no key match needed)"),
    "LOREBOOK_DECORATOR_ACTIVATE": ("kept", "lorebook entry forced on by its @@activate decorator"),
    "LOREBOOK_KEY_MATCH": ("kept", "lorebook trace: a primary key matched (the block's reason is LOREBOOK_MATCHED)"),
    # excluded
    "MANUAL_EXCLUDED": ("excluded", "excluded by the user"),
    "HIDDEN": ("excluded", "hidden message (SillyTavern is_system), never sent"),
    "HISTORY_OLDEST_FIRST": ("excluded", "oldest history removed to fit the budget"),
    "TOOL_GROUP_DROPPED": ("excluded", "removed together with its tool group"),
    "TOOL_RESULT_ORPHANED": ("excluded", "tool result whose call is not in the chat (a provider would reject it)"),
    "TOOL_PAIR_INCOMPLETE": ("excluded", "tool call without all its results, or a result before its call: the "
                                         "whole group is not sent (a provider would reject half a pair)"),
    "TOO_LARGE_FOR_BUDGET": ("excluded", "larger than all the room left after protected blocks; can never fit"),
    "EXAMPLES_PUSHED_OUT": ("excluded", "example dialogue removed first to fit the budget"),
    "LOREBOOK_BUDGET": ("excluded", "lorebook entry activated but over the lorebook token budget"),
    "LOW_RELEVANCE": ("excluded", "least relevant to the recent conversation"),
    "PRIORITY_LOWEST_FIRST": ("excluded", "lowest-priority lorebook/memory block removed to fit the budget"),
    "INTERCEPTOR_REMOVED": ("excluded", "removed by a plugin interceptor"),
    "OVER_BUDGET_PROTECTED": ("excluded", "not sent: the protected blocks alone exceed the budget"),
    # truncated
    "SUMMARIZED": ("truncated", "folded into a summary"),
    "CUT": ("truncated", "shortened to fit"),
}


def reason_words(code: str) -> str:
    """The meaning of ``code`` in words (the code itself when unknown)."""
    return REASON_CODES.get(code, ("kept", code))[1]


def reasons_markdown_table() -> str:
    """The README's reason table: ``| code | status | meaning |`` rows."""
    rows = ["| code | status | meaning |", "|---|---|---|"]
    rows += [f"| `{c}` | {cat} | {text} |" for c, (cat, text) in REASON_CODES.items()]
    return "\n".join(rows)
