"""The Lorebook tab's test box: World Info activation on any text, on a worker thread.

:func:`run_text_test` asks the engine (``engine.pipeline.activate_text``) which entries of a chat's
lorebooks a text would trigger; :class:`TextTestRunner` runs it on a ``QThreadPool`` worker and
delivers only the latest result (each request is stamped with a generation number; a result
whose generation is no longer the latest is dropped), as :mod:`gui.preview.controller` does for
previews (STYLE.md 5).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QThreadPool, Signal
from PySide6.QtGui import QColor, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QTextEdit

from engine.lorebook import ActivationResult, TraceRecord
from engine.lorebook_facts import key_spans, record_fact
from engine.pipeline import activate_text
from engine.schema import PreviewRequest
from engine.tokenizers import TokenizerRegistry

from ... import jobs
from ...errors import UserError, worker_error
from .rows import TraceKey
from .words import escape

#: ``(request, text, tokenizers) -> ActivationResult``, run on the worker; must not touch Qt.
TextTestFn = Callable[[PreviewRequest, str, "TokenizerRegistry | None"], ActivationResult]


def run_text_test(request: PreviewRequest, text: str,
                  tokenizers: TokenizerRegistry | None = None) -> ActivationResult:
    """Activate the lorebooks of ``request``'s chat on ``text`` as one user message.

    The engine answers (:func:`engine.pipeline.activate_text`): the preview's own activation step
    with its books, activation order, duplicates, scopes, tokenizer profile, lorebook budget and
    ``{{user}}``/``{{char}}`` names.

    Parameters
    ----------
    request:
        The chat's frozen request: its lorebooks, World Info settings, card, persona and names.
    text:
        The test text.
    tokenizers:
        The tokenizer registry to count with (``AppContext.registries.tokenizers``); the
        built-in profiles when ``None``.

    Returns
    -------
    ActivationResult
        ``trace[*].book_index`` indexes ``chat_lorebooks(request)`` as the preview's trace does.

    Raises
    ------
    LoomscopeError
        What the engine raises (``UNKNOWN_TOKENIZER`` for a profile the registry lacks).
    """
    return activate_text(request, text, tokenizers=tokenizers)


def _record_title(rec: TraceRecord) -> str:
    return record_fact(rec).label  # the entry's title, then book and uid (engine.lorebook_facts)


def describe_result(result: ActivationResult, trace: dict[TraceKey, TraceRecord]) -> str:
    """The test box's summary (rich text): what would fire, what the budget dropped, tokens, problems.

    Parameters
    ----------
    result:
        The :func:`run_text_test` result.
    trace:
        ``rows.index_trace(result.trace)``.
    """
    fired = [rec for rec in trace.values() if rec.activated]
    dropped = [rec for rec in trace.values() if rec.code == "LOREBOOK_BUDGET"]
    if fired:
        msg = f"<b>{len(fired)} {'entry' if len(fired) == 1 else 'entries'} would fire:</b>"
        for rec in fired:  # the same why as the Block inspector's entry table
            fact = record_fact(rec, scanned="the test text")
            msg += f"<br>• {escape(fact.label)} — {escape(fact.why)}"
    else:
        msg = "<b>No entry would fire.</b>"
    if dropped:
        msg += f"<br>{len(dropped)} matched but would be over the lorebook budget: " + escape(
            ", ".join(_record_title(r) for r in dropped))
    if result.budget:
        msg += f"<br>{result.used_tokens:,} of {result.budget:,} lorebook tokens."
    for diag in result.diagnostics:
        msg += f"<br><span style='color:#b54708'>⚠ {escape(str(diag))}</span>"
    return msg


#: Background of a matched key in the test box.
MATCH_COLOUR = QColor("#ffe08a")


def highlight_keys(edit: QPlainTextEdit, trace: list[TraceRecord]) -> int:
    """Mark in ``edit`` every occurrence of the keys that fired (``engine.lorebook_facts.key_spans``).

    Returns the number of marked spans. Offsets are code points; the box's text is mapped to
    Qt's UTF-16 positions.
    """
    text = edit.toPlainText()
    utf16 = [0]
    for ch in text:
        utf16.append(utf16[-1] + (2 if ord(ch) > 0xFFFF else 1))
    selections = []
    keys = {str(r.detail.get("key")) for r in trace
            if r.activated and r.code == "LOREBOOK_KEY_MATCH" and r.detail.get("key") is not None}
    for key in sorted(keys):
        for start, end in key_spans(text, key):
            sel = QTextEdit.ExtraSelection()
            cursor = QTextCursor(edit.document())
            cursor.setPosition(utf16[start])
            cursor.setPosition(utf16[end], QTextCursor.MoveMode.KeepAnchor)
            sel.cursor = cursor
            sel.format.setBackground(MATCH_COLOUR)
            selections.append(sel)
    edit.setExtraSelections(selections)
    return len(selections)


@dataclass(frozen=True)
class TextTestOutcome:
    """One finished test run: its generation, the text, and the engine's result or error."""

    generation: int
    text: str
    result: ActivationResult | None
    error: UserError | None


