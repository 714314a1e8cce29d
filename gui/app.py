"""QApplication bootstrap: builds one :class:`AppContext` and the main window.

``run_app`` is what ``loomscope`` / ``loomscope gui`` calls (:mod:`gui.cli`).
With ``screenshot`` it renders the window offscreen-ready at 1440×900 on the chosen chat,
waits for the preview, writes a PNG and returns 0 — for docs and tests.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QCoreApplication,
    QEventLoop,
    QMessageLogContext,
    QSettings,
    QTimer,
    QtMsgType,
    qInstallMessageHandler,
)
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QApplication

from engine.errors import LoomscopeError
from engine.pipeline import default_registries
from engine.pipeline import preview as engine_preview
from engine.schema import ContextPreview, PreviewRequest
from engine.storage import open_store

from .context import AppContext
from .document import ChatDocument
from .errors import user_error
from .gc_policy import CollectorPolicy
from .main_window import MainWindow
from .preview import PreviewController
from .tabs import TAB_NAMES

if TYPE_CHECKING:
    from engine.registries import Registries
    from engine.storage import Store

log = logging.getLogger(__name__)

ORGANIZATION = "Loomscope"
APPLICATION = "Loomscope"
#: Default screenshot size in pixels (``--size WxH`` changes it).
SCREENSHOT_SIZE = (1440, 900)
#: How often the event loop hands control back to Python so Ctrl+C is seen (ms).
SIGNAL_POLL_MS = 200
#: Exit code after Ctrl+C (SPEC §10: cancelled).
EXIT_INTERRUPTED = 130


def display_problem(env: dict[str, str] | None = None, platform: str | None = None) -> str | None:
    """Why the desktop app cannot open a window here, or ``None`` when it can (as far as we can tell).

    Checked before ``QApplication`` exists, because Qt aborts the process (no exception) when
    its platform plugin cannot start. An explicit ``QT_QPA_PLATFORM`` (``offscreen``,
    ``wayland``, ...) is the user's choice and is trusted. On Linux and the BSDs a window needs
    ``DISPLAY`` (X11) or ``WAYLAND_DISPLAY``; Qt's X11 plugin also needs ``libxcb-cursor0``.
    """
    env = dict(os.environ if env is None else env)
    platform = sys.platform if platform is None else platform
    if env.get("QT_QPA_PLATFORM"):
        return None
    if not (platform.startswith("linux") or "bsd" in platform):
        return None  # macOS and Windows always have their native platform plugin
    if env.get("WAYLAND_DISPLAY"):
        return None
    if not env.get("DISPLAY"):
        return "no display found (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    import ctypes.util

    if ctypes.util.find_library("xcb-cursor") is None:
        return "the X11 display needs the libxcb-cursor0 library, which is not installed"
    return None


def no_display_message(problem: str) -> str:
    """The one line printed when the app cannot open a window: the problem and what to do instead."""
    return (f"loomscope: gui: NO_DISPLAY: {problem}; to render the window to a PNG instead run "
            f"'loomscope --screenshot out.png [--size 1440x900] [--tab blocks]'\n")


def install_interrupt_handler(app: QApplication, window: MainWindow | None = None) -> QTimer:
    """Make Ctrl+C (SIGINT) close the window like the Quit action, instead of tracebacks.

    Qt's event loop runs in C++, where Python never sees the signal; a timer hands control back
    to Python every :data:`SIGNAL_POLL_MS` so the handler runs. The handler closes the window
    (saving its state, waiting for a running generation) and quits with exit code 130. Returns
    the timer (keep a reference).
    """
    def on_sigint(_signum: int, _frame: Any) -> None:
        app.setProperty("loomscope_interrupted", True)
        if window is not None and window.isVisible():
            window.close()
        app.quit()

    signal.signal(signal.SIGINT, on_sigint)
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(SIGNAL_POLL_MS)
    return timer
#: Longest wait for the preview before a screenshot is written anyway (seconds).
SCREENSHOT_TIMEOUT_S = 60.0


def ensure_app() -> QApplication:
    """The process's ``QApplication`` (created once)."""
    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
        app.setOrganizationName(ORGANIZATION)
        app.setApplicationName(APPLICATION)
    return app  # type: ignore[return-value]


