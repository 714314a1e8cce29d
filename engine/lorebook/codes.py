"""Stable reason codes of the lorebook activation trace (SPEC §3, FORMATS.md Appendix A).

Codes are a public interface (preview blocks, audit, GUI): extend, never rename.
``tests/engine/lorebook/test_codes.py`` pins the full table.
"""

from __future__ import annotations

from ..vocabulary import trace_codes

#: Every trace code, with its meaning: the trace view of :data:`engine.vocabulary.VOCABULARY`
#: (words and colours for the GUI live there too). Pinned by a test.
TRACE_CODES: dict[str, str] = trace_codes()

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
