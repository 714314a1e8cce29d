"""Debounced live preview on a worker thread, with stale results dropped.

Flow (STYLE.md 5, like git-cola's ``cola/widgets/diff.py`` and napari's ``_layer_slicer.py``):
every edit calls :meth:`PreviewController.schedule`, which restarts a single-shot ``QTimer``
(:data:`PREVIEW_DEBOUNCE_MS`); a click (pin, exclude: an intent, not a keystroke) calls
``schedule(immediate=True)``, which runs the preview at the next turn of the event loop, and
edits arriving before then join it instead of restarting the debounce. When it fires, the snapshot provider builds a frozen
:class:`~engine.schema.PreviewRequest` *on the main thread*; the request is stamped with a
generation number and computed on a ``QThreadPool`` worker. A result is delivered only when
its generation is still the latest; older ones are dropped (and counted, for tests).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal

from engine.schema import ContextPreview, PreviewRequest

from .. import jobs
from ..errors import UserError, worker_error

#: Quiet time after the last edit before the preview runs (milliseconds).
PREVIEW_DEBOUNCE_MS = 120

ComputeFn = Callable[[PreviewRequest], ContextPreview]
SnapshotFn = Callable[[], PreviewRequest | None]
#: Worker-side work on a finished preview (no Qt): its result travels with the outcome.
DeriveFn = Callable[[ContextPreview], Any]
#: Called on the main thread when a request is submitted: the :data:`DeriveFn` for it, or ``None``.
DeriveFactory = Callable[[], DeriveFn | None]


@dataclass(frozen=True)
class PreviewOutcome:
    """One finished computation: the request it ran on, its preview or error, and timing.

    ``elapsed_s`` is the worker's compute time in seconds; ``derived`` what the controller's
    :meth:`~PreviewController.set_derive` function made of the preview on the worker (``None``
    without one, or when it failed).
    """

    generation: int
    request: PreviewRequest
    preview: ContextPreview | None
    error: UserError | None
    elapsed_s: float
    derived: Any = None


class _Relay(QObject):
    """Lives on the main thread; worker threads emit through it (queued connection)."""

    finished = Signal(object)


@dataclass(frozen=True)
class _Task:
    """What one preview job computes on the pool: the request, the functions to run on it, where to report."""

    generation: int
    request: PreviewRequest
    compute: ComputeFn
    latest: Callable[[], int]
    relay: _Relay
    derive: DeriveFn | None = None


def _run(task: _Task) -> None:  # worker thread
    """Compute ``task`` and report its outcome through its relay."""
    jobs.emit(task.relay.finished, _outcome(task))


def _outcome(task: _Task) -> PreviewOutcome:
    """Compute ``task`` (worker thread): its preview, error, time and derived result."""
    if task.generation != task.latest():
        # superseded while queued: skip the work, but report so the busy count stays right
        return PreviewOutcome(task.generation, task.request, None, None, 0.0)
    start = time.perf_counter()
    preview: ContextPreview | None = None
    error: UserError | None = None
    derived: Any = None
    try:
        preview = task.compute(task.request)
        elapsed = time.perf_counter() - start
        if task.derive is not None and task.generation == task.latest():
            # an optional head start for the views: a failure only costs them the work
            with contextlib.suppress(Exception):
                derived = task.derive(preview)
    except Exception as exc:
        error = worker_error(exc, "preview computation")
        elapsed = time.perf_counter() - start
    return PreviewOutcome(task.generation, task.request, preview, error, elapsed, derived)


class PreviewController(QObject):
    """Schedules previews; emits only the latest result.

    Parameters
    ----------
    compute:
        ``PreviewRequest -> ContextPreview`` run on the worker (the engine's
        ``engine.pipeline.preview`` in the app; a controlled fake in tests). Must not touch Qt.
    snapshot:
        Called on the main thread when the timer fires; returns the frozen request to compute,
        or ``None`` when there is nothing to preview.
    pool:
        The thread pool (a private one with one thread by default, so previews never compete).

    Signals
    -------
    preview_started(int generation)
    preview_ready(object PreviewOutcome)   # successful and failed computations alike
    result_dropped(int generation)         # a stale result arrived and was discarded
    """

    preview_started = Signal(int)
    preview_ready = Signal(object)
    result_dropped = Signal(int)

    def __init__(self, compute: ComputeFn, snapshot: SnapshotFn | None = None,
                 pool: QThreadPool | None = None, debounce_ms: int = PREVIEW_DEBOUNCE_MS,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._compute = compute
        self._snapshot: SnapshotFn = snapshot or (lambda: None)
        self._derive: DeriveFactory | None = None
        if pool is None:
            pool = QThreadPool(self)
            pool.setMaxThreadCount(1)
        self._pool = pool
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(debounce_ms)
        self._debounce_ms = debounce_ms
        #: An immediate preview is pending (the timer runs with 0 ms): later edits join it.
        self._immediate = False
        self._timer.timeout.connect(self._on_timer_timeout)
        self._relay = _Relay(self)
        self._relay.finished.connect(self._on_relay_finished)
        self._lock = threading.Lock()
        self._generation = 0
        self._running = 0
        self.dropped = 0
        self.last_outcome: PreviewOutcome | None = None

    # -- configuration -------------------------------------------------------------------
    def set_snapshot_provider(self, snapshot: SnapshotFn) -> None:
        """Set the main-thread function that builds the frozen request."""
        self._snapshot = snapshot

    def set_compute(self, compute: ComputeFn) -> None:
        """Replace the worker function (tests, or a changed registry)."""
        self._compute = compute

    def set_derive(self, derive: DeriveFactory | None) -> None:
        """Set the main-thread factory of worker-side work on each finished preview.

        At each submission ``derive()`` is called on the main thread (so it can capture what the
        views show now) and returns a function run on the worker right after the computation,
        with the new preview; its result is the outcome's ``derived``. It must not touch Qt or
        mutate what it captured. The window uses it to find the changed rows
        (:func:`gui.models.preview_delta.diff_previews`) while the UI thread is idle.
        """
        self._derive = derive

    def set_debounce(self, debounce_ms: int) -> None:
        """Set the quiet time (milliseconds) an edit's preview waits for; clicks never wait."""
        self._debounce_ms = debounce_ms
        self._timer.setInterval(debounce_ms)

    @property
    def generation(self) -> int:
        """The number of the latest submitted request (0 before the first)."""
        with self._lock:
            return self._generation

    def is_busy(self) -> bool:
        """``True`` while a preview is pending on the timer or running on the worker."""
        return self._timer.isActive() or self._running > 0

    # -- scheduling ----------------------------------------------------------------------
    def schedule(self, immediate: bool = False) -> None:
        """Ask for a preview of the current state.

        Parameters
        ----------
        immediate:
            ``False`` (edits, typing): restart the debounce timer; the preview runs
            :data:`PREVIEW_DEBOUNCE_MS` after the last call. ``True`` (a click: pin, exclude,
            hide): run it at the next turn of the event loop, without the typing debounce. Any
            call made while an immediate preview is pending joins it (the snapshot is taken
            when the timer fires, so it includes those edits).
        """
        if immediate:
            self._immediate = True
            self._timer.start(0)
        elif not self._immediate:
            self._timer.start(self._debounce_ms)

    def flush(self) -> int | None:
        """Run a pending (or a fresh) preview now, without waiting for the timer.

        Returns the generation submitted, or ``None`` when the snapshot was empty.
        """
        self._timer.stop()
        self._immediate = False
        return self._submit()

    def _on_timer_timeout(self) -> None:
        self._immediate = False
        self._submit()

    def _submit(self) -> int | None:
        request = self._snapshot()
        if request is None:
            return None
        return self.submit(request)

    def submit(self, request: PreviewRequest) -> int:
        """Compute ``request`` on the worker now; returns its generation number."""
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._running += 1
        self.preview_started.emit(generation)
        derive = self._derive() if self._derive is not None else None
        # a plain callable, not a QRunnable subclass (gui.jobs says why)
        jobs.start(self._pool, _run, _Task(generation, request, self._compute, self._latest, self._relay, derive))
        return generation

    def _latest(self) -> int:
        """:attr:`generation` (a bound method, not a lambda per job)."""
        return self.generation

    def _on_relay_finished(self, outcome: PreviewOutcome) -> None:
        self._running = max(0, self._running - 1)
        if outcome.generation != self.generation:
            self.dropped += 1
            self.result_dropped.emit(outcome.generation)
            return
        self.last_outcome = outcome
        self.preview_ready.emit(outcome)

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Stop the timer and wait for running work (at application exit)."""
        self._timer.stop()
        self._immediate = False
        with self._lock:
            self._generation += 1  # anything still queued is stale now
        self._pool.waitForDone(timeout_ms)
