"""The chat as a list: one row per message, then one row per running progress step.

A read-only adapter over the document's messages plus the latest preview's per-message
fate. A flag edit replaces one message in place (:meth:`ChatMessagesModel.update_message`, one
``dataChanged``); a new preview repaints only the rows whose fate changed, and re-lays out rows
only when the fit marker or the compaction summary moved. The pin / exclude buttons show the
preview's flags, or a click's pending value until the preview confirms it
(:class:`~gui.models.pending.PendingFlags`). Progress rows are keyed by :attr:`ProgressEvent.step_id`, so any pipeline step
(streaming, compaction, steps added later) shows inline without GUI changes.
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from engine.compaction.strategy import SUMMARY_SOURCE
from engine.preview_facts import (
    compaction_stopped,
    compaction_summary_row,
    message_blocks,
    oldest_fitting_in,
    oldest_fitting_index,
)
from engine.schema import ChatMessage, ContextPreview, PreviewBlock, ProgressEvent

from ..roles import (
    FATE_ROLE,
    FLAGS_ROLE,
    GREYED_ROLE,
    MARKER_ROLE,
    MESSAGE_ROLE,
    PROGRESS_ROLE,
    SPEAKER_ROLE,
    SUMMARY_ROLE,
)
from ..words import display_status
from .blocks_model import changed_runs
from .pending import PendingFlags
from .preview_delta import PreviewDelta

_Index = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True)
class MessageFate:
    """A message's fate in the preview: status (``kept``/``excluded``/``truncated``/``summarized``), reason, tokens."""

    status: str
    reason: str
    tokens: int
    protected: bool
    pinned: bool
    group: str | None


#: What a message row shows of its block (its fate, its buttons), compared to find changed rows;
#: the preview's figure columns (``fit_windows``, ``reason_details``) move on nearly every row after one toggle.
_FATE_FIELDS = itemgetter("status", "reason", "tokens", "original_tokens", "protected", "pinned",
                          "manual_excluded", "group")


def message_rows(blocks: Sequence[PreviewBlock]) -> dict[int, int]:
    """``{message index: row}`` of the blocks of chat messages."""
    return {b.message_index: row for row, b in enumerate(blocks) if b.message_index is not None}


class MessageRows(Mapping[int, PreviewBlock]):
    """``{message index: block}`` over a preview's blocks and the rows of its messages, reading a
    block only when asked for it (a warm preview builds only the rows read).

    ``fates``: the ``(status, reason)`` of each message index of the preview these rows follow
    (:meth:`fates`), patched by :meth:`follow` instead of read again from every block.
    """

    def __init__(self, blocks: Sequence[PreviewBlock], rows: dict[int, int],
                 fates: list[tuple[str, str] | None] | None = None) -> None:
        self._blocks, self._rows = blocks, rows
        self._fates = fates

    def __getitem__(self, index: int) -> PreviewBlock:
        return self._blocks[self._rows[index]]

    def get(self, index: int, default: Any = None) -> Any:  # one lookup, no KeyError raised
        row = self._rows.get(index)
        return default if row is None else self._blocks[row]

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, index: object) -> bool:
        return index in self._rows

    def keys(self) -> KeysView[int]:  # the rows' own keys
        return self._rows.keys()

    def fates(self, n: int) -> list[tuple[str, str] | None]:
        """``(status, reason)`` of message ``i``'s block at ``[i]`` for ``i < n`` (``None``: no block)."""
        if self._fates is None or len(self._fates) != n:
            fates: list[tuple[str, str] | None] = [None] * n
            blocks = self._blocks
            for i, row in self._rows.items():
                if i < n:
                    b = blocks[row]
                    fates[i] = (b.status, b.reason)
            self._fates = fates
        return self._fates

    def follow(self, blocks: Sequence[PreviewBlock], changed: Sequence[int]) -> MessageRows:
        """The same rows over ``blocks``, the next preview's, where only messages ``changed`` moved
        their fate: the fates known here are copied and patched, not read again."""
        fates = None
        if self._fates is not None:
            fates = list(self._fates)
            n = len(fates)
            for i in changed:
                if i < n:
                    b = blocks[self._rows[i]]
                    fates[i] = (b.status, b.reason)
        return MessageRows(blocks, self._rows, fates)


