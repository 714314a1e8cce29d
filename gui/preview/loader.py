"""Open a chat without blocking the window: the library read runs on a worker thread.

Reading a 5,000-message chat (SQLite rows → pydantic messages → the preview request) takes
hundreds of milliseconds; :class:`ChatLoader` runs :func:`gui.document.read_chat` on a
``QThreadPool`` worker and hands the frozen :class:`~gui.document.LoadedChat` back on the main
thread. Like the preview controller, each request is stamped with a generation number and only
the latest one is delivered: clicking through the library quickly opens the last chat clicked.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QThreadPool, Signal

from .. import jobs
from ..document import LoadedChat, read_chat
from ..errors import UserError, worker_error


class _Relay(QObject):
    """Lives on the main thread; the worker emits through it (queued connection)."""

    finished = Signal(int, object, object)  # generation, LoadedChat | None, UserError | None


@dataclass(frozen=True)
class _Task:
    """One read: what :func:`_load` runs on the worker, and the relay it reports through."""

    generation: int
    store: Any
    chat_id: str
    relay: _Relay


def _load(task: _Task) -> None:  # worker thread
    """Read ``task``'s chat; report it (or the error) with its generation through its relay."""
    loaded: LoadedChat | None = None
    error: UserError | None = None
    try:
        loaded = read_chat(task.store, task.chat_id, audit=True)
    except Exception as exc:
        error = worker_error(exc, f"reading chat {task.chat_id}")
    jobs.emit(task.relay.finished, task.generation, loaded, error)


class ChatLoader(QObject):
    """Reads chats on a worker; delivers only the latest request.

    Signals
    -------
    loaded(object LoadedChat)            # the latest requested chat, read
    failed(str chat_id, object UserError)  # the latest requested chat could not be read
    """

    loaded = Signal(object)
    failed = Signal(str, object)

    def __init__(self, store: Any, pool: QThreadPool | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._pool = pool if pool is not None else jobs.single_thread_pool(self)
        self._relay = _Relay(self)
        self._relay.finished.connect(self._on_relay_finished)
        self._lock = threading.Lock()
        self._generation = 0
        self._pending: dict[int, str] = {}

    def load(self, chat_id: str) -> int:
        """Start reading ``chat_id``; returns the request's generation number."""
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._pending[generation] = chat_id
        jobs.start(self._pool, _load, _Task(generation, self._store, chat_id, self._relay))
        return generation

    def cancel(self) -> None:
        """Forget every request under way (their results are dropped when they arrive)."""
        with self._lock:
            self._generation += 1

    def pending_chat(self) -> str | None:
        """The chat id of the latest request while it is still being read, else ``None``."""
        return self._pending.get(self._generation)

    def is_busy(self) -> bool:
        """``True`` while any read is still running."""
        return bool(self._pending)

    def _on_relay_finished(self, generation: int, loaded: LoadedChat | None, error: UserError | None) -> None:
        chat_id = self._pending.pop(generation, "")
        if generation != self._generation:
            return  # superseded by a later request (or cancelled)
        if error is not None or loaded is None:
            self.failed.emit(chat_id, error or UserError("INTERNAL_ERROR", "the chat could not be read"))
            return
        self.loaded.emit(loaded)

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Drop pending results and wait for a running read (at application exit)."""
        self.cancel()
        self._pool.waitForDone(timeout_ms)