class _Relay(QObject):
    """Lives on the main thread; the worker emits through it (queued connection)."""

    finished = Signal(object)


@dataclass(frozen=True)
class _Task:
    """One test run: what :func:`_try_text` runs on the worker, and the relay it reports through."""

    generation: int
    request: PreviewRequest
    text: str
    tokenizers: TokenizerRegistry | None
    compute: TextTestFn
    latest: Callable[[], int]
    relay: _Relay


def _try_text(task: _Task) -> None:  # worker thread
    """Run ``task`` unless superseded while queued; report the outcome through its relay."""
    result: ActivationResult | None = None
    error: UserError | None = None
    if task.generation == task.latest():  # superseded while queued: skip the work
        try:
            result = task.compute(task.request, task.text, task.tokenizers)
        except Exception as exc:
            error = worker_error(exc, "lorebook test text")
    jobs.emit(task.relay.finished, TextTestOutcome(task.generation, task.text, result, error))


class TextTestRunner(QObject):
    """Runs test texts on a worker; emits only the latest result.

    Parameters
    ----------
    compute:
        The worker function (:func:`run_text_test`; a controlled fake in tests).
    pool:
        The thread pool (a private one with one thread by default).

    Signals
    -------
    finished(object TextTestOutcome)   # the latest request's result or error
    result_dropped(int generation)     # a stale result arrived and was discarded
    """

    finished = Signal(object)
    result_dropped = Signal(int)

    def __init__(self, compute: TextTestFn = run_text_test, pool: QThreadPool | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._compute = compute
        self._pool = pool if pool is not None else jobs.single_thread_pool(self)
        self._relay = _Relay(self)
        self._relay.finished.connect(self._on_relay_finished)
        self._lock = threading.Lock()
        self._generation = 0
        self._running = 0

    @property
    def generation(self) -> int:
        """The number of the latest request (0 before the first)."""
        with self._lock:
            return self._generation

    def submit(self, request: PreviewRequest, text: str, tokenizers: TokenizerRegistry | None = None) -> int:
        """Test ``text`` against ``request``'s lorebooks on the worker; returns the generation number."""
        with self._lock:
            self._generation += 1
            generation = self._generation
        self._running += 1
        jobs.start(self._pool, _try_text, _Task(generation, request, text, tokenizers, self._compute,
                                                self._latest, self._relay))
        return generation

    def _latest(self) -> int:
        """:attr:`generation` (a bound method, not a lambda per job)."""
        return self.generation

    def cancel(self) -> None:
        """Forget every request under way (their results are dropped when they arrive)."""
        with self._lock:
            self._generation += 1

    def is_busy(self) -> bool:
        """``True`` while a test run is queued or running."""
        return self._running > 0

    def _on_relay_finished(self, outcome: TextTestOutcome) -> None:
        self._running = max(0, self._running - 1)
        if outcome.generation != self.generation:
            self.result_dropped.emit(outcome.generation)
            return
        self.finished.emit(outcome)

    def shutdown(self, timeout_ms: int = 5000) -> None:
        """Drop pending results and wait for a running test (at exit)."""
        self.cancel()
        self._pool.waitForDone(timeout_ms)
