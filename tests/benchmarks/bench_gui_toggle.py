"""Responsiveness: time from an exclude toggle to the updated blocks table, on a 10,000-message chat.

Runs the real window offscreen on a real SQLite library. Each sample: toggle manual-exclude
on a message through the blocks table (``setData`` → undo command → store → document),
run the preview without waiting for the debounce timer (``flush``; the fixed
``PREVIEW_DEBOUNCE_MS`` is reported separately), and stop the clock when the window has
reset the table and the other views (``preview_applied``). Prints median and p95 of the
total, and of its parts: the engine on the worker, and the views' update on the main thread.

Usage: ``QT_QPA_PLATFORM=offscreen .venv/bin/python tests/benchmarks/bench_gui_toggle.py [N_MESSAGES] [SAMPLES] [TAB]``
(``TAB`` = ``blocks`` (default) or ``chat``: which centre tab is visible while toggling).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer

from engine.schema import Chat, ChatMessage, ContextSettings
from engine.storage import open_store
from gui.app import build_context, ensure_app
from gui.main_window import MainWindow
from gui.models.blocks_model import BlockColumn
from gui.preview import PREVIEW_DEBOUNCE_MS


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    n_messages = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    tab = sys.argv[3] if len(sys.argv) > 3 else "blocks"
    app = ensure_app()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", seed=False)
        msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                            content=f"Message {i}: the courier counts lanterns on the quay and thinks about "
                                    f"the parcel, the ledger and the warden's door ({i}).")
                for i in range(n_messages)]
        t0 = time.perf_counter()
        chat_id = store.chats.add(Chat(title="bench", messages=msgs), title="bench",
                                 settings=ContextSettings(model="gpt-4o", strategy="manual"))
        t_store = time.perf_counter() - t0
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        ctx = build_context(store, settings=settings)
        win = MainWindow(ctx)
        win.resize(1440, 900)
        win.show()
        win.select_tab(tab)

        loop = QEventLoop()
        applied: list[float] = []

        def on_applied(_p: object) -> None:
            applied.append(time.perf_counter())
            loop.quit()

        win.preview_applied.connect(on_applied)
        timeout = QTimer()
        timeout.setSingleShot(True)
        timeout.setInterval(120_000)
        timeout.timeout.connect(loop.quit)

        def wait() -> None:
            timeout.start()
            loop.exec()
            timeout.stop()
            if not applied:
                raise SystemExit("bench_gui_toggle: no preview within 120 s")

        t0 = time.perf_counter()
        win.start(chat_id)
        ctx.preview.flush()
        wait()
        t_open = time.perf_counter() - t0
        assert win.preview is not None and len(win.preview.blocks) >= n_messages

        totals, engine, views = [], [], []
        model = win.blocks_panel.model
        for k in range(samples + 2):
            index = 2 * (k % 50) + 1  # old history, far from the end
            row = model.row_of_message(index)
            checked = model.block(row).manual_excluded
            idx = model.index(row, BlockColumn.EXCLUDE)
            applied.clear()
            t0 = time.perf_counter()
            model.setData(idx, Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked,
                          Qt.ItemDataRole.CheckStateRole)
            ctx.preview.flush()
            wait()
            t1 = applied[-1]
            outcome = ctx.preview.last_outcome
            assert outcome is not None
            new_row = model.row_of_message(index)
            assert model.block(new_row).manual_excluded != checked, "table did not update"
            if k < 2:
                continue  # warm-up
            totals.append(t1 - t0)
            engine.append(outcome.elapsed_s)
            views.append(t1 - t0 - outcome.elapsed_s)

        ms = 1000.0
        print(f"bench_gui_toggle: {n_messages:,} messages, {len(win.preview.blocks):,} blocks, {samples} toggles, "
              f"{tab} tab visible")
        print(f"  store write of the chat: {t_store:.2f} s; open chat + first preview: {t_open:.2f} s")
        print(f"  toggle → updated table (engine + model reset), debounce excluded: "
              f"median {statistics.median(totals) * ms:.0f} ms, p95 {p95(totals) * ms:.0f} ms")
        print(f"    engine preview on the worker: median {statistics.median(engine) * ms:.0f} ms, "
              f"p95 {p95(engine) * ms:.0f} ms")
        print(f"    main thread (save, undo command, model resets, views): median "
              f"{statistics.median(views) * ms:.0f} ms, p95 {p95(views) * ms:.0f} ms")
        print(f"  plus the fixed debounce before the preview starts: {PREVIEW_DEBOUNCE_MS} ms")
        win.close()
        ctx.preview.shutdown()
        win.deleteLater()
        app.processEvents()
        store.close()
    sys.stdout.flush()
    # PySide6 can crash while finalizing Qt objects at interpreter exit; the figures are out
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