def changed_fates(old: Mapping[int, PreviewBlock], new: Mapping[int, PreviewBlock], n: int) -> set[int]:
    """Message indices ``< n`` whose row shows differently between two previews' message blocks
    (``{message_index: block}``): a different fate or flag, or a block that came or went."""
    if old.keys() == new.keys():
        rows = list(new)
        olds = map(vars, map(old.__getitem__, rows))  # instance dicts: itemgetter beats getattr
        return {i for i, a, b in zip(rows, map(_FATE_FIELDS, olds), map(_FATE_FIELDS, map(vars, new.values())),
                                     strict=True) if a != b and i < n}
    changed = {i for i, b in new.items()
               if i < n and (i not in old or _FATE_FIELDS(vars(old[i])) != _FATE_FIELDS(vars(b)))}
    changed.update(i for i in old if i not in new and i < n)
    return changed


def message_display_text(message: ChatMessage, limit: int = 4000) -> str:
    """What the chat view shows of ``message``: its text, then its tool calls as ``name(args)``."""
    text = message.text()
    if message.tool_calls:
        calls = "\n".join(f"→ {c.function.name or '?'}({c.function.arguments})" for c in message.tool_calls)
        text = f"{text}\n{calls}" if text else calls
    if not text.strip():
        return "(empty)"
    return text if len(text) <= limit else text[:limit]


