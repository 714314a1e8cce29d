"""ChatLoader: chats read on a worker, the latest request wins, failures reported."""

from __future__ import annotations

from engine.schema import Chat, ChatMessage
from gui.document import read_chat
from gui.preview.loader import ChatLoader


def test_read_chat_returns_what_the_document_needs(library) -> None:
    store, chat_id, book_id = library
    loaded = read_chat(store, chat_id, audit=True)
    assert loaded.chat_id == chat_id and loaded.title == "Test chat"
    assert len(loaded.request.chat.messages) == 20
    assert book_id in loaded.lorebook_ids
    assert loaded.audit_read and loaded.audit is None


def test_the_latest_request_wins(qtbot, library) -> None:
    store, chat_id, _ = library
    other = store.add_chat(Chat(title="Other", messages=[ChatMessage(role="user", content="hi")]), title="Other")
    loader = ChatLoader(store)
    got: list = []
    loader.loaded.connect(got.append)
    loader.load(chat_id)
    loader.load(other)
    assert loader.pending_chat() == other and loader.is_busy()
    qtbot.waitUntil(lambda: not loader.is_busy(), timeout=20000)
    assert [c.chat_id for c in got] == [other]
    loader.shutdown()


def test_a_missing_chat_is_reported(qtbot, library) -> None:
    store, _, _ = library
    loader = ChatLoader(store)
    with qtbot.waitSignal(loader.failed, timeout=20000) as blocker:
        loader.load("no-such-chat")
    chat_id, error = blocker.args
    assert chat_id == "no-such-chat" and error.code == "CHAT_NOT_FOUND"
    loader.shutdown()
