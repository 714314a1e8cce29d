"""Guard against the PySide6 6.12.0 bug that drops a reference to ``None`` on every void Qt call.

On CPython 3.11 that build aborts the app ("none_dealloc") after a few hundred live-preview
updates; pyproject.toml pins ``PySide6-Essentials<6.12``. This test fails if a binding with the
leak is installed again.
"""

from __future__ import annotations

import sys


def test_void_qt_calls_do_not_leak_none(qapp):
    from PySide6.QtWidgets import QLabel

    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(2000):
        label.setText("x")
    after = sys.getrefcount(None)
    assert before - after < 100
