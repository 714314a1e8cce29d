"""Re-importing an unchanged SillyTavern folder of 1,000 chats (issue 30: target ≤ 2 s), plain script.

Run: ``.venv/bin/python tests/benchmarks/bench_resync.py``. Builds a user folder with one card, one
world and 1,000 chats of 40 messages, imports it into a fresh SQLite library, then times
:func:`engine.st_sync.sync_st_folder` on the unchanged folder (median of 5) and after one chat file
changed, and prints both with the target.
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

from engine.st_sync import sync_st_folder  # noqa: E402
from engine.storage import open_store  # noqa: E402
from tests.engine.importers.st_fixture import build_st_user  # noqa: E402

CHATS = 1000
MESSAGES = 40
TARGET_S = 2.0


def _folder(root: Path) -> Path:
    user = build_st_user(root)
    header = json.dumps({"user_name": "Alex", "character_name": "Kael", "chat_metadata": {}})
    for n in range(CHATS):
        lines = [header] + [json.dumps({"name": "Kael" if i % 2 else "Alex", "is_user": not i % 2, "is_system": False,
                                        "send_date": "September 28, 2024 10:00am",
                                        "mes": f"message {i} of chat {n}: the ship, the storm, the harbor.",
                                        "extra": {}}) for i in range(MESSAGES)]
        (user / "chats" / "hero" / f"chat {n:04d}.jsonl").write_text("\n".join(lines), encoding="utf-8")
    return user


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        user = _folder(Path(d))
        with open_store(str(Path(d) / "lib.db"), seed=False) as store:
            t0 = time.perf_counter()
            first = sync_st_folder(store, user)
            full = time.perf_counter() - t0
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                again = sync_st_folder(store, user)
                samples.append(time.perf_counter() - t0)
            assert not again.changed and len(again.unchanged) == len(first.added)
            path = user / "chats" / "hero" / "chat 0500.jsonl"
            path.write_text(path.read_text("utf-8") + "\n" + json.dumps({"name": "Alex", "is_user": True,
                                                                         "mes": "one more"}), encoding="utf-8")
            t0 = time.perf_counter()
            one = sync_st_folder(store, user)
            changed = time.perf_counter() - t0
            assert [r.key for r in one.changed] == ["chats/hero/chat 0500.jsonl"]
    unchanged = statistics.median(samples)
    print(f"st folder of {CHATS} chats x {MESSAGES} messages: first import {full:.2f} s; "
          f"unchanged re-import {unchanged:.3f} s (target <= {TARGET_S} s: {'ok' if unchanged <= TARGET_S else 'SLOW'}); "
          f"one chat changed {changed:.2f} s")
    return 0 if unchanged <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
