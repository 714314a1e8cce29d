"""Prompt blocks: the units that assembly produces and shifting keeps or removes."""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .messages import ChatMessage


class BlockKind(StrEnum):
    """What a block is. The GUI groups the budget bar by these."""

    SYSTEM = "system"
    TOOLS = "tools"
    CHARACTER = "character"
    PERSONA = "persona"
    LOREBOOK = "lorebook"
    EXAMPLE = "example"
    MEMORY = "memory"
    SUMMARY = "summary"
    INSTRUCTION = "instruction"
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


class BlockOrigin(StrEnum):
    """Who made a block: the engine sets it, callers never infer it from ids or sources."""

    #: Built from the request by the assembly stages (or the SillyTavern assembly).
    ASSEMBLY = "assembly"
    #: Made by a context strategy (a summary of the messages it replaces).
    STRATEGY = "strategy"
    #: Added by an interceptor plugin (source ``interceptor:<name>``).
    INTERCEPTOR = "interceptor"


#: Source prefix of the blocks an interceptor adds (``interceptor:<name>``).
INTERCEPTOR_SOURCE_PREFIX = "interceptor:"
_ASSEMBLY_ID = re.compile(r"b\d+")


def preview_block_origin(block_id: str, source: str) -> BlockOrigin:
    """The :class:`BlockOrigin` of a preview block, from the fields a stored preview keeps.

    The one place that reads the engine's naming: assembly numbers its blocks ``b0``, ``b1``, …
    in prompt order; the pipeline gives interceptor-added blocks the source
    ``interceptor:<name>`` (ids ``i1``, ``i2``, …); every other block was made by a strategy
    (``s0``, ``sc0``, a plugin strategy's own ids). :attr:`engine.schema.PreviewBlock.origin`
    uses it, so that a preview read back from JSON tells the same.
    """
    if source.startswith(INTERCEPTOR_SOURCE_PREFIX):
        return BlockOrigin.INTERCEPTOR
    return BlockOrigin.ASSEMBLY if _ASSEMBLY_ID.fullmatch(block_id) else BlockOrigin.STRATEGY


class Block(BaseModel):
    """One unit of the prompt, before shifting.

    Attributes
    ----------
    id:
        Unique within one assembly (``"b0"``, ``"b1"``, ... in prompt order).
    kind, role, source:
        What it is, the chat role it is sent as, and a stable origin
        (``system``, ``character:<field>``, ``persona``, ``tools``, ``message:<i>``,
        ``lorebook:<book>:<uid>``, ``memory:<id>``, ``summary:<id>``, ``instruction:<name>``).
    message:
        The provider message this block becomes (OpenAI chat shape); ``None`` for the tools
        block, which is sent as the request's ``tools`` field.
    protected:
        Never removed by any strategy (SPEC §1).
    pinned, manual_excluded, hidden:
        User flags copied from the chat message's ``meta``.
    priority:
        For removable non-history blocks (lorebook, memory): higher survives longer.
    reason:
        The stable reason code for keeping it (``SYSTEM_PROMPT``, ``PINNED``, ...); shifting
        sets exclusion reasons.
    group:
        Tool-group id shared by linked tool calls and results (``None`` when not a tool block).
    history:
        Part of the chat history (removed oldest-first).
    trace:
        Free-form explanation (lorebook activation reason, ...).
    origin:
        Who made the block (:class:`BlockOrigin`): assembly (the default), a strategy (the
        pipeline marks the blocks a strategy adds), or an interceptor.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: BlockKind
    role: str = "system"
    source: str
    message: ChatMessage | None = None
    tools: list[dict[str, Any]] | None = None
    protected: bool = False
    pinned: bool = False
    manual_excluded: bool = False
    hidden: bool = False
    history: bool = False
    priority: float = 0
    reason: str = "FITS_BUDGET"
    group: str | None = None
    message_index: int | None = None
    trace: dict[str, Any] | None = None
    origin: BlockOrigin = BlockOrigin.ASSEMBLY

    def text(self) -> str:
        """The text of the block, for display.

        Message content; for an assistant's tool calls, one ``→ name(arguments)`` line per
        call after the content; JSON of the tool schemas for the ``tools`` block.
        """
        if self.message is not None:
            text = self.message.text()
            calls = [f"→ {c.function.name}({c.function.arguments})" for c in self.message.tool_calls or []]
            legacy = (self.message.model_extra or {}).get("function_call")
            if isinstance(legacy, dict):
                calls.append(f"→ {legacy.get('name', '')}({legacy.get('arguments', '')})")
            return "\n".join([text, *calls]) if text and calls else (text or "\n".join(calls))
        if self.tools is not None:
            return json.dumps(self.tools, ensure_ascii=False, sort_keys=True)
        return ""


class ExcludedBlock(BaseModel):
    """A block removed by shifting, with its stable reason code and its token count."""

    model_config = ConfigDict(frozen=True)

    block_id: str
    reason: str
    tokens: int


class TruncatedBlock(BaseModel):
    """A block compressed instead of dropped.

    ``original_tokens``/``remaining_tokens`` in tokens; ``summary_id`` is the id of the
    summary block it was folded into (``None`` when cut).
    """

    model_config = ConfigDict(frozen=True)

    block_id: str
    reason: str
    original_tokens: int
    remaining_tokens: int
    summary_id: str | None = None


class ShiftResult(BaseModel):
    """Outcome of :func:`engine.shifting.shift_context` (SPEC §3).

    ``kept`` (block ids, original order), ``excluded`` and ``truncated`` partition the input.
    ``total_tokens`` is the final full recount of the kept (and truncated-remaining) blocks.
    ``error`` is ``"TOKEN_BUDGET_EXCEEDED"`` exactly when the protected blocks alone exceed
    the budget; then nothing protected is removed and ``total_tokens`` may exceed it.
    """

    model_config = ConfigDict(frozen=True)

    kept: list[str] = Field(default_factory=list)
    excluded: list[ExcludedBlock] = Field(default_factory=list)
    truncated: list[TruncatedBlock] = Field(default_factory=list)
    total_tokens: int = 0
    budget: int = 0
    protected_tokens: int = 0
    error: str | None = None
    diagnostics: list[str] = Field(default_factory=list)
    kept_reasons: dict[str, str] = Field(default_factory=dict)
    #: Blocks the strategy created (summary blocks), each sent right before the block whose id
    #: ``added_before`` names (``None``: at the end). They are kept and counted in ``total_tokens``.
    added: list[Block] = Field(default_factory=list)
    added_before: dict[str, str | None] = Field(default_factory=dict)
    #: Extra trace entries per block id that the strategy wants shown with the block (merged
    #: into the preview's and the audit's block ``trace``; e.g. ``vector-recall``'s relevance).
    trace_updates: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: The strategy's own report (JSON-able), shown as ``ContextPreview.strategy_info``
    #: (``compact``: trigger, target, the summary used; ``vector-recall``: relevance scores).
    #: A ``"warnings"`` list in it is added to the preview's warnings.
    info: dict[str, Any] = Field(default_factory=dict)
