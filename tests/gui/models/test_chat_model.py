"""Chat model: fates from the preview, the fit marker and greyed rows, progress rows by step_id."""

from __future__ import annotations

from engine.schema import ChatMessage, ProgressEvent
from gui.models.chat_model import ChatMessagesModel
from tests.gui.helpers import make_block, make_preview


def test_model_rows_fates_and_greying(qtbot) -> None:
    model = ChatMessagesModel()
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(5)]
    model.set_messages(msgs, "Wren", "Marisol")
    preview = make_preview([
        make_block(0, message_index=0, status="excluded", reason="HISTORY_OLDEST_FIRST"),
        make_block(1, message_index=1, status="excluded", reason="HISTORY_OLDEST_FIRST"),
        make_block(2, message_index=2),
        make_block(3, message_index=3, status="excluded", reason="MANUAL_EXCLUDED", manual_excluded=True),
        make_block(4, message_index=4),
    ])
    model.set_preview(preview)
    assert model.marker_index() == 2
    assert model.is_greyed(0) and model.is_greyed(1)
    assert not model.is_greyed(2)
    assert model.is_greyed(3)  # excluded by hand
    assert model.speaker(msgs[0]) == "Wren" and model.speaker(msgs[1]) == "Marisol"
    assert model.rowCount() == 5


def test_progress_rows_keyed_by_step_id(qtbot) -> None:
    model = ChatMessagesModel()
    model.set_messages([ChatMessage(role="user", content="hi")])
    model.update_progress(ProgressEvent(step_id="s1", step="stream", label="Streaming reply…"))
    model.update_progress(ProgressEvent(step_id="s1", step="stream", label="Streaming reply…", text="Hel"))
    model.update_progress(ProgressEvent(step_id="c1", step="compaction", label="Compacting…", fraction=0.5))
    assert model.rowCount() == 3
    assert [e.step_id for e in model.progress_events()] == ["s1", "c1"]
    assert model.progress_events()[0].text == "Hel"
    model.update_progress(ProgressEvent(step_id="s1", step="stream", label="Streaming reply…", state="done"))
    model.clear_finished_progress()
    assert [e.step_id for e in model.progress_events()] == ["c1"]
    assert model.rowCount() == 2


def test_swipe_info_reads_sillytavern_keys() -> None:
    from engine.schema import MessageMeta
    from gui.widgets.chat_view import swipe_info

    meta = MessageMeta.model_validate({"swipes": ["a", "b", "c"], "swipe_id": 1})
    assert swipe_info(ChatMessage(role="assistant", content="b", meta=meta)) == (2, 3)
    assert swipe_info(ChatMessage(role="assistant", content="a")) is None
    one = MessageMeta.model_validate({"swipes": ["a"], "swipe_id": 0})
    assert swipe_info(ChatMessage(role="assistant", content="a", meta=one)) is None
