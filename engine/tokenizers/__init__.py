"""Tokenizer profiles, the offline tiktoken backend, the model table, chat accounting, ST Text Completion counts."""

from __future__ import annotations

from .accounting import (
    REPLY_PRIMING_TOKENS,
    content_part_warnings,
    count_messages_tokens,
    count_tools_tokens,
    estimated_parts,
    num_tokens_from_messages,
)
from .chat import prompt_count, reply_priming_tokens
from .defaults import default_tokenizer_registry
from .models import MODEL_TABLE, ModelInfo, known_models, lookup_model
from .profiles import TokenizerProfile, TokenizerRegistry, builtin_profiles
from .sillytavern_text import TextTokenizer, sillytavern_text_tokenizer, tokenizer_best_match
from .tiktoken_offline import get_encoding

__all__ = [
    "MODEL_TABLE",
    "REPLY_PRIMING_TOKENS",
    "ModelInfo",
    "TextTokenizer",
    "TokenizerProfile",
    "TokenizerRegistry",
    "builtin_profiles",
    "content_part_warnings",
    "count_messages_tokens",
    "count_tools_tokens",
    "default_tokenizer_registry",
    "estimated_parts",
    "get_encoding",
    "known_models",
    "lookup_model",
    "num_tokens_from_messages",
    "prompt_count",
    "reply_priming_tokens",
    "sillytavern_text_tokenizer",
    "tokenizer_best_match",
]
