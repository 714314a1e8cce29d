"""What a World Info trace record says, in words and colours, for the Lorebook tab.

A record is an :class:`engine.lorebook.TraceRecord`: of the current preview (the "In preview"
and "Why" columns) or of the test text (the "Test text" column).
"""

from __future__ import annotations

from engine.lorebook import TraceRecord

from ..block_inspector import describe_detail, reason_in_words


def status_colour(rec: TraceRecord, dark: bool) -> tuple[str, str]:
    """``(foreground, background)`` colours (``#rrggbb``) of ``rec``'s status cell.

    Green when it fired, red when it matched but went over the lorebook budget, amber for an
    invalid key, grey otherwise; ``dark`` picks the dark-palette variants.
    """
    if rec.activated:
        return ("#9be3b4", "#1d3b28") if dark else ("#1e5e36", "#e7f5ec")
    if rec.code == "LOREBOOK_BUDGET":
        return ("#ffb3ad", "#4a1f1c") if dark else ("#8a1f1c", "#fbe9e8")
    if rec.code in ("LOREBOOK_INVALID_KEY",):
        return ("#ffd27a", "#4a3b12") if dark else ("#7a5a00", "#fff4d6")
    return ("#b8bec8", "#2a2d33") if dark else ("#5d6470", "#f1f3f5")


def fired_text(rec: TraceRecord | None) -> str:
    """The "In preview" cell: ``✓ fired``, ``✗ over budget``, ``– disabled`` or ``– no`` (``""``: no record)."""
    if rec is None:
        return ""
    if rec.activated:
        return "✓ fired"
    if rec.code == "LOREBOOK_BUDGET":
        return "✗ over budget"
    if rec.code == "LOREBOOK_DISABLED":
        return "– disabled"
    return "– no"


def text_test_words(rec: TraceRecord | None) -> str:
    """The "Test text" cell: ``✓ would fire``, ``✗ over budget`` or ``– <reason>`` (``""``: no record)."""
    if rec is None:
        return ""
    if rec.activated:
        return "✓ would fire"
    if rec.code == "LOREBOOK_BUDGET":
        return "✗ over budget"
    return "– " + reason_in_words(rec.code or "").lower()


def why_text(rec: TraceRecord | None) -> str:
    """The "Why" cell: the trace code in words, then its evidence (``key "x" in message 3 ...``)."""
    if rec is None:
        return ""
    words = reason_in_words(rec.code or "")
    detail = describe_detail(rec.detail)
    return f"{words}: {detail}" if detail else words


def fired_rank(rec: TraceRecord | None) -> int:
    """Sort rank of the "In preview" column: fired 2, over budget 1, other 0, no record −1."""
    if rec is None:
        return -1
    return 2 if rec.activated else (1 if rec.code == "LOREBOOK_BUDGET" else 0)
