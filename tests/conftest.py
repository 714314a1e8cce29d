"""Shared fixtures. ``shared_data`` is the folder of real third-party files (skips when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (ROOT.parent / "shared" / "data").resolve()


def shared_data_path() -> Path | None:
    """``../shared/data`` beside the project, or ``None`` when it is absent (a user's clone)."""
    env = os.environ.get("LOOMSCOPE_SHARED_DATA")
    path = Path(env) if env else SHARED_DATA
    return path if path.is_dir() else None


@pytest.fixture
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when the folder is absent."""
    path = shared_data_path()
    if path is None:
        pytest.skip("../shared/data is absent")
    return path
