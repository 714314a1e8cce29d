"""Compaction settings and threshold arithmetic (SPEC §4, seed 003).

``effective_trigger = context_limit × (1 − response_buffer) × threshold`` and
``target = context_limit × target_percent``, both in prompt tokens of the active tokenizer
profile and rounded down. With the defaults (8 % buffer, 80 % threshold, 65 % target):
128,000 → trigger 94,208 and target 83,200; 1,000 → 736 and 650.

The settings live in ``ContextSettings.strategy_options`` (``threshold_percent``,
``response_buffer_percent``, ``keep_recent``, ``target_percent``, ``summary_model``,
``summary_cap_tokens``, ``retry_delay_s``, plus ``summary_context_limit``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import SettingsError

if TYPE_CHECKING:  # pragma: no cover
    from ..schema.request import PreviewRequest

#: Key of the host's own values in a strategy's ``options`` (set by the pipeline, never by users).
HOST_KEY = "_host"
#: Where the compaction state lives in the stored chat (``chats.data``; ``Chat`` extra field).
CHAT_KEY = "loomscope_compaction"
#: After this many failed compactions in a row, auto-compaction stops (SPEC §4).
MAX_FAILURES = 3


class CompactionOptions(BaseModel):
    """The ``compact`` strategy's settings, with SPEC §4's defaults.

    Attributes
    ----------
    threshold_percent:
        Share of the effective limit at which compaction starts (80).
    response_buffer_percent:
        Share of the context limit held back for the reply when computing the trigger (8).
    keep_recent:
        Newest messages always kept verbatim (10); a tool group reaching into them stays whole.
    target_percent:
        Share of the raw context limit the prompt must end at or below (65).
    summary_model:
        Model that writes the summary (``None``: the generation's model).
    summary_cap_tokens:
        Longest summary accepted, in tokens (``None``: 10 % of the context limit, 64–8,000).
    summary_context_limit:
        Context window of the summary model in tokens (``None``: the model table's).
    retry_delay_s:
        Seconds to wait before the one retry of a failed summary request (2).
    """

    model_config = ConfigDict(extra="ignore")

    threshold_percent: float = Field(80.0, gt=0, le=100)
    response_buffer_percent: float = Field(8.0, ge=0, lt=100)
    keep_recent: int = Field(10, ge=0, le=10_000)
    target_percent: float = Field(65.0, gt=0, le=100)
    summary_model: str | None = None
    summary_cap_tokens: int | None = Field(None, gt=0)
    summary_context_limit: int | None = Field(None, gt=0)
    retry_delay_s: float = Field(2.0, ge=0, le=600)

    @classmethod
    def from_options(cls, options: dict[str, Any] | None) -> CompactionOptions:
        """Read the options dict (unknown keys ignored).

        Raises ``SettingsError(INVALID_SETTINGS)`` naming the bad option.
        """
        try:
            return cls.model_validate({k: v for k, v in (options or {}).items() if k != HOST_KEY})
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err.get("loc", ())) or "strategy_options"
            raise SettingsError("INVALID_SETTINGS", f"strategy_options.{where}: {err.get('msg')}",
                                file="strategy_options") from None

    def cap_for(self, context_limit: int) -> int:
        """The summary cap in tokens for ``context_limit``."""
        if self.summary_cap_tokens is not None:
            return self.summary_cap_tokens
        return max(64, min(8000, context_limit // 10))


def _frac(value: float) -> Fraction:
    return Fraction(str(value))


def thresholds(context_limit: int, options: CompactionOptions | None = None) -> tuple[int, int]:
    """``(trigger, target)`` in prompt tokens for ``context_limit`` (exact, rounded down).

    >>> thresholds(128_000)
    (94208, 83200)
    """
    o = options or CompactionOptions()
    trigger = Fraction(context_limit) * (1 - _frac(o.response_buffer_percent) / 100) * _frac(o.threshold_percent) / 100
    target = Fraction(context_limit) * _frac(o.target_percent) / 100
    return int(trigger), int(target)


def strategy_host_options(request: PreviewRequest, *, context_limit: int, prompt_overhead: int) -> dict[str, Any]:
    """What the pipeline adds to a strategy's options under :data:`HOST_KEY`.

    ``{"_host": {"context_limit": tokens, "prompt_overhead": tokens outside the blocks (reply
    priming), "compaction": the chat's stored compaction state (dict) or None}}``.
    """
    extra = request.chat.model_extra or {}
    state = extra.get(CHAT_KEY)
    return {HOST_KEY: {"context_limit": int(context_limit), "prompt_overhead": int(prompt_overhead),
                       "compaction": state if isinstance(state, dict) else None}}
