"""The app's start runs without the cyclic collector until the window is up (issue 29, app start).

``loomscope gui`` pauses the collector before it imports the app (``gui/cli.py``); once the window
is shown and its first chat load has started, :func:`gui.app.end_start_pause` hands the collector
to the app's policy (:mod:`gui.gc_policy`): it runs again at once when no chat loads, and stays
held until a loading chat's first preview is applied otherwise. The app's first chat load runs no
full collection (it replaces no chat). ``tests/benchmarks/measure_start.py`` times the start.
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

import gui.app
from engine.schema import Chat, ChatMessage, ContextSettings
from gui.app import build_context, end_start_pause
from gui.cli import _run
from gui.gc_policy import CollectorPolicy
from gui.main_window import MainWindow


def _window(qtbot, tmp_path: Path, chats: int):  # type: ignore[no-untyped-def]
    from engine.storage import open_store

    store = open_store(f"sqlite:///{tmp_path / 'library.sqlite3'}", seed=False)
    ids = [store.chats.add(Chat(title=f"chat {k}", messages=[
        ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"chat {k} message {i}") for i in range(30)]),
        title=f"chat {k}", settings=ContextSettings(model="gpt-4o")) for k in range(chats)]
    ctx = build_context(store, settings=QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    win = MainWindow(ctx)
    qtbot.addWidget(win)
    win.resize(1280, 800)
    return win, ctx, store, ids


def test_loomscope_gui_imports_and_runs_the_app_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(gui.app, "run_app", lambda **_kw: seen.append(gc.isenabled()) or 0)
    gc.enable()
    args = argparse.Namespace(size=None, db=None, screenshot=None, chat=None, tab=None)
    assert _run(args) == 0
    assert seen == [False]


def test_the_start_pause_ends_at_once_when_no_chat_loads(qtbot, tmp_path: Path) -> None:
    win, ctx, store, _ = _window(qtbot, tmp_path, chats=0)
    gc.disable()
    win.show()
    win.start(None)
    assert ctx.gc_policy is not None and not ctx.gc_policy.held
    end_start_pause(ctx)
    assert gc.isenabled()
    ctx.preview.shutdown()
    store.close()


def test_a_loading_chat_keeps_the_collector_until_its_first_preview(qtbot, tmp_path: Path) -> None:
    win, ctx, store, ids = _window(qtbot, tmp_path, chats=2)
    policy = ctx.gc_policy
    assert isinstance(policy, CollectorPolicy)
    gc.disable()
    win.show()
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        win.start(ids[0])
        assert policy.held
        end_start_pause(ctx)
        assert not gc.isenabled()  # the load holds it
    qtbot.waitUntil(lambda: policy.settles == 1, timeout=5000)
    assert policy.collections == 0  # the first load replaced no chat: no full collection
    assert policy.quiet and not gc.isenabled()
    win.open_chat(None)  # closing the chat: CPython collects as usual
    assert gc.isenabled()
    ctx.preview.shutdown()
    policy.release()
    store.close()
