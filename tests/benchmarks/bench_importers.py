"""Importer throughput on the real files in ../shared/data (plain script, not collected by pytest).

Run: ``.venv/bin/python tests/benchmarks/bench_importers.py``. Prints the median wall time of
``load_any`` per file (5 runs) and a synthetic 100,000-entry lorebook / 100,000-message chat.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.importers import load_any, load_chat, load_lorebook  # noqa: E402
from tests.conftest import shared_data_path  # noqa: E402


def _time(fn, runs: int = 5) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    data = shared_data_path()
    if data is not None:
        for path in sorted(p for p in data.glob("*/*") if p.is_file() and p.suffix != ".md"):
            secs = _time(lambda p=path: load_any(p))
            size = path.stat().st_size
            print(f"{path.parent.name}/{path.name:<50} {size / 1024:9.1f} KiB {secs * 1000:9.1f} ms "
                  f"{size / secs / 2**20:7.1f} MiB/s")
    with tempfile.TemporaryDirectory() as d:
        book = Path(d) / "big.json"
        book.write_text(json.dumps({"entries": {str(i): {"uid": i, "key": [f"k{i}"], "content": "x" * 200}
                                                for i in range(100_000)}}))
        secs = _time(lambda: load_lorebook(book), runs=1)
        print(f"synthetic lorebook, 100,000 entries ({book.stat().st_size / 2**20:.1f} MiB): {secs:.2f} s")
        chat = Path(d) / "big.jsonl"
        lines = [json.dumps({"user_name": "u", "character_name": "c", "chat_metadata": {}})]
        lines += [json.dumps({"name": "c", "is_user": i % 2 == 0, "mes": "y" * 200, "send_date": i})
                  for i in range(100_000)]
        chat.write_text("\n".join(lines))
        secs = _time(lambda: load_chat(chat), runs=1)
        print(f"synthetic ST chat, 100,000 messages ({chat.stat().st_size / 2**20:.1f} MiB): {secs:.2f} s")


if __name__ == "__main__":
    main()
