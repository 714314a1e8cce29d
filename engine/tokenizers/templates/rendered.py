r"""Chat templates that render one prompt string (Qwen's ChatML, DeepSeek), counted exactly.

The template is rendered as fragments ``(owner, text, is_template)``. Tokenizing the rendered
string (tiktoken with special tokens allowed, or Hugging Face ``tokenizers``) first splits it at
special / added-token strings, each one token, and encodes the text between them on its own;
:func:`tally_rendered` does the same over the fragments, so the total equals the encoding of the
whole rendered prompt and every token is attributed to the fragment it comes from.

Qwen: ``Qwen/Qwen2.5-7B-Instruct`` ``tokenizer_config.json`` ``chat_template`` (ChatML with the
default system prompt "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." when
the chat has none, tools in the system turn inside ``<tools></tools>``, tool calls as
``<tool_call>`` JSON, tool results as ``<tool_response>`` inside a user turn, and
``<|im_start|>assistant\\n`` to prime the reply). Tool-call arguments are parsed from their JSON
string first, as OpenAI-compatible servers (vLLM) do before rendering. Qwen3:
``Qwen/Qwen3-8B`` ``tokenizer_config.json`` ``chat_template`` (:class:`Qwen3ChatML`). Text parts
of a message are joined by newlines, as OpenAI-compatible servers do for text-only models.

DeepSeek: the DeepSeek-V3/R1 ``chat_template`` (``<｜begin▁of▁sentence｜>``, all system
messages joined by ``"\\n\\n"`` in front, ``<｜User｜>`` / ``<｜Assistant｜>`` turns ending in
``<｜end▁of▁sentence｜>``, reasoning before ``</think>`` dropped from assistant turns, tool calls
and outputs in its ``<｜tool▁…｜>`` markers, ``<｜Assistant｜>`` to prime the reply).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .base import (
    OVERHEAD,
    TOOLS,
    CountMany,
    Owner,
    PromptCount,
    Tally,
    content_text,
    parse_json,
    role_of,
    tool_calls_of,
)

Fragment = tuple[Owner, str, bool]


def tally_rendered(fragments: Sequence[Fragment], special: re.Pattern[str] | None, n_messages: int) -> Tally:
    """A :class:`Tally` of the rendered prompt ``fragments``.

    Special-token strings (matched on the whole rendered text) count one token for the fragment they start in; the text
    between two of them is one joint piece.
    """
    tally = Tally(n_messages)
    full = "".join(f[1] for f in fragments)
    starts: list[int] = []
    pos = 0
    for f in fragments:
        starts.append(pos)
        pos += len(f[1])

    def frag_at(offset: int) -> int:
        lo, hi = 0, len(fragments) - 1
        while lo < hi:  # last fragment whose start <= offset and that is not empty
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        while lo > 0 and not fragments[lo][1]:
            lo -= 1
        return lo

    def ordinary(a: int, b: int) -> None:
        if a >= b:
            return
        parts: list[Fragment] = []
        k = frag_at(a)
        while k < len(fragments) and starts[k] < b:
            owner, text, tmpl = fragments[k]
            lo = max(a, starts[k]) - starts[k]
            hi = min(b, starts[k] + len(text)) - starts[k]
            if hi > lo:
                parts.append((owner, text[lo:hi], tmpl))
            k += 1
        tally.joint(parts)

    cursor = 0
    if special is not None:
        for m in special.finditer(full):
            ordinary(cursor, m.start())
            owner, _, tmpl = fragments[frag_at(m.start())]
            tally.special(owner, 1, tmpl)
            cursor = m.end()
    ordinary(cursor, len(full))
    return tally


def _tojson(value: Any) -> str:
    """Transformers' ``tojson`` filter: ``json.dumps(value, ensure_ascii=False)``."""
    return json.dumps(value, ensure_ascii=False)


QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
QWEN_TOOLS_HEAD = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                   "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
QWEN_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                   "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                   "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")


def _tool_response(i: int, text: str, roles: Sequence[str]) -> list[Fragment]:
    """Qwen's (2.5 and 3) ``tool`` turn: consecutive results share one ``user`` turn.

    That turn holds ``<tool_response>`` blocks (the same branch in both vendor chat templates).
    """
    frags: list[Fragment] = []
    if i == 0 or roles[i - 1] != "tool":
        frags.append((i, "<|im_start|>user", True))
    frags += [(i, "\n<tool_response>\n", True), (i, text, False), (i, "\n</tool_response>", True)]
    if i == len(roles) - 1 or roles[i + 1] != "tool":
        frags.append((i, "<|im_end|>\n", True))
    return frags


