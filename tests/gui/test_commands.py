"""The command runner: one place where an engine error becomes a shown error (git-cola ``cmds.do``)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QUndoCommand, QUndoStack

from engine.errors import NotFoundError
from gui.commands import CommandRunner
from gui.errors import UserError


class _Record(QUndoCommand):
    """Appends ``name`` on redo and removes it on undo; ``fail`` raises an engine error on redo."""

    def __init__(self, log: list[str], name: str, fail: bool = False) -> None:
        super().__init__(name)
        self.log, self.name, self.fail = log, name, fail

    def redo(self) -> None:
        if self.fail:
            raise NotFoundError("CHAT_NOT_FOUND", "chat 'x' not found")
        self.log.append(self.name)

    def undo(self) -> None:
        self.log.remove(self.name)


@pytest.fixture
def runner(qapp):
    shown: list[tuple[UserError, str]] = []
    stack = QUndoStack()
    return CommandRunner(stack, lambda err, title: shown.append((err, title))), stack, shown


def test_do_returns_the_value_and_shows_nothing(runner) -> None:
    run, _stack, shown = runner
    out = run.do("Add", lambda a, b: a + b, 2, 3)
    assert out.ok and out.value == 5 and out.error is None
    assert shown == []


def test_do_shows_an_engine_error_once_under_the_title(runner) -> None:
    run, _stack, shown = runner

    def boom() -> None:
        raise NotFoundError("CHAT_NOT_FOUND", "chat 'x' not found")

    out = run.do("Open chat", boom)
    assert not out.ok and out.value is None
    assert out.error is not None and out.error.code == "CHAT_NOT_FOUND"
    assert [(e.code, t) for e, t in shown] == [("CHAT_NOT_FOUND", "Open chat")]
    assert "no longer in the library" in shown[0][0].text  # mapped by code, not str(exc)


def test_do_uses_describe_for_the_shown_text(runner) -> None:
    run, _stack, shown = runner

    def boom() -> None:
        raise NotFoundError("CHAT_NOT_FOUND", "x")

    run.do("Import failed", boom, describe=lambda exc: UserError(exc.code, f"Could not import: {exc.code}"))
    assert shown[0][0].text == "Could not import: CHAT_NOT_FOUND"


def test_a_bug_is_not_swallowed(runner) -> None:
    run, _stack, shown = runner
    with pytest.raises(ZeroDivisionError):
        run.do("Divide", lambda: 1 / 0)
    assert shown == []


def test_push_macro_is_one_undo_step_and_factories_build_late(runner) -> None:
    run, stack, shown = runner
    log: list[str] = []
    out = run.push("Save", _Record(log, "a"), lambda: _Record(log, "b"), macro="Both")
    assert out.ok and [c.text() for c in out.value or []] == ["a", "b"]
    assert log == ["a", "b"] and stack.count() == 1 and stack.undoText() == "Both"
    stack.undo()
    assert log == [] and shown == []


def test_push_failure_is_shown_and_the_macro_closed(runner) -> None:
    run, stack, shown = runner
    log: list[str] = []
    out = run.push("Save", _Record(log, "a"), _Record(log, "b", fail=True), macro="Both")
    assert not out.ok and [t for _e, t in shown] == ["Save"]
    # the macro was closed: a later push is its own step
    assert run.push("Save", _Record(log, "c")).ok
    assert stack.undoText() == "c"
    run.forget_history()
    assert stack.count() == 0 and not stack.canUndo()
