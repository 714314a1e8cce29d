"""Does the app's garbage-collector policy (``gui.gc_policy``) pay? One side per fresh process.

    QT_QPA_PLATFORM=offscreen python tests/benchmarks/measure_gc_policy.py --policy on|off [--n 10000] [--clicks 40]

The real window on a real SQLite library holding a ``chatgen.make_chat`` chat of ``n`` messages
(blocks tab shown). The chat is opened (after a 10-message one), then ``clicks`` Excl. checkboxes
of recent messages are toggled one after the other as the view's delegate does (``setData`` with
``CheckStateRole``); each click is timed until the window has applied the engine's preview of the
toggled chat (``preview_applied``). Every cyclic collection of the oldest generation (on any
thread) is timed through ``gc.callbacks``. ``--policy off`` disables the policy (CPython's own
collector schedule); ``on`` holds the collector from the chat load's start to its first preview,
then freezes (``gui.gc_policy``). An engine
that still pauses the collector itself (``engine.pipeline.gc_paused``, removed by issue 29) has
that pause turned off here, so both sides measure the app's policy alone.

Prints one JSON object on the last line of stdout (times in seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from chatgen import make_chat, settings, toggle_indices  # noqa: E402
from measure_gui import run_until, settle  # noqa: E402
from PySide6.QtCore import QSettings, Qt  # noqa: E402

import engine.pipeline  # noqa: E402
from engine.storage import open_store  # noqa: E402
from gui.app import build_context, ensure_app  # noqa: E402
from gui.main_window import MainWindow  # noqa: E402
from gui.models.blocks_model import BlockColumn  # noqa: E402


class FullCollections:
    """Times every generation-2 collection (any thread) through :data:`gc.callbacks`."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.durations.append(time.perf_counter() - self._start)

    def take(self) -> list[float]:
        out, self.durations = self.durations, []
        return out


def _toggle_times(app: Any, win: MainWindow, n: int, clicks: int) -> list[float]:
    table = win.blocks_panel.table
    model = win.blocks_panel.model
    proxy = table.model()
    applied: list[float] = []
    win.preview_applied.connect(lambda _p: applied.append(time.perf_counter()))
    times: list[float] = []
    for message in [i for i in toggle_indices(make_chat(n), 4 * clicks) if i > n - 2000][:clicks]:
        row = model.row_of_message(message)
        src = model.index(row, BlockColumn.EXCLUDE)
        current = model.data(src, Qt.ItemDataRole.CheckStateRole)
        want = Qt.CheckState.Unchecked if current == Qt.CheckState.Checked else Qt.CheckState.Checked
        applied.clear()
        t0 = time.perf_counter()
        proxy.setData(proxy.mapFromSource(src), want, Qt.ItemDataRole.CheckStateRole)
        run_until(app, lambda: bool(applied))
        times.append(applied[0] - t0)
        settle(app, 0.05)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", choices=("on", "off"), required=True)
    ap.add_argument("--n", type=int, default=10_000, help="messages of the chat")
    ap.add_argument("--clicks", type=int, default=40)
    args = ap.parse_args(argv)
    if hasattr(engine.pipeline, "gc_paused"):  # an engine from before issue 29: its own pause off
        engine.pipeline.gc_paused = contextlib.nullcontext
    app = ensure_app()
    full = FullCollections()
    out: dict[str, Any] = {"policy": args.policy, "messages": args.n}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", seed=False)
        small = store.chats.add(make_chat(10), title="small", settings=settings())
        big = store.chats.add(make_chat(args.n), title="big", settings=settings())
        ctx = build_context(store, settings=QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat))
        assert ctx.gc_policy is not None
        ctx.gc_policy.enabled = args.policy == "on"
        win = MainWindow(ctx)
        win.resize(1440, 900)
        win.show()
        win.select_tab("blocks")
        shown: list[Any] = []
        win.preview_applied.connect(shown.append)
        win.start(small)
        run_until(app, lambda: any(p is not None for p in shown))
        settle(app)
        shown.clear()
        t0 = time.perf_counter()
        win.open_chat(big)
        run_until(app, lambda: any(p is not None and len(p.blocks) >= args.n for p in shown))
        out["open_to_applied_s"] = time.perf_counter() - t0
        settle(app, 0.5)
        out["settle_s"] = ctx.gc_policy.last_settle_s
        out["settles"] = ctx.gc_policy.settles
        out["frozen_objects"] = gc.get_freeze_count()
        out["open_full_collections_s"] = full.take()
        times = _toggle_times(app, win, args.n, args.clicks)
        gcs = full.take()
        out.update({
            "toggle_median_s": statistics.median(times), "toggle_p90_s": sorted(times)[int(0.9 * len(times))],
            "toggle_max_s": max(times), "toggle_total_s": sum(times),
            "toggle_full_collections": len(gcs), "toggle_full_collections_total_s": sum(gcs),
            "toggle_full_collection_max_s": max(gcs, default=0.0),
        })
        win.close()
        ctx.preview.shutdown()
        store.close()
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # PySide6 can crash while finalizing Qt objects at interpreter exit; the figures are out


if __name__ == "__main__":
    raise SystemExit(main())
