"""Store methods behind the app's library panels and entry editor (issue 18), on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import LoomscopeError
from engine.schema import Character, Chat, ChatMessage, Lorebook, LorebookEntry, Persona
from engine.storage import open_store


@pytest.fixture
def store(tmp_path: Path):
    s = open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False)
    yield s
    s.close()


def _book() -> Lorebook:
    return Lorebook(name="City", entries=[LorebookEntry(uid=0, keys=["a"], content="A"),
                                          LorebookEntry(uid=5, keys=["b"], content="B")])


def test_rename_and_where_used(store):
    char = store.characters.add(Character(name="Mara", first_mes="Hello, {{user}}.",
                                         character_book=Lorebook(entries=[LorebookEntry(uid=1, keys=["x"])])))
    persona = store.personas.add(Persona(name="Wren", description="A courier."))
    book = store.lorebooks.add(_book())
    chat = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="One",
                          character_id=char, persona_id=persona, lorebook_ids=[book])
    store.characters.rename(char, "Marisol")
    store.personas.rename(persona, "Wren B")
    store.lorebooks.rename(book, "Town")
    assert store.characters.get(char).name == "Marisol"
    assert [p.name for p in store.personas.summaries()] == ["Wren B"]
    assert store.lorebooks.get(book).name == "Town"
    assert [(u.chat_id, u.how) for u in store.chats.where_used("character", char)] == [(chat, "character")]
    assert [(u.chat_id, u.how) for u in store.chats.where_used("persona", persona)] == [(chat, "persona")]
    assert [(u.chat_id, u.how) for u in store.chats.where_used("lorebook", book)] == [(chat, "chat")]
    card_book = store.characters.summaries()[0].lorebook_id
    assert [(u.chat_id, u.how) for u in store.chats.where_used("lorebook", card_book)] == [(chat, "card")]
    with pytest.raises(LoomscopeError) as err:
        store.chats.where_used("spaceship", "x")
    assert err.value.code == "INVALID_SETTINGS"


def test_update_persona_changes_every_chat(store):
    persona = store.personas.add(Persona(name="Wren", description="A courier."))
    chat = store.chats.add(Chat(messages=[]), persona_id=persona)
    store.personas.update(persona, Persona(name="Wren", description="A retired courier."))
    assert store.chats.build_request(chat).persona.description == "A retired courier."
    with pytest.raises(LoomscopeError) as err:
        store.personas.update("nope", Persona())
    assert err.value.code == "PERSONA_NOT_FOUND"


def test_delete_character_and_persona_keep_chats(store):
    char = store.characters.add(Character(name="Mara", character_book=Lorebook(entries=[LorebookEntry(uid=1)])))
    persona = store.personas.add(Persona(name="Wren"))
    chat = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), character_id=char,
                          persona_id=persona)
    store.characters.delete(char)
    store.personas.delete(persona)
    stored = store.chats.get(chat)
    assert stored.character_id is None and stored.persona_id is None
    assert len(stored.chat.messages) == 1
    assert store.characters.summaries() == [] and store.personas.summaries() == [] and store.lorebooks.summaries() == []
    for fn in (store.characters.delete, store.personas.delete):
        with pytest.raises(LoomscopeError):
            fn(char)


def test_delete_lorebook_detaches(store):
    book = store.lorebooks.add(_book())
    chat = store.chats.add(Chat(messages=[]), lorebook_ids=[book])
    store.lorebooks.delete(book)
    assert store.chats.get(chat).lorebook_ids == []


def test_new_chat_for_character(store):
    char = store.characters.add(Character(name="Mara", first_mes="Welcome.",
                                         character_book=Lorebook(entries=[LorebookEntry(uid=1, keys=["x"])])))
    chat = store.chats.new_for_character(char)
    request = store.chats.build_request(chat)
    assert [m.content for m in request.chat.messages] == ["Welcome."]
    assert request.chat.messages[0].role == "assistant"
    assert request.character.name == "Mara" and len(request.lorebooks) == 1  # the card book is active
    assert store.chats.summaries()[0].title == "Mara"
    with pytest.raises(LoomscopeError) as err:
        store.chats.new_for_character("nope")
    assert err.value.code == "CHARACTER_NOT_FOUND"


def test_entry_create_duplicate_insert(store):
    book = store.lorebooks.add(_book())
    new = store.lorebooks.add_entry(book, LorebookEntry(keys=["c"], content="C"))
    assert new.uid == 6  # one past the largest numeric uid
    dup = store.lorebooks.duplicate_entry(book, 0)
    assert dup.uid == 7 and dup.keys == ["a"]
    assert [e.uid for e in store.lorebooks.get(book).entries] == [0, 7, 5, 6]
    store.lorebooks.delete_entry(book, 5)
    store.lorebooks.insert_entry(book, LorebookEntry(uid=5, keys=["b"], content="B"), 2)
    assert [e.uid for e in store.lorebooks.get(book).entries] == [0, 7, 5, 6]
    with pytest.raises(LoomscopeError) as err:
        store.lorebooks.duplicate_entry(book, 99)
    assert err.value.code == "LOREBOOK_ENTRY_NOT_FOUND"
    blank = store.lorebooks.add_entry(store.lorebooks.add(Lorebook(name="Empty")))
    assert blank.uid == 0
