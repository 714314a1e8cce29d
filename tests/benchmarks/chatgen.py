"""The benchmark chat: a seeded role-play chat with tool exchanges, of any length.

Every benchmark of issue 12 (``run_bench.py`` and its workers) previews this chat, so the
figures at 1,000 / 10,000 / 50,000 messages describe the same kind of text:

* a system message, then user and assistant turns of 8-80 words (about 60 tokens on average);
* every 50th turn an assistant tool call (``lookup``) and the tool's 40-word result;
* about 1 % of the messages pinned; the last message is the user's question.

``settings()`` is the context both the engine and LangChain's ``trim_messages`` are given
(gpt-4o, 128,000-token window, 4,096 tokens for the reply), so from about 2,000 messages on
the history no longer fits and shifting drops the oldest turns.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, ToolCall, ToolFunction

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "sword", "castle", "dragon", "whisper",
         "lantern", "river", "forest", "ancient", "ruin", "glimmer", "storm", "harbor", "merchant", "spell"]

MODEL = "gpt-4o"
CONTEXT_LIMIT = 128_000
REPLY_RESERVE = 4096


def settings() -> ContextSettings:
    """The context settings of every benchmark preview."""
    return ContextSettings(model=MODEL, context_limit=CONTEXT_LIMIT, reply_reserve=REPLY_RESERVE)


def make_chat(n: int, seed: int = 7) -> Chat:
    """A chat of exactly ``n`` messages (``n`` ≥ 2), the same for the same ``n`` and ``seed``."""
    rng = random.Random(seed)
    msgs: list[ChatMessage] = [ChatMessage(role="system", content="You are a helpful narrator.")]
    i = 0
    while len(msgs) < n:
        i += 1
        if i % 50 == 0:
            cid = f"call_{i}"
            msgs.append(ChatMessage(role="assistant", tool_calls=[ToolCall(
                id=cid, function=ToolFunction(name="lookup", arguments='{"q": "castle"}'))]))
            msgs.append(ChatMessage(role="tool", tool_call_id=cid, content=" ".join(rng.choices(WORDS, k=40))))
            continue
        role = "user" if len(msgs) % 2 else "assistant"
        msgs.append(ChatMessage(role=role, content=" ".join(rng.choices(WORDS, k=rng.randint(8, 80))),
                                meta=MessageMeta(pinned=rng.random() < 0.01)))
    msgs = msgs[:n]
    if msgs[-1].role == "tool" or msgs[-1].tool_calls:
        # never end on half a tool exchange: the last turn is the user's question
        msgs[-1] = ChatMessage(role="user", content="What happens next?")
        if msgs[-2].tool_calls:
            msgs[-2] = ChatMessage(role="assistant", content="The lantern flickers.")
    else:
        msgs[-1] = ChatMessage(role="user", content="What happens next?")
    return Chat(messages=msgs)


def toggle_indices(chat: Chat, count: int) -> list[int]:
    """Messages to exclude one at a time: alternately recent (kept) and old (dropped from 2,000 on).

    Tool messages and the last two messages are skipped, so every toggle is a plain turn.
    """
    n = len(chat.messages)
    plain = [k for k, m in enumerate(chat.messages[1:-2], start=1) if m.role in ("user", "assistant")
             and not m.tool_calls]
    recent = plain[::-1]
    old = plain[len(plain) // 2:] if n > 2000 else plain
    out: list[int] = []
    for k in range(count):
        pool = recent if k % 2 == 0 else old
        step = max(1, min(37, len(pool) // max(1, count)))
        out.append(pool[(k // 2 * step) % len(pool)])
    return out


def write_chat_file(chat: Chat, path: Path) -> Path:
    """Write ``chat`` as an OpenAI messages JSON array (what ``loomscope preview --chat`` reads)."""
    path.write_text(json.dumps([m.to_provider() for m in chat.messages], ensure_ascii=False), encoding="utf-8")
    return path

