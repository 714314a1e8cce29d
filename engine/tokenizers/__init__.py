"""Tokenizer profiles, the offline tiktoken backend, the model table and chat accounting."""

from __future__ import annotations

from .accounting import (
    REPLY_PRIMING_TOKENS,
    content_part_warnings,
    count_messages_tokens,
    estimated_parts,
    count_tools_tokens,
    num_tokens_from_messages,
)
from .chat import prompt_count, reply_priming_tokens
from .models import MODEL_TABLE, ModelInfo, known_models, lookup_model
from .profiles import TokenizerProfile, TokenizerRegistry, builtin_profiles, default_tokenizer_registry
from .tiktoken_offline import get_encoding

__all__ = [
    "REPLY_PRIMING_TOKENS", "content_part_warnings", "estimated_parts", "count_messages_tokens", "count_tools_tokens", "num_tokens_from_messages",
    "MODEL_TABLE", "ModelInfo", "known_models", "lookup_model",
    "TokenizerProfile", "TokenizerRegistry", "builtin_profiles", "default_tokenizer_registry",
    "get_encoding", "prompt_count", "reply_priming_tokens",
]
