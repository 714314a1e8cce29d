"""The app's one garbage-collector policy (issue 29 item 5): hold while a chat loads, then tidy after each preview.

A 10,000-message chat, its preview and the views' indices over them are several hundred thousand
long-lived Python objects (pydantic messages and blocks, their dicts). CPython's full (generation 2)
collection walks every one of them, collecting nothing, whenever enough new objects have survived
since the last one; reading a chat and computing its first preview make them survive quickly, and
each such collection holds the GIL, so the window stalls while a big chat opens (seconds on a
loaded machine). :func:`gc.freeze` moves every object alive into a permanent generation the
collector never walks, so later full collections only walk what was allocated since.

The policy, owned by the app and run on the main thread only (worker threads never touch it):

* :meth:`CollectorPolicy.hold`, when a chat load starts (the window's ``open_chat``), pauses
  automatic collection process-wide (:func:`gc.disable`) for the read and the first preview.
  When a collection is *due* (see below), the frozen objects are unfrozen and one full
  collection runs right there first, while the old chat has been dropped by the document and
  the views and the new one is not yet built.
* :meth:`CollectorPolicy.settle`, when that first preview has been applied, freezes what is alive
  (two list splices, no traversal) and keeps automatic collection off while the chat is open: a
  pin or exclude toggle builds a new preview of thousands of rows, and CPython's automatic
  collections walked them (and, every few toggles, every unfrozen object the last previews left)
  inside the engine's work, on whatever thread allocated: about a fifth of a toggle at 10,000
  messages and nearly half at 50,000 (``tests/benchmarks/measure_engine.py``, ``tidy_s``).
* :meth:`CollectorPolicy.tidy`, after every later preview the views have applied (and every
  :data:`TIDY_EVERY_S` seconds while the chat is open, for work that runs no preview), collects
  the young generations (what was allocated since the last tidy: the new preview and what the
  views built for it) and freezes what survives, so no collection walks it again. Its cost is
  the young objects' count, on the main thread, after the row is on screen.
* A load that ends without a preview (the read failed, the chat was closed instead, the first
  preview failed) turns automatic collection back on (:meth:`CollectorPolicy.resume`), as does
  closing the chat.

Cyclic garbage of replaced chats: an object frozen (or created while held) and later dropped is
freed by reference counting unless it sits in a reference cycle; such cycles wait for a full
collection over unfrozen objects. They stay frozen (settle adds the next chat to the frozen set)
until a full collection is due at a hold, once :data:`COLLECT_EVERY_HOLDS` loads have passed since
the last one (measured: ~180 cyclic objects per 5,000-message chat switch), so they stay bounded.
Nothing else in the app, and nothing in the engine, touches the collector, but the app's start:
``loomscope gui`` runs it paused from before the app's imports until the window is up and the
first chat load holds it (:func:`gui.app.end_start_pause`).

The measurements (``/work/notes/issue-29-guitypes.md``, ``/work/notes/issue-29-gcfix.md``) are
repeatable with ``tests/benchmarks/measure_gc_policy.py`` and ``tests/benchmarks/measure_gui.py``.
"""

from __future__ import annotations

import gc
import threading
import time

from PySide6.QtCore import QObject, QTimer

from .document import ChatDocument
from .preview import PreviewController, PreviewOutcome
from .preview.loader import ChatLoader

__all__ = ["COLLECT_EVERY_HOLDS", "GC_FREEZE_AFTER_LOAD", "TIDY_EVERY_S", "CollectorPolicy"]

#: Whether the app holds the collector while a chat loads and freezes after (the measured default).
GC_FREEZE_AFTER_LOAD = True
#: A full collection runs at a chat load's :meth:`CollectorPolicy.hold` once this many loads have
#: passed since the last one (the app's first load does not: it replaces no chat, and its full pass
#: over everything the app's start built cost about 75 ms before the window's first paint): the
#: cyclic garbage of replaced chats stays bounded, and most loads start without walking the heap.
COLLECT_EVERY_HOLDS = 8
#: Seconds between two tidy passes while a chat is open and no preview ran (a long generation, ...).
TIDY_EVERY_S = 30