class ChatMessagesModel(QAbstractListModel):
    """Rows: messages (chat order) followed by progress indicators (insertion order)."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._messages: list[ChatMessage] = []
        self._preview: ContextPreview | None = None
        #: message index → block (fates built on demand)
        self._blocks: dict[int, PreviewBlock] | MessageRows = {}
        self._block_rows: dict[int, int] | None = None  # message index → row of its block, once needed
        self._has_summary_source = False  # a block of the preview is the compaction summary
        self._fates: dict[int, MessageFate] = {}
        self._marker: int | None = None
        self._progress: dict[str, ProgressEvent] = {}
        self._summary: tuple[int, PreviewBlock] | None = None  # (row it is shown on, preview block)
        #: The preview says auto-compaction stopped after 3 failures in a row.
        self.compaction_stopped = False
        self._user_name = "User"
        self._char_name = "Assistant"
        self._pending = PendingFlags()
        #: Whether the last :meth:`set_preview` changed row heights (marker or summary moved).
        self.layout_changed = False

    # -- sources -------------------------------------------------------------------------
    def set_messages(self, messages: list[ChatMessage], user_name: str = "User",
                     char_name: str = "Assistant") -> None:
        """Show ``messages`` (resets; keeps the previous fates until the next preview)."""
        self.beginResetModel()
        self._messages = list(messages)
        self._user_name = user_name or "User"
        self._char_name = char_name or "Assistant"
        self._pending.clear()
        self._recompute_marker()
        self.endResetModel()

    def update_message(self, index: int, message: ChatMessage) -> bool:
        """Message ``index`` changed in place (its flags or text): repaint that row only.

        Returns whether its displayed text changed (the row's height may have: re-lay it out).
        """
        if not 0 <= index < len(self._messages):
            return False
        old = self._messages[index]
        self._messages[index] = message
        b = self._blocks.get(index)
        shown = {"pinned": bool(b.pinned), "manual_excluded": bool(b.manual_excluded)} if b is not None else \
            {"pinned": bool(old.meta.pinned), "manual_excluded": bool(old.meta.manualExcluded)}
        self._pending.expect(index, shown, {"pinned": bool(message.meta.pinned),
                                            "manual_excluded": bool(message.meta.manualExcluded)})
        self.dataChanged.emit(self.index(index), self.index(index))
        return message_display_text(old) != message_display_text(message)

    def shown_flags(self, index: int) -> tuple[bool, bool]:
        """``(pinned, manual_excluded)`` of message ``index`` as its buttons show them."""
        msg = self._messages[index]
        b = self._blocks.get(index)
        pinned = bool(b.pinned) if b is not None else bool(msg.meta.pinned)
        excluded = bool(b.manual_excluded) if b is not None else bool(msg.meta.manualExcluded)
        return (self._pending.value(index, "pinned", pinned),
                self._pending.value(index, "manual_excluded", excluded))

    def set_preview(self, preview: ContextPreview | None, delta: PreviewDelta | None = None) -> None:
        """Take each message's fate from ``preview`` (by ``message_index``); repaint the rows
        whose fate (or greying) changed. :attr:`layout_changed` says whether row heights did.

        ``delta`` (:func:`~gui.models.preview_delta.diff_previews` from the preview shown to
        ``preview``, as the blocks table found it) names the changed rows, so they need not be
        searched for again; it is ignored unless its ``old`` is the preview shown.
        """
        # 10,000-message chats: keep the frozen blocks, build MessageFate only for painted rows
        old_blocks, old_marker, old_summary = self._blocks, self._marker, self.summary_row()
        shown, self._preview = self._preview, preview
        same_rows = preview is not None and delta is not None and delta.follows(shown) and delta.new is preview
        if same_rows:
            # the same rows: each message's new block sits where its old one did
            assert preview is not None and delta is not None
            if isinstance(old_blocks, MessageRows):
                self._blocks = old_blocks.follow(preview.blocks, delta.message_indices())
            else:
                if self._block_rows is None:
                    self._block_rows = message_rows(preview.blocks)
                self._blocks = MessageRows(preview.blocks, self._block_rows)
        else:
            self._blocks = {} if preview is None else message_blocks(preview)
            self._block_rows = None
            self._has_summary_source = preview is not None and any(
                b.source == SUMMARY_SOURCE for b in preview.blocks)
        pending = list(self._pending.indices())
        self._pending.settle(self._blocks.get)
        self._fates = {}
        self._summary = None
        self.compaction_stopped = preview is not None and compaction_stopped(preview)
        if preview is not None and (not same_rows or self._has_summary_source):
            self._summary = compaction_summary_row(preview, len(self._messages))
        self._recompute_marker()
        self.layout_changed = self._marker != old_marker or self.summary_row() != old_summary
        if not self._messages:
            return
        n = len(self._messages)
        if not old_blocks or not self._blocks:
            self.dataChanged.emit(self.index(0), self.index(n - 1))
            return
        if same_rows and delta is not None:
            changed = {i for i in delta.message_indices() if i < n}  # a fate reads only key fields
        else:
            changed = changed_fates(old_blocks, self._blocks, n)
        changed.update(i for i in pending if i < n)
        if self._marker != old_marker:  # greying depends on the marker: rows between the two moved
            ends = [m for m in (self._marker, old_marker) if m is not None]
            low = min(ends) if len(ends) == 2 else 0
            changed.update(range(low, max(ends) + 1))
        for row in (old_summary, self.summary_row()):
            if row is not None:
                changed.add(row)
        for first, last in changed_runs(sorted(changed)):
            self.dataChanged.emit(self.index(first), self.index(last))

    def _recompute_marker(self) -> None:
        blocks = self._blocks
        if isinstance(blocks, MessageRows):  # from the preview's status / reason columns: no row built
            n = len(self._messages)
            self._marker = oldest_fitting_in(blocks.fates(n).__getitem__, n)
        else:
            self._marker = oldest_fitting_index(blocks, len(self._messages))

    def marker_index(self) -> int | None:
        """Message index of the oldest message that still fits (``None``: everything fits)."""
        return self._marker

    def fate(self, message_index: int) -> MessageFate | None:
        """The preview fate of message ``message_index``."""
        fate = self._fates.get(message_index)
        if fate is None:
            b = self._blocks.get(message_index)
            if b is None:
                return None
            fate = self._fates[message_index] = MessageFate(
                display_status(b.status, b.reason), b.reason,
                b.original_tokens if b.original_tokens is not None else b.tokens,
                b.protected, b.pinned, b.group)
        return fate

    def is_greyed(self, message_index: int) -> bool:
        """Shown greyed: above the marker (and not kept), or excluded anywhere."""
        fate = self.fate(message_index)
        if fate is not None and fate.status == "excluded":
            return True
        if self._marker is not None and message_index < self._marker:
            return fate is None or fate.status != "kept"
        return False

    def summary_row(self) -> int | None:
        """The message row the compaction summary is shown on (it is sent right before that
        message), or ``None`` when the preview uses none."""
        return None if self._summary is None else self._summary[0]

    def summary_block(self) -> PreviewBlock | None:
        """The compaction summary's preview block, or ``None``."""
        return None if self._summary is None else self._summary[1]

    def message_count(self) -> int:
        """Number of message rows (progress rows follow them)."""
        return len(self._messages)

    def speaker(self, message: ChatMessage) -> str:
        """Display name: the message's ``name``, else the user / character name by role."""
        if message.name:
            return message.name
        if message.role == "user":
            return self._user_name
        if message.role == "assistant":
            return self._char_name
        return message.role.title()

    # -- progress ------------------------------------------------------------------------
    def update_progress(self, event: ProgressEvent) -> None:
        """Add or update the indicator row of ``event.step_id``."""
        keys = list(self._progress)
        if event.step_id in self._progress:
            self._progress[event.step_id] = event
            row = len(self._messages) + keys.index(event.step_id)
            self.dataChanged.emit(self.index(row), self.index(row))
            return
        row = len(self._messages) + len(keys)
        self.beginInsertRows(QModelIndex(), row, row)
        self._progress[event.step_id] = event
        self.endInsertRows()

    def clear_finished_progress(self, keep_steps: tuple[str, ...] = ()) -> None:
        """Remove indicator rows whose step ended (``done``/``failed``/``cancelled``), except
        those of the steps named in ``keep_steps`` (``("compaction",)``)."""
        keys = list(self._progress)
        for i in range(len(keys) - 1, -1, -1):
            ev = self._progress[keys[i]]
            if ev.state != "running" and ev.step not in keep_steps:
                row = len(self._messages) + i
                self.beginRemoveRows(QModelIndex(), row, row)
                del self._progress[keys[i]]
                self.endRemoveRows()

    def progress_events(self) -> list[ProgressEvent]:
        """The indicator rows' events, in order."""
        return list(self._progress.values())

    # -- Qt model API --------------------------------------------------------------------
    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._messages) + len(self._progress)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = index.row()
        if row >= len(self._messages):
            event = list(self._progress.values())[row - len(self._messages)]
            if role == PROGRESS_ROLE:
                return event
            if role == Qt.ItemDataRole.DisplayRole:
                return event.label
            return None
        msg = self._messages[row]
        if role == MESSAGE_ROLE:
            return msg
        if role == Qt.ItemDataRole.DisplayRole:
            return message_display_text(msg)
        if role == SPEAKER_ROLE:
            return self.speaker(msg)
        if role == FATE_ROLE:
            return self.fate(row)
        if role == MARKER_ROLE:
            return self._marker is not None and row == self._marker
        if role == GREYED_ROLE:
            return self.is_greyed(row)
        if role == SUMMARY_ROLE:
            return self._summary[1] if self._summary is not None and self._summary[0] == row else None
        if role == FLAGS_ROLE:
            return self.shown_flags(row)
        if role == Qt.ItemDataRole.ToolTipRole:
            fate = self.fate(row)
            if fate is None:
                return None
            return f"message {row}: {fate.tokens:,} tokens · {fate.status} ({fate.reason})"
        return None
