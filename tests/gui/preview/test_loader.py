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
    other = store.chats.add(Chat(title="Other", messages=[ChatMessage(role="user", content="hi")]), title="Other")
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


def test_read_chat_reads_the_same_as_the_stored_chat_without_loading_it_twice(library, monkeypatch) -> None:
    from engine.schema import Character, Lorebook, LorebookEntry
    from engine.schema.sillytavern import SillyTavernSetup

    store, chat_id, book_id = library
    card = Character(name="Ines", description="A cartographer.",
                     character_book=Lorebook(name="Ines' maps", entries=[LorebookEntry(uid=1, keys=["map"],
                                                                                        content="Maps.")]))
    with_card = store.chats.add(Chat(title="Carded", messages=[ChatMessage(role="user", content="a map")]),
                               title="Carded", character_id=store.characters.add(card), lorebook_ids=[book_id])
    branch = store.chats.branch(chat_id, 3)
    tavern = store.chats.add(Chat(title="Tavern", messages=[ChatMessage(role="user", content="hi")]),
                            title="Tavern", lorebook_ids=[book_id])
    store.chats.save_setup(tavern, SillyTavernSetup())
    loads: list[str] = []
    get_chat = store.chats.get
    monkeypatch.setattr(store.chats, "get", lambda cid: loads.append(cid) or get_chat(cid))
    for cid in (chat_id, with_card, branch, tavern):
        loaded = read_chat(store, cid)
        stored = get_chat(cid)
        assert loaded.title == stored.title and loaded.parent_id == stored.parent_id
        expected_ids = (stored.lorebook_ids if loaded.request.sillytavern is not None
                        else store.lorebooks.ids_for_chat(cid))
        assert list(loaded.lorebook_ids) == list(expected_ids)
        book = stored.character.character_book if stored.character is not None else None
        expected_card = (book.name or "card book") if book is not None and loaded.request.sillytavern is None else None
        assert loaded.card_book_name == expected_card
    assert loads == []  # the messages were read once, by build_request
    assert read_chat(store, with_card).card_book_name == "Ines' maps"
    assert read_chat(store, branch).parent_id == chat_id