def build_context(store: Store | None, *, settings: QSettings | None = None, registries: Registries | None = None,
                  compute: Callable[[PreviewRequest], ContextPreview] | None = None) -> AppContext:
    """Build the one :class:`AppContext`.

    ``compute`` defaults to ``engine.pipeline.preview`` with ``registries`` (fresh
    ``default_registries()`` when not given). ``settings`` defaults to the user's QSettings;
    tests pass an INI file in a temp dir.
    """
    registries = registries if registries is not None else default_registries(load_plugins=True)
    if compute is None:
        def compute(request: PreviewRequest) -> ContextPreview:
            return engine_preview(request, registries=registries)
    if settings is None:
        settings = QSettings(ORGANIZATION, APPLICATION)
    document = ChatDocument(store)
    controller = PreviewController(compute, document.snapshot)
    policy = CollectorPolicy(document, controller, parent=controller)
    return AppContext(store=store, registries=registries, preview=controller, undo_stack=QUndoStack(),
                      settings=settings, document=document, gc_policy=policy)


def wait_for_preview(window: MainWindow, timeout_s: float = SCREENSHOT_TIMEOUT_S) -> bool:
    """Process events until the window shows a preview for the open chat; ``False`` on timeout."""
    ctx = window.ctx
    loop = QEventLoop()
    loader = window.chat_loader
    if loader is not None and window.is_loading():  # the chat is read on a worker first (gui/preview/loader.py)
        loader.loaded.connect(loop.quit)
        loader.failed.connect(loop.quit)
        QTimer.singleShot(int(timeout_s * 1000), loop.quit)
        loop.exec()
        loader.loaded.disconnect(loop.quit)
        loader.failed.disconnect(loop.quit)
    if ctx.document.request is None:
        return True
    done = {"ok": False}

    def check(*_a: Any) -> None:
        if not ctx.preview.is_busy():
            done["ok"] = True
            loop.quit()

    window.preview_applied.connect(check)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    ctx.preview.flush()
    if not done["ok"]:
        loop.exec()
    window.preview_applied.disconnect(check)
    return done["ok"]


def take_screenshot(window: MainWindow, path: str | Path, chat: str | None = None, tab: str | None = None,
                    size: tuple[int, int] | None = None) -> int:
    """Render ``window`` on ``chat`` (default: the most recently updated) with ``tab`` shown; write a PNG.

    ``size`` is ``(width, height)`` in pixels (default :data:`SCREENSHOT_SIZE`). The layout is the
    app's default for that width; when the Lorebook or Audit tab is the subject, the inspector
    is widened as a writer would drag it.
    """
    w, h = size or SCREENSHOT_SIZE
    window.resize(w, h)
    sizes = window.default_splitter_sizes(w)
    if tab is not None and tab.strip().lower() in ("lorebook", "audit", "setup", "entry"):
        # as a writer would drag it: the inspector wider, the blocks keeping a readable 620 px
        extra = max(0, min(int(w * 0.42), w - sizes[0] - 620) - sizes[2])
        sizes = [sizes[0], sizes[1] - extra, sizes[2] + extra]
    window.splitter.setSizes(sizes)
    window.window_state.splitter_restored = True  # keep these sizes when the window is shown
    store = window.ctx.store
    if chat is not None and store is not None:
        try:
            store.chats.get(chat)
        except LoomscopeError as exc:  # CHAT_NOT_FOUND: say so instead of an empty window
            sys.stderr.write(f"loomscope: {chat}: {exc.code}: {exc.message}\n")
            return 2
    window.show()
    window.start(chat)
    if tab and not window.select_tab(tab):
        sys.stderr.write(f"loomscope: --tab: USAGE: unknown tab {tab!r} ({', '.join(TAB_NAMES)})\n")
        return 2
    if not wait_for_preview(window):
        log.warning("preview did not finish in %.0f s; writing the screenshot anyway", SCREENSHOT_TIMEOUT_S)
    if tab == "chat":
        window.chat_view.scroll_to_marker()
    if tab in (None, "blocks") and window.preview is not None:
        # the shot shows the cut: the newest chat message that is not sent, with its reason
        cut = [b.message_index for b in window.preview.blocks
               if b.message_index is not None and b.status != "kept" and not b.protected]
        if cut:
            window.blocks_panel.select_message(max(cut))
    if tab in ("characters", "lorebooks", "personas"):  # a selected row shows where it is used
        panel = window.library_setup.tabs.panels[tab[:-1]]
        if panel.ids():
            panel.select(panel.ids()[0])
    if tab in ("lorebook", "entry"):  # show the entry editor on the first entry rather than an empty form
        from PySide6.QtWidgets import QTableView

        for view in window.lorebook_tab.findChildren(QTableView):
            if view.model() is not None and view.model().rowCount() > 0:
                view.setCurrentIndex(view.model().index(0, 0))
                break
    for _ in range(5):
        QCoreApplication.processEvents()
    image = window.grab()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not image.save(str(out), "PNG"):
        sys.stderr.write(f"loomscope: {out}: STORAGE_ERROR: could not write the PNG\n")
        return 2
    return 0