class QwenChatML:
    """Token accounting of the Qwen2.5 chat template (see the module notes)."""

    name = "qwen2.5"
    source = "Qwen/Qwen2.5-7B-Instruct tokenizer_config.json chat_template"

    def __init__(self, special: Any) -> None:
        self._special = special  # callable returning the encoder's special-token regex

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[Fragment]:
        """The rendered prompt as fragments (add_generation_prompt=True)."""
        frags: list[Fragment] = []
        roles = [role_of(m) for m in messages]
        first_system = bool(messages) and roles[0] == "system"
        sys_owner: Owner = 0 if first_system else OVERHEAD
        if tools:
            frags.append((sys_owner, "<|im_start|>system\n", True))
            if first_system:
                frags.append((0, content_text(messages[0].get("content"), "\n"), False))
            else:
                frags.append((OVERHEAD, QWEN_DEFAULT_SYSTEM, True))
            frags.append((TOOLS, QWEN_TOOLS_HEAD, True))
            for t in tools:
                frags.append((TOOLS, "\n", True))
                frags.append((TOOLS, _tojson(t), False))
            frags.append((TOOLS, QWEN_TOOLS_TAIL, True))
        elif first_system:
            frags += [(0, "<|im_start|>system\n", True), (0, content_text(messages[0].get("content"), "\n"), False),
                      (0, "<|im_end|>\n", True)]
        else:
            frags.append((OVERHEAD, f"<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}<|im_end|>\n", True))
        for i, m in enumerate(messages):
            role = roles[i]
            text = content_text(m.get("content"), "\n")
            calls = tool_calls_of(m) if role == "assistant" else []
            if role == "user" or (role == "system" and i > 0) or (role == "assistant" and not calls):
                frags += [(i, f"<|im_start|>{role}\n", True), (i, text, False), (i, "<|im_end|>\n", True)]
            elif role == "assistant":
                frags.append((i, "<|im_start|>assistant", True))
                if text:
                    frags += [(i, "\n", True), (i, text, False)]
                for call in calls:
                    frags += [(i, '\n<tool_call>\n{"name": "', True), (i, call["name"], False),
                              (i, '", "arguments": ', True), (i, _tojson(parse_json(call["arguments"])), False),
                              (i, "}\n</tool_call>", True)]
                frags.append((i, "<|im_end|>\n", True))
            elif role == "tool":
                frags += _tool_response(i, text, roles)
        frags.append((OVERHEAD, "<|im_start|>assistant\n", True))
        return frags

    def count_prompt(self, count_many: CountMany, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict[str, Any]] | None = None) -> PromptCount:
        """Exact attributed count of the rendered prompt."""
        return tally_rendered(self.render(messages, tools), self._special(), len(messages)).finish(count_many)


QWEN3_TOOLS_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")


class Qwen3ChatML(QwenChatML):
    """Token accounting of the Qwen3 chat template (``Qwen/Qwen3-8B`` ``tokenizer_config.json``).

    Differences from Qwen2.5: no default system prompt; the system text and the tools section
    share the system turn; reasoning (``<think>…</think>``) is dropped from answers before the
    last user query and an answer after it carries a ``<think>`` block (empty when it has no
    reasoning and is the last message); tool-call arguments that are not JSON objects are
    written as they are.
    """

    name = "qwen3"
    source = "Qwen/Qwen3-8B tokenizer_config.json chat_template"

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[Fragment]:
        """The rendered prompt as fragments (add_generation_prompt=True, thinking not disabled)."""
        frags: list[Fragment] = []
        roles = [role_of(m) for m in messages]
        texts = [content_text(m.get("content"), "\n") for m in messages]
        first_system = bool(messages) and roles[0] == "system"
        if tools:
            frags.append((0 if first_system else OVERHEAD, "<|im_start|>system\n", True))
            if first_system:
                frags += [(0, texts[0], False), (0, "\n\n", True)]
            frags.append((TOOLS, QWEN3_TOOLS_HEAD, True))
            for t in tools:
                frags += [(TOOLS, "\n", True), (TOOLS, _tojson(t), False)]
            frags.append((TOOLS, QWEN_TOOLS_TAIL, True))
        elif first_system:
            frags += [(0, "<|im_start|>system\n", True), (0, texts[0], False), (0, "<|im_end|>\n", True)]
        last_query = len(messages) - 1
        for idx in range(len(messages) - 1, -1, -1):
            text = texts[idx]
            if roles[idx] == "user" and not (text.startswith("<tool_response>") and text.endswith("</tool_response>")):
                last_query = idx
                break
        for i, m in enumerate(messages):
            role, text = roles[i], texts[i]
            if role == "user" or (role == "system" and i > 0):
                frags += [(i, f"<|im_start|>{role}\n", True), (i, text, False), (i, "<|im_end|>\n", True)]
            elif role == "assistant":
                reasoning = m.get("reasoning_content")
                if not isinstance(reasoning, str):
                    reasoning = ""
                    if "</think>" in text:
                        reasoning = text.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
                        text = text.split("</think>")[-1].lstrip("\n")
                if i > last_query and (i == len(messages) - 1 or reasoning):
                    frags += [(i, "<|im_start|>assistant\n<think>\n", True), (i, reasoning.strip("\n"), False),
                              (i, "\n</think>\n\n", True), (i, text.lstrip("\n"), False)]
                else:
                    frags += [(i, "<|im_start|>assistant\n", True), (i, text, False)]
                for k, call in enumerate(tool_calls_of(m)):
                    if k > 0 or text:
                        frags.append((i, "\n", True))
                    args = parse_json(call["arguments"])
                    frags += [(i, '<tool_call>\n{"name": "', True), (i, call["name"], False),
                              (i, '", "arguments": ', True),
                              (i, args if isinstance(args, str) else _tojson(args), False),
                              (i, "}\n</tool_call>", True)]
                frags.append((i, "<|im_end|>\n", True))
            elif role == "tool":
                frags += _tool_response(i, text, roles)
        frags.append((OVERHEAD, "<|im_start|>assistant\n", True))
        return frags


