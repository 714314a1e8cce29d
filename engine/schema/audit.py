"""``PromptContextAudit``: what one generation actually sent, and how it ended (SPEC §6).

An audit is created (status ``pending``) before any network call and closed with a terminal
status ``completed``, ``failed`` or ``cancelled``. It never holds the upstream response body
or an API key: failures are recorded as a normalized ``error_code`` (see
:data:`engine.errors.ERROR_CODES`) and a message written by Loomscope itself.
Only the last terminal audit of each chat is stored (``engine.storage.Store.audits.put``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from .preview import FitWindows, PreviewBlock, ReasonDetails, RowFigures, TokenizerInfo

AuditStatus = Literal["pending", "completed", "failed", "cancelled"]


class PromptContextAudit(RowFigures):
    """The record of one generation.

    Attributes
    ----------
    generation_id:
        Unique id of this generation (hex UUID4).
    chat_id:
        The library chat it belongs to.
    provider:
        The provider endpoint, as ``scheme://host[:port]/path`` (credentials and query removed).
    model:
        Model name sent to the provider.
    status:
        ``pending`` while running; then ``completed``, ``failed`` or ``cancelled``.
    error_code:
        Normalized code (``PROVIDER_TIMEOUT``, ``TOKEN_BUDGET_EXCEEDED``, ``CANCELLED``, ...) or
        ``None`` when completed.
    error_message:
        Loomscope's own one-line explanation (never the upstream body).
    created_at, finished_at:
        UTC timestamps; ``finished_at`` is ``None`` while pending.
    context_limit, reply_reserve, budget, safety_margin, prompt_tokens, headroom:
        In tokens of ``tokenizer.profile`` (``budget = context_limit − reply_reserve``,
        ``headroom = budget − safety_margin − prompt_tokens``).
    strategy:
        Context strategy name used for shifting.
    tokenizer:
        Profile name, whether counts are approximate, and the profile version.
    blocks:
        Every prompt block in actual order, with tokens, status and stable reason (as in the
        preview).
    provider_messages:
        The final messages sent (OpenAI chat shape), after interceptors and the final shift.
    tools:
        The tool schemas sent with the request (empty when none).
    interceptor_diagnostics:
        What plugin interceptors and the host checks after them reported.
    warnings:
        Preview warnings (unknown model, approximate profile, ...).
    reply_chars:
        Length of the reply text in characters (``None`` unless completed).
    finish_reason:
        The provider's ``finish_reason`` (``stop``, ``length``, ``tool_calls``) when completed.
    usage:
        The provider's reported token usage (``prompt_tokens``, ``completion_tokens``,
        ``total_tokens``) when it sent one; integers only.
    request_params:
        The request's fields other than ``messages`` and ``tools``, as sent: ``model``,
        ``stream`` and the reply limit carrying the reply reserve (``max_tokens`` or
        ``max_completion_tokens``, in tokens); empty when nothing was sent.
    compaction:
        The compaction record (strategy ``compact``), see below.
    """

    model_config = ConfigDict(frozen=True)

    generation_id: str
    chat_id: str
    provider: str
    model: str
    status: AuditStatus = "pending"
    error_code: str | None = None
    error_message: str | None = None
    created_at: datetime
    finished_at: datetime | None = None
    context_limit: int
    reply_reserve: int
    budget: int = 0
    safety_margin: int = 0
    prompt_tokens: int
    headroom: int = 0
    strategy: str
    tokenizer: TokenizerInfo
    blocks: list[PreviewBlock] = Field(default_factory=list)
    provider_messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    interceptor_diagnostics: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    reply_chars: int | None = None
    finish_reason: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    request_params: dict[str, Any] = Field(default_factory=dict)
    #: Which SillyTavern path the request took (``chat_completion`` / ``text_completion``) and,
    #: for Text Completion, the exact prompt string and stop strings sent (SPEC §9.1).
    api: Literal["chat_completion", "text_completion"] = "chat_completion"
    prompt: str | None = None
    stop: list[str] = Field(default_factory=list)
    #: What compaction did before this request (strategy ``compact``; see
    #: ``engine.compaction.run``): ``status``, the summary id and the message ``range`` it
    #: replaced, ``attempts``, ``error_code``, ``fallback``; ``None`` for other strategies.
    compaction: dict[str, Any] | None = None
    #: Per row of ``blocks``: the preview's fit windows and specific reasons when it was sent
    #: (as :attr:`engine.schema.preview.ContextPreview.fit_windows` / ``reason_details``; in JSON
    #: each row's ``fit_window``, ``reason_detail`` and ``reason_data``).
    fit_windows: FitWindows = Field(default_factory=lambda: FitWindows.none(0), exclude=True)
    reason_details: ReasonDetails = Field(default_factory=lambda: ReasonDetails.none(0), exclude=True)

