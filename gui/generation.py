"""Running a generation off the main thread, with progress and cancel.

The worker calls ``engine.generation.generate_and_store`` (the one function that generates and
stores the audit, the reply, World Info timers and compaction state in one transaction). It never
raises for provider failures: the returned audit carries the terminal status and a normalized
``error_code``; a storage failure arrives as ``failed``. Progress events from the pipeline's
``on_progress`` callback are relayed to the main thread and shown inline in the chat view.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from engine.generation import generate_and_store
from engine.schema import PreviewRequest

from . import jobs
from .errors import UserError, worker_error

if TYPE_CHECKING:
    from engine.generation import GenerationResult, ProviderConfig
    from engine.registries import Registries
    from engine.storage import Store


class _Relay(QObject):
    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(object)


@dataclass(frozen=True)
class _Task:
    """One generation: what :func:`_generate` runs on the worker, and the relay it reports through."""

    store: Store
    request: PreviewRequest
    provider: ProviderConfig
    chat_id: str
    registries: Registries
    cancel: threading.Event
    relay: _Relay


def _generate(task: _Task) -> None:  # worker thread
    """Generate and store ``task``'s reply; report the result (or the error) through its relay."""
    try:
        result = generate_and_store(task.store, task.chat_id, task.provider, request=task.request,
                                    registries=task.registries, on_progress=task.relay.progress.emit,
                                    cancel=task.cancel)
    except Exception as exc:
        jobs.emit(task.relay.failed, worker_error(exc, "generation"))
        return
    jobs.emit(task.relay.finished, result)


class GenerationRunner(QObject):
    """One generation at a time.

    Signals
    -------
    progress(object ProgressEvent), finished(object GenerationResult), failed(object UserError),
    running_changed(bool)
    """

    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(object)
    running_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = jobs.single_thread_pool(self)
        self._relay = _Relay(self)
        self._relay.progress.connect(self.progress)
        self._relay.finished.connect(self._on_relay_finished)
        self._relay.failed.connect(self._on_relay_failed)
        self._cancel: threading.Event | None = None
        self.running = False

    def start(self, store: Store, request: PreviewRequest, provider: ProviderConfig, chat_id: str,
              registries: Registries) -> bool:
        """Generate for ``chat_id`` from ``request`` and store the outcome in ``store``.

        Returns ``False`` when one is already running.
        """
        if self.running:
            return False
        self._cancel = threading.Event()
        self.running = True
        self.running_changed.emit(True)
        jobs.start(self._pool, _generate, _Task(store, request, provider, chat_id, registries, self._cancel, self._relay))
        return True

    def cancel(self) -> None:
        """Ask the running generation to stop (it ends with status ``cancelled``)."""
        if self._cancel is not None:
            self._cancel.set()

    def _done(self) -> None:
        self.running = False
        self._cancel = None
        self.running_changed.emit(False)

    def _on_relay_finished(self, result: GenerationResult) -> None:
        self._done()
        self.finished.emit(result)

    def _on_relay_failed(self, error: UserError) -> None:
        self._done()
        self.failed.emit(error)

    def wait(self, timeout_ms: int = 30000) -> None:
        """Block until the worker is idle (shutdown, tests)."""
        if self._cancel is not None:
            self._cancel.set()
        self._pool.waitForDone(timeout_ms)
