"""Benchmark: preview of a generated 10,000-message chat under each built-in strategy (`make bench`).

Prints the median of 3 warm previews per strategy (the token-count cache is warm after the first),
with the number of blocks kept / summarized. ``compact`` is shown without and with a stored
summary of everything older than the newest 10 messages.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench_preview import make_chat

from engine.compaction.state import CompactionState, make_summary
from engine.pipeline import default_registries, preview
from engine.schema import ContextSettings, PreviewRequest


def timed(req: PreviewRequest, regs) -> tuple[float, object]:
    times = []
    pv = None
    for _ in range(3):
        t0 = time.perf_counter()
        pv = preview(req, registries=regs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), pv


def main() -> int:
    chat = make_chat(10_000)
    regs = default_registries()
    print("10,000-message chat, gpt-4o, context 8,192 / reply 1,024")
    for name in ("truncate", "manual", "summarize", "vector-recall", "compact"):
        req = PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", context_limit=8192,
                                                                 reply_reserve=1024, strategy=name))
        preview(req, registries=regs)  # warm the count cache
        t, pv = timed(req, regs)
        kept = sum(b.status == "kept" for b in pv.blocks)
        folded = sum(b.status == "truncated" for b in pv.blocks)
        print(f"  {name:14s} {t * 1000:8.0f} ms   kept {kept:5d}   summarized {folded:5d}   prompt {pv.prompt_tokens}")
    covered = {i: m for i, m in enumerate(chat.messages[:-10]) if i > 0}
    state = CompactionState(summary=make_summary("A long story so far. " * 40, covered))
    req = PreviewRequest(chat=chat.model_copy(update={"loomscope_compaction": state.dump()}),
                         settings=ContextSettings(model="gpt-4o", context_limit=8192, reply_reserve=1024,
                                                  strategy="compact"))
    preview(req, registries=regs)
    t, pv = timed(req, regs)
    print(f"  compact+summary {t * 1000:7.0f} ms   summarized {sum(b.status == 'truncated' for b in pv.blocks)}"
          f"   prompt {pv.prompt_tokens}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
