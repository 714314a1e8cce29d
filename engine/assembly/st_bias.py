"""Start Reply With: SillyTavern 1.12.6 ``getBiasStrings`` (``public/script.js`` 4714–4746).

The text a reply is started with: the ``{{bias "…"}}`` of the text being sent, else the bias the
newest user / system / narrator message carries (``extra.bias``, stored when it was sent), else
``power_user.user_prompt_bias`` (the Start Reply With box); macros substituted. Both paths use
:func:`bias_strings`: the Chat Completion path sends a non-empty bias as the system prompt
``bias``, last of the prompts ``populateChatCompletion`` adds (``openai.js`` 1036); the Text
Completion path appends it to the prompt string (``script.js`` 4167–4172).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema.messages import ChatMessage

__all__ = ["BiasStrings", "bias_strings", "extract_message_bias"]

_BIAS_HELPER = re.compile(r'\{\{bias\s+"((?:[^"\\]|\\.)*)"\s*\}\}')


@dataclass(frozen=True)
class BiasStrings:
    """``getBiasStrings``' result.

    ``message_bias`` (from the sent text), ``prompt_bias`` (the one used) and whether it is the
    Start Reply With setting (``is_user_prompt_bias``).
    """

    message_bias: str
    prompt_bias: str
    is_user_prompt_bias: bool


def extract_message_bias(message: str) -> str:
    """``extractMessageBias`` (script.js 2671–2694): ``" " + `` the ``{{bias "…"}}`` texts joined by spaces."""
    if not message:
        return ""
    found = [m.group(1).replace('\\"', '"') for m in _BIAS_HELPER.finditer(message)]
    return " " + " ".join(found) if found else ""


def _extra(m: ChatMessage) -> dict[str, Any]:
    raw = (m.meta.model_extra or {}).get("extra")
    return raw if isinstance(raw, dict) else {}


def bias_strings(messages: Sequence[ChatMessage], user_prompt_bias: str, substitute: Callable[[str], str],
                 *, generation_type: str = "normal", textarea: str = "") -> BiasStrings:
    """SillyTavern's ``getBiasStrings`` for the chat ``messages`` (oldest first).

    Parameters
    ----------
    messages:
        The whole chat, hidden (``is_system``) messages included.
    user_prompt_bias:
        ``power_user.user_prompt_bias`` (:attr:`SillyTavernSetup.start_reply_with`).
    substitute:
        ``substituteParams`` (:func:`engine.assembly.macros.macro_function`).
    generation_type:
        ``impersonate`` and ``continue`` have no bias; ``swipe`` skips the newest message.
    textarea:
        The text being sent (empty for a preview of a chat whose last message is already in it).

    Returns
    -------
    BiasStrings
        With macros substituted in both texts.
    """
    if generation_type in ("impersonate", "continue"):
        return BiasStrings("", "", False)
    message_bias = extract_message_bias(textarea)
    prompt_bias = ""
    if not textarea:
        last = len(messages) - 1
        for i in range(last, -1, -1):
            m = messages[i]
            if generation_type == "swipe" and i == last:
                continue
            extra = _extra(m)
            if m.role == "user" or m.meta.hidden or extra.get("type") == "narrator":
                bias = extra.get("bias")
                if isinstance(bias, str) and bias.strip():
                    prompt_bias = bias
                break
    prompt_bias = message_bias or prompt_bias or user_prompt_bias or ""
    is_user = prompt_bias == user_prompt_bias
    return BiasStrings(substitute(message_bias) if message_bias else "",
                       substitute(prompt_bias) if prompt_bias else "", is_user)
