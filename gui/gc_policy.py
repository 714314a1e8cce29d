"""The app's one garbage-collector policy (issue 29 item 5): collect and freeze once per chat.

A 10,000-message chat, its preview and the views' indices over them are several hundred thousand
long-lived Python objects (pydantic messages and blocks, their dicts). CPython's full (generation 2)
collection walks every one of them, collecting nothing, whenever enough new objects have survived
since the last one; a preview per click makes them survive quickly. :func:`gc.freeze` moves every
object alive into a permanent generation the collector never walks, so a full collection only walks
what was allocated since.

The policy, owned by the app and run on the main thread only: when a chat has been opened and its
first preview applied, :meth:`CollectorPolicy.settle` collects once and freezes what is alive (the
chat, its preview, the views). The next chat's load unfreezes first (:meth:`CollectorPolicy.release`,
when the document has dropped the old chat), so the old chat's objects are freed, cycles included,
by the next collection. Nothing else in the app, and nothing in the engine, touches the collector;
worker threads never do. Frozen objects are still freed by reference counting when dropped (a
toggle's replaced preview); only reference cycles among them wait for the next chat's load.

The measurement that decided to keep it (issue 29 closing note, ``/work/notes/issue-29-guitypes.md``)
is repeatable with ``tests/benchmarks/measure_gc_policy.py``.
"""

from __future__ import annotations

import gc
import threading
import time

from PySide6.QtCore import QObject, QTimer

from .document import ChatDocument
from .preview import PreviewController, PreviewOutcome

__all__ = ["GC_FREEZE_AFTER_LOAD", "CollectorPolicy"]

#: Whether the app collects and freezes once after each chat load (the measured default).
GC_FREEZE_AFTER_LOAD = True


class CollectorPolicy(QObject):
    """Collects and freezes once after each chat load; unfreezes when the next chat loads.

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
        How many times :meth:`settle` collected and froze (tests, measurements).
    last_settle_s:
        Seconds the last :meth:`settle` took on the main thread (its collection, mostly).
    """

    def __init__(self, document: ChatDocument, preview: PreviewController, *,
                 enabled: bool = GC_FREEZE_AFTER_LOAD, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.enabled = enabled
        self._preview = preview
        self._frozen = False
        #: The first preview submitted after this generation belongs to the chat just loaded.
        self._after_generation: int | None = None
        self.settles = 0
        self.last_settle_s = 0.0
        document.chat_loaded.connect(self._on_document_chat_loaded)
        preview.preview_ready.connect(self._on_preview_ready)

    @property
    def frozen(self) -> bool:
        """``True`` while the objects of the open chat are frozen by this policy."""
        return self._frozen

    def _on_document_chat_loaded(self, chat_id: str) -> None:
        # the document has dropped the previous chat: let its objects be collected again
        self.release()
        self._after_generation = self._preview.generation if (chat_id and self.enabled) else None

    def _on_preview_ready(self, outcome: PreviewOutcome) -> None:
        due = self._after_generation
        if due is None or outcome.generation <= due or outcome.preview is None:
            return  # no load pending, a preview of the previous chat, or a failed one
        self._after_generation = None
        # connected before the window's own slot: settle once the views have applied this preview
        QTimer.singleShot(0, self.settle)

    def settle(self) -> None:
        """Collect once, then freeze every object alive (main thread only).

        Raises
        ------
        RuntimeError
            When called from another thread: the collector's state is the main thread's to set.
        """
        _require_main_thread()
        start = time.perf_counter()
        self.release()
        gc.collect()
        gc.freeze()
        self._frozen = True
        self.settles += 1
        self.last_settle_s = time.perf_counter() - start

    def release(self) -> None:
        """Unfreeze what :meth:`settle` froze (a new chat is loading, or the app is closing)."""
        _require_main_thread()
        if self._frozen:
            gc.unfreeze()
            self._frozen = False


def _require_main_thread() -> None:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("the garbage-collector policy runs on the main thread only")
