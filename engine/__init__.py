"""Loomscope engine: pure Python (never imports Qt).

Public surface: schema models, tokenizer profiles, shifting, assembly and the pipeline.
"""

from __future__ import annotations

from .errors import ERROR_CODES, BudgetExceededError, LoomscopeError, LoomscopeImportError
from .schema import (
    Block,
    BlockKind,
    Character,
    Chat,
    ChatMessage,
    ContextPreview,
    ContextSettings,
    Lorebook,
    LorebookEntry,
    Persona,
    ShiftResult,
    WorldInfoSettings,
)

__all__ = [
    "ERROR_CODES", "BudgetExceededError", "LoomscopeError", "LoomscopeImportError",
    "Block", "BlockKind", "Character", "Chat", "ChatMessage", "ContextPreview", "ContextSettings",
    "Lorebook", "LorebookEntry", "Persona", "ShiftResult", "WorldInfoSettings",
]
