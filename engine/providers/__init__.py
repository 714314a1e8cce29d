"""LLM providers: an OpenAI-compatible chat-completions client and error normalization."""

from __future__ import annotations

from .errors import error_for_exception, error_for_status
from .keys import KEYRING_SERVICE, KEYRING_USERNAME, resolve_api_key
from .openai_compat import ChatCompletionsClient, ProviderReply, completions_url, public_endpoint
from .params import REPLY_LIMIT_PARAMS, default_reply_limit_param, reply_limit_fields

__all__ = [
    "KEYRING_SERVICE", "KEYRING_USERNAME", "ChatCompletionsClient", "ProviderReply", "completions_url",
    "error_for_exception", "error_for_status", "public_endpoint", "resolve_api_key",
    "REPLY_LIMIT_PARAMS", "default_reply_limit_param", "reply_limit_fields",
]
