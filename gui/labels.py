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


#: Reason code → a few words for the blocks table's Reason column (the full words, from
#: ``engine.reasons``, are in its tooltip and the Block inspector).
REASON_SHORT: dict[str, str] = {
    "SYSTEM_PROMPT": "protected: system prompt",
    "TOOL_SCHEMAS": "protected: tool schemas",
    "CHARACTER": "protected: character",
    "PERSONA": "protected: persona",
    "LOREBOOK_CONSTANT": "protected: constant entry",
    "PINNED": "pinned by you",
    "CURRENT_INPUT": "protected: your input",
    "INSTRUCTION": "protected: instruction",
    "LOREBOOK_MATCHED": "lorebook key matched",
    "MEMORY": "memory fits",
    "SUMMARY": "summary fits",
    "EXAMPLE_DIALOGUE": "example fits",
    "FITS_BUDGET": "fits the budget",
    "INTERCEPTOR_ADDED": "added by a plugin",
    "MANUAL_EXCLUDED": "excluded by you",
    "HIDDEN": "hidden message",
    "HISTORY_OLDEST_FIRST": "oldest history first",
    "TOOL_GROUP_DROPPED": "with its tool group",
    "TOOL_RESULT_ORPHANED": "result without its call",
    "TOO_LARGE_FOR_BUDGET": "too large to ever fit",
    "EXAMPLES_PUSHED_OUT": "examples go first",
    "LOREBOOK_BUDGET": "over the lorebook budget",
    "LOW_RELEVANCE": "least relevant",
    "PRIORITY_LOWEST_FIRST": "lowest priority first",
    "INTERCEPTOR_REMOVED": "removed by a plugin",
    "OVER_BUDGET_PROTECTED": "protected blocks overflow",
    "SUMMARIZED": "folded into the summary",
    "COMPACTED": "compacted into a summary",
    "CUT": "shortened to fit",
}


def reason_cell(code: str, data: dict | None = None) -> str:
    """The blocks table's Reason cell: a few words, made specific by the block's ``reason_data``.

    ``newer message 55 did not fit`` (history kept contiguous), ``kept for pinned message 7``
    (tool group), ``over lorebook budget: 480 + 60 > 512``; else :data:`REASON_SHORT`'s words.
    """
    if data:
        if data.get("blocked_by_tokens") is not None:
            who = (f"message {data['blocked_by_message']}" if data.get("blocked_by_message") is not None
                   else str(data.get("blocked_by")))
            return f"newer {who} did not fit"
        if data.get("held_by") is not None:
            who = (f"message {data['held_by_message']}" if data.get("held_by_message") is not None
                   else str(data["held_by"]))
            return f"kept for {data.get('held_because', 'pinned')} {who}"
        if code == "LOREBOOK_BUDGET" and {"budget", "used", "tokens"} <= set(data):
            return f"over lorebook budget: {data['used']:,} + {data['tokens']:,} > {data['budget']:,}"
    return REASON_SHORT.get(code) or reason_words(code)


def plain(value: object) -> str:
    """A value as a writer reads it: lists as ``a, b``, strings as they are, dicts as ``k: v``
    (never a Python repr like ``['meadowlark']``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(plain(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')}: {plain(v)}" for k, v in value.items())
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return "" if value is None else str(value)


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
