"""Store round trips, flags, branches, lorebooks, audits and deletes on a real database."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlalchemy import create_engine, inspect, text

from engine.errors import NotFoundError
from engine.schema import ContextSettings, LorebookEntry
from engine.storage import Store, open_store

from .samples import audit, book, card, rich_chat, user


def _count(db_url: str, sql: str, **params) -> int:
    """Run a COUNT query on the real database (sqlite3 for SQLite files, SQLAlchemy otherwise)."""
    if db_url.startswith("sqlite:///"):
        con = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            return con.execute(sql.replace(":chat", "?"), tuple(params.values())).fetchone()[0]
        finally:
            con.close()
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql), params).scalar_one()
    finally:
        engine.dispose()


def test_migrations_create_schema_at_head(store: Store, db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        names = set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    finally:
        engine.dispose()
    assert {"chats", "messages", "characters", "personas", "lorebooks", "lorebook_entries",
            "chat_lorebooks", "audits", "library_meta", "import_sources"} <= names
    assert version == "0002"
    # opening again is a no-op migration
    open_store(db_url, seed=False).close()


def test_sqlite_uses_wal_and_foreign_keys(tmp_path) -> None:
    s = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    try:
        with s.database.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        s.close()
    assert (tmp_path / "lib.db").exists()


def test_chat_round_trip_keeps_every_field(store: Store) -> None:
    chat = rich_chat()
    chat_id = store.chats.add(chat, settings=ContextSettings(model="gpt-4o-mini", context_limit=8000,
                                                            reply_reserve="15%", strategy="manual"))
    stored = store.chats.get(chat_id)
    assert stored.chat.model_dump() == chat.model_dump()
    assert stored.settings.reply_reserve == "15%" and stored.settings.strategy == "manual"
    msgs = stored.chat.messages
    assert msgs[1].meta.pinned and msgs[1].meta.model_extra == {"send_date": "2023-05-12"}
    assert msgs[2].meta.model_extra["swipes"] == ["Hi", "Hello there"]
    assert msgs[3].call_ids() == ["call_1", "call_2"]
    assert msgs[4].tool_call_id == "call_1"
    assert msgs[5].toolCallId == "call_2" and msgs[5].tool_call_id is None  # the original key is kept
    assert msgs[6].meta.manualExcluded and msgs[6].meta.hidden and isinstance(msgs[6].content, list)
    assert msgs[7].model_extra["swipes"] == ["top-level swipes"]
    assert stored.chat.model_extra == {"chat_extra_field": {"unknown": True}}
    [summary] = store.chats.summaries()
    assert (summary.id, summary.title, summary.messages, summary.has_audit) == (chat_id, "Everything", 8, False)


def test_character_and_books_round_trip(store: Store) -> None:
    c = card()
    char_id = store.characters.add(c)
    assert store.characters.get(char_id).model_dump() == c.model_dump()
    world = book("World", 4)
    book_id = store.lorebooks.add(world)
    assert store.lorebooks.get(book_id).model_dump() == world.model_dump()
    chat_id = store.chats.add(rich_chat(), character_id=char_id, lorebook_ids=[book_id])
    ids = store.lorebooks.ids_for_chat(chat_id)
    assert len(ids) == 2 and ids[1] == book_id  # the card's own book first
    summaries = store.lorebooks.summaries(chat_id)
    assert [s.name for s in summaries] == ["Card book", "World"]
    assert summaries[0].character_id == char_id and summaries[1].entries == 4
    assert {s.id for s in store.lorebooks.summaries()} == set(ids)
    req = store.chats.build_request(chat_id)
    assert req.character is not None and req.character.character_book is None
    assert [b.name for b in req.lorebooks] == ["Card book", "World"]
    assert req.chat.model_dump() == rich_chat().model_dump()


def test_update_lorebook_entry_by_uid(store: Store) -> None:
    book_id = store.lorebooks.add(book("World", 3))
    store.lorebooks.update_entry(book_id, LorebookEntry(uid=1, keys=["changed"], content="New", comment="c"))
    store.lorebooks.update_entry(book_id, LorebookEntry(uid="new-9", keys=["k"], content="Appended"))
    got = store.lorebooks.get(book_id)
    assert [e.uid for e in got.entries] == [0, 1, 2, "new-9"]
    assert got.entries[1].keys == ["changed"] and got.entries[1].content == "New"
    store.lorebooks.delete_entry(book_id, 2)
    assert [e.uid for e in store.lorebooks.get(book_id).entries] == [0, 1, "new-9"]
    with pytest.raises(NotFoundError) as err:
        store.lorebooks.update_entry("nope", LorebookEntry())
    assert err.value.code == "LOREBOOK_NOT_FOUND"


def test_flags_append_update_and_truncate(store: Store) -> None:
    chat_id = store.chats.add(rich_chat())
    store.messages.set_flags(chat_id, 0, pinned=True)
    store.messages.set_flags(chat_id, 1, pinned=False, manual_excluded=True)
    msgs = store.chats.get(chat_id).chat.messages
    assert msgs[0].meta.pinned and not msgs[1].meta.pinned and msgs[1].meta.manualExcluded
    assert msgs[1].meta.model_extra == {"send_date": "2023-05-12"}  # other meta untouched
    assert store.messages.append(chat_id, user("next")) == 8
    store.messages.update(chat_id, 8, user("edited"))
    assert store.chats.get(chat_id).chat.messages[8].content == "edited"
    store.messages.delete_from(chat_id, 5)
    assert len(store.chats.get(chat_id).chat.messages) == 5
    with pytest.raises(NotFoundError) as err:
        store.messages.set_flags(chat_id, 99, pinned=True)
    assert err.value.code == "MESSAGE_NOT_FOUND"
    with pytest.raises(NotFoundError) as err:
        store.messages.append("missing", user("x"))
    assert err.value.code == "CHAT_NOT_FOUND"


def test_concurrent_appends_number_messages_in_turn(store: Store) -> None:
    chat_id = store.chats.add(rich_chat().model_copy(update={"messages": []}))
    indexes: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for i in range(8):
            idx = store.messages.append(chat_id, user(f"{n}-{i}"))
            with lock:
                indexes.append(idx)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(indexes) == list(range(32))
    assert len(store.chats.get(chat_id).chat.messages) == 32


def test_branch_keeps_parent_link_and_attachments(store: Store) -> None:
    char_id = store.characters.add(card())
    book_id = store.lorebooks.add(book())
    settings = ContextSettings(model="gpt-4o", context_limit=3000, reply_reserve=300)
    chat_id = store.chats.add(rich_chat(), character_id=char_id, lorebook_ids=[book_id], settings=settings)
    branch_id = store.chats.branch(chat_id, 3)
    branch = store.chats.get(branch_id)
    assert branch.parent_id == chat_id and branch.branch_point == 3
    assert len(branch.chat.messages) == 4 and branch.lorebook_ids == [book_id]
    assert branch.character_id == char_id and branch.settings == settings
    store.messages.append(branch_id, user("only in the branch"))
    assert len(store.chats.get(chat_id).chat.messages) == 8
    with pytest.raises(NotFoundError):
        store.chats.branch(chat_id, 8)
    store.chats.delete(chat_id)  # the branch survives its parent
    assert store.chats.get(branch_id).parent_id is None


def test_settings_persona_and_lorebook_attachments(store: Store) -> None:
    from engine.schema import Persona

    chat_id = store.chats.add(rich_chat())
    persona_id = store.personas.add(Persona(name="Wren", description="A courier."))
    b1, b2 = store.lorebooks.add(book("A")), store.lorebooks.add(book("B"))
    store.chats.set_persona(chat_id, persona_id)
    store.chats.set_lorebooks(chat_id, [b2, b1, b2])
    store.chats.save_settings(chat_id, ContextSettings(model="claude-3-5-sonnet", strategy="manual"))
    stored = store.chats.get(chat_id)
    assert stored.persona is not None and stored.persona.description == "A courier."
    assert stored.lorebook_ids == [b2, b1]
    assert stored.settings.model == "claude-3-5-sonnet"
    assert [b.name for b in store.chats.build_request(chat_id).lorebooks] == ["B", "A"]
    with pytest.raises(NotFoundError):
        store.chats.set_lorebooks(chat_id, ["missing"])
    with pytest.raises(NotFoundError) as err:
        store.chats.set_persona(chat_id, "missing")
    assert err.value.code == "PERSONA_NOT_FOUND"
    assert store.chats.get(chat_id).lorebook_ids == [b2, b1]  # unchanged after the failed call


def test_put_audit_replaces_previous(store: Store, db_url: str) -> None:
    chat_id = store.chats.add(rich_chat())
    assert store.audits.get(chat_id) is None
    store.audits.put(audit(chat_id, "first"))
    store.audits.put(audit(chat_id, "second", status="failed", code="PROVIDER_TIMEOUT"))
    got = store.audits.get(chat_id)
    assert got is not None and got.generation_id == "second" and got.error_code == "PROVIDER_TIMEOUT"
    assert got == audit(chat_id, "second", status="failed", code="PROVIDER_TIMEOUT").model_copy(
        update={"created_at": got.created_at, "finished_at": got.finished_at})
    assert _count(db_url, "SELECT COUNT(*) FROM audits WHERE chat_id = :chat", chat=chat_id) == 1
    assert store.chats.summaries()[0].has_audit
    with pytest.raises(NotFoundError) as err:
        store.audits.put(audit("missing", "x"))
    assert err.value.code == "CHAT_NOT_FOUND"
    with pytest.raises(NotFoundError) as err:
        store.audits.get("missing")
    assert err.value.code == "CHAT_NOT_FOUND"


def test_record_generation_appends_reply_and_audit_together(store: Store) -> None:
    from engine.schema import ChatMessage

    chat_id = store.chats.add(rich_chat())
    idx = store.audits.record_generation(audit(chat_id, "g1"), ChatMessage(role="assistant", content="reply"))
    assert idx == 8
    assert store.chats.get(chat_id).chat.messages[8].content == "reply"
    assert store.audits.get(chat_id).generation_id == "g1"
    assert store.audits.record_generation(audit(chat_id, "g2", "failed", "PROVIDER_SERVER_ERROR"), None) is None
    assert len(store.chats.get(chat_id).chat.messages) == 9


def test_delete_chat_removes_its_audit_and_messages(store: Store, db_url: str) -> None:
    keep_id = store.chats.add(rich_chat())
    chat_id = store.chats.add(rich_chat(), lorebook_ids=[store.lorebooks.add(book())])
    store.audits.put(audit(chat_id, "doomed"))
    store.audits.put(audit(keep_id, "kept"))
    store.chats.delete(chat_id)
    assert _count(db_url, "SELECT COUNT(*) FROM audits WHERE chat_id = :chat", chat=chat_id) == 0
    assert _count(db_url, "SELECT COUNT(*) FROM messages WHERE chat_id = :chat", chat=chat_id) == 0
    assert _count(db_url, "SELECT COUNT(*) FROM chat_lorebooks WHERE chat_id = :chat", chat=chat_id) == 0
    assert _count(db_url, "SELECT COUNT(*) FROM audits WHERE chat_id = :chat", chat=keep_id) == 1
    assert [c.id for c in store.chats.summaries()] == [keep_id]
    assert len(store.lorebooks.summaries()) == 1  # books are library items, not deleted with a chat
    with pytest.raises(NotFoundError) as err:
        store.chats.get(chat_id)
    assert err.value.code == "CHAT_NOT_FOUND"
    with pytest.raises(NotFoundError):
        store.chats.delete(chat_id)


def test_foreign_key_cascade_deletes_audit_in_sql(store: Store, db_url: str) -> None:
    """Deleting the chat row with plain SQL (no Store logic) still removes its audit: ON DELETE CASCADE."""
    chat_id = store.chats.add(rich_chat())
    store.audits.put(audit(chat_id, "g"))
    with store.database.engine.begin() as conn:
        conn.execute(text("DELETE FROM chats WHERE id = :chat"), {"chat": chat_id})
    assert _count(db_url, "SELECT COUNT(*) FROM audits WHERE chat_id = :chat", chat=chat_id) == 0
    assert _count(db_url, "SELECT COUNT(*) FROM messages WHERE chat_id = :chat", chat=chat_id) == 0


def test_record_generation_stamps_sillytavern_times(store: Store) -> None:
    """Issue 30: the reply keeps ``gen_started`` / ``gen_finished`` (``saveReply``'s JSON dates) and
    ``send_date`` (``getMessageTimeStamp``), the user message its ``send_date``, so an export writes them."""
    from datetime import UTC, datetime

    from engine.schema import ChatMessage

    chat_id = store.chats.add(rich_chat())
    record = audit(chat_id, "g1").model_copy(update={
        "created_at": datetime(2024, 6, 19, 14, 20, 0, 125000, tzinfo=UTC),
        "finished_at": datetime(2024, 6, 19, 14, 20, 3, 500000, tzinfo=UTC)})
    store.audits.record_generation(record, ChatMessage(role="assistant", content="reply"),
                            user_message=ChatMessage(role="user", content="hi"))
    user_msg, reply = store.chats.get(chat_id).chat.messages[-2:]
    assert (user_msg.meta.model_extra or {}) == {"send_date": "June 19, 2024 2:20pm"}
    assert reply.meta.model_extra == {"send_date": "June 19, 2024 2:20pm", "gen_started": "2024-06-19T14:20:00.125Z",
                                      "gen_finished": "2024-06-19T14:20:03.500Z"}
