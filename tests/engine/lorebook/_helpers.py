"""Helpers for the lorebook tests: a word-count tokenizer and small builders."""

from __future__ import annotations

from typing import Any

from engine.schema import ChatMessage, Lorebook, LorebookEntry


def words(text: str) -> int:
    """Test tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def entry(uid: int | str, keys: list[str] | None = None, content: str | None = None, **kw: Any) -> LorebookEntry:
    """An entry; content defaults to ``"lore <uid>"`` (2 tokens under :func:`words`)."""
    return LorebookEntry(uid=uid, keys=keys or [], content=f"lore {uid}" if content is None else content, **kw)


def book(*entries: LorebookEntry, name: str = "book") -> Lorebook:
    return Lorebook(name=name, entries=list(entries))


def chat(*items: str | tuple[str, str] | dict[str, Any]) -> list[ChatMessage]:
    """Messages oldest first; plain strings alternate user/assistant starting with user."""
    out: list[ChatMessage] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=item))
        elif isinstance(item, tuple):
            out.append(ChatMessage(role=item[0], content=item[1]))  # type: ignore[arg-type]
        else:
            out.append(ChatMessage.model_validate(item))
    return out


def tokens_of(n: int) -> str:
    """A content of exactly ``n`` tokens under :func:`words`."""
    return " ".join(["w"] * n)
