"""``loomscope import DIR``, ``preview --chat-id``, ``export`` (issue 17), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main
from engine.importers import load_character, load_chat, load_lorebook
from engine.importers.card_export import export_card_png
from engine.pipeline import preview
from engine.storage import open_store
from tests.conftest import st_user_copy
from tests.engine.importers.st_fixture import build_st_user


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _import(capsys, folder: Path, db: str, *extra: str) -> dict:
    code, out, err = _cli(capsys, "import", str(folder), "--db", db, "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_import_dir_reports_added_then_unchanged(tmp_path: Path, capsys) -> None:
    build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    first = _import(capsys, tmp_path / "data", db)
    assert {r["key"] for r in first["added"]} >= {"characters/hero.png", "worlds/Realm.json",
                                                  "chats/hero/voyage.jsonl", "User Avatars/alex.png"}
    assert first["skipped"][0]["file"] == "group chats/1700000000000.jsonl"
    second = _import(capsys, tmp_path / "data" / "default-user", db)
    assert not second["added"] and not second["changed"] and len(second["unchanged"]) == len(first["added"])


def test_import_dir_errors(tmp_path: Path, capsys) -> None:
    (tmp_path / "plain").mkdir()
    code, _out, err = _cli(capsys, "import", str(tmp_path / "plain"), "--db", str(tmp_path / "lib.db"))
    assert code == 2 and f"{tmp_path / 'plain'}: IMPORT_UNSUPPORTED_FORMAT" in err
    user = build_st_user(tmp_path)
    (user / "characters" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    code, _out, err = _cli(capsys, "import", str(user), "--db", str(tmp_path / "lib.db"))
    assert code == 2 and "broken.png: IMPORT_INVALID_PNG" in err
    assert open_store(str(tmp_path / "lib.db"), seed=False).chats.summaries() == []
    report = _import(capsys, user, str(tmp_path / "lib.db"), "--skip-bad")
    assert [s["file"] for s in report["skipped"]] == ["characters/broken.png", "group chats/1700000000000.jsonl"]
    assert any(r["kind"] == "chat" for r in report["added"])


def test_preview_chat_id_uses_stored_setup_and_flags_override(tmp_path: Path, capsys) -> None:
    build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    chat_id = next(r["id"] for r in _import(capsys, tmp_path / "data", db)["added"] if r["kind"] == "chat")
    code, out, err = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--format", "json")
    assert code == 0, err
    pv = json.loads(out)
    with open_store(db, seed=False) as store:
        expected = preview(store.chats.build_request(chat_id))
    assert pv["messages"] == expected.messages and pv["strategy"] == "sillytavern"
    assert (pv["model"], pv["context_limit"], pv["reply_reserve"]) == ("gpt-4o", 2000, 250)
    code, out, _ = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--format", "json",
                        "--context-limit", "4000", "--reply-reserve", "100", "--model", "gpt-4o-mini")
    pv = json.loads(out)
    assert (pv["model"], pv["context_limit"], pv["reply_reserve"]) == ("gpt-4o-mini", 4000, 100)
    code, out, err = _cli(capsys, "preview", "--chat-id", "nope", "--db", db)
    assert code == 2 and "nope: CHAT_NOT_FOUND" in err


def test_export_never_overwrites_without_force(tmp_path: Path, capsys) -> None:
    build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    report = _import(capsys, tmp_path / "data", db)
    ids = [r["id"] for r in report["added"] if r["kind"] != "persona"]
    out_dir = tmp_path / "out"
    code, out, err = _cli(capsys, "export", *ids, "--to", str(out_dir), "--db", db, "--format", "json")
    assert code == 0, err
    files = sorted(str(Path(r["file"]).relative_to(out_dir)) for r in json.loads(out))
    assert files == ["User Avatars/alex.png", "characters/hero.png", "chats/hero/voyage.jsonl", "settings.json",
                     "worlds/HeroLore.json", "worlds/Realm.json", "worlds/Unused.json", "worlds/Voyage.json"]
    (out_dir / "settings.json").write_text('{"mine": 1, "world_info_settings": {"world_info": {"globalSelect": ["Old"]}}}')
    (out_dir / "worlds" / "Realm.json").write_text('{"entries": {}}')
    (out_dir / "worlds" / "Voyage.json").unlink()
    code, out, err = _cli(capsys, "export", *ids, "--to", str(out_dir), "--db", db)
    assert code == 2 and ".json: EXPORT_TARGET_EXISTS" in err
    assert (out_dir / "worlds" / "Realm.json").read_text() == '{"entries": {}}'
    assert not (out_dir / "worlds" / "Voyage.json").exists()  # nothing at all was written
    code, out, err = _cli(capsys, "export", *ids, "--to", str(out_dir), "--db", db, "--force", "--merge")
    assert code == 0 and (out_dir / "worlds" / "Realm.json").read_text() != '{"entries": {}}'
    merged = json.loads((out_dir / "settings.json").read_text())  # merged key by key: theirs kept, ours added
    assert merged["mine"] == 1 and merged["world_info_settings"]["world_info"]["globalSelect"] == ["Old", "Realm"]
    assert merged["power_user"]["personas"] == {"alex.png": "Alex"}


def test_export_refuses_foreign_files_and_unwritable_folders(tmp_path: Path, capsys) -> None:
    build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    report = _import(capsys, tmp_path / "data", db)
    chat = next(r["id"] for r in report["added"] if r["kind"] == "chat")
    out_dir = tmp_path / "out"
    (out_dir / "worlds").mkdir(parents=True)
    (out_dir / "worlds" / "Realm.json").write_text("my shopping list")  # not SillyTavern's
    code, _, err = _cli(capsys, "export", chat, "--to", str(out_dir), "--db", db, "--force")
    assert code == 2 and "Realm.json: EXPORT_TARGET_FOREIGN" in err
    assert sorted(p.name for p in out_dir.rglob("*")) == ["Realm.json", "worlds"]  # nothing else written
    (out_dir / "worlds" / "Realm.json").unlink()
    (out_dir / "settings.json").write_text("[1, 2]")
    code, _, err = _cli(capsys, "export", chat, "--to", str(out_dir), "--db", db, "--merge")
    assert code == 2 and "settings.json: EXPORT_TARGET_FOREIGN" in err
    (out_dir / "settings.json").unlink()
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, _, err = _cli(capsys, "export", chat, "--to", str(locked), "--db", db)
        import os

        if os.geteuid() != 0:  # root writes anywhere
            assert code == 2 and "EXPORT_NOT_WRITABLE" in err and str(locked) in err
            assert not list(locked.rglob("*"))
    finally:
        locked.chmod(0o700)
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "chats").write_text("a file where the chats folder goes")
    code, _, err = _cli(capsys, "export", chat, "--to", str(blocked), "--db", db)
    assert code == 2 and "EXPORT_NOT_WRITABLE" in err and "chats" in err
    assert sorted(p.name for p in blocked.rglob("*")) == ["chats"]  # nothing half-written


def test_import_export_import_is_equal(tmp_path: Path, capsys) -> None:
    user = build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    report = _import(capsys, user, db)
    ids = {r["key"]: r["id"] for r in report["added"]}
    out_dir = tmp_path / "out"
    code, _, err = _cli(capsys, "export", *[i for k, i in ids.items() if not k.startswith("User")],
                        "--to", str(out_dir), "--db", db)
    assert code == 0, err
    with open_store(db, seed=False) as store:
        chat = store.chats.get(ids["chats/hero/voyage.jsonl"]).chat
        card = store.characters.get(ids["characters/hero.png"])
        worlds = {k: store.lorebooks.get(i) for k, i in ids.items() if k.startswith("worlds/")}
    again = load_chat(out_dir / "chats" / "hero" / "voyage.jsonl")
    assert again.model_dump() == chat.model_dump()
    assert again.metadata["unknown_meta"] == {"x": 1}
    again_card = load_character(out_dir / "characters" / "hero.png")
    assert again_card.model_dump() == card.model_dump()
    assert (again_card.model_extra or {}).get("unknown_data_field") == "survives export"
    assert again_card.extensions["unknown_extension"] == {"kept": True}
    for key, book in worlds.items():
        assert load_lorebook(out_dir / key).model_dump() == book.model_dump(), key
    # a second import of the exported files equals the first (a fresh library)
    code, out, err = _cli(capsys, "import", *[str(p) for p in sorted(out_dir.rglob("*"))
                                              if p.is_file() and p.name != "settings.json"
                                              and p.parent.name != "User Avatars"],
                          "--db", str(tmp_path / "lib2.db"), "--format", "json")
    assert code == 0, err
    with open_store(str(tmp_path / "lib2.db"), seed=False) as store2:
        refs = json.loads(out)
        chat2 = store2.chats.get(next(r["id"] for r in refs if r["kind"] == "chat")).chat
        assert chat2.model_dump() == chat.model_dump()


def test_changed_card_keeps_unknown_fields(tmp_path: Path) -> None:
    user = build_st_user(tmp_path)
    original = (user / "characters" / "hero.png").read_bytes()
    card = load_character(user / "characters" / "hero.png")
    assert export_card_png(card, original) == original  # unchanged: the imported bytes as they were
    edited = card.model_copy(update={"description": "A retired swordsman."})
    path = tmp_path / "edited.png"
    path.write_bytes(export_card_png(edited, original))
    back = load_character(path)
    assert back.description == "A retired swordsman."
    assert back.model_extra["root_fields"]["description"] == "A retired swordsman."  # the V1 mirror too
    assert back.extensions["unknown_extension"] == {"kept": True}
    assert back.model_dump(exclude={"description", "root_fields"}) == card.model_dump(exclude={"description",
                                                                                                "root_fields"})
    fresh = tmp_path / "fresh.png"
    fresh.write_bytes(export_card_png(edited))  # no original image: a plain image, same card
    assert load_character(fresh).description == "A retired swordsman."


def test_exported_folder_imports_back_with_the_same_prompt(tmp_path: Path, capsys) -> None:
    """import DIR → export (settings.json too) → import the exported folder: same setup, same messages."""
    user = build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    report = _import(capsys, user, db)
    ids = [r["id"] for r in report["added"] if r["kind"] != "persona"]
    out_dir = tmp_path / "out"
    code, _, err = _cli(capsys, "export", *ids, "--to", str(out_dir), "--db", db)
    assert code == 0, err
    db2 = str(tmp_path / "lib2.db")
    again = _import(capsys, out_dir, db2)
    chat1 = next(r["id"] for r in report["added"] if r["kind"] == "chat")
    chat2 = next(r["id"] for r in again["added"] if r["kind"] == "chat")
    with open_store(db, seed=False) as s1, open_store(db2, seed=False) as s2:
        r1, r2 = s1.chats.build_request(chat1), s2.chats.build_request(chat2)
        assert r2.chat.model_dump() == r1.chat.model_dump()
        assert r2.character.model_dump() == r1.character.model_dump()
        assert r2.settings == r1.settings and r2.persona.model_dump() == r1.persona.model_dump()
        assert r2.sillytavern.model_dump(exclude={"source"}) == r1.sillytavern.model_dump(exclude={"source"})
        assert [b.model_dump() for b in r2.lorebooks] == [b.model_dump() for b in r1.lorebooks]
        assert preview(r2).messages == preview(r1).messages


def test_pristine_folder_round_trip(shared_data: Path, tmp_path: Path, capsys) -> None:
    db, db2 = str(tmp_path / "lib.db"), str(tmp_path / "lib2.db")
    # a Chat Completion copy: the export writes no Text Completion setup back (main_api, instruct, context)
    report = _import(capsys, st_user_copy(shared_data, tmp_path / "cc"), db)
    code, _, err = _cli(capsys, "export", *[r["id"] for r in report["added"] if r["kind"] != "persona"],
                        "--to", str(tmp_path / "out"), "--db", db)
    assert code == 0, err
    # the card is written back byte for byte (it did not change)
    assert (tmp_path / "out" / "characters" / "default_Seraphina.png").read_bytes() == (
        shared_data / "st-user" / "default-user" / "characters" / "default_Seraphina.png").read_bytes()
    again = _import(capsys, tmp_path / "out", db2)
    chat1 = next(r["id"] for r in report["added"] if r["kind"] == "chat")
    chat2 = next(r["id"] for r in again["added"] if r["kind"] == "chat")
    with open_store(db, seed=False) as s1, open_store(db2, seed=False) as s2:
        r1, r2 = s1.chats.build_request(chat1), s2.chats.build_request(chat2)
        assert r2.chat.model_dump() == r1.chat.model_dump()
        assert preview(r2).messages == preview(r1).messages
