"""App start → painted window, offscreen, in a fresh process (``run_bench.py`` starts it).

    QT_QPA_PLATFORM=offscreen python tests/benchmarks/measure_start.py DB_PATH T0

``T0`` is the parent's ``time.time()`` just before it started this process, so the figure
includes the interpreter's own start and every import, as a writer's ``loomscope gui`` pays.
This process then does what :func:`gui.app.run_app` does (the same functions in the same order:
``ensure_app``, ``open_store``, ``build_context``, ``MainWindow``, ``restore_state``, ``show``,
``start``, ``end_start_pause``, with the collector paused from the first line as ``gui/cli.py``
pauses it) on the library at ``DB_PATH`` (the seeded sample library, prepared by the parent) and
stops the clock:

* **painted**: right after the main window's first paint event (the window is on screen);
* **preview**: right after the first paint that follows the first preview applied to the window
  (the sample chat's blocks are on screen).

Prints one JSON object on the last line of stdout (seconds since ``T0``).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

gc.disable()  # as `loomscope gui` starts the app (gui/cli.py): gui.app.end_start_pause turns it back on
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from PySide6.QtCore import QEvent, QObject, QSettings, QTimer  # noqa: E402

from engine.storage import open_store  # noqa: E402
from gui.app import build_context, end_start_pause, ensure_app  # noqa: E402
from gui.main_window import MainWindow  # noqa: E402

TIMEOUT_S = float(os.environ.get("BENCH_START_TIMEOUT", "60"))


class FirstPaints(QObject):
    """Records the time of the window's first paint, and of the first paint after a preview."""

    def __init__(self, window: Any, t0: float) -> None:
        super().__init__(window)
        self.t0 = t0
        self.painted: float | None = None
        self.preview: float | None = None
        self._previewed = False
        window.installEventFilter(self)
        window.preview_applied.connect(self._on_preview)

    def _on_preview(self, _preview: object) -> None:
        self._previewed = True
        QTimer.singleShot(0, self._repaint_done)

    def _repaint_done(self) -> None:
        # the event loop has processed the paints the preview queued
        if self.preview is None:
            self.preview = time.time() - self.t0

    def eventFilter(self, obj: Any, event: Any) -> bool:
        if event.type() == QEvent.Type.Paint and self.painted is None:
            QTimer.singleShot(0, self._paint_done)
        return False

    def _paint_done(self) -> None:
        if self.painted is None:
            self.painted = time.time() - self.t0


def main(argv: list[str]) -> int:
    db, t0 = argv[0], float(argv[1])
    app = ensure_app()
    store = open_store(db)
    with tempfile.TemporaryDirectory(prefix="loomscope-bench-start-") as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        window = MainWindow(build_context(store, settings=settings))
        probe = FirstPaints(window, t0)
        window.resize(1440, 900)
        window.restore_state()
        window.show()
        window.start(None)
        end_start_pause(window.ctx)
        deadline = time.time() + TIMEOUT_S
        while (probe.painted is None or probe.preview is None) and time.time() < deadline:
            app.processEvents()
            time.sleep(0.001)
        window.close()
        app.processEvents()
    store.close()
    shown = None if probe.preview is None or probe.painted is None else max(probe.preview, probe.painted)
    print(json.dumps({"start_painted_s": probe.painted, "start_preview_s": shown}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
