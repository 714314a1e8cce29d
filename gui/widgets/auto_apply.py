"""Forms that apply as you type: one debounced apply per burst of edits (issue 31 item 5).

A section of a form (the Setup tab's persona, prompts, Author's Note, World Info, model) hands its
fields and its apply function to :class:`AutoApply`: each user edit restarts a single-shot timer
(:data:`FORM_APPLY_DEBOUNCE_MS`); when the writer pauses, the section is applied once, so a burst
of typing is one undo step. Programmatic fills (the panel's ``_loading`` flag) never apply.

When the applied edit comes back (the chat is re-read and the form filled again), :meth:`AutoApply.hold`
keeps what the writer is doing: a section with edits still waiting keeps its fields as typed, and a
focused text box keeps its cursor. Any form can use it (the instruct / context preset editors too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from PySide6.QtCore import QObject, QSignalBlocker, QTimer
from PySide6.QtWidgets import QAbstractSpinBox, QCheckBox, QComboBox, QLineEdit, QPlainTextEdit, QWidget

#: Pause after the last edit before a section is applied, in milliseconds.
FORM_APPLY_DEBOUNCE_MS = 600


def _value(w: QWidget) -> Any:
    if isinstance(w, QPlainTextEdit):
        return w.toPlainText()
    if isinstance(w, QLineEdit):
        return w.text()
    if isinstance(w, QCheckBox):
        return w.isChecked()
    if isinstance(w, QComboBox):
        return w.currentIndex()
    if isinstance(w, QAbstractSpinBox):
        return w.value()  # type: ignore[attr-defined]
    return None


def _set_value(w: QWidget, value: Any) -> None:
    with QSignalBlocker(w):
        if isinstance(w, QPlainTextEdit) and w.toPlainText() != value:
            w.setPlainText(value)
        elif isinstance(w, QLineEdit) and w.text() != value:
            w.setText(value)
        elif isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QComboBox):
            w.setCurrentIndex(int(value))
        elif isinstance(w, QAbstractSpinBox):
            w.setValue(value)  # type: ignore[attr-defined]


def _cursor(w: QWidget) -> tuple[Any, ...] | None:
    if isinstance(w, QPlainTextEdit):
        c = w.textCursor()
        return (w.toPlainText(), c.anchor(), c.position(), w.verticalScrollBar().value())
    if isinstance(w, QLineEdit):
        return (w.text(), w.cursorPosition())
    return None


def _restore_cursor(w: QWidget, saved: tuple[Any, ...]) -> None:
    if isinstance(w, QPlainTextEdit) and w.toPlainText() == saved[0]:
        c = w.textCursor()
        c.setPosition(min(saved[1], len(saved[0])))
        c.setPosition(min(saved[2], len(saved[0])), c.MoveMode.KeepAnchor)
        w.setTextCursor(c)
        w.verticalScrollBar().setValue(saved[3])
    elif isinstance(w, QLineEdit) and w.text() == saved[0]:
        w.setCursorPosition(saved[1])


class AutoApply(QObject):
    """Apply one form section after each burst of edits.

    Parameters
    ----------
    apply:
        The section's apply function (emits the undoable intent).
    widgets:
        The section's fields: line edits, text boxes, spin boxes, combo boxes, check boxes.
        User edits are watched (``textEdited``, ``textChanged``, ``valueChanged``, ``activated``,
        ``clicked``).
    loading:
        ``True`` while the form is being filled by code: edits then are not the writer's.
    delay_ms:
        The pause that ends a burst, milliseconds.
    """

    def __init__(self, apply: Callable[[], None], widgets: Iterable[QWidget], *, loading: Callable[[], bool],
                 delay_ms: int = FORM_APPLY_DEBOUNCE_MS, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._apply = apply
        self._loading = loading
        self.widgets = list(widgets)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(delay_ms)
        self.timer.timeout.connect(self._apply)
        for w in self.widgets:
            if isinstance(w, QPlainTextEdit):
                w.textChanged.connect(self._on_edited)
            elif isinstance(w, QLineEdit):
                w.textEdited.connect(self._on_edited)
            elif isinstance(w, QCheckBox):
                w.clicked.connect(self._on_edited)
            elif isinstance(w, QComboBox):
                w.activated.connect(self._on_edited)
            elif isinstance(w, QAbstractSpinBox):
                w.valueChanged.connect(self._on_edited)  # type: ignore[attr-defined]

    def pending(self) -> bool:
        """``True`` while an edit waits for the pause."""
        return self.timer.isActive()

    def apply_now(self) -> None:
        """Apply the section now (a waiting edit is then applied, not again later)."""
        self.timer.stop()
        self._apply()

    def flush(self) -> None:
        """Apply a waiting edit now."""
        if self.timer.isActive():
            self.timer.stop()
            self._apply()

    def cancel(self) -> None:
        """Forget a waiting edit (the form now shows another chat)."""
        self.timer.stop()

    def _on_edited(self, *_args: Any) -> None:
        if not self._loading():
            self.timer.start()


@contextlib.contextmanager
def hold(sections: Iterable[AutoApply], *, same_chat: bool) -> Iterator[None]:
    """Fill a form inside this block without losing what the writer is doing.

    For the same chat, a section with edits still waiting keeps its fields as typed (its timer
    still applies them) and a focused text box keeps its cursor when its text is unchanged;
    for another chat, waiting edits are dropped.
    """
    sections = list(sections)
    kept: list[tuple[QWidget, Any]] = []
    cursors: list[tuple[QWidget, tuple[Any, ...]]] = []
    for s in sections:
        if not same_chat:
            s.cancel()
            continue
        if s.pending():
            kept.extend((w, _value(w)) for w in s.widgets)
        for w in s.widgets:
            saved = _cursor(w) if w.hasFocus() else None
            if saved is not None:
                cursors.append((w, saved))
    yield
    for w, value in kept:
        _set_value(w, value)
    for w, saved in cursors:
        _restore_cursor(w, saved)
