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
    char = store.add_character(Character(name="Mara", first_mes="Hello, {{user}}.",
                                         character_book=Lorebook(entries=[LorebookEntry(uid=1, keys=["x"])])))
    persona = store.add_persona(Persona(name="Wren", description="A courier."))
    book = store.add_lorebook(_book())
    chat = store.add_chat(Chat(messages=[ChatMessage(role="user", content="hi")]), title="One",
                          character_id=char, persona_id=persona, lorebook_ids=[book])
    store.rename_character(char, "Marisol")
    store.rename_persona(persona, "Wren B")
    store.rename_lorebook(book, "Town")
    assert store.get_character(char).name == "Marisol"
    assert [p.name for p in store.list_personas()] == ["Wren B"]
    assert store.get_lorebook(book).name == "Town"
    assert [(u.chat_id, u.how) for u in store.where_used("character", char)] == [(chat, "character")]
    assert [(u.chat_id, u.how) for u in store.where_used("persona", persona)] == [(chat, "persona")]
    assert [(u.chat_id, u.how) for u in store.where_used("lorebook", book)] == [(chat, "chat")]
    card_book = store.list_characters()[0].lorebook_id
    assert [(u.chat_id, u.how) for u in store.where_used("lorebook", card_book)] == [(chat, "card")]
    with pytest.raises(LoomscopeError) as err:
        store.where_used("spaceship", "x")
    assert err.value.code == "INVALID_SETTINGS"


def test_update_persona_changes_every_chat(store):
    persona = store.add_persona(Persona(name="Wren", description="A courier."))
    chat = store.add_chat(Chat(messages=[]), persona_id=persona)
    store.update_persona(persona, Persona(name="Wren", description="A retired courier."))
    assert store.build_request(chat).persona.description == "A retired courier."
    with pytest.raises(LoomscopeError) as err:
        store.update_persona("nope", Persona())
    assert err.value.code == "PERSONA_NOT_FOUND"


def test_delete_character_and_persona_keep_chats(store):
    char = store.add_character(Character(name="Mara", character_book=Lorebook(entries=[LorebookEntry(uid=1)])))
    persona = store.add_persona(Persona(name="Wren"))
    chat = store.add_chat(Chat(messages=[ChatMessage(role="user", content="hi")]), character_id=char,
                          persona_id=persona)
    store.delete_character(char)
    store.delete_persona(persona)
    stored = store.get_chat(chat)
    assert stored.character_id is None and stored.persona_id is None
    assert len(stored.chat.messages) == 1
    assert store.list_characters() == [] and store.list_personas() == [] and store.list_lorebooks() == []
    for fn in (store.delete_character, store.delete_persona):
        with pytest.raises(LoomscopeError):
            fn(char)


def test_delete_lorebook_detaches(store):
    book = store.add_lorebook(_book())
    chat = store.add_chat(Chat(messages=[]), lorebook_ids=[book])
    store.delete_lorebook(book)
    assert store.get_chat(chat).lorebook_ids == []


def test_new_chat_for_character(store):
    char = store.add_character(Character(name="Mara", first_mes="Welcome.",
                                         character_book=Lorebook(entries=[LorebookEntry(uid=1, keys=["x"])])))
    chat = store.new_chat_for_character(char)
    request = store.build_request(chat)
    assert [m.content for m in request.chat.messages] == ["Welcome."]
    assert request.chat.messages[0].role == "assistant"
    assert request.character.name == "Mara" and len(request.lorebooks) == 1  # the card book is active
    assert store.list_chats()[0].title == "Mara"
    with pytest.raises(LoomscopeError) as err:
        store.new_chat_for_character("nope")
    assert err.value.code == "CHARACTER_NOT_FOUND"


def test_entry_create_duplicate_insert(store):
    book = store.add_lorebook(_book())
    new = store.add_lorebook_entry(book, LorebookEntry(keys=["c"], content="C"))
    assert new.uid == 6  # one past the largest numeric uid
    dup = store.duplicate_lorebook_entry(book, 0)
    assert dup.uid == 7 and dup.keys == ["a"]
    assert [e.uid for e in store.get_lorebook(book).entries] == [0, 7, 5, 6]
    store.delete_lorebook_entry(book, 5)
    store.insert_lorebook_entry(book, LorebookEntry(uid=5, keys=["b"], content="B"), 2)
    assert [e.uid for e in store.get_lorebook(book).entries] == [0, 7, 5, 6]
    with pytest.raises(LoomscopeError) as err:
        store.duplicate_lorebook_entry(book, 99)
    assert err.value.code == "LOREBOOK_ENTRY_NOT_FOUND"
    blank = store.add_lorebook_entry(store.add_lorebook(Lorebook(name="Empty")))
    assert blank.uid == 0
