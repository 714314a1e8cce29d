"""Worker jobs hold nothing once finished (issue 29, part leaks): ``gui.jobs`` and every place that runs work on a pool.

A ``QRunnable`` subclass handed to ``QThreadPool.start`` can be kept alive by PySide6, with all it
holds, when the worker finishes it before ``start`` returns (see :mod:`gui.jobs`). The race is
likeliest while another Python thread wants the GIL, so each leak test runs its jobs under
:func:`gil_contention`; then, with the pool idle, nothing a finished job captured may be alive.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QThreadPool, Signal

from engine.errors import NotFoundError
from engine.schema import Chat, ChatMessage, Lorebook, LorebookEntry, PreviewRequest
from gui import jobs
from gui.folder_import import run_folder_import
from gui.generation import GenerationRunner
from gui.preview import PreviewController
from gui.preview.loader import ChatLoader
from gui.widgets.embedding_model import EmbeddingModelBox
from gui.widgets.lorebook.test_text import TextTestRunner
from gui.widgets.lorebook_report_dialog import LorebookReportDialog
from gui.widgets.prompt_text_view import SYNC_TOKENIZE_CHARS, PromptTextView
from tests.gui.helpers import make_block, make_preview
from tests.tc_preview import as_text_completion

GUI = Path(__file__).resolve().parents[2] / "gui"
#: Jobs per place: with contention, a QRunnable subclass lost most of 40 in about half the runs.
JOBS = 40
#: Fresh pools (rounds) per place where the place takes a pool: the race's odds change per pool.
ROUNDS = 4


class _Captured:
    """Something only a job holds (a fake store, provider, tokenizer): a weak reference tells whether it lives.

    As a store or provider, its first use fails at once with an engine error: one the app does
    not log (a logged traceback would hold the worker's frames, and with them this object).
    """

    def __getattr__(self, name: str) -> Any:
        raise NotFoundError("CHAT_NOT_FOUND", f"no {name} in this test")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return []


@contextlib.contextmanager
def gil_contention() -> Iterator[None]:
    """A second Python thread spins for the GIL while the block runs (switch interval 1 ms)."""
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: [None for _ in iter(stop.is_set, True)], daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    spinner.start()
    try:
        yield
    finally:
        stop.set()
        spinner.join()
        sys.setswitchinterval(interval)


def _alive(refs: list[weakref.ref[Any]], qtbot: Any, *pools: QThreadPool) -> int:
    for pool in pools or (QThreadPool.globalInstance(),):
        assert pool.waitForDone(5000)
    qtbot.wait(20)
    gc.collect()
    return sum(r() is not None for r in refs)


def _request(tag: str) -> PreviewRequest:
    return PreviewRequest(chat=Chat(title=tag, messages=[ChatMessage(role="user", content=tag)]))


# -- the helper -------------------------------------------------------------------------------
class _Relay(QObject):
    done = Signal(object)


def _work(captured: _Captured, relay: _Relay) -> None:
    jobs.emit(relay.done, type(captured).__name__)


def test_start_runs_the_job_and_lets_go_of_its_arguments(qtbot) -> None:
    relay = _Relay()
    refs: list[weakref.ref[Any]] = []
    pools = [jobs.single_thread_pool(relay) for _ in range(ROUNDS)]
    assert all(p.maxThreadCount() == 1 for p in pools)
    with gil_contention():
        for pool in pools:
            for _ in range(JOBS):
                captured = _Captured()
                refs.append(weakref.ref(captured))
                with qtbot.waitSignal(relay.done, timeout=5000) as blocker:
                    jobs.start(pool, _work, captured, relay)
                assert blocker.args == ["_Captured"]
                del captured
    assert _alive(refs, qtbot, *pools) == 0


def test_emit_on_a_deleted_relay_is_quiet() -> None:
    relay = _Relay()
    signal = relay.done
    shiboken6.delete(relay)
    jobs.emit(signal, 1)  # at shutdown a worker may report to a relay already gone


def test_no_qrunnable_subclass_and_no_pool_start_outside_gui_jobs() -> None:
    """Every job goes through :func:`gui.jobs.start` (one rule, one place)."""
    subclasses, starts = [], []
    for path in sorted(GUI.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and any("QRunnable" in ast.unparse(b) for b in node.bases):
                subclasses.append(f"{path.name}:{node.lineno} {node.name}")
        if path.name != "jobs.py":
            starts += [f"{path.name}: {m.group(0)}" for m in re.finditer(r"(pool|globalInstance\(\))\.(try)?[sS]tart\(",
                                                                      source, flags=re.IGNORECASE)]
    assert subclasses == []
    assert starts == []


# -- every place that runs work on a pool ---------------------------------------------------------
def test_preview_controller_jobs_hold_nothing(qtbot) -> None:
    refs: list[weakref.ref[Any]] = []
    pools = [QThreadPool() for _ in range(ROUNDS)]
    with gil_contention():
        for pool in pools:
            ctl = PreviewController(lambda req: make_preview([make_block(0, text=req.chat.title)]), pool=pool)
            for k in range(JOBS):
                request = _request(f"r{k}")
                refs.append(weakref.ref(request))
                with qtbot.waitSignal(ctl.preview_ready, timeout=5000):
                    ctl.submit(request)
                del request
            ctl.last_outcome = None
    assert _alive(refs, qtbot, *pools) == 0


def test_chat_loader_jobs_hold_nothing(qtbot) -> None:
    refs: list[weakref.ref[Any]] = []
    pools = [QThreadPool() for _ in range(ROUNDS)]
    with gil_contention():
        for pool in pools:
            for k in range(JOBS):
                store = _Captured()
                refs.append(weakref.ref(store))
                loader = ChatLoader(store, pool=pool)
                with qtbot.waitSignal(loader.failed, timeout=5000):
                    loader.load(f"chat-{k}")
                del store, loader
    assert _alive(refs, qtbot, *pools) == 0


def test_generation_jobs_hold_nothing(qtbot) -> None:
    refs: list[weakref.ref[Any]] = []
    requests: list[weakref.ref[Any]] = []
    runners = [GenerationRunner() for _ in range(ROUNDS)]
    with gil_contention():
        for runner in runners:
            for k in range(JOBS // 2):  # each runs a preview first: fewer, and still most of them lost before
                store, provider, request = _Captured(), _Captured(), _request(f"g{k}")
                refs += [weakref.ref(store), weakref.ref(provider)]
                requests.append(weakref.ref(request))
                assert runner.start(store, request, provider, f"chat-{k}", None)  # type: ignore[arg-type]
                qtbot.waitUntil(lambda runner=runner: not runner.running, timeout=5000)
                del store, provider, request
    for runner in runners:
        runner.wait(5000)
    # the engine keeps its last run for the next warm one: the last request only
    assert _alive(refs + requests[:-1], qtbot) == 0


def test_folder_import_jobs_hold_nothing(qtbot, tmp_path: Path) -> None:
    refs: list[weakref.ref[Any]] = []
    pools = [QThreadPool() for _ in range(ROUNDS)]
    with gil_contention():
        for pool in pools:
            for _ in range(JOBS // 2):
                store = _Captured()
                refs.append(weakref.ref(store))
                report, error = run_folder_import(store, tmp_path / "missing", pool=pool)  # type: ignore[arg-type]
                assert report is None and error is not None
                del store
    assert _alive(refs, qtbot, *pools) == 0


def test_embedding_download_jobs_hold_nothing(qtbot, tmp_path: Path) -> None:
    refs: list[weakref.ref[Any]] = []
    pools = [QThreadPool() for _ in range(ROUNDS)]
    with gil_contention():
        for pool in pools:
            for _ in range(JOBS // 2):
                download: Callable[..., Path] = lambda ref, on_progress: tmp_path  # noqa: E731
                refs.append(weakref.ref(download))
                box = EmbeddingModelBox(download=download, pool=pool)
                box.name_edit.setText("minishlab/potion-base-2M")
                with qtbot.waitSignal(box.download_finished, timeout=5000) as blocker:
                    box.download_button.click()
                assert blocker.args == [True]
                del download, box
    assert _alive(refs, qtbot, *pools) == 0


def test_text_test_jobs_hold_nothing(qtbot) -> None:
    refs: list[weakref.ref[Any]] = []
    pools = [QThreadPool() for _ in range(ROUNDS)]
    with gil_contention():
        for pool in pools:
            runner = TextTestRunner(compute=lambda request, text, tokenizers: None, pool=pool)  # type: ignore[arg-type, return-value]
            for k in range(JOBS):
                request = _request(f"t{k}")
                refs.append(weakref.ref(request))
                with qtbot.waitSignal(runner.finished, timeout=5000):
                    runner.submit(request, "the dragon")
                del request
    assert _alive(refs, qtbot, *pools) == 0


def test_lorebook_report_jobs_hold_nothing(qtbot) -> None:
    refs: list[weakref.ref[Any]] = []
    book = Lorebook(name="Lore", entries=[LorebookEntry(uid=1, keys=["dragon"], content="Dragons nest here.")])
    with gil_contention():
        for k in range(JOBS):
            request = _request(f"the dragon {k}").model_copy(update={"lorebooks": [book]})
            refs.append(weakref.ref(request))
            dialog = LorebookReportDialog(request)
            with qtbot.waitSignal(dialog.ready, timeout=10000):
                pass
            assert dialog.report is not None
            dialog.deleteLater()
            del request, dialog
    assert _alive(refs, qtbot) == 0


def test_prompt_text_token_cut_jobs_hold_nothing(qtbot) -> None:
    messages = [ChatMessage(role="user", content="Fog over the harbour.\n" * 40) for _ in range(120)]
    request = PreviewRequest(chat=Chat(messages=messages))
    pv = as_text_completion(make_preview([make_block(i, text=m.content) for i, m in enumerate(messages)]))
    assert len(pv.prompt) > SYNC_TOKENIZE_CHARS
    view = PromptTextView()
    qtbot.addWidget(view)
    view.tokens_box.setChecked(True)
    refs: list[weakref.ref[Any]] = []
    with gil_contention():
        for _ in range(JOBS // 2):
            spans = _Captured()
            refs.append(weakref.ref(spans))
            view.set_preview(pv, request, spans)
            view.ensure_rendered()
            assert view.wait_for_tokens()
            assert view.token_spans() == []
            del spans
    view.set_preview(None)
    assert _alive(refs, qtbot) == 0