class DeepSeekTemplate:
    """Token accounting of the DeepSeek-V3/R1 chat template (see the module notes).

    The template has no tool-schema section: tool schemas are counted as their JSON text
    (``tools`` block), which is how DeepSeek's API documentation describes passing them.
    """

    name = "deepseek-v3"
    source = "deepseek-ai DeepSeek-V3/R1 tokenizer_config.json chat_template"

    def __init__(self, special: Any) -> None:
        self._special = special

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> list[Fragment]:
        """The rendered prompt as fragments (add_generation_prompt=True)."""
        frags: list[Fragment] = [(OVERHEAD, "<｜begin▁of▁sentence｜>", True)]
        first_sp = True
        for i, m in enumerate(messages):
            if role_of(m) == "system":
                if not first_sp:
                    frags.append((i, "\n\n", True))
                frags.append((i, content_text(m.get("content"), "\n"), False))
                first_sp = False
        is_first = False
        is_tool = False
        is_output_first = True
        for i, m in enumerate(messages):
            role = role_of(m)
            text = content_text(m.get("content"), "\n")
            calls = tool_calls_of(m) if role == "assistant" else []
            if role == "user":
                is_tool = False
                frags += [(i, "<｜User｜>", True), (i, text, False)]
            elif role == "assistant" and calls:
                is_tool = False
                for call in calls:
                    body = [(i, call["type"], True), (i, "<｜tool▁sep｜>", True), (i, call["name"], False),
                            (i, "\n```json\n", True), (i, call["arguments"], False),
                            (i, "\n```<｜tool▁call▁end｜>", True)]
                    if not is_first:
                        frags.append((i, "<｜Assistant｜>", True))
                        if text:
                            frags.append((i, text, False))
                        frags.append((i, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", True))
                        is_first = True
                    else:
                        frags.append((i, "\n<｜tool▁call▁begin｜>", True))
                    frags += body
                frags.append((i, "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>", True))
            elif role == "assistant":
                if is_tool:
                    frags += [(i, "<｜tool▁outputs▁end｜>", True), (i, text, False), (i, "<｜end▁of▁sentence｜>", True)]
                    is_tool = False
                else:
                    if "</think>" in text:
                        text = text.split("</think>")[-1]
                    frags += [(i, "<｜Assistant｜>", True), (i, text, False), (i, "<｜end▁of▁sentence｜>", True)]
            elif role == "tool":
                is_tool = True
                if is_output_first:
                    frags.append((i, "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>", True))
                    is_output_first = False
                else:
                    frags.append((i, "<｜tool▁output▁begin｜>", True))
                frags += [(i, text, False), (i, "<｜tool▁output▁end｜>", True)]
        if is_tool:
            frags.append((OVERHEAD, "<｜tool▁outputs▁end｜>", True))
        else:
            frags.append((OVERHEAD, "<｜Assistant｜>", True))
        return frags

    def count_prompt(self, count_many: CountMany, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict[str, Any]] | None = None) -> PromptCount:
        """Exact attributed count of the rendered prompt (+ the tool schemas as JSON text)."""
        frags = self.render(messages, tools)
        tally = tally_rendered(frags, self._special(), len(messages))
        if tools:
            tally.text(TOOLS, json.dumps(list(tools), ensure_ascii=False))
        return tally.finish(count_many)
