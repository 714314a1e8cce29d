"""Import a SillyTavern folder on a ``QThreadPool`` worker (like :mod:`gui.preview.loader`).

Reading a SillyTavern ``data/<user>`` folder and writing it to the library takes seconds; the
work runs on a worker and its outcome comes back on the main thread through a queued signal.
:func:`run_folder_import` waits for it in a local event loop, so the window keeps painting (and
the progress dialog animating) without a busy loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QEventLoop, QObject, QThreadPool, Signal

from engine.st_sync import sync_st_folder
from engine.storage import FolderImportReport, Store

from . import jobs
from .errors import UserError, worker_error


class _Relay(QObject):
    """Lives on the main thread; the worker emits through it (queued connection)."""

    finished = Signal(object, object)  # FolderImportReport | None, UserError | None
    progressed = Signal(str, int, int)  # stage ("read" / "store"), done, total


@dataclass(frozen=True)
class _Task:
    """One import: what :func:`_import` runs on the worker, and the relay it reports through."""

    store: Store
    folder: str | Path
    st_user: str | None
    relay: _Relay
    on_conflict: str = "ask"

    def progress(self, stage: str, done: int, total: int) -> None:
        """Report progress (worker thread), every 25th file and the last one."""
        # a queued signal per file would flood the event loop on a 10,000-chat folder
        if done == total or done % 25 == 0:
            jobs.emit(self.relay.progressed, stage, done, total)


def _import(task: _Task) -> None:  # worker thread
    """Import ``task``'s folder; report the report (or the error) through its relay."""
    report: FolderImportReport | None = None
    error: UserError | None = None
    try:
        # again: only what changed is read and stored (engine.st_sync)
        report = sync_st_folder(task.store, task.folder, st_user=task.st_user, skip_bad=True,
                                on_conflict=task.on_conflict,
                                on_read=lambda done, total: task.progress("read", done, total),
                                on_store=lambda done, total: task.progress("store", done, total))
    except Exception as exc:  # an engine error by its code; anything else is logged
        error = worker_error(exc, f"importing the SillyTavern folder {task.folder}")
    jobs.emit(task.relay.finished, report, error)


def run_folder_import(store: Store, folder: str | Path, *, st_user: str | None = None,
                      pool: QThreadPool | None = None,
                      on_progress: Callable[[str, int, int], None] | None = None,
                      on_conflict: str = "ask") -> tuple[FolderImportReport | None, UserError | None]:
    """Import ``folder`` (a SillyTavern ``data/<user>`` or ``data/`` folder) on a worker.

    Returns ``(report, None)`` on success or ``(None, error)`` (nothing imported; a non-engine
    exception is logged and reads ``INTERNAL_ERROR``). Events keep being processed while waiting.
    ``on_progress(stage, done, total)`` runs on the main thread: stage ``"read"`` counts files read,
    ``"store"`` items stored. ``on_conflict`` as :func:`engine.st_sync.sync_st_folder` takes it.
    """
    relay = _Relay()
    if on_progress is not None:
        relay.progressed.connect(on_progress)
    loop = QEventLoop()
    outcome: list[tuple[FolderImportReport | None, UserError | None]] = []

    def done(report: FolderImportReport | None, error: UserError | None) -> None:
        outcome.append((report, error))
        loop.quit()

    relay.finished.connect(done)
    jobs.start(pool, _import, _Task(store, folder, st_user, relay, on_conflict))
    if not outcome:
        loop.exec()
    relay.deleteLater()
    return outcome[0]
