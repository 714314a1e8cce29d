"""Loomscope engine: pure Python (never imports Qt).

Public surface: schema models, tokenizer profiles, shifting, assembly and the pipeline.
"""

from __future__ import annotations

import importlib

from .errors import ERROR_CODES, LoomscopeError, LoomscopeImportError
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
    PreviewChanges,
    PreviewRequest,
    ShiftResult,
    WorldInfoSettings,
    preview_changes,
)
from .schema.blocks import BlockOrigin

#: Heavier parts (storage pulls in SQLAlchemy and Alembic, generation httpx) load on first use; so does the
#: audit model, which a preview never builds.
_LAZY = {
    "PromptContextAudit": "engine.schema.audit",
    "Store": "engine.storage", "open_store": "engine.storage",
    "generate": "engine.generation", "generate_and_store": "engine.generation",
    "ProviderConfig": "engine.generation", "GenerationResult": "engine.generation",
    "preview": "engine.pipeline", "prepare": "engine.pipeline", "default_registries": "engine.registries", "Registries": "engine.registries",
    "shift_context": "engine.shifting", "activate": "engine.lorebook",
    "ActivationResult": "engine.lorebook", "TraceRecord": "engine.lorebook", "TRACE_CODES": "engine.lorebook",
    "lint_lorebook": "engine.lorebook", "REASON_CODES": "engine.reasons",
    "load_any": "engine.importers", "load_chat": "engine.importers", "load_character": "engine.importers",
    "load_lorebook": "engine.importers",
    "model_profile_and_limit": "engine.resolve", "ResolvedModel": "engine.resolve",
    "speaker_names": "engine.resolve", "SpeakerNames": "engine.resolve",
    "chat_lorebooks": "engine.resolve", "lorebook_plan": "engine.resolve", "LorebookPlan": "engine.resolve",
    "honours_exclusions": "engine.resolve",
    "lorebook_budget": "engine.resolve",
    "VOCABULARY": "engine.vocabulary", "Term": "engine.vocabulary", "STATUS_COLOURS": "engine.vocabulary",
    "compare_audit_with_preview": "engine.audit_compare", "summarize_comparison": "engine.audit_compare",
    "CompareRow": "engine.audit_compare", "ComparisonSummary": "engine.audit_compare",
    "oldest_fitting_index": "engine.preview_facts", "compaction_marks": "engine.preview_facts",
    "CompactionMarks": "engine.preview_facts",
    "plan_st_export": "engine.st_export", "sync_st_folder": "engine.st_sync",
    "text_completion_title": "engine.assembly.textcompletion",
}


def __getattr__(name: str) -> object:
    """Resolve the lazily imported public names listed in ``_LAZY``."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")

    return getattr(importlib.import_module(module), name)


__all__ = [
    "ERROR_CODES", "LoomscopeError", "LoomscopeImportError",
    "Block", "BlockKind", "BlockOrigin", "Character", "Chat", "ChatMessage", "ContextPreview", "ContextSettings",
    "Lorebook", "LorebookEntry", "Persona", "PreviewChanges", "PreviewRequest", "ShiftResult",
    "WorldInfoSettings", "preview_changes", *_LAZY,
]
