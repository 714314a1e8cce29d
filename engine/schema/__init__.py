"""pydantic v2 models: the one schema for engine inputs and outputs."""

from __future__ import annotations

from .audit import PromptContextAudit
from .blocks import Block, BlockKind, ExcludedBlock, ShiftResult, TruncatedBlock
from .character import Character, DepthPrompt, Persona
from .lorebook import InsertionPosition, Lorebook, LorebookEntry, SelectiveLogic
from .messages import Chat, ChatMessage, MessageMeta, ToolCall, ToolFunction, content_text
from .preview import ContextPreview, PreviewBlock, PreviewError, TokenizerInfo
from .progress import ProgressEvent
from .request import DEFAULT_SYSTEM_PROMPT, MemoryItem, PreviewRequest
from .settings import DEFAULT_TEMPLATE, ContextSettings, WorldInfoSettings
from .sillytavern import AuthorNote, PromptDefinition, PromptOrderItem, SillyTavernSetup

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
    "DepthPrompt",
    "ExcludedBlock",
    "InsertionPosition",
    "Lorebook",
    "LorebookEntry",
    "MemoryItem",
    "MessageMeta",
    "Persona",
    "PreviewBlock",
    "PreviewError",
    "PreviewRequest",
    "ProgressEvent",
    "PromptContextAudit",
    "PromptDefinition",
    "PromptOrderItem",
    "SelectiveLogic",
    "ShiftResult",
    "SillyTavernSetup",
    "TokenizerInfo",
    "ToolCall",
    "ToolFunction",
    "TruncatedBlock",
    "WorldInfoSettings",
    "content_text",
]
