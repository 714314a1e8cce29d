"""One entry point for a whole prompt's count, whatever the profile's chat accounting.

:func:`prompt_count` returns a :class:`~.templates.PromptCount` (per-message tokens, the tool
schemas' tokens and the tokens no block owns) that adds up exactly to the prompt length:
OpenAI chat accounting (:mod:`.accounting`: 3 framing tokens per message, 3 to prime the reply)
for profiles without a chat template, the family's template (:mod:`.templates`) otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .accounting import REPLY_PRIMING_TOKENS, count_messages_tokens, count_tools_tokens, message_overhead
from .profiles import TokenizerProfile
from .templates import PromptCount


def prompt_count(profile: TokenizerProfile, messages: Sequence[dict[str, Any]],
                 tools: Sequence[dict[str, Any]] | None = None) -> PromptCount:
    """Exact, attributed token count of a chat-completions prompt (``messages`` + ``tools``).

    For template profiles ``template[i]`` is the number of message ``i``'s tokens that the chat
    template added; for OpenAI accounting it is the per-message framing (3, +1 for a name, +3
    per tool call). Raises ``SettingsError(UNKNOWN_TOKENIZER)`` when a vocabulary file is
    missing or fails its hash check.
    """
    msgs = list(messages)
    if profile.chat is not None:
        return profile.chat.count_prompt(profile.count_many, msgs, list(tools) if tools else None)
    per = count_messages_tokens(profile, msgs)
    framing = [message_overhead(m) for m in msgs]
    return PromptCount(messages=per, template=framing, tools=count_tools_tokens(profile, tools or []),
                       overhead=REPLY_PRIMING_TOKENS)


def reply_priming_tokens(profile: TokenizerProfile, messages: Sequence[dict[str, Any]] = ()) -> int:
    """Tokens of a prompt that no block owns, for ``messages`` (default: an empty chat).

    OpenAI: the 3 reply-priming tokens; templates: BOS, the reply header, turns the template inserts.
    """
    if profile.chat is None:
        return REPLY_PRIMING_TOKENS
    return prompt_count(profile, messages).overhead
