"""Benchmark: preview of a generated 10,000-message chat (run on demand: `make bench`).

Prints tiktoken's own batch-encoding time for the same texts, the cold preview (fresh count
cache) and the warm preview after one exclude toggle, with the ratio of cold preview to
tiktoken's batch encoding.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.pipeline import default_registries, preview
from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, PreviewRequest, ToolCall, ToolFunction
from engine.tokenizers import get_encoding

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "sword", "castle", "dragon", "whisper", "lantern", "river", "forest", "ancient", "ruin", "glimmer", "storm", "harbor", "merchant", "spell"]


def make_chat(n: int, seed: int = 7) -> Chat:
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
    msgs[-1] = ChatMessage(role="user", content="What happens next?")
    return Chat(messages=msgs[:n])


def main() -> None:
    n = 10_000
    chat = make_chat(n)
    texts = [m.text() for m in chat.messages]
    enc = get_encoding("o200k_base")
    enc.encode_ordinary_batch(texts[:10])  # load the encoder outside the timing
    t0 = time.perf_counter()
    enc.encode_ordinary_batch(texts, num_threads=2)
    tik = time.perf_counter() - t0

    settings = ContextSettings(model="gpt-4o", context_limit=128_000, reply_reserve=4096)
    request = PreviewRequest(chat=chat, settings=settings)
    regs = default_registries()
    regs.tokenizers.get("o200k_base").count("warm the encoder")
    t0 = time.perf_counter()
    pv = preview(request, registries=regs)
    cold = time.perf_counter() - t0
    kept = sum(b.status == "kept" for b in pv.blocks)

    warm: list[float] = []
    for k in range(7):
        idx = 5000 + k
        msgs = list(chat.messages)
        m = msgs[idx]
        msgs[idx] = m.model_copy(update={"meta": m.meta.model_copy(update={"manualExcluded": not m.meta.manualExcluded})})
        req = request.model_copy(update={"chat": chat.model_copy(update={"messages": msgs})})
        t0 = time.perf_counter()
        preview(req, registries=regs)
        warm.append(time.perf_counter() - t0)

    print(f"messages: {n}, kept blocks: {kept}, prompt tokens: {pv.prompt_tokens}")
    print(f"tiktoken encode_ordinary_batch (o200k_base, same texts): {tik * 1000:.1f} ms")
    print(f"cold preview: {cold * 1000:.1f} ms  (ratio to tiktoken batch: {cold / tik:.2f}x)")
    print(f"warm preview after one exclude toggle: median {statistics.median(warm) * 1000:.1f} ms, "
          f"max {max(warm) * 1000:.1f} ms over {len(warm)} runs")


if __name__ == "__main__":
    main()
