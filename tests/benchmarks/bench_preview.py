"""Quick look at one size of ``make bench``'s engine figures (default 10,000 messages).

    .venv/bin/python tests/benchmarks/bench_preview.py [N_MESSAGES] [TOGGLES]

Runs ``measure_engine.py`` (a fresh process, so the cold preview is cold) and prints its
figures: tiktoken's batch encoding of the same texts (the floor), the cold preview, the warm
preview after each exclude toggle and LangChain's ``trim_messages`` after the same toggles
(when the ``bench`` extra is installed). ``make bench`` (run_bench.py) measures all sizes and
the whole-process, memory and GUI figures, with the targets.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from run_bench import fmt_s, run_child  # noqa: E402


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    toggles = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    argv = [sys.executable, str(HERE / "measure_engine.py"), str(n), "--toggles", str(toggles)]
    if importlib.util.find_spec("langchain_core") is None:
        argv.append("--no-trim")
    e = run_child(argv, 900).json()
    print(f"messages: {n:,}, blocks: {e['blocks']:,}, kept: {e['kept_blocks']:,}, prompt tokens: {e['prompt_tokens']:,}")
    print(f"tiktoken encode_ordinary_batch (o200k_base, same texts): median {fmt_s(e['floor_s'])}, "
          f"min {fmt_s(e['floor_min_s'])}")
    print(f"cold preview: {fmt_s(e['cold_s'])}  ({e['cold_s'] / e['floor_s']:.2f} × the floor)")
    runs = ", ".join(fmt_s(s) for s in e["warm_runs_s"])
    print(f"warm preview after one exclude toggle: median {fmt_s(e['warm_s'])} "
          f"({100 * e['warm_s'] / e['floor_s']:.1f} % of the floor); runs: {runs}")
    if "trim_s" in e:
        print(f"trim_messages (strategy last, warm per-text cache, same counter and budget): median "
              f"{fmt_s(e['trim_s'])}; kept {e['trim_kept']:,} messages; trim ÷ warm (our speed-up): {e['trim_s'] / e['warm_s']:.2f} ×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
