"""Small models used by the storage tests."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.schema import Character, Chat, ChatMessage, Lorebook, LorebookEntry
from engine.schema.audit import PromptContextAudit
from engine.schema.preview import PreviewBlock, TokenizerInfo


def rich_chat() -> Chat:
    """A chat touching every stored message feature (tool calls, id keys, swipes, flags, unknown fields)."""
    return Chat.model_validate({
        "title": "Everything",
        "user_name": "Wren",
        "character_name": "Marisol Quill",
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
        "metadata": {"note": "kept", "nested": {"a": [1, 2]}},
        "chat_extra_field": {"unknown": True},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello", "name": "Wren",
             "meta": {"pinned": True, "send_date": "2023-05-12"}},
            {"role": "assistant", "content": "Hi", "meta": {"swipes": ["Hi", "Hello there"], "swipe_id": 0}},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "result one"},
            {"role": "tool", "toolCallId": "call_2", "content": "result two", "is_error": False},
            {"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image_url",
                                                                          "image_url": {"url": "x.png"}}],
             "meta": {"manualExcluded": True, "hidden": True}},
            {"role": "assistant", "content": "ünïcödé ✓ 日本語", "swipes": ["top-level swipes"],
             "extra": {"model": "gpt"}},
        ],
    })


def book(name: str = "World", n: int = 3) -> Lorebook:
    """A lorebook with one constant entry, keyword entries and an unknown field."""
    entries = [LorebookEntry(uid=0, keys=[], content="Always.", constant=True, comment="const")]
    entries += [LorebookEntry.model_validate({"uid": i, "keys": [f"key{i}"], "content": f"Entry {i}",
                                              "comment": f"e{i}", "automationId": f"auto{i}"})
                for i in range(1, n)]
    return Lorebook.model_validate({"name": name, "entries": [e.model_dump() for e in entries],
                                    "scan_depth": 3, "custom_book_field": "kept"})


def card(name: str = "Marisol Quill", with_book: bool = True) -> Character:
    """A character card with an embedded book and unknown fields."""
    data = {"name": name, "description": "An archivist.", "personality": "precise",
            "extensions": {"talkativeness": "0.5", "depth_prompt": {"prompt": "x", "depth": 2}},
            "creatorcomment": "kept unknown field"}
    if with_book:
        data["character_book"] = book("Card book", 2).model_dump()
    return Character.model_validate(data)


def audit(chat_id: str, generation_id: str, status: str = "completed", code: str | None = None) -> PromptContextAudit:
    """A closed audit with two blocks."""
    now = datetime.now(UTC)
    return PromptContextAudit(
        generation_id=generation_id, chat_id=chat_id, provider="http://127.0.0.1:1/v1", model="gpt-4o",
        status=status, error_code=code, created_at=now, finished_at=now, context_limit=4096,
        reply_reserve=512, budget=3584, prompt_tokens=20, strategy="truncate",
        tokenizer=TokenizerInfo(profile="o200k_base", approximate=False),
        blocks=[PreviewBlock(id="b0", kind="system", role="system", source="system", position=0, tokens=10,
                             status="kept", reason="SYSTEM_PROMPT", protected=True, pinned=False, text="sys"),
                PreviewBlock(id="b1", kind="message", role="user", source="message:0", position=1, tokens=10,
                             status="kept", reason="CURRENT_USER_INPUT", protected=True, pinned=False, text="hi")],
        provider_messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
    )


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)
