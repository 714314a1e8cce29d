"""Every file dialog of the app leaves SQLite's lock on the library alone (issue 25 item 1).

Qt's default icon provider reads each listed file to find its type; on POSIX that drops the locks SQLite
holds on the library, and a CLI run then deleted the ``-wal`` file the app was writing into. Each dialog is
opened on the library's own folder (detail view: icons and types of every file), then ``/proc/locks`` must
still show the app's lock, and a real ``loomscope chats`` run must leave the ``-wal`` file in place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog

from engine.storage.lock_guard import PROC_LOCKS, process_holds_lock
from gui.file_dialogs import ContentFreeIconProvider

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not PROC_LOCKS.exists(), reason="needs /proc/locks (Linux)")


def _wait(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def _look_through_dialog(folder: Path, seen: list[str]) -> None:
    dialog = QApplication.activeModalWidget()
    if not isinstance(dialog, QFileDialog):
        QTimer.singleShot(20, lambda: _look_through_dialog(folder, seen))
        return
    seen.append(dialog.windowTitle())
    assert isinstance(dialog.iconProvider(), ContentFreeIconProvider)
    dialog.setDirectory(str(folder))
    dialog.setViewMode(QFileDialog.ViewMode.Detail)
    _wait(700)  # the dialog's file system model lists the folder on its own thread
    dialog.reject()


@pytest.fixture
def lib_window(qtbot, tmp_path: Path, qsettings):
    """The app on ``./lib.db`` (as in the issue: a name no MIME glob knows, so Qt's default provider sniffs it)."""
    from engine.schema import Chat, ChatMessage
    from engine.storage import open_store
    from gui.app import build_context
    from gui.main_window import MainWindow

    store = open_store(str(tmp_path / "lib.db"), seed=False)
    chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hello")]), title="first")
    win = MainWindow(build_context(store, settings=qsettings))
    qtbot.addWidget(win)
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        win.start(chat_id)
    yield win, tmp_path / "lib.db"
    win.close()
    store.close()


def test_each_file_dialog_keeps_the_library_lock(lib_window) -> None:
    window, db = lib_window
    ident = (db.stat().st_dev, db.stat().st_ino)
    window.ctx.store.chats.summaries()
    assert process_holds_lock(ident) is True
    setup = window.library_setup
    triggers = [window.import_action, setup.open_folder_action, setup.export_action]
    seen: list[str] = []
    for action in triggers:
        QTimer.singleShot(0, lambda: _look_through_dialog(db.parent, seen))
        action.trigger()
        assert process_holds_lock(ident) is True, f"the dialog of {action.text()!r} dropped the lock"
    assert len(seen) == len(triggers)
    # a file dropped on the window that is the library itself is refused without being opened
    window.library_setup.import_dropped([str(db)])
    assert process_holds_lock(ident) is True
    wal = Path(f"{db}-wal")
    assert wal.exists()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "engine.cli", "chats", "--db", str(db), "--format", "json"],
                   capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=True)
    assert wal.exists(), "another process deleted the WAL: it did not see the app's lock"


def test_every_file_dialog_goes_through_the_helper() -> None:
    """A static ``QFileDialog.get…`` (or a bare ``QFileDialog(…)``) would bring back the content-sniffing provider."""
    offenders = []
    for path in sorted((REPO / "gui").rglob("*.py")):
        if path.name == "file_dialogs.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "QFileDialog" in line or "QFileSystemModel" in line:
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "use gui/file_dialogs.py:\n" + "\n".join(offenders)
