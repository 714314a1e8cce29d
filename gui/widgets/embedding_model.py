"""The ``vector-recall`` semantic model row of the Settings tab (issue 28 item 4).

A model2vec model is named by a folder or a model id; a preview only ever loads it from the
folder or the user's model cache (``engine.shifting.embedding``). Downloading happens only here,
when the writer presses *Download*: on a ``QThreadPool`` worker, with a progress bar, the window
usable meanwhile. Signal ``model_chosen(str)`` carries the name to store in the strategy
options (``embedding_model``; empty: BM25).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThreadPool, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.shifting import embedding

from .. import jobs
from ..file_dialogs import ask_directory

#: ``download(ref, on_progress=...) -> folder``; :func:`engine.shifting.embedding.download_model` by default.
Downloader = Callable[..., Path]


class _Relay(QObject):
    """Carries the worker's progress and outcome to the GUI thread (queued signals)."""

    progressed = Signal(int, int)
    finished = Signal(str)
    failed = Signal(str)


@dataclass(frozen=True)
class _Task:
    """One download: what :func:`_fetch` runs on the worker, and the relay it reports through."""

    ref: str
    download: Downloader
    relay: _Relay


def _fetch(task: _Task) -> None:  # worker thread
    """Download ``task.ref``; report the folder (or why not) through the relay."""
    try:
        folder = task.download(task.ref, on_progress=task.relay.progressed.emit)
    except OSError as exc:
        jobs.emit(task.relay.failed, str(exc))
        return
    jobs.emit(task.relay.finished, str(folder))


class EmbeddingModelBox(QWidget):
    """Model name, *Browse…*, *Download* with a progress bar, and where the model stands.

    Signals: ``model_chosen(str)`` (the name to use; ``""`` for BM25), ``download_finished(bool)``.
    """

    model_chosen = Signal(str)
    download_finished = Signal(bool)

    def __init__(self, parent: QWidget | None = None, *, download: Downloader | None = None,
                 pool: QThreadPool | None = None) -> None:
        super().__init__(parent)
        self._download = download or embedding.download_model
        self._pool = pool
        self._relay = _Relay(self)
        self._relay.progressed.connect(self._on_relay_progressed)
        self._relay.finished.connect(self._on_relay_finished)
        self._relay.failed.connect(self._on_relay_failed)
        self.name_edit = QLineEdit(self)
        self.name_edit.setObjectName("embeddingModel")
        self.name_edit.setPlaceholderText(f"none: BM25 · a model2vec folder or id, e.g. {embedding.DEFAULT_MODEL}")
        self.browse_button = QPushButton("Browse…", self)
        self.download_button = QPushButton("Download", self)
        self.download_button.setObjectName("downloadEmbeddingModel")
        self.download_button.setToolTip("Download this model id into your model cache (the only time Loomscope "
                                        "downloads a model; previews never do)")
        self.progress = QProgressBar(self)
        self.progress.setVisible(False)
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.status.setStyleSheet("color: #666;")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.name_edit, 1)
        row.addWidget(self.browse_button)
        row.addWidget(self.download_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        self.name_edit.editingFinished.connect(self._on_name_edit_finished)
        self.browse_button.clicked.connect(self._on_browse_button_clicked)
        self.download_button.clicked.connect(self._on_download_button_clicked)

    def set_model(self, name: str) -> None:
        """Show ``name`` (from the chat's settings) and where it stands; emits nothing."""
        if self.name_edit.text() != name:
            self.name_edit.setText(name)
        self._show_status()

    def _show_status(self) -> None:
        name = self.name_edit.text().strip()
        if not name:
            self.status.setText("Ranked with BM25 (no semantic model).")
            return
        try:
            folder = embedding.resolve_model_folder(name)
        except FileNotFoundError:
            self.status.setText("Not on this computer: press Download (for a model id) or pick a folder. "
                                "Until then vector-recall ranks with BM25.")
            return
        except (ImportError, OSError, ValueError) as exc:  # model2vec missing, an unreadable folder
            self.status.setText(f"Cannot use it ({exc}); vector-recall ranks with BM25.")
            return
        self.status.setText(f"Ready: {folder}")

    def _on_name_edit_finished(self) -> None:
        self._show_status()
        self.model_chosen.emit(self.name_edit.text().strip())

    def _on_browse_button_clicked(self) -> None:
        # through gui/file_dialogs.py: Qt's default dialog reads file contents, and would drop the library's lock
        folder = ask_directory(self, "A model2vec model folder")
        if folder:
            self.name_edit.setText(folder)
            self._on_name_edit_finished()

    def _on_download_button_clicked(self) -> None:
        ref = self.name_edit.text().strip() or embedding.DEFAULT_MODEL
        self.name_edit.setText(ref)
        self.download_button.setEnabled(False)
        self.progress.setRange(0, 0)  # busy until the first file count arrives
        self.progress.setVisible(True)
        self.status.setText(f"Downloading {ref}…")
        jobs.start(self._pool, _fetch, _Task(ref, self._download, self._relay))

    def _on_relay_progressed(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.progress.setFormat("%v of %m files")

    def _on_relay_finished(self, folder: str) -> None:
        self._end_download()
        self.status.setText(f"Downloaded to {folder}")
        self.model_chosen.emit(self.name_edit.text().strip())
        self.download_finished.emit(True)

    def _on_relay_failed(self, message: str) -> None:
        self._end_download()
        self.status.setText(f"Download failed: {message}. vector-recall keeps ranking with BM25.")
        self.download_finished.emit(False)

    def _end_download(self) -> None:
        self.download_button.setEnabled(True)
        self.progress.setVisible(False)

    def progress_state(self) -> dict[str, Any]:
        """What the progress bar shows (tests): visible, value, maximum."""
        return {"visible": not self.progress.isHidden(), "value": self.progress.value(),
                "maximum": self.progress.maximum()}
