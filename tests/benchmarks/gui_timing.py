"""GUI responsiveness figures for issue 12 (item 3), measured on the real window offscreen.

Two functions the bench harness imports (part F), each running in the calling process on a
real SQLite library in a temp folder:

- :func:`measure_click_to_repaint`: a real mouse click on the *Excl.* check box of a chat
  message in the prompt blocks table (10,000 messages by default) → the moment that row has
  been repainted with the box ticked. Also reports click → the engine's preview applied
  (the settled state, debounce included).
- :func:`measure_open_stall`: the longest the UI thread goes without serving a 5 ms heartbeat
  ``QTimer`` while a 5,000-message chat opens (from the open request until its first preview
  is shown and the chat list is laid out).

Both return plain dicts of floats (milliseconds) so the harness can print and dump them.
``QT_QPA_PLATFORM`` defaults to ``offscreen``. Run directly for a quick look::

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/benchmarks/gui_timing.py [N_CLICK] [N_OPEN]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from PySide6.QtCore import QEventLoop, QModelIndex, QPoint, QSettings, Qt, QTimer  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem  # noqa: E402

from engine.schema import Chat, ChatMessage, ContextSettings  # noqa: E402

#: Heartbeat period (ms) of the stall probe; a stall is the longest gap between two beats.
HEARTBEAT_MS = 5
#: Quiet time after the first preview of an opened chat during which stalls still count (ms):
#: the chat list lays itself out in batches after the model is filled.
SETTLE_MS = 400
#: Longest wait for anything (ms) before a measurement gives up.
TIMEOUT_MS = 120_000


def bench_messages(n_messages: int) -> list[ChatMessage]:
    """``n_messages`` alternating user / assistant messages of ~25 tokens each."""
    return [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                        content=f"Message {i}: the courier counts lanterns on the quay and thinks about "
                                f"the parcel, the ledger and the warden's door ({i}).")
            for i in range(n_messages)]


class _Bench:
    """A window on a temp library with one big chat (``chat_id``) and a small one (``small_id``)."""

    def __init__(self, messages: Sequence[ChatMessage], size: tuple[int, int]) -> None:
        from engine.storage import open_store
        from gui.app import build_context, ensure_app
        from gui.main_window import MainWindow

        self.app = ensure_app()
        self._tmp = tempfile.TemporaryDirectory(prefix="loomscope-guibench-")
        tmp = Path(self._tmp.name)
        self.store = open_store(f"sqlite:///{tmp / 'bench.sqlite3'}", seed=False)
        settings = ContextSettings(model="gpt-4o", strategy="manual")
        self.chat_id = self.store.chats.add(Chat(title="bench", messages=list(messages)), title="bench",
                                           settings=settings)
        self.small_id = self.store.chats.add(Chat(title="small", messages=list(messages[:3])), title="small",
                                            settings=settings)
        qsettings = QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat)
        self.ctx = build_context(self.store, settings=qsettings)
        self.win = MainWindow(self.ctx)
        self.win.resize(*size)
        self.win.window_state.splitter_restored = True
        self.win.splitter.setSizes(self.win.default_splitter_sizes(size[0]))
        self.win.show()

    def wait(self, done: Callable[[], bool], timeout_ms: int = TIMEOUT_MS) -> None:
        """Run the event loop until ``done()`` (checked every millisecond)."""
        deadline = time.perf_counter() + timeout_ms / 1000
        loop = QEventLoop()
        while not done():
            if time.perf_counter() > deadline:
                raise TimeoutError("gui_timing: the window did not get there in time")
            QTimer.singleShot(1, loop.quit)
            loop.exec()

    def open_and_settle(self, chat_id: str) -> None:
        """Open ``chat_id`` and wait for its preview."""
        win = self.win
        win.open_chat(chat_id)
        self.wait(lambda: win.preview is not None and win.presenter.preview_chat == chat_id and not self.busy())

    def busy(self) -> bool:
        """A chat load or a preview is still under way."""
        loading = getattr(self.win, "is_loading", None)
        return bool(loading and loading()) or self.ctx.preview.is_busy()

    def close(self) -> None:
        self.win.close()
        self.ctx.preview.shutdown()
        self.win.deleteLater()
        self.app.processEvents()
        self.store.close()
        self._tmp.cleanup()


@contextmanager
def _bench(messages: Sequence[ChatMessage], size: tuple[int, int] = (1440, 900)) -> Iterator[_Bench]:
    bench = _Bench(messages, size)
    try:
        yield bench
    finally:
        bench.close()


class _PaintProbe(QStyledItemDelegate):
    """The Excl. column's delegate while measuring: paints as the default delegate does and
    notes when the watched source row is painted with the watched check state."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.watch: tuple[int, Qt.CheckState] | None = None  # (proxy row, state)
        self.painted_at: float | None = None

    def paint(self, painter: Any, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        super().paint(painter, option, index)
        if self.watch is not None and self.painted_at is None and index.row() == self.watch[0]:
            state = index.data(Qt.ItemDataRole.CheckStateRole)
            if state is not None and Qt.CheckState(state) == self.watch[1]:
                self.painted_at = time.perf_counter()


def _check_box_point(table: Any, index: QModelIndex) -> QPoint:
    """Where a user clicks to toggle the check box of ``index`` (a proxy index of ``table``)."""
    option = QStyleOptionViewItem()
    option.initFrom(table)
    option.rect = table.visualRect(index)
    option.features |= QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
    option.checkState = Qt.CheckState(index.data(Qt.ItemDataRole.CheckStateRole))
    option.displayAlignment = Qt.AlignmentFlag.AlignCenter
    rect = table.style().subElementRect(QStyle.SubElement.SE_ItemViewItemCheckIndicator, option, table)
    return rect.center() if rect.isValid() and not rect.isEmpty() else option.rect.center()


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure_click_to_repaint(n_messages: int = 10_000, samples: int = 20, *,
                             messages: Sequence[ChatMessage] | None = None) -> dict[str, float]:
    """Click → repainted row in the prompt blocks table, on a chat of ``n_messages``.

    Each sample is a real left click (``QTest.mouseClick``) on the Excl. check box of an old
    chat message's row, scrolled into view; the clock stops when the table has repainted that
    row with the box in its new state (the optimistic tick). ``settled`` is the same click up
    to the moment the engine's preview for the new state is shown (the 120 ms debounce
    included). Two warm-up clicks are not counted.

    Parameters
    ----------
    n_messages:
        Size of the generated chat (ignored when ``messages`` is given).
    samples:
        Counted clicks.
    messages:
        The chat to open instead of :func:`bench_messages` (e.g. one with tool exchanges).

    Returns
    -------
    dict
        ``n_messages``, ``samples``, ``tick_median_ms``, ``tick_p95_ms``, ``tick_max_ms``,
        ``settled_median_ms``, ``settled_p95_ms`` (milliseconds).
    """
    from gui.models.blocks_model import BlockColumn

    msgs = list(messages) if messages is not None else bench_messages(n_messages)
    with _bench(msgs) as bench:
        win = bench.win
        win.select_tab("blocks")
        bench.open_and_settle(bench.chat_id)
        panel = win.blocks_panel
        table, model, proxy = panel.table, panel.model, panel.proxy
        probe = _PaintProbe(table)
        table.setItemDelegateForColumn(BlockColumn.EXCLUDE, probe)
        candidates = [b.message_index for b in model.preview().blocks  # type: ignore[union-attr]
                      if b.message_index is not None and not b.protected][:200]
        ticks: list[float] = []
        settled: list[float] = []
        for k in range(samples + 2):
            message_index = candidates[(7 * k) % len(candidates)]
            row = model.row_of_message(message_index)
            assert row is not None
            index = proxy.mapFromSource(model.index(row, BlockColumn.EXCLUDE))
            table.scrollTo(index)
            bench.wait(lambda: True)
            bench.app.processEvents()
            was = Qt.CheckState(index.data(Qt.ItemDataRole.CheckStateRole))
            want = Qt.CheckState.Unchecked if was == Qt.CheckState.Checked else Qt.CheckState.Checked
            probe.watch, probe.painted_at = (index.row(), want), None
            applied: list[float] = []
            win.preview_applied.connect(lambda _p, a=applied: a.append(time.perf_counter()))
            point = _check_box_point(table, index)
            t0 = time.perf_counter()
            QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, point)
            bench.wait(lambda: probe.painted_at is not None)
            bench.wait(lambda: bool(applied) and not bench.busy())
            win.preview_applied.disconnect()
            probe.watch = None
            block = model.block(model.row_of_message(message_index))  # type: ignore[arg-type]
            if block.manual_excluded != (want == Qt.CheckState.Checked):
                raise AssertionError(f"message {message_index}: the preview did not take the click")
            if k < 2:
                continue
            ticks.append(probe.painted_at - t0)  # type: ignore[operator]
            settled.append(applied[0] - t0)
        ms = 1000.0
        return {"n_messages": float(len(msgs)), "samples": float(samples),
                "tick_median_ms": statistics.median(ticks) * ms, "tick_p95_ms": _percentile(ticks, 0.95) * ms,
                "tick_max_ms": max(ticks) * ms,
                "settled_median_ms": statistics.median(settled) * ms,
                "settled_p95_ms": _percentile(settled, 0.95) * ms}


