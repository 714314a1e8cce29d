"""The prompt blocks table: a read-only adapter over a frozen :class:`ContextPreview`.

``setData`` on the pin / exclude check columns never edits engine objects: it emits an intent
signal (``pin_toggled`` / ``exclude_toggled`` with the chat message index) that the window
turns into an undoable command (STYLE.md 4, like napari's ``features_table.py``). Once the
document holds the new flag the window calls :meth:`BlocksTableModel.expect_flags` and the box
ticks at once (:class:`~gui.models.pending.PendingFlags`); the next preview confirms it or rolls
it back (``flags_rolled_back``). A preview with the same rows as the one shown updates the
table in place (``dataChanged`` for the rows that differ; selection and scroll stay); only a
different row set resets the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from enum import IntEnum
from functools import lru_cache, partial
from itertools import compress, repeat
from operator import is_not, itemgetter, ne
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont

from engine.lorebook_facts import block_source_label
from engine.schema import ContextPreview, Explanation, PreviewBlock

from ..labels import (
    GROUP_MARK,
    PINNED_MARK,
    PROTECTED_MARK,
    kind_label,
)
from ..roles import BLOCK_ROLE, SORT_ROLE
from ..theme import status_hex
from ..words import display_status, reason_cell, reason_meaning
from .pending import FlagRollback, PendingFlags
from .preview_delta import PreviewDelta, diff_previews

_Index = QModelIndex | QPersistentModelIndex
_TEXT_PREVIEW_CHARS = 160


class BlockColumn(IntEnum):
    """Columns of :class:`BlocksTableModel`."""

    POSITION = 0
    KIND = 1
    ROLE = 2
    SOURCE = 3
    TEXT = 4
    TOKENS = 5
    STATUS = 6
    REASON = 7
    MARKERS = 8
    PIN = 9
    EXCLUDE = 10


HEADERS = {
    BlockColumn.POSITION: "#", BlockColumn.KIND: "Kind", BlockColumn.ROLE: "Role",
    BlockColumn.SOURCE: "Source", BlockColumn.TEXT: "Text", BlockColumn.TOKENS: "Tokens",
    BlockColumn.STATUS: "Status", BlockColumn.REASON: "Reason", BlockColumn.MARKERS: "",
    BlockColumn.PIN: "Pin", BlockColumn.EXCLUDE: "Excl.",
}

#: What a reset reads of each block (then as columns): its message, tool group and status.
_RESET_FIELDS = itemgetter("message_index", "group", "status")
_GROUP_OF = itemgetter("group")
_STATUS_SORT = {"kept": 0, "truncated": 1, "summarized": 1, "excluded": 2}

# data() and flags() run for every cell painted: their constants as plain ints and made-once objects
_DISPLAY = int(Qt.ItemDataRole.DisplayRole.value)
_DECORATION = int(Qt.ItemDataRole.DecorationRole.value)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole.value)
_FONT = int(Qt.ItemDataRole.FontRole.value)
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole.value)
_BACKGROUND = int(Qt.ItemDataRole.BackgroundRole.value)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole.value)
_CHECK = int(Qt.ItemDataRole.CheckStateRole.value)
_ALIGN_RIGHT = int((Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value)
_ALIGN_CENTER = int(Qt.AlignmentFlag.AlignCenter.value)
_COLUMN_COUNT = len(BlockColumn)
_CHECK_COLUMNS = frozenset({int(BlockColumn.PIN), int(BlockColumn.EXCLUDE)})
_CENTRED_COLUMNS = frozenset({int(BlockColumn.PIN), int(BlockColumn.EXCLUDE), int(BlockColumn.MARKERS)})
_NO_FLAGS = Qt.ItemFlag.NoItemFlags
_BASE_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
_CHECKABLE_FLAGS = _BASE_FLAGS | Qt.ItemFlag.ItemIsUserCheckable
_EXCLUDED_FG = QBrush(QColor("#8a8f98"))
_GROUP_BG = QBrush(QColor("#dbe8ff"))


@lru_cache(maxsize=256)
def _status_brushes(status: str, reason: str) -> tuple[QBrush, QBrush]:
    """(foreground, background) brushes of a block's status as shown."""
    fg, bg = status_hex(display_status(status, reason))
    return QBrush(QColor(fg)), QBrush(QColor(bg))


@lru_cache(maxsize=1)
def _bold_font() -> QFont:
    """The application font, bold (made on first use: a QFont wants the application)."""
    font = QFont()
    font.setBold(True)
    return font


