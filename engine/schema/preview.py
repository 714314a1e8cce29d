"""The preview result: ``ContextPreview`` (the CLI's ``--format json`` and the API body)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .blocks import BlockOrigin, preview_block_origin
from .trace import TraceRecord


class TokenizerInfo(BaseModel):
    """The tokenizer profile used: its name, whether counts are estimates, and its version."""

    model_config = ConfigDict(frozen=True)

    profile: str
    approximate: bool
    version: str = "1"


class PreviewError(BaseModel):
    """A stable error code with a message (e.g. ``TOKEN_BUDGET_EXCEEDED``)."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class PreviewBlock(BaseModel):
    """One block of the preview, in prompt order, with its fate.

    ``tokens`` is the block's own count including its chat-format overhead (3 per message,
    +1 per ``name``); for truncated blocks ``original_tokens`` gives the count before.
    With a chat-template profile (Llama, Mistral, Qwen, DeepSeek), ``tokens`` is the block's
    exact share of the final prompt and ``template_tokens`` how many of them the template
    added (headers, control tokens, separators); ``None`` for OpenAI accounting.
    ``position`` is the 0-based index in prompt order (all blocks, kept or not).
    ``reason_detail`` is the specific reason in words where the code alone would mislead (a
    small message out while tokens are free, a tool call kept for its pinned result, a lorebook
    entry over the World Info budget); ``reason_data`` holds its figures (tokens, message
    indices; see :func:`engine.shifting.explain.explain_blocks`). Both are ``None`` otherwise.
    ``fit_window`` (chat messages) is the smallest context window in tokens that would send
    this message under the same settings and strategy (``None``: none would; see
    :func:`engine.shifting.fitmap.fit_windows`).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    role: str
    source: str
    position: int
    tokens: int
    status: Literal["kept", "excluded", "truncated"]
    reason: str
    protected: bool
    pinned: bool
    group: str | None = None
    text: str = ""
    name: str | None = None
    original_tokens: int | None = None
    summary_id: str | None = None
    manual_excluded: bool = False
    template_tokens: int | None = None
    message_index: int | None = None
    trace: dict[str, Any] | None = None
    reason_detail: str | None = None
    reason_data: dict[str, Any] | None = None
    fit_window: int | None = None

    @property
    def origin(self) -> BlockOrigin:
        """Who made the block: assembly, a strategy (a summary) or an interceptor (not serialized).

        Derived by :func:`engine.schema.blocks.preview_block_origin` from ``id`` and ``source``,
        so it is the same for a preview read back from JSON; equal to the engine block's
        ``Block.origin``.
        """
        return preview_block_origin(self.id, self.source)


class ContextPreview(BaseModel):
    """What the model would see, and why (SPEC §2, issue #2 item 7).

    Token fields are in tokens of ``tokenizer.profile``. ``budget = context_limit −
    reply_reserve``; ``headroom = budget − safety_margin − prompt_tokens``.
    ``prompt_tokens`` is the exact chat-accounting count of ``messages`` plus the tools block.
    ``overhead_tokens`` are the prompt tokens no block owns (OpenAI: the 3 reply-priming tokens;
    chat templates: BOS, the reply header, turns the template inserts): the ``tokens`` of the
    kept blocks plus ``overhead_tokens`` add up to ``prompt_tokens`` (truncated blocks aside).
    """

    model_config = ConfigDict(frozen=True)

    model: str
    tokenizer: TokenizerInfo
    context_limit: int
    reply_reserve: int
    budget: int
    safety_margin: int
    headroom: int
    prompt_tokens: int
    strategy: str
    overhead_tokens: int = 0
    warnings: list[str] = Field(default_factory=list)
    error: PreviewError | None = None
    blocks: list[PreviewBlock] = Field(default_factory=list)
    lorebook_trace: list[TraceRecord] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    diagnostics: list[str] = Field(default_factory=list)
    #: How ``blocks[*].fit_window`` was computed: ``exact`` (``truncate``/``manual``) or
    #: ``truncate-order`` (another strategy, read by truncate's removal order).
    fit_method: str = "exact"
    #: The strategy's own report (``ShiftResult.info``): for ``compact`` the trigger, target and
    #: summary in use; for ``vector-recall`` the relevance scores. Empty for other strategies.
    strategy_info: dict[str, Any] = Field(default_factory=dict)