def measure_open_stall(n_messages: int = 5_000, repeats: int = 3, *,
                       messages: Sequence[ChatMessage] | None = None) -> dict[str, float]:
    """Longest UI-thread stall while a chat of ``n_messages`` opens.

    The window starts on a 3-message chat; then, ``repeats`` times, the big chat is opened
    (``MainWindow.open_chat``, what a click in the library does) while a ``QTimer`` beats every
    :data:`HEARTBEAT_MS` ms; the longest gap between beats, from the open request until the
    first preview is shown plus :data:`SETTLE_MS`, is that open's stall. Between repeats the
    small chat is opened again.

    Returns
    -------
    dict
        ``n_messages``, ``longest_stall_ms`` (worst over the repeats), ``median_stall_ms``,
        ``open_to_preview_ms`` (median time until the preview is shown), ``stalls_over_50ms``
        (beats gaps > 50 ms, summed over the repeats).
    """
    msgs = list(messages) if messages is not None else bench_messages(n_messages)
    with _bench(msgs) as bench:
        win = bench.win
        win.select_tab("chat")
        bench.open_and_settle(bench.small_id)
        stalls: list[float] = []
        opens: list[float] = []
        over = 0
        for _ in range(repeats):
            gaps: list[float] = []
            last = [0.0]

            def beat(gaps: list[float] = gaps, last: list[float] = last) -> None:
                now = time.perf_counter()
                gaps.append(now - last[0])
                last[0] = now

            heart = QTimer()
            heart.setInterval(HEARTBEAT_MS)
            heart.timeout.connect(beat)
            heart.start()
            bench.wait(lambda: True)
            last[0] = t0 = time.perf_counter()
            win.open_chat(bench.chat_id)
            bench.wait(lambda: win.preview is not None and win.presenter.preview_chat == bench.chat_id
                       and not bench.busy())
            opened = time.perf_counter()
            bench.wait(lambda: time.perf_counter() - opened > SETTLE_MS / 1000)
            heart.stop()
            beat()
            stalls.append(max(gaps))
            over += sum(1 for g in gaps if g > 0.050)
            opens.append(opened - t0)
            bench.open_and_settle(bench.small_id)
        ms = 1000.0
        return {"n_messages": float(len(msgs)), "longest_stall_ms": max(stalls) * ms,
                "median_stall_ms": statistics.median(stalls) * ms,
                "open_to_preview_ms": statistics.median(opens) * ms, "stalls_over_50ms": float(over)}


def main(argv: list[str] | None = None) -> int:
    """Print both figures (``[N_CLICK] [N_OPEN]`` messages)."""
    args = sys.argv[1:] if argv is None else argv
    n_click = int(args[0]) if args else 10_000
    n_open = int(args[1]) if len(args) > 1 else 5_000
    click = measure_click_to_repaint(n_click)
    print(f"click → repainted row at {n_click:,} messages: median {click['tick_median_ms']:.1f} ms, "
          f"p95 {click['tick_p95_ms']:.1f} ms, max {click['tick_max_ms']:.1f} ms (target ≤ 100 ms); "
          f"click → preview shown: median {click['settled_median_ms']:.0f} ms")
    stall = measure_open_stall(n_open)
    print(f"opening a {n_open:,}-message chat: longest UI stall {stall['longest_stall_ms']:.1f} ms "
          f"(target ≤ 50 ms), {stall['stalls_over_50ms']:.0f} gaps > 50 ms, "
          f"open → preview shown {stall['open_to_preview_ms']:.0f} ms")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    os._exit(code)  # PySide6 can crash while finalizing Qt objects at interpreter exit
