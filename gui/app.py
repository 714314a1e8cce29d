"""QApplication bootstrap: builds one :class:`AppContext` and the main window.

``run_app`` is what ``loomscope`` / ``loomscope gui`` calls (``engine/commands/gui.py``).
With ``screenshot`` it renders the window offscreen-ready at 1440×900 on the chosen chat,
waits for the preview, writes a PNG and returns 0 — for docs and tests.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QEventLoop, QSettings, QTimer
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import QApplication

from engine.errors import LoomscopeError
from engine.pipeline import default_registries
from engine.pipeline import preview as engine_preview
from engine.schema import ContextPreview, PreviewRequest

from .context import AppContext
from .document import ChatDocument
from .main_window import MainWindow
from .preview import PreviewController

log = logging.getLogger(__name__)

ORGANIZATION = "Loomscope"
APPLICATION = "Loomscope"
#: Screenshot size in pixels (the issue asks for at least 1280×800).
SCREENSHOT_SIZE = (1440, 900)
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


def build_context(store: Any | None, *, settings: QSettings | None = None, registries: Any | None = None,
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
    return AppContext(store=store, registries=registries, preview=controller, undo_stack=QUndoStack(),
                      settings=settings, document=document)


def wait_for_preview(window: MainWindow, timeout_s: float = SCREENSHOT_TIMEOUT_S) -> bool:
    """Process events until the window shows a preview for the open chat; ``False`` on timeout."""
    ctx = window.ctx
    if ctx.document.request is None:
        return True
    loop = QEventLoop()
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


def take_screenshot(window: MainWindow, path: str | Path, chat: str | None = None, tab: str | None = None) -> int:
    """Render ``window`` on ``chat`` (default: the most recently updated) with ``tab`` shown; write a PNG."""
    w, h = SCREENSHOT_SIZE
    window.resize(w, h)
    # the inspector tabs get more room when they are the subject of the shot
    wide = tab is not None and tab.strip().lower() in ("lorebook", "audit", "setup", "entry")
    window.splitter.setSizes([200, 600, 640] if wide else [200, 840, 400])
    if chat is not None:
        try:
            window.ctx.store.get_chat(chat)
        except LoomscopeError as exc:  # CHAT_NOT_FOUND: say so instead of an empty window
            sys.stderr.write(f"loomscope: {chat}: {exc.code}: {exc.message}\n")
            return 2
    window.show()
    window.start(chat)
    if tab and not window.select_tab(tab):
        sys.stderr.write(f"loomscope: --tab: USAGE: unknown tab {tab!r} "
                         f"(blocks, chat, block, lorebook, audit, settings, setup, entry, chats, characters, "
                         "lorebooks, personas)\n")
        return 2
    if not wait_for_preview(window):
        log.warning("preview did not finish in %.0f s; writing the screenshot anyway", SCREENSHOT_TIMEOUT_S)
    if tab == "chat":
        window.chat_view.scroll_to_marker()
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
    from .errors import UserError, message_for

    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        log.error("unexpected error", exc_info=(exc_type, exc, tb))
        if issubclass(exc_type, KeyboardInterrupt):
            previous(exc_type, exc, tb)
            return
        code = getattr(exc, "code", None)
        if isinstance(code, str):
            window.show_error(UserError(code, message_for(code), getattr(exc, "file", None),
                                        getattr(exc, "place", None)))
        else:
            window.show_error(UserError("INTERNAL_ERROR", message_for("INTERNAL_ERROR")))

    sys.excepthook = hook


def run_app(db: str | None = None, screenshot: str | None = None, chat: str | None = None,
            tab: str | None = None) -> int:
    """Open the desktop app (or write a screenshot and exit). Returns the exit code.

    Raises
    ------
    LoomscopeError
        ``STORAGE_ERROR`` when the library cannot be opened (the CLI prints it).
    """
    from engine.storage import open_store

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
            rc = take_screenshot(window, screenshot, chat, tab)
            window.close()
            return rc
        install_excepthook(window)
        window.resize(1440, 900)
        window.restore_state()
        window.show()
        window.start(chat)
        if tab:
            window.select_tab(tab)
        return int(app.exec())
    finally:
        store.close()
        if tmp is not None:
            tmp.cleanup()
