r"""Mistral instruct formats v1, v3 and v7 (SentencePiece or Tekken), after ``mistral-common``.

``MistralTokenizer.encode_chat_completion`` first normalises the request
(``protocol/instruct/normalize.py`` ``InstructRequestNormalizer``; v7: ``...NormalizerV7``) and
then encodes it (``tokens/tokenizers/instruct.py`` ``InstructTokenizerV1`` / ``V3`` / ``V7``):

Normalisation
    Consecutive messages of one role are merged: user and assistant contents joined by
    ``"\\n\\n"`` (empty contents skipped), tool calls concatenated, each tool message kept.
    Before v7, system messages leave the conversation and become one system prompt (joined by
    ``"\\n\\n"``); a conversation not starting with a user turn gets an empty user turn first.
    From v7, system messages stay in place. Tool-call arguments and (before v7) tool results are
    re-serialised as JSON when they parse.

v1 (``[INST]`` as text)
    ``<s>``; user: ``"[INST] " + content + " [/INST]"`` encoded as one string, the system
    prompt + ``"\\n\\n"`` put in front of the *first* user content; assistant: content +
    ``</s>``.
v3 (control tokens)
    ``<s>``; user: ``[AVAILABLE_TOOLS]`` + JSON of the tools + ``[/AVAILABLE_TOOLS]`` before the
    *last* user turn, then ``[INST]`` + content + ``[/INST]``, the system prompt + ``"\\n\\n"`` in
    front of the last user content; assistant: content (trailing spaces stripped) or
    ``[TOOL_CALLS]`` + JSON list of ``{"name", "arguments", "id"}``, then ``</s>``; tool result:
    ``[TOOL_RESULTS]`` + JSON ``{"content", "call_id"}`` + ``[/TOOL_RESULTS]``.
v7
    As v3, but each system message is ``[SYSTEM_PROMPT]`` + content + ``[/SYSTEM_PROMPT]`` in
    place, and a tool result is ``[TOOL_RESULTS]`` + call id + ``[TOOL_CONTENT]`` + content +
    ``[/TOOL_RESULTS]``; an assistant turn may hold content and tool calls.

Requests ``mistral-common`` rejects (an assistant turn with content and tool calls before v7,
tools or tool messages with v1) are still counted, as the closest encoding (documented in the
README); images and audio parts are not counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
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

Part = tuple[Owner, str, bool]


@dataclass
class _Turn:
    role: str
    owner: Owner
    parts: list[Part] = field(default_factory=list)  # content, "\n\n"-joined across merged messages
    calls: list[tuple[Owner, dict[str, Any]]] = field(default_factory=list)
    call_id: str | None = None
    raw_content: str = ""


def _joined(items: list[tuple[Owner, str]]) -> list[Part]:
    r"""Texts joined by "\\n\\n" (empty ones skipped); each separator belongs to the text before it."""
    out: list[Part] = []
    for owner, text in items:
        if not text:
            continue
        if out:
            prev_owner = out[-1][0]
            out.append((prev_owner, "\n\n", True))
        out.append((owner, text, False))
    return out


def _normalize_json(text: str) -> str:
    """``InstructRequestNormalizer._normalize_json_content``."""
    if not text:
        return "{}"
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


class MistralInstruct:
    """Token accounting of ``mistral-common``'s instruct encoding, ``version`` "v1", "v3" or "v7"."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.name = f"mistral-{version}"
        cls = {"v1": "InstructTokenizerV1", "v3": "InstructTokenizerV3", "v7": "InstructTokenizerV7"}[version]
        self.source = f"mistral-common tokens/tokenizers/instruct.py {cls} (encode_chat_completion)"

    # -- normalisation (InstructRequestNormalizer._aggregate_messages) ---------------------------
    def _normalize(self, messages: Sequence[dict[str, Any]]) -> tuple[list[tuple[Owner, str]], list[_Turn]]:
        v7 = self.version == "v7"
        system: list[tuple[Owner, str]] = []
        turns: list[_Turn] = []
        run: list[tuple[int, dict[str, Any]]] = []
        run_role: str | None = None

        def flush() -> None:
            if not run:
                return
            if run_role == "system":
                for i, m in run:
                    text = content_text(m.get("content"))
                    if v7:
                        turns.append(_Turn("system", i, [(i, text, False)]))
                    elif text:
                        system.append((i, text))
            elif run_role == "tool":
                for i, m in run:
                    text = content_text(m.get("content"))
                    turns.append(_Turn("tool", i, [], call_id=m.get("tool_call_id"),
                                       raw_content=text if v7 else _normalize_json(text)))
            else:
                t = _Turn(run_role or "user", run[0][0],
                          _joined([(i, content_text(m.get("content"))) for i, m in run]))
                if run_role == "assistant":
                    for i, m in run:
                        for call in tool_calls_of(m):
                            t.calls.append((i, call))
                turns.append(t)

        for i, m in enumerate(messages):
            role = role_of(m)
            if role not in ("system", "user", "assistant", "tool"):
                role = "user"
            if role != run_role:
                flush()
                run = []
                run_role = role
            run.append((i, m))
        flush()
        if not turns or (not v7 and turns[0].role != "user"):
            turns.insert(0, _Turn("user", OVERHEAD))
        return system, turns

    # -- encoding (InstructTokenizerBase.encode_instruct and the versioned encoders) -------------
    def count_prompt(self, count_many: CountMany, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict[str, Any]] | None = None) -> PromptCount:
        """Exact attributed count; the total equals ``len(encode_chat_completion(...).tokens)``."""
        system, turns = self._normalize(messages)
        tally = Tally(len(messages))
        tally.special(OVERHEAD, 1)  # <s>
        users = [k for k, t in enumerate(turns) if t.role == "user"]
        first_user, last_user = (users[0], users[-1]) if users else (-1, -1)
        sys_parts = [p for p in _joined(system)]
        if sys_parts:
            sys_parts.append((sys_parts[-1][0], "\n\n", True))
        for k, turn in enumerate(turns):
            owner = turn.owner
            if turn.role == "user":
                self._user(tally, turn, sys_parts, k == first_user, k == last_user, tools)
            elif turn.role == "assistant":
                self._assistant(tally, turn)
            elif turn.role == "tool":
                self._tool(tally, turn)
            else:  # v7 system message
                tally.special(owner, 1)  # [SYSTEM_PROMPT]
                tally.joint(turn.parts)
                tally.special(owner, 1)  # [/SYSTEM_PROMPT]
        return tally.finish(count_many)

    def _user(self, tally: Tally, turn: _Turn, sys_parts: list[Part], first: bool, last: bool,
              tools: Sequence[dict[str, Any]] | None) -> None:
        owner = turn.owner
        if self.version == "v1":
            prefix = sys_parts if first else []
            tally.joint([(owner, "[INST] ", True), *prefix, *turn.parts, (owner, " [/INST]", True)])
            return
        if last and tools:
            tally.special(TOOLS, 1)  # [AVAILABLE_TOOLS]
            tally.text(TOOLS, json.dumps([_tool_dump(t) for t in tools], ensure_ascii=False))
            tally.special(TOOLS, 1)  # [/AVAILABLE_TOOLS]
        tally.special(owner, 1)  # [INST]
        prefix = sys_parts if (last and self.version == "v3") else []
        tally.joint([*prefix, *turn.parts])
        tally.special(owner, 1)  # [/INST]

    def _assistant(self, tally: Tally, turn: _Turn) -> None:
        owner = turn.owner
        parts = list(turn.parts)
        if self.version != "v1" and parts:  # _encode_normal_content_assistant_message: rstrip(" ")
            o, text, tmpl = parts[-1]
            parts[-1] = (o, text.rstrip(" "), tmpl)
        if parts:
            tally.joint(parts)
        if turn.calls:
            if self.version != "v1":
                tally.special(owner, 1)  # [TOOL_CALLS]
            pieces: list[Part] = []
            for n, (o, call) in enumerate(turn.calls):
                prepared: dict[str, Any] = {"name": call["name"],
                                            "arguments": parse_json(_normalize_json(call["arguments"]))}
                if self.version != "v1" and call.get("id") and call["id"] != "null":
                    prepared["id"] = call["id"]
                pieces.append((o, ("[" if n == 0 else ", ") + json.dumps(prepared, ensure_ascii=False), False))
            pieces.append((pieces[-1][0], "]", False))
            tally.joint(pieces)
        tally.special(owner, 1)  # </s>

    def _tool(self, tally: Tally, turn: _Turn) -> None:
        owner = turn.owner
        if self.version == "v1":
            tally.text(owner, turn.raw_content)
            return
        tally.special(owner, 1)  # [TOOL_RESULTS]
        if self.version == "v7":
            tally.text(owner, str(turn.call_id or ""), template=True)
            tally.special(owner, 1)  # [TOOL_CONTENT]
            tally.text(owner, turn.raw_content)
        else:
            tally.text(owner, json.dumps({"content": parse_json(turn.raw_content), "call_id": turn.call_id},
                                         ensure_ascii=False))
        tally.special(owner, 1)  # [/TOOL_RESULTS]


def _tool_dump(tool: dict[str, Any]) -> dict[str, Any]:
    """``Tool.model_dump(exclude={"function": {"strict"}})`` of an OpenAI tool schema."""
    fn = tool.get("function", tool) if isinstance(tool, dict) else {}
    fn = fn if isinstance(fn, dict) else {}
    return {"type": "function", "function": {"name": str(fn.get("name", "")),
                                             "description": str(fn.get("description") or ""),
                                             "parameters": fn.get("parameters") or {}}}
