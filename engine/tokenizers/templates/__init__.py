"""Chat templates of the open-weight families, as exact token accounting (see :mod:`.base`)."""

from __future__ import annotations

from .base import OVERHEAD, TOOLS, ChatTemplate, PromptCount, Tally
from .llama import LlamaChatFormat
from .mistral import MistralInstruct
from .rendered import DeepSeekTemplate, Qwen3ChatML, QwenChatML, tally_rendered

__all__ = [
           "OVERHEAD",
           "TOOLS",
           "ChatTemplate",
           "DeepSeekTemplate",
           "LlamaChatFormat",
           "MistralInstruct",
           "PromptCount",
           "Qwen3ChatML",
           "QwenChatML",
           "Tally",
           "tally_rendered",
]
