"""Import is one transaction; the embedded library is seeded once with the sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import LoomscopeError
from engine.storage import Store, default_db_path, default_db_url, open_store


def _snapshot(store: Store) -> tuple:
    return (
        [c.model_dump() for c in store.chats.summaries()],
        [b.model_dump() for b in store.lorebooks.summaries()],
        [c.model_dump() for c in store.characters.summaries()],
    )


def _write_good_files(tmp_path: Path) -> list[Path]:
    world = tmp_path / "world.json"
    world.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["fog"], "keysecondary": [],
                                                    "comment": "Fog", "content": "The fog rises.",
                                                    "constant": False, "order": 100, "position": 0}}}))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]}))
    return [world, chat]


def test_import_files_stores_each_kind(store: Store, tmp_path: Path) -> None:
    refs = store.imports.files(_write_good_files(tmp_path))
    assert [r.kind for r in refs] == ["lorebook", "chat"]
    assert refs[0].name == "world" and refs[1].name == "chat"
    chat = store.chats.get(refs[1].id)
    assert chat.chat.messages[3].tool_call_id == "c1"
    assert store.lorebooks.get(refs[0].id).entries[0].keys == ["fog"]


def test_bad_file_leaves_library_exactly_as_before(store: Store, tmp_path: Path) -> None:
    store.imports.files(_write_good_files(tmp_path))
    before = _snapshot(store)
    bad = tmp_path / "broken.json"
    bad.write_text('{"messages": [ {"role": "user", "content": "x"} ')  # truncated JSON
    more = tmp_path / "more"
    more.mkdir()
    with pytest.raises(LoomscopeError) as err:
        store.imports.files([*_write_good_files(more), bad])
    assert err.value.code.startswith("IMPORT_")
    assert str(bad) in (err.value.file or "")
    assert _snapshot(store) == before


def test_real_card_and_chat_link_by_name(store: Store, shared_data: Path) -> None:
    chat_file = shared_data / "chats" / "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"
    card_file = shared_data / "cards" / "default_Seraphina.png"
    refs = store.imports.files([chat_file, card_file])  # chat first: still linked to the card
    assert [r.kind for r in refs] == ["chat", "character"]
    stored = store.chats.get(refs[0].id)
    assert stored.character_id == refs[1].id
    assert stored.character is not None and stored.character.character_book is not None
    assert len(stored.character.character_book.entries) == 4
    req = store.chats.build_request(refs[0].id)
    assert len(req.lorebooks) == 1 and req.lorebooks[0].name == "Eldoria"


def test_seed_once_with_sample(db_url: str) -> None:
    store = open_store(db_url, seed=True)
    try:
        [summary] = store.chats.summaries()
        stored = store.chats.get(summary.id)
        msgs = stored.chat.messages
        assert stored.character is not None and stored.persona is not None
        assert sum(m.meta.pinned for m in msgs) >= 2
        assert any(m.meta.manualExcluded for m in msgs)
        assert any(m.tool_calls for m in msgs) and any(m.role == "tool" for m in msgs)
        assert stored.chat.tools
        [book_id] = stored.lorebook_ids
        entries = store.lorebooks.get(book_id).entries
        assert any(e.constant for e in entries) and any(e.keys and not e.constant for e in entries)
        assert stored.settings.context_limit and stored.settings.reply_reserve
        store.chats.delete(summary.id)
    finally:
        store.close()
    again = open_store(db_url, seed=True)  # seeded before: the deleted sample does not come back
    try:
        assert again.chats.summaries() == []
    finally:
        again.close()


def test_sample_chat_shifts_at_its_budget(tmp_path: Path) -> None:
    from engine.pipeline import preview

    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=True)
    try:
        chat_id = store.chats.summaries()[0].id
        pv = preview(store.chats.build_request(chat_id))
    finally:
        store.close()
    assert pv.error is None
    excluded = [b for b in pv.blocks if b.status == "excluded" and b.kind == "message"]
    assert excluded, "the sample chat must be long enough that shifting drops history"
    assert any(b.reason == "MANUAL_EXCLUDED" or b.manual_excluded for b in pv.blocks)
    assert all(b.status == "kept" for b in pv.blocks if b.pinned)
    assert pv.prompt_tokens <= pv.budget


def test_default_library_is_embedded_sqlite_and_seeded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("LOOMSCOPE_DB", raising=False)
    path = default_db_path()
    assert path.is_relative_to(tmp_path / "xdg") and path.name == "library.sqlite3"
    assert default_db_url() == f"sqlite:///{path}"
    store = open_store()
    try:
        assert len(store.chats.summaries()) == 1 and path.exists()
    finally:
        store.close()
    # $LOOMSCOPE_DB wins and is not seeded
    other = tmp_path / "other.db"
    monkeypatch.setenv("LOOMSCOPE_DB", str(other))
    assert default_db_url() == f"sqlite:///{other}"
    store = open_store()
    try:
        assert store.chats.summaries() == [] and other.exists()
    finally:
        store.close()


def test_bad_url_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(LoomscopeError) as err:
        open_store("notadialect+nodriver://x/y", seed=False)
    assert err.value.code == "STORAGE_ERROR"


def test_import_stores_every_transcript_of_a_multi_transcript_file(store: Store, shared_data: Path) -> None:
    refs = store.imports.files([shared_data / "chats" / "127_ChatGPT_DFS_woFilter_w2.json"])
    assert [r.kind for r in refs] == ["chat", "chat", "chat"]
    assert len({r.name for r in refs}) == 3  # the importer's titles already tell them apart
    assert len({r.id for r in refs}) == 3


def test_a_file_that_is_not_a_database_is_a_one_line_storage_error(tmp_path: Path, capsys) -> None:
    from engine.cli import main as cli_main

    bogus = tmp_path / "notes.txt"
    bogus.write_text("this is not an SQLite database, just some text long enough to have a header" * 3)
    before = bogus.read_bytes()
    with pytest.raises(LoomscopeError) as err:
        open_store(str(bogus), seed=False)
    assert err.value.code == "STORAGE_ERROR" and "\n" not in err.value.message
    assert "sqlalche.me" not in err.value.message
    assert cli_main(["chats", "--db", str(bogus), "--format", "json"]) == 2
    out, stderr = capsys.readouterr()
    assert out == "" and stderr.count("\n") == 1 and "STORAGE_ERROR" in stderr
    assert bogus.read_bytes() == before  # nothing written into someone else's file
