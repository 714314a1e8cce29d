"""ChatDocument signals: a flag click is told apart from other edits (it is previewed at once)."""

from __future__ import annotations

from engine.schema import Chat, ChatMessage, PreviewRequest
from gui.document import ChatDocument


def _document() -> tuple[ChatDocument, list[str]]:
    doc = ChatDocument()
    doc.request = PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content=f"m{i}") for i in range(3)]))
    events: list[str] = []
    doc.flags_changed.connect(lambda i: events.append(f"flags {i}"))
    doc.message_changed.connect(lambda i: events.append(f"message {i}"))
    doc.request_changed.connect(lambda: events.append("request"))
    return doc, events


def test_a_flag_change_says_so_before_the_request_changes(qtbot) -> None:
    doc, events = _document()
    doc.set_message_flags(1, manual_excluded=True)
    assert events == ["message 1", "flags 1", "request"]
    assert doc.messages()[1].meta.manualExcluded


def test_a_text_edit_is_no_flag_change(qtbot) -> None:
    doc, events = _document()
    doc.replace_message(0, ChatMessage(role="user", content="edited"))
    assert events == ["message 0", "request"]
