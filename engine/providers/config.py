"""Where and how a generation sends its request: :class:`ProviderConfig` (re-exported by :mod:`engine.generation`).

Below the generation and the compaction run, which both take one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .openai_compat import public_endpoint
from .params import REPLY_LIMIT_PARAMS


@dataclass(frozen=True)
class ProviderConfig:
    """Where and how to send the request.

    ``model`` is the model name sent to the provider (empty → the chat settings' model);
    ``api_key`` is never stored or logged (``repr`` hides it); ``timeout_s`` is the longest
    silence tolerated from the provider, in seconds. The reply reserve is sent as
    ``max_tokens`` or ``max_completion_tokens`` (``reply_limit_param``, default per model).

    Raises
    ------
    ValueError
        ``reply_limit_param`` is not one of ``max_tokens``, ``max_completion_tokens``, ``both``,
        ``none``.
    """

    def __post_init__(self) -> None:
        if self.reply_limit_param is not None and self.reply_limit_param not in REPLY_LIMIT_PARAMS:
            raise ValueError(f"unknown reply limit field {self.reply_limit_param!r} "
                             f"(expected one of {', '.join(REPLY_LIMIT_PARAMS)})")

    base_url: str
    model: str = ""
    api_key: str | None = None
    timeout_s: float = 60.0
    stream: bool = True
    extra_body: dict[str, Any] | None = None
    #: Which field sends the reply reserve: ``max_tokens``, ``max_completion_tokens``, ``both`` or
    #: ``none``; ``None`` = per model (``engine.providers.params``).
    reply_limit_param: str | None = None

    def __repr__(self) -> str:
        return (f"ProviderConfig(base_url={public_endpoint(self.base_url, self.api_key)!r}, model={self.model!r}, "
                f"api_key={'***' if self.api_key else None}, timeout_s={self.timeout_s}, stream={self.stream})")
