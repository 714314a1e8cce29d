"""The GUI figures, offscreen, in a fresh process (``run_bench.py`` starts it).

    QT_QPA_PLATFORM=offscreen python tests/benchmarks/measure_gui.py [--open N] [--click N] [--samples K]

The real window on a real SQLite library holding ``chatgen.make_chat`` chats:

* **open stall**: the window shows a 10-message chat; then the 5,000-message chat is opened
  (``MainWindow.open_chat``, what a click in the library does). A 2 ms heartbeat timer runs on
  the UI thread from just before the call until the first preview of that chat is painted;
  the longest gap between two heartbeats (the call itself included) is the longest stall.
* **click → row**: on the 10,000-message chat in the blocks tab, the Excl. checkbox of a kept
  recent message is clicked (``setData`` on the view's model with ``CheckStateRole``: what the
  view's delegate does on a click); the clock stops when the table's viewport has painted that
  row (a paint whose region meets the row, timed after the paint) showing the click:
  *tick*: the row's check state shows the click; *row*: the engine's preview of the toggled chat
  has been applied (``preview_applied``) and painted. When the view has scrolled the row out of
  sight by then, the paint that moved it counts (``click_row_scrolled_away`` says how often). Nothing is flushed: the app's own debounce
  is part of the figure. Median over ``K`` clicks (after one warm-up click).

Prints one JSON object on the last line of stdout (times in seconds).
"""

from __future__ import annotations

import argparse
import itertools
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
from PySide6.QtCore import QEvent, QEventLoop, QObject, QSettings, Qt, QTimer  # noqa: E402

from engine.storage import open_store  # noqa: E402
from gui.app import build_context, ensure_app  # noqa: E402
from gui.main_window import MainWindow  # noqa: E402
from gui.models.blocks_model import BlockColumn  # noqa: E402

TIMEOUT_S = float(os.environ.get("BENCH_GUI_TIMEOUT", "120"))


class PaintWatch(QObject):
    """Calls ``on_painted(region)`` right after each paint of ``widget`` (the region it painted)."""

    def __init__(self, widget: Any, on_painted: Any) -> None:
        super().__init__(widget)
        self._on_painted = on_painted
        widget.installEventFilter(self)

    def eventFilter(self, obj: Any, event: Any) -> bool:
        if event.type() == QEvent.Type.Paint:
            region = event.region()
            QTimer.singleShot(0, lambda r=region: self._on_painted(r))  # runs once the paint is done
        return False


def run_until(app: Any, done: Any, timeout_s: float = TIMEOUT_S) -> None:
    """Process events until ``done()`` is true (``SystemExit`` after ``timeout_s``)."""
    deadline = time.perf_counter() + timeout_s
    loop = QEventLoop()
    poll = QTimer()
    poll.setInterval(1)
    poll.timeout.connect(lambda: loop.quit() if done() or time.perf_counter() > deadline else None)
    poll.start()
    if not done():
        loop.exec()
    poll.stop()
    if not done():
        raise SystemExit(f"measure_gui: timed out after {timeout_s:.0f} s")


def settle(app: Any, seconds: float = 0.3) -> None:
    """Let pending timers (debounce, repaints) run out."""
    end = time.perf_counter() + seconds
    run_until(app, lambda: time.perf_counter() >= end)


def measure_open(app: Any, win: MainWindow, chat_id: str, n: int) -> dict[str, Any]:
    """Longest UI-thread stall while opening ``chat_id``, up to its first painted preview."""
    applied: list[float] = []
    painted: list[float] = []
    beats: list[float] = []

    def on_applied(p: Any) -> None:
        if p is not None and len(p.blocks) >= n:
            applied.append(time.perf_counter())

    def on_painted(_region: Any) -> None:
        if applied:
            painted.append(time.perf_counter())

    win.preview_applied.connect(on_applied)
    watch = PaintWatch(win.blocks_panel.table.viewport(), on_painted)
    heart = QTimer()
    heart.setTimerType(Qt.TimerType.PreciseTimer)
    heart.setInterval(2)
    heart.timeout.connect(lambda: beats.append(time.perf_counter()))
    heart.start()
    t0 = time.perf_counter()
    win.open_chat(chat_id)
    returned = time.perf_counter()
    run_until(app, lambda: bool(painted))
    heart.stop()
    end = painted[0]
    marks = [t0, *[b for b in beats if b < end], end]
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    win.preview_applied.disconnect(on_applied)
    watch.deleteLater()
    return {"open_messages": n, "open_stall_s": max(gaps), "open_call_s": returned - t0,
            "open_to_painted_s": end - t0, "open_heartbeats": len(marks) - 2}


