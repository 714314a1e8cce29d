"""Importing a SillyTavern folder with 10,000 chat files (issue 25 item 4; plain script, not collected by pytest).

Run: ``.venv/bin/python tests/benchmarks/bench_huge_folder.py [--chats 10000] [--messages 12]``.

Builds the fixture user folder of ``tests/engine/importers/st_fixture.py`` with ``--chats`` chat files under
three characters' folders (each chat ``--messages`` messages, every tenth linking a world that does not exist, so a
warning repeats per file), then runs ``loomscope import DATA --db NEW.db --format json`` in a child process, twice
(first import, then the unchanged re-import), and prints the wall time and the child's peak RSS of each. Target
(issue 25): the first import in at most 60 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.engine.importers.st_fixture import CARD, build_st_user, card_png  # noqa: E402

#: Issue 25's target for the first import of 10,000 chat files.
TARGET_S = 60.0


def build_huge_folder(root: Path, chats: int, messages: int) -> Path:
    """The fixture user folder plus ``chats`` chat files; returns the ``data/`` folder."""
    user = build_st_user(root)
    names = ["hero", "mira", "orin"]
    for name in names[1:]:
        (user / "characters" / f"{name}.png").write_bytes(card_png({**CARD, "name": name.title()}))
    for n in range(chats):
        folder = user / "chats" / names[n % len(names)]
        folder.mkdir(exist_ok=True)
        meta: dict = {"chat_metadata": {"world_info": "Missing World"} if n % 10 == 0 else {}}
        lines = [{"user_name": "Alex", "character_name": names[n % 3].title(), "create_date": "2024-01-01", **meta}]
        lines += [{"name": "Alex" if i % 2 == 0 else names[n % 3].title(), "is_user": i % 2 == 0,
                   "send_date": f"2024-01-01 10:{i % 60:02d}", "mes": f"Chat {n}, message {i}: the harbor lights."}
                  for i in range(messages)]
        (folder / f"chat {n:05d}.jsonl").write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return root / "data"


def run_import(data: Path, db: Path) -> tuple[float, float, float, dict]:
    """``loomscope import DATA`` in a child: (wall s, the child's CPU s, peak RSS in MiB, its JSON report).

    The peak is the largest of all children so far (``RUSAGE_CHILDREN``): the first run's is its own.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "import", str(data), "--db", str(db), "--format",
                           "json"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 5):
        raise SystemExit(f"import failed ({proc.returncode}): {proc.stderr[-2000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    return wall, cpu, max(usage.ru_maxrss, before) / 1024, json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chats", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=12)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        data = build_huge_folder(Path(d), args.chats, args.messages)
        print(f"built {args.chats:,} chat files ({args.messages} messages each) in {time.perf_counter() - t0:.1f} s")
        db = Path(d) / "lib.db"
        first, cpu1, rss1, report = run_import(data, db)
        again, cpu2, rss2, report2 = run_import(data, db)
    added = len(report["added"])
    verdict = "pass" if first <= TARGET_S or args.chats < 10_000 else "FAIL"
    print(f"first import: {first:.1f} s wall ({cpu1:.1f} s CPU), peak RSS {rss1:.0f} MiB, {added:,} objects added "
          f"(target <= {TARGET_S:.0f} s at 10,000 chats: {verdict})")
    print(f"re-import (unchanged): {again:.1f} s wall ({cpu2:.1f} s CPU), peak RSS {rss2:.0f} MiB, {len(report2['unchanged']):,} unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
