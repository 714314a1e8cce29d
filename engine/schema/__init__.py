"""pydantic v2 models: the one schema for engine inputs and outputs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .blocks import Block, BlockKind, ExcludedBlock, ShiftResult, TruncatedBlock
from .character import Character, DepthPrompt, Persona
from .lorebook import InsertionPosition, Lorebook, LorebookEntry, SelectiveLogic
from .messages import Chat, ChatMessage, MessageMeta, ToolCall, ToolFunction, content_text
from .preview import (
    ContextPreview,
    Explanation,
    FitWindows,
    PreviewBlock,
    PreviewChanges,
    PreviewError,
    ReasonDetails,
    SentMessage,
    TokenizerInfo,
    preview_changes,
)
from .request import DEFAULT_SYSTEM_PROMPT, MemoryItem, PreviewRequest
from .settings import DEFAULT_TEMPLATE, ContextSettings, WorldInfoSettings
from .sillytavern import (
    AuthorNote,
    ContextTemplate,
    InstructTemplate,
    PromptDefinition,
    PromptOrderItem,
    SillyTavernSetup,
    SystemPromptPreset,
    TextCompletionSetup,
)

if TYPE_CHECKING:
    from .audit import PromptContextAudit
    from .progress import ProgressEvent

#: Models only generation, the library and the API use load on first use (a preview builds neither).
_LAZY = {"PromptContextAudit": "engine.schema.audit", "ProgressEvent": "engine.schema.progress"}


def __getattr__(name: str) -> object:
    """Resolve the lazily imported models listed in ``_LAZY``."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.schema' has no attribute {name!r}")

    return getattr(importlib.import_module(module), name)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "DEFAULT_TEMPLATE",
    "AuthorNote",
    "Block",
    "BlockKind",
    "Character",
    "Chat",
    "ChatMessage",
    "ContextPreview",
    "ContextSettings",
    "ContextTemplate",
    "DepthPrompt",
    "ExcludedBlock",
    "Explanation",
    "FitWindows",
    "InsertionPosition",
    "InstructTemplate",
    "Lorebook",
    "LorebookEntry",
    "MemoryItem",
    "MessageMeta",
    "Persona",
    "PreviewBlock",
    "PreviewChanges",
    "PreviewError",
    "PreviewRequest",
    "ProgressEvent",
    "PromptContextAudit",
    "PromptDefinition",
    "PromptOrderItem",
    "ReasonDetails",
    "SelectiveLogic",
    "SentMessage",
    "ShiftResult",
    "SillyTavernSetup",
    "SystemPromptPreset",
    "TextCompletionSetup",
    "TokenizerInfo",
    "ToolCall",
    "ToolFunction",
    "TruncatedBlock",
    "WorldInfoSettings",
    "content_text",
    "preview_changes",
]
