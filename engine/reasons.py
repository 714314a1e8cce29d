"""Stable reason codes for every inclusion and exclusion of a prompt block (SPEC §3).

Codes are a public interface (CLI JSON, audit, GUI): extend, never rename; add them to
:mod:`engine.vocabulary`, the one table of codes, words and colours. The documentation's
table is generated from :data:`REASON_CODES`; ``tests/engine/test_codes.py`` pins the list and
``tests/engine/test_reason_corpus.py`` runs the engine over a corpus and fails on any code a
block carries (as its reason or its trace ``code``) that is not listed here.
Lorebook entries that did not activate are not blocks: their codes live in the activation
trace (``engine.lorebook``).
"""

from __future__ import annotations

from typing import Literal

from .vocabulary import reason_codes

Category = Literal["kept", "excluded", "truncated"]

#: code → (category, meaning in words): the block-reason view of :data:`engine.vocabulary.VOCABULARY`
#: (where the GUI's short words and the status colours also live).
REASON_CODES: dict[str, tuple[Category, str]] = reason_codes()



def reasons_markdown_table() -> str:
    """The reason table of ``docs/shifting.md``: ``| code | status | meaning |`` rows."""
    rows = ["| code | status | meaning |", "|---|---|---|"]
    rows += [f"| `{c}` | {cat} | {text} |" for c, (cat, text) in REASON_CODES.items()]
    return "\n".join(rows)
