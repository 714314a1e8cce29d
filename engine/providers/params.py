"""Which request field carries the reply reserve: ``max_tokens`` or ``max_completion_tokens``.

The reply reserve the budget set aside (``ContextPreview.reply_reserve``, in tokens) is sent with
every generation, so that the provider never writes a reply longer than the room left for it:
prompt tokens ≤ context limit − reply reserve, reply ≤ reply reserve.

OpenAI API reference ("Create chat completion"): ``max_tokens`` is deprecated in favour of
``max_completion_tokens`` and "is not compatible with o-series models"; the reasoning models
(o1, o3, o4-mini, gpt-5 and their dated variants) reject ``max_tokens`` with a 400 error.
Most OpenAI-compatible servers (vLLM, llama.cpp, Ollama, LM Studio, OpenRouter) read only
``max_tokens``. So: ``max_completion_tokens`` for the OpenAI models listed in
:data:`COMPLETION_TOKENS_MODELS` (by name prefix, without a provider prefix such as
``openai/`` — a router takes ``max_tokens``), ``max_tokens`` for every other model. The user
can override the choice per run (``ProviderConfig.reply_limit_param``, ``loomscope generate
--reply-limit-param``): ``both`` sends both fields with the same value, ``none`` sends neither.
"""

from __future__ import annotations

from typing import Literal

ReplyLimitParam = Literal["max_tokens", "max_completion_tokens", "both", "none"]
REPLY_LIMIT_PARAMS: tuple[str, ...] = ("max_tokens", "max_completion_tokens", "both", "none")
#: Request fields that limit the reply (removed from ``extra_body`` when Loomscope sets one).
REPLY_LIMIT_FIELDS: tuple[str, ...] = ("max_tokens", "max_completion_tokens")

#: Model name prefixes (case-insensitive, no provider prefix) that reject ``max_tokens``.
COMPLETION_TOKENS_MODELS: tuple[str, ...] = ("o1", "o3", "o4", "gpt-5", "codex-mini")


def default_reply_limit_param(model: str) -> ReplyLimitParam:
    """The field a model takes for the reply limit: ``max_completion_tokens`` or ``max_tokens``."""
    name = model.strip().lower()
    if "/" not in name and name.startswith(COMPLETION_TOKENS_MODELS):
        return "max_completion_tokens"
    return "max_tokens"


def reply_limit_fields(model: str, reply_reserve: int, override: str | None = None) -> dict[str, int]:
    """The request fields that send ``reply_reserve`` (tokens) to ``model``.

    ``override`` is one of :data:`REPLY_LIMIT_PARAMS` (``None``: the per-model default). A
    reserve of 0 tokens sends nothing (providers reject a limit of 0).

    Raises
    ------
    ValueError
        An unknown ``override``.
    """
    param = override or default_reply_limit_param(model)
    if param not in REPLY_LIMIT_PARAMS:
        raise ValueError(f"unknown reply limit field {param!r} (expected one of {', '.join(REPLY_LIMIT_PARAMS)})")
    if param == "none" or reply_reserve <= 0:  # a limit of 0 tokens is rejected by providers
        return {}
    if param == "both":
        return {"max_tokens": reply_reserve, "max_completion_tokens": reply_reserve}
    return {param: reply_reserve}
