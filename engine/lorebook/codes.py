"""Stable reason codes of the lorebook activation trace (SPEC §3, FORMATS.md Appendix A).

Codes are a public interface (preview blocks, audit, GUI): extend, never rename.
``tests/engine/lorebook/test_codes.py`` pins the full table.
"""

from __future__ import annotations

#: Every trace code, with its meaning. Pinned by a test.
TRACE_CODES: dict[str, str] = {
    # activated (kept reasons of lorebook blocks)
    "LOREBOOK_CONSTANT": "constant entry: always active, required (never dropped for the budget)",
    "LOREBOOK_KEY_MATCH": "a primary key matched (key, message index, depth, recursion pass given)",
    "LOREBOOK_STICKY": "sticky timed effect still running: active without a key match",
    "LOREBOOK_DECORATOR_ACTIVATE": "the content starts with the @@activate decorator",
    # not activated
    "LOREBOOK_NOT_MATCHED": "no primary key found in the scanned text",
    "LOREBOOK_DISABLED": "the entry is disabled",
    "LOREBOOK_NO_KEYS": "a non-constant entry without (usable) primary keys never fires",
    "LOREBOOK_SECONDARY_FAILED": "a primary key matched but the secondary keys' logic was not satisfied",
    "LOREBOOK_PROBABILITY": "matched, but the seeded probability roll failed (seed and roll given)",
    "LOREBOOK_BUDGET": "matched, but dropped because the lorebook token budget was full (entries are "
                       "taken by priority: order descending, then book order, then uid; constants never "
                       "dropped)",
    "LOREBOOK_COOLDOWN": "suppressed by a running cooldown timed effect",
    "LOREBOOK_DELAY": "suppressed: the chat has fewer messages than the entry's delay",
    "LOREBOOK_DELAY_UNTIL_RECURSION": "only activates in a recursion pass (of its level), none reached",
    "LOREBOOK_EXCLUDED_FROM_RECURSION": "non-recursable entry: its key appeared only in other entries' content",
    "LOREBOOK_GROUP_LOST": "lost its inclusion group to another entry (winner and mode given)",
    "LOREBOOK_GROUP_ALREADY_SATISFIED": "its inclusion group already has an active entry from an earlier pass",
    "LOREBOOK_INVALID_KEY": "an invalid regex key (diagnostic given) and no other key matched",
    "LOREBOOK_EMPTY": "matched, but its content is empty after macros and decorators",
    "LOREBOOK_FILTERED_CHARACTER": "filtered out by its character/tag filter",
    "LOREBOOK_FILTERED_TRIGGER": "its generation-type triggers exclude this generation type",
    "LOREBOOK_DECORATOR_SUPPRESS": "the content starts with the @@dont_activate decorator",
    "LOREBOOK_REGEX_TIMEOUT": "a regex key ran out of its time limit (regex_timeout_ms per search, "
                              "regex_total_timeout_ms per activation) and counts as not matching; "
                              "the diagnostic names the key",
    "LOREBOOK_DUPLICATE_BOOK": "this book repeats another attached book (same name, keys and content, "
                               "e.g. a world file exported from the card's embedded book); its entries "
                               "activate once, under that book",
}

#: Codes of activated entries (``ActivatedEntry.reason`` uses the block-reason names below).
ACTIVATED_CODES: frozenset[str] = frozenset(
    {"LOREBOOK_CONSTANT", "LOREBOOK_KEY_MATCH", "LOREBOOK_STICKY", "LOREBOOK_DECORATOR_ACTIVATE"}
)

#: Block reason (SPEC §3 kept reasons) for each activation code.
BLOCK_REASONS: dict[str, str] = {
    "LOREBOOK_CONSTANT": "LOREBOOK_CONSTANT",
    "LOREBOOK_KEY_MATCH": "LOREBOOK_MATCHED",
    "LOREBOOK_STICKY": "LOREBOOK_STICKY",
    "LOREBOOK_DECORATOR_ACTIVATE": "LOREBOOK_DECORATOR_ACTIVATE",
}
