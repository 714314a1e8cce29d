"""LLM providers: OpenAI-compatible chat-completions and text-completions clients, error normalization."""

from __future__ import annotations

from .errors import error_for_exception, error_for_status
from .keys import KEYRING_SERVICE, KEYRING_USERNAME, ApiKeyLookup, lookup_api_key, resolve_api_key
from .openai_compat import ChatCompletionsClient, ProviderReply, completions_url, public_endpoint
from .params import REPLY_LIMIT_PARAMS, default_reply_limit_param, reply_limit_fields
from .text_completion import TextCompletionsClient, text_completions_url

__all__ = [
    "KEYRING_SERVICE",
    "KEYRING_USERNAME",
    "REPLY_LIMIT_PARAMS",
    "ApiKeyLookup",
    "ChatCompletionsClient",
    "ProviderReply",
    "TextCompletionsClient",
    "completions_url",
    "default_reply_limit_param",
    "error_for_exception",
    "error_for_status",
    "lookup_api_key",
    "public_endpoint",
    "reply_limit_fields",
    "resolve_api_key",
    "text_completions_url",
]
