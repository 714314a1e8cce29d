"""What a World Info trace record says, in words and colours, for the Lorebook tab.

A record is an :class:`engine.lorebook.TraceRecord`: of the current preview (the "In preview" and
"Why" columns) or of the test text (the "Test text" column). The words, categories and status
colours of its code come from the engine's one table, ``engine.vocabulary`` (through
:mod:`gui.words` and :mod:`gui.theme`); this module only picks the short cell labels.
"""

from __future__ import annotations

from engine.lorebook import TraceRecord
from engine.vocabulary import term

from ...theme import status_hex
from ...words import describe_detail, reason_in_words, reason_meaning


def record_status(rec: TraceRecord) -> str:
    """The ``engine.vocabulary`` status key ``rec`` is coloured with (``kept``, ``excluded``, ``inactive``, ...).

    The status of its code; a code the table does not hold: ``kept`` when the entry fired,
    else ``inactive``.
    """
    t = term(rec.code)
    if t is not None:
        return t.status
    return "kept" if rec.activated else "inactive"


def _over_budget(rec: TraceRecord) -> bool:
    # matched but dropped: the one trace code of category "excluded" (LOREBOOK_BUDGET)
    t = term(rec.code)
    return not rec.activated and t is not None and t.category == "excluded"


def status_colour(rec: TraceRecord, dark: bool) -> tuple[str, str]:
    """``(foreground, background)`` colours (``#rrggbb``) of ``rec``'s status cell.

    ``gui.theme.status_hex`` of :func:`record_status`: green when it fired, red when it matched
    but went over the lorebook budget, amber for an invalid key, grey otherwise; ``dark`` picks
    the dark-palette variants.
    """
    return status_hex(record_status(rec), dark)


def fired_text(rec: TraceRecord | None) -> str:
    """The "In preview" cell: ``✓ fired``, ``✗ over budget``, ``– disabled`` or ``– no`` (``""``: no record)."""
    if rec is None:
        return ""
    if rec.activated:
        return "✓ fired"
    if _over_budget(rec):
        return "✗ over budget"
    if rec.code == "LOREBOOK_DISABLED":
        return "– disabled"
    return "– no"


def text_test_words(rec: TraceRecord | None) -> str:
    """The "Test text" cell: ``✓ would fire``, ``✗ over budget`` or ``– <code in words>`` (``""``: no record)."""
    if rec is None:
        return ""
    if rec.activated:
        return "✓ would fire"
    if _over_budget(rec):
        return "✗ over budget"
    return "– " + reason_in_words(rec.code).lower()


def why_text(rec: TraceRecord | None) -> str:
    """The "Why" cell: the trace code in words, then its evidence (``key "x" in message 3 ...``)."""
    if rec is None:
        return ""
    words = reason_in_words(rec.code)
    detail = describe_detail(rec.detail)
    return f"{words}: {detail}" if detail else words


def why_tooltip(rec: TraceRecord) -> str:
    """The tooltip of a trace cell: :func:`why_text`, the code's full meaning, and the code."""
    return f"{why_text(rec)}\n{reason_meaning(rec.code, 'trace')}\n({rec.code})"


def fired_rank(rec: TraceRecord | None) -> int:
    """Sort rank of the "In preview" column: fired 2, over budget 1, other 0, no record −1."""
    if rec is None:
        return -1
    return 2 if rec.activated else (1 if _over_budget(rec) else 0)
