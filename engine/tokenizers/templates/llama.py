r"""Llama 3 and Llama 4 chat formats, after Meta's ``llama-models``.

``llama_models/llama3/chat_format.py`` ``ChatFormat.encode_dialog_prompt`` (Llama 4:
``llama_models/llama4/chat_format.py``): ``<|begin_of_text|>``, then per message a header
(``<|start_header_id|>`` + role + ``<|end_header_id|>`` + ``"\\n\\n"``; Llama 4:
``<|header_start|>`` / ``<|header_end|>``), the content (each text part encoded on its own),
each tool call as ``json.dumps({"type": "function", "name", "parameters"})`` (the default JSON
tool-prompt format), and ``<|eot_id|>`` / ``<|eom_id|>`` (Llama 4: ``<|eot|>`` / ``<|eom|>``);
finally the assistant header that primes the reply. Tool results use the role ``ipython``.
Special-token text inside content is encoded as ordinary text (``disallowed_special=()``).

Tool schemas are not part of ``ChatFormat``; Loomscope counts them as the Llama 3.1 chat
template's JSON tool preamble (the ``tools_in_user_message`` text of Meta's Hugging Face
``tokenizer_config.json``: the instruction sentence plus each tool as JSON indented by 4).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .base import OVERHEAD, TOOLS, CountMany, PromptCount, Tally, content_parts, parse_json, role_of, tool_calls_of

LLAMA31_TOOLS_PREAMBLE = (
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
    "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n")


class LlamaChatFormat:
    """Token accounting of ``ChatFormat.encode_dialog_prompt`` for Llama 3 (``generation=3``) or 4."""

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.name = f"llama{generation}"
        self.source = f"llama-models llama{generation}/chat_format.py ChatFormat.encode_dialog_prompt"

    def _header(self, tally: Tally, owner: Any, role: str) -> None:
        tally.special(owner, 1)  # <|start_header_id|> / <|header_start|>
        tally.text(owner, "ipython" if role == "tool" else role, template=True)
        tally.special(owner, 1)  # <|end_header_id|> / <|header_end|>
        tally.text(owner, "\n\n", template=True)

    def count_prompt(self, count_many: CountMany, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict[str, Any]] | None = None) -> PromptCount:
        """Exact attributed count; the total equals ``len(encode_dialog_prompt(...).tokens)``."""
        tally = Tally(len(messages))
        tally.special(OVERHEAD, 1)  # <|begin_of_text|>
        for i, m in enumerate(messages):
            role = role_of(m)
            self._header(tally, i, role)
            for part in content_parts(m.get("content")):
                tally.text(i, part)
            if role == "assistant":
                for call in tool_calls_of(m):
                    tally.text(i, json.dumps({"type": "function", "name": call["name"],
                                              "parameters": parse_json(call["arguments"])}))
            tally.special(i, 1)  # <|eot_id|> or <|eom_id|>
        self._header(tally, OVERHEAD, "assistant")
        if tools:
            tally.text(TOOLS, LLAMA31_TOOLS_PREAMBLE + "".join(json.dumps(t, indent=4) + "\n\n" for t in tools),
                       template=False)
        return tally.finish(count_many)
