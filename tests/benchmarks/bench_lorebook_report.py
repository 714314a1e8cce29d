"""Benchmark: the lorebook tuning report over a long chat and a large book.

Run: ``.venv/bin/python tests/benchmarks/bench_lorebook_report.py``. Builds the
``bench_lorebook`` book (1,000 entries, 2 % regex keys, groups, probabilities, constants) and a
chat of 5,000 messages (2,500 generated turns), then times ``build_report`` under both rule sets
with the exact o200k_base profile, and the same on the first 1,250 and 2,500 messages to show
the cost grows linearly with chat length (seconds, and milliseconds per turn).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lorebook import make_book, make_chat

from engine.lorebook.report import build_report
from engine.schema import WorldInfoSettings
from engine.tokenizers import default_tokenizer_registry


def main() -> None:
    rng = random.Random(11)
    book = make_book(1000, rng, regex_every=50)
    chat = make_chat(5000, book, rng)
    count = default_tokenizer_registry().get("o200k_base").count
    print("lorebook report: 1,000 entries, scan depth 2 (o200k_base)")
    for rules in ("sillytavern", "loomscope"):
        for n in (1250, 2500, 5000):
            started = time.perf_counter()
            r = build_report([book], chat[:n], WorldInfoSettings(rules=rules), count_tokens=count,
                             context_limit=31_744)
            took = time.perf_counter() - started
            fired = sum(1 for e in r.entries if e.turns_fired)
            print(f"  {rules:11s} {n:5d} messages  {len(r.turns):5d} turns  {took:7.2f} s  "
                  f"{1000 * took / len(r.turns):6.2f} ms/turn  entries fired {fired}")


if __name__ == "__main__":
    main()
