"""In-place updates and optimistic flags of the table models (called directly, no window)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from engine.schema import ChatMessage, Explanation
from gui.models.blocks_model import BlockColumn, BlocksTableModel, changed_runs
from gui.models.chat_model import FLAGS_ROLE, ChatMessagesModel
from gui.models.pending import FlagRollback, PendingFlags
from tests.gui.helpers import make_block, make_preview

CHECK = Qt.ItemDataRole.CheckStateRole


def _blocks(excluded: int | None = None, pinned: int | None = None, n: int = 6):
    out = [make_block(0, kind="system", role="system", protected=True, reason="SYSTEM_PROMPT")]
    for i in range(n):
        ex = i == excluded
        out.append(make_block(i + 1, message_index=i, status="excluded" if ex else "kept",
                              reason="MANUAL_EXCLUDED" if ex else "FITS_BUDGET", manual_excluded=ex,
                              pinned=i == pinned))
    return out


def _recorder(model):
    events: list[tuple] = []
    model.modelReset.connect(lambda: events.append(("reset",)))
    model.dataChanged.connect(lambda a, b, *_: events.append(("changed", a.row(), b.row())))
    return events


def test_changed_runs_groups_consecutive_rows_and_caps_the_count() -> None:
    assert changed_runs([]) == []
    assert changed_runs([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]
    assert changed_runs(list(range(0, 20, 2)), max_runs=4) == [(0, 18)]


def test_same_rows_update_in_place_with_data_changed_for_the_changed_row_only(qtbot) -> None:
    model = BlocksTableModel()
    model.set_preview(make_preview(_blocks()))
    events = _recorder(model)
    changed = model.set_preview(make_preview(_blocks(excluded=3)))
    assert changed == [4]  # message 3 is row 4 (after the system block)
    assert events == [("changed", 4, 4)]
    assert model.index(4, BlockColumn.EXCLUDE).data(CHECK) == Qt.CheckState.Checked
    assert model.index(4, BlockColumn.STATUS).data() == "excluded"


def test_an_identical_preview_changes_nothing_and_new_rows_reset(qtbot) -> None:
    model = BlocksTableModel()
    model.set_preview(make_preview(_blocks()))
    events = _recorder(model)
    assert model.set_preview(make_preview(_blocks())) == []
    assert events == []
    assert model.set_preview(make_preview(_blocks(n=7))) is None  # a message more: the rows differ
    assert events == [("reset",)]
    assert model.rowCount() == 8


def test_expect_flags_ticks_at_once_and_a_confirming_preview_keeps_it(qtbot) -> None:
    model = BlocksTableModel()
    model.set_preview(make_preview(_blocks()))
    rolled: list = []
    model.flags_rolled_back.connect(rolled.append)
    events = _recorder(model)
    assert model.expect_flags(2, pinned=False, manual_excluded=True)
    assert events == [("changed", 3, 3)]
    assert model.index(3, BlockColumn.EXCLUDE).data(CHECK) == Qt.CheckState.Checked
    assert model.is_pending(3)
    # a click on the ticked box asks for the opposite of what is shown
    toggles: list = []
    model.exclude_toggled.connect(lambda i, v: toggles.append((i, v)))
    model.setData(model.index(3, BlockColumn.EXCLUDE), Qt.CheckState.Unchecked, CHECK)
    assert toggles == [(2, False)]
    model.set_preview(make_preview(_blocks(excluded=2)))
    assert rolled == [] and not model.is_pending(3)
    assert model.index(3, BlockColumn.EXCLUDE).data(CHECK) == Qt.CheckState.Checked


def test_a_preview_that_disagrees_rolls_the_tick_back_and_says_so(qtbot) -> None:
    model = BlocksTableModel()
    model.set_preview(make_preview(_blocks()))
    rolled: list = []
    model.flags_rolled_back.connect(rolled.append)
    model.expect_flags(4, pinned=True, manual_excluded=False)
    assert model.index(5, BlockColumn.PIN).data(CHECK) == Qt.CheckState.Checked
    events = _recorder(model)
    model.set_preview(make_preview(_blocks()))  # the engine did not pin message 4
    assert rolled == [[FlagRollback(4, "pinned", True)]]
    assert ("changed", 5, 5) in events  # the row repaints even though its block is unchanged
    assert model.index(5, BlockColumn.PIN).data(CHECK) == Qt.CheckState.Unchecked
    assert "does not show it pinned" in rolled[0][0].describe("sillytavern")


def test_expecting_what_the_preview_already_shows_is_not_pending() -> None:
    pending = PendingFlags()
    assert not pending.expect(1, {"pinned": False, "manual_excluded": False},
                              {"pinned": False, "manual_excluded": False})
    assert not pending
    assert pending.expect(1, {"pinned": False, "manual_excluded": False}, {"pinned": True, "manual_excluded": False})
    # toggled back before the preview came: nothing pending any more
    assert pending.expect(1, {"pinned": False, "manual_excluded": False}, {"pinned": False, "manual_excluded": False})
    assert not pending.is_pending(1)
    # a message the new preview has no block for settles without a rollback
    pending.expect(2, {"pinned": False}, {"pinned": True})
    assert pending.settle(lambda _i: None) == [] and not pending


def _messages(n: int = 6) -> list[ChatMessage]:
    return [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message {i}") for i in range(n)]


def test_chat_model_updates_one_message_in_place_and_shows_its_flags(qtbot) -> None:
    model = ChatMessagesModel()
    msgs = _messages()
    model.set_messages(msgs)
    model.set_preview(make_preview(_blocks()))
    events = _recorder(model)
    flagged = msgs[2].model_copy(update={"meta": msgs[2].meta.model_copy(update={"manualExcluded": True})})
    assert model.update_message(2, flagged) is False  # same text: no re-layout needed
    assert events == [("changed", 2, 2)]
    assert model.index(2).data(FLAGS_ROLE) == (False, True)
    events.clear()
    model.set_preview(make_preview(_blocks(excluded=2)))
    assert ("reset",) not in events
    assert all(a <= 2 <= b for _kind, a, b in events) and events  # only message 2's row repaints
    assert model.index(2).data(FLAGS_ROLE) == (False, True)
    edited = msgs[3].model_copy(update={"content": "a different text"})
    assert model.update_message(3, edited) is True


def test_fields_the_table_does_not_show_change_no_row(qtbot) -> None:
    """After one toggle nearly every block differs in its fit window and the free tokens of its
    specific reason; rows whose cells read the same get no ``dataChanged``."""
    model = BlocksTableModel()
    model.set_preview(make_preview(_blocks()))
    events = _recorder(model)
    blocks = _blocks(excluded=3)
    why = Explanation("only 11 tokens free", {"free": 11, "tokens": 10})
    assert model.set_preview(make_preview(blocks, fits=[1234] * len(blocks), details=[why] * len(blocks))) == [4]
    assert events == [("changed", 4, 4)]
    # the model shows the new preview all the same
    assert model.preview().fit_windows[2] == 1234 and model.detail(2) is why


def test_a_reason_cell_that_reads_differently_changes_its_row(qtbot) -> None:
    out = _blocks()
    out[2] = out[2].model_copy(update={"status": "excluded", "reason": "HISTORY_OLDEST_FIRST"})

    def with_reason(data):
        details: list[Explanation | None] = [None] * len(out)
        details[2] = Explanation("history is kept contiguous", data)
        return make_preview(out, details=details)

    model = BlocksTableModel()
    model.set_preview(with_reason({"blocked_by_tokens": 50, "blocked_by_message": 5, "free": 3}))
    assert model.index(2, BlockColumn.REASON).data() == "newer message 5 did not fit"
    events = _recorder(model)
    assert model.set_preview(with_reason({"blocked_by_tokens": 50, "blocked_by_message": 5, "free": 9})) == []
    assert model.set_preview(with_reason({"blocked_by_tokens": 50, "blocked_by_message": 4, "free": 9})) == [2]
    assert events == [("changed", 2, 2)]
    assert model.index(2, BlockColumn.REASON).data() == "newer message 4 did not fit"


def test_chat_rows_repaint_only_where_the_fate_changed(qtbot) -> None:
    from gui.models.chat_model import changed_fates

    model = ChatMessagesModel()
    model.set_messages([ChatMessage(role="user", content=f"m{i}") for i in range(6)])
    model.set_preview(make_preview(_blocks()))
    events = _recorder(model)
    blocks = _blocks(excluded=2)
    model.set_preview(make_preview(blocks, fits=[99] * len(blocks), details=[Explanation("x", {})] * len(blocks)))
    assert ("reset",) not in events
    assert [e for e in events if e[0] == "changed"] == [("changed", 2, 2)]
    old = {b.message_index: b for b in _blocks() if b.message_index is not None}
    new = {b.message_index: b for b in _blocks(pinned=1) if b.message_index is not None}
    assert changed_fates(old, new, 6) == {1}
    assert changed_fates(old, {i: b for i, b in new.items() if i != 5}, 6) == {1, 5}  # a block went
