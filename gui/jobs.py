"""Work on a ``QThreadPool`` worker: every job of the app is a plain callable, started here.

Why not a ``QRunnable`` subclass: PySide6 binds ``QThreadPool.start(QRunnable*)`` (and
``tryStart``) with the GIL released during the call (``allow-thread="yes"``) and makes the runnable
a child of the pool *after* the call returns (``<parent index="this" action="add"/>``, PySide6
6.11 ``typesystems/typesystem_core_common.xml``). A short job can run on the worker, and the pool
auto-delete it, inside that window: the binding then adds the already destroyed wrapper to the
pool's children, where it stays, with everything it holds (a request, a chat, a store, a
preview), for as long as the pool lives; the global pool lives until the process ends. The race
is timing-dependent (about half of a run of 40 short jobs lost most of them while a second Python
thread wanted the GIL: ``tests/gui/test_jobs.py``). ``start(callable)`` instead takes one
reference to the callable and drops it on the worker, under the GIL, right after calling it.

So a job here is ``fn(*args)``: a module-level function and the values it works on (a frozen
task, a relay ``QObject`` living on the main thread). It reports through queued signals with
:func:`emit`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, QThreadPool, SignalInstance

__all__ = ["emit", "single_thread_pool", "start"]


def start(pool: QThreadPool | None, fn: Callable[..., object], /, *args: Any) -> None:
    """Run ``fn(*args)`` on a worker of ``pool`` (the global pool when ``None``).

    Parameters
    ----------
    pool:
        The thread pool; ``None`` for ``QThreadPool.globalInstance()``.
    fn:
        The work, run on the worker thread: it must not touch widgets; it reports with
        :func:`emit` on a relay living on the main thread. An exception it lets escape is
        printed by the binding and lost, so a job catches its own (``gui.errors.worker_error``).
    *args:
        What ``fn`` works on; released on the worker as soon as ``fn`` returns.
    """
    (pool or QThreadPool.globalInstance()).start(partial(fn, *args))


def emit(signal: SignalInstance, *args: Any) -> None:
    """Emit ``signal(*args)`` from a worker; nothing happens when its relay was deleted at shutdown."""
    with contextlib.suppress(RuntimeError):  # "Internal C++ object already deleted"
        signal.emit(*args)


def single_thread_pool(parent: QObject) -> QThreadPool:
    """A private pool with one thread, owned by ``parent``: its jobs run one after another."""
    pool = QThreadPool(parent)
    pool.setMaxThreadCount(1)
    return pool