def install_excepthook(window: MainWindow) -> None:
    """Show unexpected exceptions as ``INTERNAL_ERROR`` (details to the log) instead of losing them."""
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        log.error("unexpected error", exc_info=(exc_type, exc, tb))
        if issubclass(exc_type, KeyboardInterrupt):
            previous(exc_type, exc, tb)
            return
        window.show_error(user_error(exc))  # an engine error by its code, anything else INTERNAL_ERROR

    sys.excepthook = hook


#: Qt messages that say nothing to a writer (the offscreen platform's missing window features,
#: a runtime directory Qt falls back from): not printed by :func:`quiet_qt_messages`.
QT_NOISE = ("does not support propagateSizeHints", "XDG_RUNTIME_DIR", "QStandardPaths: runtime directory",
            "propagateSizeHints", "This plugin does not support")


def _qt_message(kind: QtMsgType, _context: QMessageLogContext, message: str) -> None:
    if kind in (QtMsgType.QtDebugMsg, QtMsgType.QtInfoMsg) or any(n in message for n in QT_NOISE):
        return
    sys.stderr.write(f"loomscope: Qt: {message}\n")


def quiet_qt_messages() -> None:
    """Print Qt's warnings as one ``loomscope: Qt: …`` line each, without its platform noise (issue 31)."""
    qInstallMessageHandler(_qt_message)


def end_start_pause(ctx: AppContext) -> None:
    """The app's start is over: the cyclic garbage collector runs again, unless a chat load holds it.

    ``loomscope gui`` pauses the collector before it imports the app (:mod:`gui.cli`) until the
    window is shown and its first chat load has started. On the way, CPython's automatic
    collections walked every object the imports build (Qt's wrappers, pydantic's and SQLAlchemy's
    classes), two full passes among them: about 0.15 s of a 1.5 s start on the sample library
    (``tests/benchmarks/measure_start.py``). From here the app's one policy owns the collector
    (:mod:`gui.gc_policy`): a chat load holds it until its first preview is applied, then freezes
    what is alive (the start's objects with it); with no chat loading it runs again now. Main
    thread only, like the policy.
    """
    policy = ctx.gc_policy
    if policy is None or not (policy.held or policy.quiet):
        gc.enable()


def run_app(db: str | None = None, screenshot: str | None = None, chat: str | None = None,
            tab: str | None = None, size: tuple[int, int] | None = None) -> int:
    """Open the desktop app (or write a screenshot and exit). Returns the exit code.

    Without a display (see :func:`display_problem`) the app prints one line saying so and how
    to get a screenshot instead, and returns 2 before Qt starts; a screenshot then renders
    offscreen by itself. Ctrl+C in the terminal closes the window and returns 130.

    Raises
    ------
    LoomscopeError
        ``STORAGE_ERROR`` when the library cannot be opened (the CLI prints it).
    """
    quiet_qt_messages()
    if QApplication.instance() is None:
        problem = display_problem()
        if problem is not None:
            if not screenshot:
                sys.stderr.write(no_display_message(problem))
                return 2
            os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a screenshot needs no screen
    app = ensure_app()
    store = open_store(db)
    tmp: tempfile.TemporaryDirectory[str] | None = None
    try:
        if screenshot:
            # a screenshot neither reads nor writes the user's window layout
            tmp = tempfile.TemporaryDirectory(prefix="loomscope-shot-")
            settings = QSettings(str(Path(tmp.name) / "settings.ini"), QSettings.Format.IniFormat)
        else:
            settings = QSettings(ORGANIZATION, APPLICATION)
        ctx = build_context(store, settings=settings)
        window = MainWindow(ctx)
        if screenshot:
            rc = take_screenshot(window, screenshot, chat, tab, size)
            window.close()
            end_start_pause(ctx)
            return rc
        install_excepthook(window)
        interrupt_timer = install_interrupt_handler(app, window)
        window.resize(*(size or (1440, 900)))
        window.restore_state()
        if size:
            window.resize(*size)
        window.show()
        window.start(chat)
        end_start_pause(ctx)
        if tab:
            window.select_tab(tab)
        rc = int(app.exec())
        interrupt_timer.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return EXIT_INTERRUPTED if app.property("loomscope_interrupted") else rc
    finally:
        store.close()
        if tmp is not None:
            tmp.cleanup()
