"""Exact prompt accounting for chat templates: token tallies attributed to message blocks.

A chat template turns provider messages (OpenAI chat shape) into one token sequence. A
:class:`Tally` collects that sequence's pieces, each owned by a message (its index), by the
``"tools"`` block, or by ``"overhead"`` (BOS, the reply header that primes the answer, turns
the template inserts on its own):

* control tokens (``special``), one token each;
* text encoded on its own (``text``), as the vendor's code encodes each piece separately;
* text encoded as one string although several owners contributed to it (``joint``), e.g.
  Mistral's system prompt merged into a user turn, or text between two special tokens of a
  rendered ChatML prompt. The joint string is counted whole (so the total is exact) and its
  tokens are attributed by prefix differences: the part ``k`` owns
  ``count(parts[:k+1]) − count(parts[:k])`` tokens.

Every piece is flagged as content or template (framing) so a block can show how many of its
tokens the template added. ``PromptCount.total`` is the exact prompt length.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..parts import part_texts

Owner = int | str
CountMany = Callable[[Sequence[str]], list[int]]
OVERHEAD = "overhead"
TOOLS = "tools"


@dataclass(frozen=True)
class PromptCount:
    """Exact token count of one prompt, attributed.

    ``messages[i]`` are the tokens owned by message ``i`` (template tokens included) and
    ``template[i]`` how many of them are template framing; ``tools`` the tool schemas' tokens
    (with their framing); ``overhead`` the tokens no block owns (BOS, reply priming).
    ``total = sum(messages) + tools + overhead``.
    """

    messages: list[int]
    template: list[int]
    tools: int
    overhead: int

    @property
    def total(self) -> int:
        """Prompt tokens: every message, the tools and the overhead."""
        return sum(self.messages) + self.tools + self.overhead


class ChatTemplate(Protocol):
    """A family's chat template as token accounting (see the module notes)."""

    name: str
    source: str

    def count_prompt(self, count_many: CountMany, messages: Sequence[dict[str, Any]],
                     tools: Sequence[dict[str, Any]] | None = None) -> PromptCount:
        """Exact attributed count of ``messages`` (+ ``tools``) as this template encodes them."""
        ...


@dataclass
class Tally:
    """Pieces of one prompt's token sequence, counted in one batch by :meth:`finish`."""

    n_messages: int
    _specials: list[tuple[Owner, int, bool]] = field(default_factory=list)
    _joints: list[list[tuple[Owner, str, bool]]] = field(default_factory=list)

    def special(self, owner: Owner, n: int = 1, template: bool = True) -> None:
        """``n`` control tokens owned by ``owner``."""
        self._specials.append((owner, n, template))

    def text(self, owner: Owner, text: str, template: bool = False) -> None:
        """Text encoded on its own."""
        if text:
            self._joints.append([(owner, text, template)])

    def joint(self, parts: Sequence[tuple[Owner, str, bool]]) -> None:
        """Parts ``(owner, text, is_template)`` encoded as one string."""
        merged: list[tuple[Owner, str, bool]] = []
        for owner, text, tmpl in parts:
            if not text:
                continue
            if merged and merged[-1][0] == owner and merged[-1][2] == tmpl:
                merged[-1] = (owner, merged[-1][1] + text, tmpl)
            else:
                merged.append((owner, text, tmpl))
        if merged:
            self._joints.append(merged)

    def finish(self, count_many: CountMany) -> PromptCount:
        """Count every piece (one batched call) and attribute the tokens."""
        strings: list[str] = []
        plan: list[list[tuple[Owner, bool, int]]] = []  # per joint: (owner, template, index of its prefix)
        for parts in self._joints:
            prefix = ""
            entry = []
            for owner, text, tmpl in parts:
                prefix += text
                entry.append((owner, tmpl, len(strings)))
                strings.append(prefix)
            plan.append(entry)
        counts = count_many(strings) if strings else []
        per: dict[Owner, int] = {}
        tmpl_per: dict[Owner, int] = {}

        def add(owner: Owner, n: int, tmpl: bool) -> None:
            per[owner] = per.get(owner, 0) + n
            if tmpl:
                tmpl_per[owner] = tmpl_per.get(owner, 0) + n

        for owner, n, tmpl in self._specials:
            add(owner, n, tmpl)
        for entry in plan:
            before = 0
            for owner, tmpl, idx in entry:
                add(owner, counts[idx] - before, tmpl)
                before = counts[idx]
        return PromptCount(
            messages=[per.get(i, 0) for i in range(self.n_messages)],
            template=[tmpl_per.get(i, 0) for i in range(self.n_messages)],
            tools=per.get(TOOLS, 0),
            overhead=per.get(OVERHEAD, 0),
        )


def content_parts(content: Any) -> list[str]:
    """The text parts of a message ``content`` (a string, ``None``, or a list of parts).

    Parts sent as text are counted the way OpenAI accounting counts them
    (:func:`engine.tokenizers.accounting.part_texts`: ``refusal`` text, reasoning blobs and
    ``file`` parts by their strings, unknown parts as their JSON); images and audio are not
    counted by the open-weight templates here.
    """
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("type") in (None, "text"):
                out.append(part["text"])
            else:
                out.extend(part_texts(part))
    return out


def content_text(content: Any, joiner: str = "\n\n") -> str:
    """The text parts of ``content`` joined by ``joiner`` (empty parts skipped)."""
    return joiner.join(p for p in content_parts(content) if p)


def tool_calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's tool calls as ``{"id", "type", "name", "arguments"}`` (arguments a string).

    A legacy ``function_call`` counts as one call.
    """
    calls: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        fn = call.get("function") or {}
        args = fn.get("arguments", "")
        calls.append({"id": call.get("id"), "type": call.get("type") or "function",
                      "name": str(fn.get("name", "")),
                      "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})
    fc = message.get("function_call")
    if isinstance(fc, dict):
        args = fc.get("arguments", "")
        calls.append({"id": None, "type": "function", "name": str(fc.get("name", "")),
                      "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})
    return calls


def parse_json(text: str) -> Any:
    """``json.loads(text)``, or ``text`` itself when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def role_of(message: dict[str, Any]) -> str:
    """The message role, with ``developer`` read as ``system`` and ``function`` as ``tool``."""
    role = str(message.get("role") or "user")
    return {"developer": "system", "function": "tool"}.get(role, role)