#: More separate runs of changed rows than this are sent as one ``dataChanged`` span (a view
#: repaints the rows of a span that it shows: see ``BlocksTable.dataChanged``).
MAX_CHANGED_RUNS = 256


def changed_runs(changed: list[int], max_runs: int = MAX_CHANGED_RUNS) -> list[tuple[int, int]]:
    """``[(first, last), ...]`` runs of consecutive rows in ``changed`` (sorted); when there
    are more than ``max_runs``, one run from the first to the last changed row. C-level passes
    only (thousands of rows change after one click on a 10,000-message chat)."""
    if not changed:
        return []
    # positions k where a run starts anew: changed[k] is not changed[k - 1] + 1
    breaks = list(compress(range(1, len(changed)), map(ne, changed[1:], map((1).__add__, changed))))
    if len(breaks) >= max_runs:
        return [(changed[0], changed[-1])]
    starts = [0, *breaks]
    ends = [k - 1 for k in breaks] + [len(changed) - 1]
    return [(changed[a], changed[b]) for a, b in zip(starts, ends, strict=True)]


def offers_toggles(b: PreviewBlock) -> bool:
    """Whether the table offers pin / exclude check boxes for block ``b``.

    Only chat messages have them, and not the protected ones a toggle cannot change (the current
    user input, a leading system message): those show no boxes, like the other protected rows.
    A pinned or hand-excluded message keeps its boxes so the flag can always be taken back.
    """
    if b.message_index is None:
        return False
    return not b.protected or b.pinned or b.manual_excluded


