"""Chat messages in OpenAI chat shape, plus Loomscope's ``meta``.

A message is what an OpenAI-compatible chat-completions endpoint accepts (``role``,
``content``, ``name``, ``tool_calls``, ``tool_call_id``), extended with ``meta`` for
Loomscope's own flags. Imported third-party data keeps unknown fields (``extra="allow"``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool", "function", "developer"]

#: Keys under which a tool result may carry the id of the call it answers.
TOOL_RESULT_ID_KEYS: tuple[str, ...] = ("tool_call_id", "toolCallId", "callId")


class MessageMeta(BaseModel):
    """Loomscope's per-message flags.

    Attributes
    ----------
    pinned:
        The user marked this message protected: no strategy removes it.
    manualExcluded:
        The user excluded this message by hand (the ``manual`` strategy drops it first).
    hidden:
        Hidden from the prompt (SillyTavern ``is_system``); excluded with reason ``HIDDEN``.
    Other keys (swipes, send dates, SillyTavern ``extra``) are kept as given.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    pinned: bool = False
    manualExcluded: bool = False
    hidden: bool = False


class ToolFunction(BaseModel):
    """``tool_calls[].function``: the name and the arguments (a JSON string in OpenAI's shape)."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    arguments: str = ""


class ToolCall(BaseModel):
    """One entry of an assistant message's ``tool_calls`` (OpenAI shape)."""

    model_config = ConfigDict(extra="allow")

    id: str | None = None
    type: str = "function"
    function: ToolFunction = Field(default_factory=ToolFunction)


class ChatMessage(BaseModel):
    """One chat message in OpenAI chat shape.

    ``content`` is text, ``None`` (assistant tool-call messages), or a list of content
    parts (``[{"type": "text", "text": ...}, ...]``) as OpenAI accepts them.
    A tool result's id may come under ``tool_call_id``, ``toolCallId`` or ``callId``;
    :meth:`result_id` reads whichever is set.
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    role: Role
    content: str | list[Any] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    toolCallId: str | None = None
    callId: str | None = None
    meta: MessageMeta = Field(default_factory=MessageMeta)

    def text(self) -> str:
        """The message's text: ``content`` as a string (text parts joined by newlines)."""
        return content_text(self.content)

    def result_id(self) -> str | None:
        """The id of the tool call this message answers, under any of the accepted keys."""
        for key in TOOL_RESULT_ID_KEYS:
            value = getattr(self, key, None)
            if value:
                return str(value)
        return None

    def call_ids(self) -> list[str]:
        """Ids of the tool calls this (assistant) message makes; empty when none carry ids."""
        return [c.id for c in (self.tool_calls or []) if c.id]

    def to_provider(self) -> dict[str, Any]:
        """The message as sent to an OpenAI-compatible endpoint (no ``meta``, canonical keys).

        The tool-result id is always written as ``tool_call_id`` (OpenAI's key), whatever
        key it was imported under.
        """
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [c.model_dump(exclude_none=True) for c in self.tool_calls]
        rid = self.result_id()
        if rid and self.role in ("tool", "function"):
            out["tool_call_id"] = rid
        legacy_call = (self.model_extra or {}).get("function_call")
        if isinstance(legacy_call, dict):
            out["function_call"] = legacy_call
        return out


def content_text(content: str | list[Any] | None) -> str:
    """Flatten OpenAI message ``content`` to text.

    ``None`` gives ``""``; a list of parts gives the ``text`` of each text part joined by
    newlines (image parts contribute nothing here; their cost is counted separately).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, dict):
            if part.get("type") in (None, "text") and isinstance(part.get("text"), str):
                parts.append(part["text"])
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


class Chat(BaseModel):
    """A chat as Loomscope reads it: messages plus the tool schemas sent with requests.

    Attributes
    ----------
    messages:
        In chat order; index ``i`` is the message's ``source`` ``message:<i>``.
    tools:
        OpenAI tool/function definitions (``[{"type": "function", "function": {...}}]``);
        they become the protected ``tools`` block.
    user_name, character_name:
        Names for the ``{{user}}`` / ``{{char}}`` macros (SillyTavern header line).
    metadata:
        Free-form chat metadata (SillyTavern ``chat_metadata`` and similar), kept as read.
    """

    model_config = ConfigDict(extra="allow")

    title: str = ""
    messages: list[ChatMessage] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    user_name: str = "User"
    character_name: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
