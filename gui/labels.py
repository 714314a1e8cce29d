"""Words and colours for engine codes and kinds (presentation only; the engine owns the codes)."""

from __future__ import annotations

#: Block kind → short label and a glyph shown as its icon.
KIND_LABELS: dict[str, tuple[str, str]] = {
    "system": ("System", "⚙"),
    "tools": ("Tools", "⚒"),
    "character": ("Character", "☺"),
    "persona": ("Persona", "☻"),
    "lorebook": ("Lorebook", "§"),
    "example": ("Example", "✎"),
    "memory": ("Memory", "◈"),
    "summary": ("Summary", "Σ"),
    "instruction": ("Instruction", "➤"),
    "message": ("Message", "✉"),
    "tool_call": ("Tool call", "ƒ"),
    "tool_result": ("Tool result", "↩"),
}

#: Budget-bar groups (issue 6 item 3), in drawing order, with their colours.
BUDGET_GROUPS: tuple[tuple[str, str], ...] = (
    ("system", "#6c7a89"),
    ("character", "#8e6cc0"),
    ("persona", "#c06c9e"),
    ("lorebook", "#d09a3a"),
    ("memory", "#3a9fd0"),
    ("history", "#4caf7a"),
    ("summary", "#2f8f8f"),
)

#: Block kind → budget-bar group.
KIND_GROUP: dict[str, str] = {
    "system": "system", "tools": "system", "instruction": "system",
    "character": "character", "example": "character",
    "persona": "persona",
    "lorebook": "lorebook",
    "memory": "memory",
    "summary": "summary",
    "message": "history", "tool_call": "history", "tool_result": "history",
}

RESERVE_COLOR = "#b0b7c3"
SAFETY_COLOR = "#d8c47a"
FREE_COLOR = "#eef1f4"
CUT_COLOR = "#d9534f"

#: Status → (foreground, background) colours in the blocks table and chat view.
STATUS_COLORS: dict[str, tuple[str, str]] = {
    "kept": ("#1e5e36", "#e7f5ec"),
    "excluded": ("#8a1f1c", "#fbe9e8"),
    "truncated": ("#7a5a00", "#fff4d6"),
    "summarized": ("#145a6b", "#e1f3f7"),
}

#: Stable reason codes (SPEC §3) → words. Unknown codes show as the code itself.
REASON_WORDS: dict[str, str] = {
    "SYSTEM_PROMPT": "system prompt (protected)",
    "CHARACTER": "character card (protected)",
    "PERSONA": "persona (protected)",
    "LOREBOOK_CONSTANT": "constant lorebook entry (protected)",
    "PINNED": "pinned by you (protected)",
    "CURRENT_INPUT": "current user input (protected)",
    "INSTRUCTION": "instruction (protected)",
    "TOOLS": "tool schemas (protected)",
    "TOOL_SCHEMAS": "tool schemas (protected)",
    "AUTHOR_NOTE": "author's note (protected)",
    "POST_HISTORY": "post-history instructions (protected)",
    "LOREBOOK_MATCHED": "lorebook keyword matched",
    "MEMORY": "memory block",
    "SUMMARY": "summary of older history",
    "FITS_BUDGET": "fits the budget",
    "EXAMPLE": "example dialogue",
    "MANUAL_EXCLUDED": "excluded by you",
    "HIDDEN": "hidden message",
    "HISTORY_OLDEST_FIRST": "oldest history dropped to fit",
    "TOOL_GROUP_DROPPED": "its tool group was dropped",
    "LOREBOOK_BUDGET": "over the lorebook budget",
    "LOW_RELEVANCE": "low relevance to the conversation",
    "PRIORITY_LOWEST_FIRST": "lowest priority dropped to fit",
    "EXAMPLES_FIRST": "example dialogue dropped first",
    "SUMMARIZED": "folded into a summary",
    "CUT": "cut to fit",
    "COMPACTED": "compacted into a summary",
}


def reason_words(code: str) -> str:
    """Words for a reason code: the engine's table (``engine.reasons``), then ours, then the code."""
    from engine.reasons import REASON_CODES

    if code in REASON_CODES:
        return REASON_CODES[code][1]
    return REASON_WORDS.get(code, code.replace("_", " ").lower())


def kind_label(kind: str) -> str:
    """``"✉ Message"``-style label for a block kind (glyphs that common fonts carry)."""
    label, glyph = KIND_LABELS.get(kind, (kind.title(), "•"))
    return f"{glyph} {label}"


def display_status(status: str, reason: str) -> str:
    """``summarized`` for truncated blocks folded into a summary, else the status itself."""
    if status == "truncated" and reason in ("SUMMARIZED", "COMPACTED"):
        return "summarized"
    return status

#: Markers (glyphs present in DejaVu Sans / common UI fonts; no emoji font needed).
PROTECTED_MARK = "⚷"
PINNED_MARK = "⚑"
GROUP_MARK = "↔"
EXCLUDE_MARK = "⊘"