class CollectorPolicy(QObject):
    """Holds the collector while a chat loads; freezes once its first preview is applied, then tidies after each.

    Parameters
    ----------
    document:
        The app's document; its ``chat_loaded`` signal marks a new chat (``""``: none).
    preview:
        The app's preview controller; the first preview submitted after a chat load, once the
        views have applied it, is when the chat's long-lived objects are all built.
    enabled:
        ``False`` keeps the collector as CPython runs it (the measurement's "without" side).

    Attributes
    ----------
    settles:
        How many times :meth:`settle` froze (tests, measurements).
    holds:
        How many chat loads :meth:`hold` paused the collector for.
    collections:
        How many full collections :meth:`hold` ran (one per :data:`COLLECT_EVERY_HOLDS` loads).
    tidies:
        How many times :meth:`tidy` collected the young generations and froze.
    last_settle_s, last_hold_s, last_tidy_s:
        Seconds the last :meth:`settle` / :meth:`hold` / :meth:`tidy` took on the main thread.
    """

    def __init__(self, document: ChatDocument, preview: PreviewController, *,
                 enabled: bool = GC_FREEZE_AFTER_LOAD, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.enabled = enabled
        self._preview = preview
        self._frozen = False
        self._held = False
        self._quiet = False  # a settled chat is open: automatic collection off, tidy after previews
        self._loaders: set[int] = set()
        #: The first preview submitted after this generation belongs to the chat just loaded.
        self._after_generation: int | None = None
        self._holds_since_collect = 0  # the first load replaces no chat: nothing of one to collect
        self.settles = 0
        self.holds = 0
        self.collections = 0
        self.tidies = 0
        self.last_settle_s = 0.0
        self.last_hold_s = 0.0
        self.last_tidy_s = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(TIDY_EVERY_S * 1000)
        self._timer.timeout.connect(self.tidy)
        document.chat_loaded.connect(self._on_document_chat_loaded)
        preview.preview_ready.connect(self._on_preview_ready)

    @property
    def frozen(self) -> bool:
        """``True`` while the objects of the open chat are frozen by this policy."""
        return self._frozen

    @property
    def quiet(self) -> bool:
        """``True`` while a settled chat is open: automatic collection off, :meth:`tidy` after each preview."""
        return self._quiet

    @property
    def held(self) -> bool:
        """``True`` while a chat load holds the collector paused."""
        return self._held

    def hold(self, loader: ChatLoader | None = None) -> None:
        """A chat load starts: pause automatic collection until its first preview is applied.

        Call it on the main thread right before the load is started, after the document has
        dropped the old chat. When a full collection is due (every :data:`COLLECT_EVERY_HOLDS`
        loads), it runs here, over the unfrozen heap, before the collector is paused.

        Parameters
        ----------
        loader:
            The worker that reads the chat; its ``failed`` signal ends the hold.

        Raises
        ------
        RuntimeError
            When called from another thread.
        """
        _require_main_thread()
        if not self.enabled:
            return
        start = time.perf_counter()
        if loader is not None and id(loader) not in self._loaders:
            self._loaders.add(id(loader))
            loader.failed.connect(self._on_loader_failed)
        self._leave_quiet()
        if not self._held:
            self._holds_since_collect += 1
            if self._holds_since_collect >= COLLECT_EVERY_HOLDS:
                self._holds_since_collect = 0
                self._unfreeze()
                gc.collect()
                self.collections += 1
            self._held = True
            self.holds += 1
        gc.disable()
        self.last_hold_s = time.perf_counter() - start

    def resume(self) -> None:
        """End a hold, or the quiet of an open chat (a load failed or was cancelled, the chat closed): collection runs again."""
        _require_main_thread()
        if self._held or self._quiet:
            self._held = False
            self._leave_quiet()
            gc.enable()

    def _leave_quiet(self) -> None:
        self._quiet = False
        self._timer.stop()

    def _on_loader_failed(self, _chat_id: str, _error: object) -> None:
        if self._after_generation is None:  # the document has no new chat waiting for a preview
            self.resume()

    def _on_document_chat_loaded(self, chat_id: str) -> None:
        self._after_generation = self._preview.generation if (chat_id and self.enabled) else None
        if not chat_id:
            self.resume()  # closed, or closed before another chat arrives: nothing to wait for
        elif self._held:
            gc.disable()  # still held for the first preview (whatever a worker did meanwhile)

    def _on_preview_ready(self, outcome: PreviewOutcome) -> None:
        due = self._after_generation
        if due is None or outcome.generation <= due:  # no load pending, or a preview of the previous chat
            if self._quiet:
                QTimer.singleShot(0, self.tidy)  # once the views have applied it
            return
        if outcome.preview is None:
            self.resume()  # the first preview failed: collect as usual; settle after the next one
            return
        self._after_generation = None
        # connected before the window's own slot: settle once the views have applied this preview
        QTimer.singleShot(0, self.settle)

    def settle(self) -> None:
        """Freeze every object alive and end the hold; automatic collection stays off while the chat is open.

        Main thread only; no collection (:meth:`tidy` runs after each later preview).

        Raises
        ------
        RuntimeError
            When called from another thread: the collector's state is the main thread's to set.
        """
        _require_main_thread()
        start = time.perf_counter()
        gc.disable()
        gc.freeze()
        self._frozen = True
        self._held = False
        self._quiet = True
        self._timer.start()
        self.settles += 1
        self.last_settle_s = time.perf_counter() - start

    def tidy(self) -> None:
        """Collect the young generations and freeze what survives (a settled chat only; main thread).

        Cyclic garbage made since the last tidy is freed here; everything alive joins the frozen
        objects no collection walks. A no-op unless :attr:`quiet`.

        Raises
        ------
        RuntimeError
            When called from another thread.
        """
        _require_main_thread()
        if not self._quiet:
            return
        start = time.perf_counter()
        gc.collect(1)
        gc.freeze()
        self._timer.start()  # the next timed tidy counts from here
        self.tidies += 1
        self.last_tidy_s = time.perf_counter() - start

    def release(self) -> None:
        """Unfreeze what :meth:`settle` froze and end any hold (the app is closing)."""
        _require_main_thread()
        self._unfreeze()
        self.resume()

    def _unfreeze(self) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False


def _require_main_thread() -> None:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("the garbage-collector policy runs on the main thread only")
