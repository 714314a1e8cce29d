"""One command runner for the window's user actions (git-cola's ``cmds.do``).

Every user action that writes the library or the open chat can fail with a
:class:`~engine.errors.LoomscopeError`. Instead of each slot catching it, mapping it to a
:class:`~gui.errors.UserError` and showing it, the slot hands the work to
:meth:`CommandRunner.do` (plain calls) or :meth:`CommandRunner.push` (undo commands): the runner
calls it, and on failure shows the error once, under the action's title, and says so in the
returned :class:`Outcome`. Only the engine's stable-coded errors are caught; anything else is a
bug and propagates (as in git-cola, where ``do`` is the single place errors become dialogs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from PySide6.QtGui import QUndoCommand, QUndoStack

from engine.errors import LoomscopeError

from .errors import UserError, user_error

T = TypeVar("T")

#: Shows a :class:`UserError` under a title (the window's ``show_error``).
ShowError = Callable[[UserError, str], None]
#: Turns a caught engine error into the text shown (default: :func:`gui.errors.user_error`).
Describe = Callable[[LoomscopeError], UserError]


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What a command returned (``value``) or the error already shown for it (``error``)."""

    value: T | None = None
    error: UserError | None = None

    @property
    def ok(self) -> bool:
        """``True`` when the command ran without an engine error."""
        return self.error is None


class CommandRunner:
    """Runs the window's commands; an engine error is shown once and reported in the outcome.

    Parameters
    ----------
    undo_stack:
        The application's undo stack; :meth:`push` puts commands on it.
    show_error:
        Called with the mapped error and the action's title when a command fails.
    """

    def __init__(self, undo_stack: QUndoStack, show_error: ShowError) -> None:
        self._stack = undo_stack
        self._show_error = show_error
        # PySide drops the Python half of a command pushed inside a macro, and with it the
        # undo()/redo() overrides: every live command stays referenced until the stack is cleared.
        self._live: list[QUndoCommand] = []

    def do(self, title: str, fn: Callable[..., T], *args: Any, describe: Describe | None = None) -> Outcome[T]:
        """Call ``fn(*args)``; on a :class:`LoomscopeError` show it under ``title``.

        ``describe`` maps the error to what is shown (default :func:`gui.errors.user_error`).
        Returns the value in an :class:`Outcome`, or the shown error.
        """
        try:
            return Outcome(fn(*args))
        except LoomscopeError as exc:
            error = describe(exc) if describe is not None else user_error(exc)
            self._show_error(error, title)
            return Outcome(error=error)

    def push(self, title: str, *commands: QUndoCommand | Callable[[], QUndoCommand],
             macro: str | None = None) -> Outcome[list[QUndoCommand]]:
        """Push undo commands (each built first when given as a factory) as one :meth:`do`.

        A factory lets a command whose constructor reads the library fail the same way as its
        ``redo``. With ``macro`` the commands are one undo step named ``macro`` (the macro is
        closed even when one of them fails). Returns the pushed commands in the outcome.
        """
        def run() -> list[QUndoCommand]:
            pushed: list[QUndoCommand] = []
            if macro is not None:
                self._stack.beginMacro(macro)
            try:
                for command in commands:
                    cmd = command if isinstance(command, QUndoCommand) else command()
                    self._live.append(cmd)
                    self._stack.push(cmd)
                    pushed.append(cmd)
            finally:
                if macro is not None:
                    self._stack.endMacro()
            return pushed

        return self.do(title, run)

    def forget_history(self) -> None:
        """Clear the undo stack (after an action that cannot be undone, e.g. a deletion)."""
        self._stack.clear()
        self._live.clear()
