"""Labels and colours for block kinds, budget-bar groups and markers (presentation only).

Codes (reasons, trace and lint codes) and status colours are the engine's: ``engine.vocabulary``,
read through :mod:`gui.words` and :mod:`gui.theme`.
"""

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


#: Markers (glyphs present in DejaVu Sans / common UI fonts; no emoji font needed).
PROTECTED_MARK = "⚷"
PINNED_MARK = "⚑"
GROUP_MARK = "↔"
EXCLUDE_MARK = "⊘"

#: The markers by name, as the Block and Audit inspectors label badges.
MARKS: dict[str, str] = {
    "protected": PROTECTED_MARK,
    "pinned": PINNED_MARK,
    "group": GROUP_MARK,
    "excluded": EXCLUDE_MARK,
}
