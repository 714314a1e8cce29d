"""The Settings tab's recall model row (issue 28 item 4): Download with a progress bar, only when asked.

The downloader is a stand-in that reports file counts and builds a real model2vec model in a
temp folder (no network); the rest is the real widget, worker pool and settings panel.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from engine.registries import default_registries
from engine.schema import ContextSettings
from gui.widgets.embedding_model import EmbeddingModelBox
from gui.widgets.settings_panel import SettingsPanel
from tests.engine.shifting.test_recall_embedding import make_tiny_model

pytest.importorskip("model2vec")


class SlowDownloader:
    """Reports 1..3 of 3 files, waiting for ``go`` before the last one; returns a tiny model folder."""

    def __init__(self, folder: Path, fail: bool = False) -> None:
        self.folder, self.fail = folder, fail
        self.go = threading.Event()
        self.calls: list[str] = []

    def __call__(self, ref, *, on_progress=None):
        self.calls.append(ref)
        on_progress(1, 3)
        on_progress(2, 3)
        self.go.wait(10)
        if self.fail:
            raise OSError(f"could not download embedding model {ref!r}: no network")
        on_progress(3, 3)
        return make_tiny_model(self.folder)


def _panel(qtbot, download) -> SettingsPanel:
    panel = SettingsPanel(default_registries())
    qtbot.addWidget(panel)
    panel.recall_model._download = download
    panel.set_settings(ContextSettings(strategy="vector-recall"))
    return panel


def test_download_shows_progress_and_stores_the_model_in_the_options(qtbot, tmp_path) -> None:
    dl = SlowDownloader(tmp_path / "tiny")
    panel = _panel(qtbot, dl)
    panel.resize(520, 600)
    panel.show()
    box = panel.recall_model
    assert box.isVisibleTo(panel)  # shown for vector-recall
    box.name_edit.setText("me/tiny")
    edited = []
    panel.settings_edited.connect(edited.append)
    box.download_button.click()
    qtbot.waitUntil(lambda: box.progress_state()["value"] == 2, timeout=5000)
    assert box.progress_state() == {"visible": True, "value": 2, "maximum": 3}
    assert not box.download_button.isEnabled() and box.status.text() == "Downloading me/tiny…"
    folder = os.environ.get("LOOMSCOPE_SCREENSHOT_DIR")
    if folder:
        panel.grab().save(os.path.join(folder, "issue28-recall-model-downloading.png"))
    with qtbot.waitSignal(box.download_finished, timeout=10000) as blocker:
        dl.go.set()
    assert blocker.args == [True] and dl.calls == ["me/tiny"]
    assert not box.progress_state()["visible"] and box.download_button.isEnabled()
    assert box.status.text() == f"Downloaded to {tmp_path / 'tiny'}"
    assert edited and edited[-1].strategy_options["embedding_model"] == "me/tiny"


def test_a_failed_download_says_so_and_changes_nothing(qtbot, tmp_path) -> None:
    dl = SlowDownloader(tmp_path / "tiny", fail=True)
    panel = _panel(qtbot, dl)
    box = panel.recall_model
    box.name_edit.setText("me/absent")
    edited = []
    panel.settings_edited.connect(edited.append)
    with qtbot.waitSignal(box.download_finished, timeout=10000) as blocker:
        box.download_button.click()
        dl.go.set()
    assert blocker.args == [False] and not edited
    assert box.status.text().startswith("Download failed: could not download embedding model 'me/absent'")


def test_a_local_folder_is_ready_and_the_row_hides_for_other_strategies(qtbot, tmp_path) -> None:
    model = make_tiny_model(tmp_path / "m")
    panel = _panel(qtbot, SlowDownloader(tmp_path / "unused"))
    box: EmbeddingModelBox = panel.recall_model
    edited = []
    panel.settings_edited.connect(edited.append)
    box.name_edit.setText(str(model))
    box.name_edit.editingFinished.emit()
    assert box.status.text() == f"Ready: {model}"
    assert edited[-1].strategy_options == {"embedding_model": str(model)}
    panel.set_settings(ContextSettings(strategy="truncate"))
    assert not box.isVisibleTo(panel)
