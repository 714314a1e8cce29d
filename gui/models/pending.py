"""Optimistic pin / exclude state: what a table shows between an edit and the preview that follows.

A pin or exclude click changes the document at once (an undo command, saved), but the frozen
preview the tables adapt arrives a debounce and an engine run later. Until then a model shows
the document's new flag for that message (:meth:`PendingFlags.expect`); when the next preview
is applied, :meth:`PendingFlags.settle` compares: where the engine agrees the pending value
simply becomes the preview's, where it does not the row falls back to what the engine says and
a :class:`FlagRollback` tells the window to say so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.schema import PreviewBlock

#: The flags a click can change, as named on :class:`~engine.schema.PreviewBlock`.
FLAGS = ("pinned", "manual_excluded")


@dataclass(frozen=True)
class FlagRollback:
    """An optimistic flag the engine's preview did not confirm.

    ``wanted`` is what the click asked for; the preview shows ``not wanted``.
    """

    message_index: int
    flag: str
    wanted: bool

    def describe(self, strategy: str = "") -> str:
        """One sentence for the status bar: which click did not take, and that the box shows the preview."""
        what = {("pinned", True): "pinned", ("pinned", False): "unpinned",
                ("manual_excluded", True): "excluded", ("manual_excluded", False): "included"}[
                    (self.flag, self.wanted)]
        by = f" under the “{strategy}” strategy" if strategy else ""
        return (f"Message #{self.message_index}: the preview{by} does not show it {what}; "
                "the check box shows what the engine did")


class PendingFlags:
    """Per message index, the flags shown ahead of the preview."""

    def __init__(self) -> None:
        self._want: dict[int, dict[str, bool]] = {}

    def __bool__(self) -> bool:
        return bool(self._want)

    def expect(self, message_index: int, shown: dict[str, bool], document: dict[str, bool]) -> bool:
        """The document now holds ``document`` flags for ``message_index``; ``shown`` is what the
        current preview says. Returns whether anything shown changes (the row needs a repaint)."""
        before = dict(self._want.get(message_index, {}))
        want = {f: v for f, v in document.items() if f in FLAGS and shown.get(f) != v}
        if want:
            self._want[message_index] = want
        else:
            self._want.pop(message_index, None)
        return want != before

    def value(self, message_index: int, flag: str, shown: bool) -> bool:
        """The flag to display: the pending one if any, else ``shown`` (the preview's)."""
        want = self._want.get(message_index)
        if want is None:
            return shown
        return want.get(flag, shown)

    def is_pending(self, message_index: int) -> bool:
        """Whether ``message_index`` shows a flag the preview has not confirmed yet."""
        return message_index in self._want

    def indices(self) -> Iterable[int]:
        """Message indices with a pending flag."""
        return list(self._want)

    def settle(self, block_of: Callable[[int], PreviewBlock | None]) -> list[FlagRollback]:
        """A new preview is shown: drop every pending flag; return those it contradicts.

        ``block_of(message_index)`` gives the new preview's block of that message (or ``None``:
        the message has no block now, e.g. SillyTavern drops excluded messages; nothing to roll back).
        """
        rollbacks: list[FlagRollback] = []
        for index, want in self._want.items():
            block = block_of(index)
            if block is None:
                continue
            for flag, value in want.items():
                if bool(getattr(block, flag)) != value:
                    rollbacks.append(FlagRollback(index, flag, value))
        self._want.clear()
        return rollbacks

    def clear(self) -> None:
        """Forget everything (another chat, or no preview)."""
        self._want.clear()
