"""Smoke test of ``make bench`` (tests/benchmarks/run_bench.py): every measurement once, at tiny sizes.

The figures themselves are not judged here (speed targets live in the benchmark's table); this
checks that each benchmark runs, measures something, and lands in the table and the JSON.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "tests" / "benchmarks"
sys.path.insert(0, str(BENCH))

import run_bench  # noqa: E402
from chatgen import make_chat, toggle_indices  # noqa: E402

HAS_LANGCHAIN = importlib.util.find_spec("langchain_core") is not None


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    proc = subprocess.run([sys.executable, str(BENCH / "run_bench.py"), "--smoke", "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text(encoding="utf-8"))


def test_smoke_run_prints_one_table_and_writes_every_figure(smoke: tuple[str, dict]) -> None:
    stdout, report = smoke
    assert "targets met" in stdout and str(report["plan"]["sizes"][0]) in stdout
    sizes = report["plan"]["sizes"]
    for n in sizes:
        e = report["raw"]["engine"][str(n)]
        assert e["n"] == n and e["blocks"] == n
        assert e["floor_s"] > 0 and e["cold_s"] > 0 and e["warm_s"] > 0
        assert len(e["warm_runs_s"]) == len(e["toggles"]) == report["plan"]["toggles"][sizes.index(n)]
        assert len(e["warm_rows_runs_s"]) == len(e["toggles"]) and e["warm_read_s"] >= e["warm_s"]
        assert all(r == pytest.approx(w + b) for r, w, b in zip(e["warm_read_runs_s"], e["warm_runs_s"],
                                                               e["warm_rows_runs_s"]))
        assert e["max_rss_mb"] > 0 and e["process_max_rss_mb"] >= e["max_rss_mb"] * 0.9
    p = report["raw"]["process"]
    assert p["loomscope_s"] > 0 and p["tiktoken_s"] > 0 and p["prompt_tokens"] > 0
    assert report["raw"]["rss"]["max_rss_mb"] > 0
    g = report["raw"]["gui"]
    assert g["open_stall_s"] > 0 and g["open_to_painted_s"] >= g["open_stall_s"]
    assert 0 < g["click_tick_s"] <= g["click_row_s"]
    start = report["raw"]["start"]
    assert len(start["runs"]) == report["plan"]["start_repeats"]
    assert 0 < start["painted_s"] <= start["preview_s"]  # the window paints before the sample chat's blocks show
    rows = {r["figure"]: r for r in report["rows"]}
    judged = [r for r in rows.values() if r["target"] and r["target"] not in ("the floor", "reference", "reported")
              and not r["target"].startswith("LangChain")]
    # + Text vs Chat Completion (26); app start, batch floor and trim incl. rows, stricter floor (29)
    assert len(judged) == (15 if HAS_LANGCHAIN else 13)
    st = report["raw"]["st"]
    assert st["chat_completion"]["cold_s"] > 0 and st["text_completion"]["repeat_s"] > 0
    assert st["text_completion"]["prompt_tokens"] > 0 and len(st["text_completion"]["runs"]) == report["plan"][
        "st_repeats"]
    assert all(r["verdict"] in ("pass", "FAIL") for r in judged)
    assert rows["scaling exponent, cold"]["values"]["exponent"] == pytest.approx(
        run_bench.exponent(sizes, [report["raw"]["engine"][str(n)]["cold_s"] for n in sizes]))


@pytest.mark.skipif(not HAS_LANGCHAIN, reason="langchain-core is the bench extra: pip install -e '.[bench]'")
def test_smoke_run_trims_with_the_engines_own_counter(smoke: tuple[str, dict]) -> None:
    _stdout, report = smoke
    for e in report["raw"]["engine"].values():
        assert e["trim_counter_agrees"] is True
        assert e["trim_s"] > 0 and e["trim_kept"] > 0
        assert e["trim_max_tokens"] == e["budget"] - 3  # the preview's budget less its reply priming


def test_exponent_is_the_log_log_slope() -> None:
    sizes = [1_000, 10_000, 50_000]
    assert run_bench.exponent(sizes, [n * 2e-6 for n in sizes]) == pytest.approx(1.0)
    assert run_bench.exponent(sizes, [(n ** 1.5) * 1e-9 for n in sizes]) == pytest.approx(1.5)
    assert run_bench.exponent(sizes, [0.01, 0.01, 0.01]) == pytest.approx(0.0)


def test_verdict_and_table_layout() -> None:
    assert run_bench.verdict(True, None) == "pass"
    assert run_bench.verdict(True, False) == "FAIL"
    assert run_bench.verdict(None) == "n/a"
    rows = [run_bench.Row("a", ["1 ms", "2 ms", "3 ms"], target="≤ 1 ms", verdict="FAIL"),
            run_bench.Row("longer figure", span="a spanning text wider than the three size columns together",
                          target="t", verdict="pass")]
    lines = run_bench.render(rows, (1, 2, 3)).splitlines()
    assert len(lines) == 4
    assert lines[2].index("≤ 1 ms") == lines[3].index(" t ") + 1  # targets line up


def test_chat_generator_is_deterministic_with_tool_exchanges() -> None:
    a, b = make_chat(500), make_chat(500)
    assert a == b and len(a.messages) == 500
    assert a.messages[-1].role == "user"
    calls = [m for m in a.messages if m.tool_calls]
    assert calls and all(a.messages[a.messages.index(m) + 1].role == "tool" for m in calls)
    picks = toggle_indices(a, 6)
    assert len(picks) == 6 and all(a.messages[i].role in ("user", "assistant") and not a.messages[i].tool_calls
                                   for i in picks)