def measure_clicks(app: Any, win: MainWindow, n: int, samples: int) -> dict[str, Any]:
    """Median click → ticked row and click → row with the engine's result, painted."""
    table = win.blocks_panel.table
    model = win.blocks_panel.model
    proxy = table.model()
    state: dict[str, Any] = {}

    def row_rect() -> Any:
        row = model.row_of_message(state["message"])
        if row is None:
            return None
        pidx = proxy.mapFromSource(model.index(row, BlockColumn.EXCLUDE))
        rect = table.visualRect(pidx)
        rect.setLeft(0)
        rect.setRight(table.viewport().width())
        return rect, row

    def on_painted(region: Any) -> None:
        if "t0" not in state or "row" in state:
            return
        found = row_rect()
        visible = found is not None and found[0].intersects(table.viewport().rect())
        if visible and not region.intersects(found[0]):
            return
        now = time.perf_counter()
        shown = (model.data(model.index(found[1], BlockColumn.EXCLUDE), Qt.ItemDataRole.CheckStateRole)
                 if found is not None else None)
        if shown != state["want"]:
            return
        # a row the view scrolled away from counts as shown at the paint that moved it
        if "tick" not in state:
            state["tick"] = now
        if "applied" in state:
            state["row"] = now
            state["away"] = not visible

    def on_applied(_p: Any) -> None:
        if "t0" in state:
            state["applied"] = time.perf_counter()

    watch = PaintWatch(table.viewport(), on_painted)
    win.preview_applied.connect(on_applied)
    chat = make_chat(n)
    kept = [i for i in toggle_indices(chat, 2 * (samples + 1)) if i > n - 2000][: samples + 1]
    ticks: list[float] = []
    rows: list[float] = []
    away = 0
    for k, message in enumerate(kept):
        row = model.row_of_message(message)
        src = model.index(row, BlockColumn.EXCLUDE)
        pidx = proxy.mapFromSource(src)
        table.scrollTo(pidx)
        settle(app, 0.2)
        current = model.data(src, Qt.ItemDataRole.CheckStateRole)
        want = Qt.CheckState.Unchecked if current == Qt.CheckState.Checked else Qt.CheckState.Checked
        state.clear()
        state.update(message=message, want=want)
        state["t0"] = t0 = time.perf_counter()
        proxy.setData(pidx, want, Qt.ItemDataRole.CheckStateRole)
        run_until(app, lambda: "row" in state)
        if k == 0:
            continue  # warm-up click
        ticks.append(state["tick"] - t0)
        rows.append(state["row"] - t0)
        away += state["away"]
    win.preview_applied.disconnect(on_applied)
    watch.deleteLater()
    return {"click_messages": n, "click_tick_s": statistics.median(ticks), "click_row_s": statistics.median(rows),
            "click_row_scrolled_away": away,
            "click_tick_runs_s": ticks, "click_row_runs_s": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--open", type=int, default=5000, help="messages of the chat opened for the stall figure")
    ap.add_argument("--click", type=int, default=10_000, help="messages of the chat clicked in")
    ap.add_argument("--samples", type=int, default=7)
    args = ap.parse_args(argv)
    app = ensure_app()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", seed=False)
        ids = {n: store.chats.add(make_chat(n), title=f"bench {n}", settings=settings())
               for n in (10, args.open, args.click)}
        ctx = build_context(store, settings=QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat))
        win = MainWindow(ctx)
        win.resize(1440, 900)
        win.show()
        win.select_tab("blocks")
        shown: list[Any] = []
        win.preview_applied.connect(shown.append)
        win.start(ids[10])
        run_until(app, lambda: any(p is not None for p in shown))
        settle(app)
        out.update(measure_open(app, win, ids[args.open], args.open))
        settle(app)
        shown.clear()
        win.open_chat(ids[args.click])
        run_until(app, lambda: any(p is not None and len(p.blocks) >= args.click for p in shown))
        settle(app)
        out.update(measure_clicks(app, win, args.click, args.samples))
        win.close()
        ctx.preview.shutdown()
        store.close()
    print(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # PySide6 can crash while finalizing Qt objects at interpreter exit; the figures are out


if __name__ == "__main__":
    raise SystemExit(main())