def _preview_text(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _TEXT_PREVIEW_CHARS else flat[: _TEXT_PREVIEW_CHARS - 1] + "…"


class BlocksTableModel(QAbstractTableModel):
    """One row per :class:`PreviewBlock`, in prompt order.

    Signals
    -------
    pin_toggled(int message_index, bool pinned)
    exclude_toggled(int message_index, bool excluded)
        Intents from the check columns; message indices are stable across previews, block ids are not.
    """

    pin_toggled = Signal(int, bool)
    exclude_toggled = Signal(int, bool)
    #: ``list[FlagRollback]``: optimistic ticks the new preview did not confirm.
    flags_rolled_back = Signal(object)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._preview: ContextPreview | None = None
        self._blocks: Sequence[PreviewBlock] = []
        self._group_sizes: dict[str, int] = {}
        self._row_by_message: dict[int, int] = {}
        self._row_by_source: dict[str, int] = {}
        self._text_cache: dict[int, str] = {}
        self._source_cache: dict[int, str] = {}  # lorebook rows: entries named by title
        self.last_delta: PreviewDelta | None = None
        self._kept = 0  # rows with status "kept"
        self._highlight_group: str | None = None
        self._pending = PendingFlags()
        #: ``""`` while the Pin column works; else why it is off (a SillyTavern chat: no pinning).
        self.pin_off_reason = ""

    # -- data source ---------------------------------------------------------------------
    def set_preview(self, preview: ContextPreview | None, delta: PreviewDelta | None = None) -> list[int] | None:
        """Show ``preview``.

        With the same rows as the preview shown (same sources in the same order) the model
        updates in place: ``dataChanged`` for the rows that show differently
        (:func:`~gui.models.preview_delta.diff_previews`, kept as :attr:`last_delta` for the other
        views), and the list of those rows is returned. Otherwise the model is reset and ``None``
        is returned. Pending optimistic flags are settled against ``preview``
        (``flags_rolled_back`` when it disagrees). ``delta``: the comparison already made
        elsewhere (:meth:`delta_maker`), used when it is from the preview shown to ``preview``.
        """
        if delta is not None and (not delta.follows(self._preview) or delta.new is not preview):
            delta = None
        if delta is None and preview is not None and self._preview is not None:
            delta = diff_previews(self._preview, preview, self.last_delta)
        #: How ``preview`` differs from the preview shown before (``None``: the rows differ, reset).
        self.last_delta = delta
        # the same rows: keep the preview's own sequence (a warm preview builds only the rows read);
        # a reset reads every row anyway
        blocks: Sequence[PreviewBlock] = ([] if preview is None else preview.blocks if delta is not None
                                          else list(preview.blocks))
        if preview is None:
            self._pending.clear()
        pending_rows, rollbacks = self._settle_pending(preview, blocks, delta is not None)
        changed: list[int] | None = None
        if delta is not None:
            changed = sorted(set(delta.rows).union(pending_rows)) if pending_rows else delta.rows
            old_blocks, self._preview, self._blocks = self._blocks, preview, blocks
            self._update_rows(old_blocks, delta, changed)
        else:
            self._reset(preview, blocks)
        if self._highlight_group not in self._group_sizes:
            self._highlight_group = None
        if rollbacks:
            self.flags_rolled_back.emit(rollbacks)
        return changed

    def _settle_pending(self, preview: ContextPreview | None, blocks: Sequence[PreviewBlock],
                        same_rows: bool) -> tuple[list[int], list[FlagRollback]]:
        """Settle the pending optimistic flags against ``preview``: the rows showing one (repainted
        even when their block is equal) and the ticks it did not confirm."""
        if preview is None or not self._pending:
            return [], []
        pending_rows = [r for i in self._pending.indices() if (r := self._row_by_message.get(i)) is not None]
        if same_rows:  # the new block of a message sits on its old row
            rows = self._row_by_message

            def block_of(i: int) -> PreviewBlock | None:
                row = rows.get(i)
                return None if row is None else blocks[row]
        else:
            by_message = {b.message_index: b for b in blocks if b.message_index is not None}

            def block_of(i: int) -> PreviewBlock | None:
                return by_message.get(i)
        return pending_rows, self._pending.settle(block_of)

    def _update_rows(self, old: Sequence[PreviewBlock], delta: PreviewDelta, changed: list[int]) -> None:
        """The same rows, now showing the new blocks (``old``: the blocks shown before): recount what
        the changed rows move (kept rows, tool groups), drop their cached cells, and signal them as
        ranges (the view repaints those it shows)."""
        blocks = self._blocks
        key_rows = delta.key_rows
        if key_rows:
            now = list(map(blocks.__getitem__, key_rows))
            was = list(map(old.__getitem__, key_rows))
            self._kept += sum(b.status == "kept" for b in now) - sum(b.status == "kept" for b in was)
            if any(a.group != b.group for a, b in zip(was, now, strict=True)):
                self._group_sizes = self._count_groups(blocks)
        for row in key_rows:  # the Text cell is cached per row: its text may have changed
            self._text_cache.pop(row, None)
        if self._source_cache:
            for row in changed:
                self._source_cache.pop(row, None)
        last = len(BlockColumn) - 1
        for first, end in changed_runs(changed):
            self.dataChanged.emit(self.index(first, 0), self.index(end, last))

    def _reset(self, preview: ContextPreview | None, blocks: Sequence[PreviewBlock]) -> None:
        """Show ``preview``'s rows from scratch (a model reset)."""
        self.beginResetModel()
        self._preview = preview
        self._blocks = blocks
        # one read per block, then C-level passes over the columns (a 5,000-row reset)
        columns = list(zip(*map(_RESET_FIELDS, map(vars, blocks)))) or [(), (), ()]
        messages, groups, statuses = columns
        self._group_sizes = dict(Counter(filter(None, groups)))
        self._kept = statuses.count("kept")
        with_message = list(compress(range(len(messages)), map(is_not, messages, repeat(None))))
        self._row_by_message = dict(zip(map(messages.__getitem__, with_message), with_message))
        self._row_by_source = {}  # built on first use
        self._text_cache = {}
        self._source_cache = {}
        self.endResetModel()

    def delta_maker(self) -> Callable[[ContextPreview], PreviewDelta | None] | None:
        """A function comparing a new preview with the one shown now (:func:`diff_previews`),
        safe to run on another thread: it holds only frozen previews and the last delta's
        lists, never the model. ``None`` when nothing is shown."""
        if self._preview is None:
            return None
        return partial(diff_previews, self._preview, base=self.last_delta)

    @staticmethod
    def _count_groups(blocks: Sequence[PreviewBlock]) -> dict[str, int]:
        return dict(Counter(filter(None, map(_GROUP_OF, map(vars, blocks)))))

    def expect_flags(self, message_index: int, *, pinned: bool, manual_excluded: bool) -> bool:
        """The document now holds these flags for chat message ``message_index``: show them at
        once (the check boxes tick before the preview runs). Returns whether the row changed."""
        row = self._row_by_message.get(message_index)
        if row is None:
            return False
        b = self._blocks[row]
        if not self._pending.expect(message_index, {"pinned": b.pinned, "manual_excluded": b.manual_excluded},
                                    {"pinned": pinned, "manual_excluded": manual_excluded}):
            return False
        self.dataChanged.emit(self.index(row, BlockColumn.MARKERS), self.index(row, BlockColumn.EXCLUDE))
        return True

    def shown_flag(self, row: int, flag: str) -> bool:
        """``pinned`` / ``manual_excluded`` of ``row`` as shown: a pending click's value, else the preview's."""
        b = self._blocks[row]
        shown = bool(getattr(b, flag))
        return shown if b.message_index is None else self._pending.value(b.message_index, flag, shown)

    def is_pending(self, row: int) -> bool:
        """Whether ``row`` shows a flag the preview has not confirmed yet."""
        b = self._blocks[row]
        return b.message_index is not None and self._pending.is_pending(b.message_index)

    def kept_count(self) -> int:
        """Rows whose block is ``kept`` (all rows, whatever the filter shows)."""
        return self._kept

    def preview(self) -> ContextPreview | None:
        """The preview shown."""
        return self._preview

    def blocks(self) -> Sequence[PreviewBlock]:
        """The blocks shown, one per row (read-only use)."""
        return self._blocks

    def block(self, row: int) -> PreviewBlock:
        """The block of ``row``."""
        return self._blocks[row]

    def detail(self, row: int) -> Explanation | None:
        """The specific reason of the block of ``row`` (the shown preview's ``reason_details``)."""
        return self._preview.reason_detail(row) if self._preview is not None and row >= 0 else None

    def row_of_message(self, message_index: int) -> int | None:
        """The row of the block for chat message ``message_index`` (``None`` if none)."""
        return self._row_by_message.get(message_index)

    def row_of_source(self, source: str) -> int | None:
        """The row of the block with stable origin ``source`` (``None`` if none)."""
        if not self._row_by_source and self._blocks:
            self._row_by_source = {b.source: row for row, b in enumerate(self._blocks)}
        return self._row_by_source.get(source)

    def display_text(self, row: int, column: int) -> Any:
        """The display value of ``row`` / ``column`` (what ``data`` shows), without a model index."""
        return self._display(self._blocks[row], row, BlockColumn(column))

    def display_of(self, block: PreviewBlock, column: int) -> Any:
        """What ``data`` would show in ``column`` for ``block`` on a row of its own (no pending flag)."""
        if column == BlockColumn.TEXT:
            return _preview_text(block.text)
        if column == BlockColumn.MARKERS:
            return ((PROTECTED_MARK if block.protected else "") + (PINNED_MARK if block.pinned else "")
                    + (GROUP_MARK if block.group else ""))
        return self._display(block, -1, BlockColumn(column))

    def group_size(self, group: str | None) -> int:
        """Members of tool group ``group`` in this preview."""
        return self._group_sizes.get(group or "", 0)

    def set_highlight_group(self, group: str | None) -> None:
        """Shade the rows of tool group ``group`` (the selection's group) to show the link."""
        if group == self._highlight_group:
            return
        self._highlight_group = group
        if self._blocks:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._blocks) - 1, len(BlockColumn) - 1),
                                  [Qt.ItemDataRole.BackgroundRole])

    # -- Qt model API --------------------------------------------------------------------
    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._blocks)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else _COLUMN_COUNT  # asked with every index the proxy maps

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS.get(BlockColumn(section), "")
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            if section == BlockColumn.MARKERS:
                return f"{PROTECTED_MARK} protected · {PINNED_MARK} pinned · {GROUP_MARK} tool group"
            if section == BlockColumn.PIN:
                return "Pin: always keep this message (P)"
            if section == BlockColumn.EXCLUDE:
                return "Exclude this message by hand (Space)"
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return _NO_FLAGS
        if index.column() in _CHECK_COLUMNS and self._is_toggleable(index.row()):
            if self.pin_off_reason and index.column() == BlockColumn.PIN:
                return Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsUserCheckable  # shown, greyed
            return _CHECKABLE_FLAGS
        return _BASE_FLAGS

    def set_pin_off_reason(self, reason: str) -> None:
        """Turn the Pin column off with ``reason`` as its tooltip (``""``: on again)."""
        if reason == self.pin_off_reason:
            return
        self.pin_off_reason = reason
        if self._blocks:
            self.dataChanged.emit(self.index(0, int(BlockColumn.PIN)),
                                  self.index(len(self._blocks) - 1, int(BlockColumn.PIN)))

    def _is_toggleable(self, row: int) -> bool:
        return offers_toggles(self._blocks[row])

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        # called for every role of every cell painted (a few thousand calls per repaint of the
        # table): plain int comparisons, brushes and fonts made once
        if not index.isValid():
            return None
        row, col = index.row(), index.column()
        b = self._blocks[row]
        if role == _DISPLAY:
            return self._display(b, row, col)
        if role == _DECORATION:
            return None
        if role == _CHECK:
            if col not in _CHECK_COLUMNS or not offers_toggles(b):
                return None
            flag = "pinned" if col == BlockColumn.PIN else "manual_excluded"
            return Qt.CheckState.Checked if self.shown_flag(row, flag) else Qt.CheckState.Unchecked
        if role == _FOREGROUND:
            if col == BlockColumn.STATUS or col == BlockColumn.REASON:
                return _status_brushes(b.status, b.reason)[0]
            if b.status == "excluded":
                return _EXCLUDED_FG
            return None
        if role == _BACKGROUND:
            if self._highlight_group is not None and b.group == self._highlight_group:
                return _GROUP_BG
            if col == BlockColumn.STATUS:
                return _status_brushes(b.status, b.reason)[1]
            return None
        if role == _FONT:
            if col == BlockColumn.STATUS or (col == BlockColumn.MARKERS and b.protected):
                return _bold_font()
            return None
        if role == _ALIGN:
            if col == BlockColumn.POSITION or col == BlockColumn.TOKENS:
                return _ALIGN_RIGHT
            if col in _CENTRED_COLUMNS:
                return _ALIGN_CENTER
            return None
        if role == BLOCK_ROLE:
            return b
        if role == SORT_ROLE:
            return self._sort_value(b, BlockColumn(col))
        if role == _TOOLTIP:
            if col == BlockColumn.PIN and self.pin_off_reason and offers_toggles(b):
                return self.pin_off_reason
            if col in _CHECK_COLUMNS and self.is_pending(row):
                return "Saved; the preview is being recomputed"
            return self._tooltip(b, BlockColumn(col))
        return None

    def _display(self, b: PreviewBlock, row: int, col: int) -> Any:  # col: a BlockColumn value
        if col == BlockColumn.POSITION:
            return b.position
        if col == BlockColumn.KIND:
            if b.message_index is not None:  # the role says more than "Message" for chat messages
                return f"{kind_label(b.kind).split(' ')[0]} {b.role}"
            return kind_label(b.kind)
        if col == BlockColumn.ROLE:
            return b.role
        if col == BlockColumn.SOURCE:
            if b.trace is None or (b.kind != "lorebook" and "parts" not in b.trace):
                return b.name + " · " + b.source if b.name else b.source
            label = self._source_cache.get(row)
            if label is None:  # World Info entries by title, the uid as a detail (engine.lorebook_facts)
                label = self._source_cache[row] = block_source_label(b, self._preview)
            return label
        if col == BlockColumn.TEXT:
            cached = self._text_cache.get(row)
            if cached is None:
                cached = self._text_cache[row] = _preview_text(b.text)
            return cached
        if col == BlockColumn.TOKENS:
            if b.status == "truncated" and b.original_tokens is not None:
                return f"{b.tokens} / {b.original_tokens}"
            return b.tokens
        if col == BlockColumn.STATUS:
            return display_status(b.status, b.reason)
        if col == BlockColumn.REASON:
            why = self.detail(b.position)
            return reason_cell(b.reason, why.data if why is not None else None)
        if col == BlockColumn.MARKERS:
            pinned = self.shown_flag(row, "pinned")
            marks = (PROTECTED_MARK if b.protected else "") + (PINNED_MARK if pinned else "")
            if b.group:
                marks += GROUP_MARK
            return marks
        return None

    def _sort_value(self, b: PreviewBlock, col: BlockColumn) -> Any:
        if col == BlockColumn.TOKENS:
            return b.tokens
        if col == BlockColumn.POSITION:
            return b.position
        if col == BlockColumn.STATUS:
            return _STATUS_SORT.get(display_status(b.status, b.reason), 3)
        if col == BlockColumn.PIN:
            return int(b.pinned)
        if col == BlockColumn.EXCLUDE:
            return int(b.manual_excluded)
        if col == BlockColumn.MARKERS:
            return int(b.protected) * 2 + int(b.pinned)
        return str(self._display(b, b.position, col) or "")

    def _tooltip(self, b: PreviewBlock, col: BlockColumn) -> str | None:
        if col in (BlockColumn.REASON, BlockColumn.STATUS):
            why = f"{reason_meaning(b.reason)} ({b.reason})"
            detail = self.detail(b.position)
            return f"{why}\n{detail.text}" if detail is not None and detail.text else why
        if col == BlockColumn.TOKENS and b.original_tokens is not None:
            return f"{b.tokens} tokens kept of {b.original_tokens}"
        if col in (BlockColumn.EXCLUDE, BlockColumn.MARKERS) and b.group:
            n = self.group_size(b.group)
            return (f"Tool group {b.group}: {n} linked blocks. Excluding one removes the whole "
                    f"group ({n} blocks).")
        if col == BlockColumn.MARKERS and b.protected:
            return "Protected: no strategy removes this block"
        if col == BlockColumn.TEXT:
            text = b.text
            return text if len(text) <= 1200 else text[:1200] + "…"
        return None

    def setData(self, index: _Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        """Check-column edits become intents; the model itself never changes here."""
        if not index.isValid() or role != Qt.ItemDataRole.CheckStateRole:
            return False
        row = index.row()
        b = self._blocks[row]
        if not offers_toggles(b):
            return False
        checked = value in (Qt.CheckState.Checked, Qt.CheckState.Checked.value, 2, True)
        if index.column() == BlockColumn.PIN:
            if checked != self.shown_flag(row, "pinned"):
                self.pin_toggled.emit(b.message_index, checked)
            return True
        if index.column() == BlockColumn.EXCLUDE:
            if checked != self.shown_flag(row, "manual_excluded"):
                self.exclude_toggled.emit(b.message_index, checked)
            return True
        return False


class BlocksFilterProxy(QSortFilterProxyModel):
    """Filter blocks by kind, status and text; sort by :data:`SORT_ROLE`."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._kinds: frozenset[str] | None = None
        self._statuses: frozenset[str] | None = None
        self._text = ""
        self.setSortRole(SORT_ROLE)
        self._sync_dynamic()

    def is_filtering(self) -> bool:
        """Whether a kind, status or text filter is set."""
        return self._kinds is not None or self._statuses is not None or bool(self._text)

    def _sync_dynamic(self) -> None:
        # Re-filtering and re-sorting on dataChanged asks filterAcceptsRow (Python) about every
        # changed row: thousands after one click on a 10,000-message chat. Unfiltered and in
        # prompt order every row passes and stays where it is, so it is only on while needed.
        dynamic = self.is_filtering() or self.sortColumn() >= 0
        if self.dynamicSortFilter() != dynamic:
            self.setDynamicSortFilter(dynamic)

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Sort by ``column`` (``-1``: prompt order); rows re-sort on later changes while sorted."""
        super().sort(column, order)
        self._sync_dynamic()

    def set_kinds(self, kinds: set[str] | None) -> None:
        """Only these block kinds (``None``: all)."""
        self._refilter(lambda: setattr(self, "_kinds", frozenset(kinds) if kinds is not None else None))

    def set_statuses(self, statuses: set[str] | None) -> None:
        """Only these statuses (``kept``/``excluded``/``truncated``/``summarized``; ``None``: all)."""
        self._refilter(lambda: setattr(self, "_statuses",
                                       frozenset(statuses) if statuses is not None else None))

    def set_text(self, text: str) -> None:
        """Only blocks whose text or source contains ``text`` (case-insensitive)."""
        self._refilter(lambda: setattr(self, "_text", text.strip().lower()))

    def _refilter(self, change) -> None:
        # Qt ≥ 6.10 wants begin/endFilterChange around the change; older Qt has invalidateFilter
        if hasattr(self, "beginFilterChange"):
            self.beginFilterChange()
            change()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - older PySide6
            change()
            self.invalidateFilter()
        self._sync_dynamic()

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:
        if self._kinds is None and self._statuses is None and not self._text:
            return True  # the common case, called once per row on every reset: keep it cheap
        model = self.sourceModel()
        if not isinstance(model, BlocksTableModel):
            return True
        b = model.block(source_row)
        if self._kinds is not None and b.kind not in self._kinds:
            return False
        if self._statuses is not None and display_status(b.status, b.reason) not in self._statuses \
                and b.status not in self._statuses:
            return False
        return not (self._text and self._text not in b.text.lower() and self._text not in b.source.lower())
