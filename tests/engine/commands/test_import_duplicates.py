"""No silent duplicates (issue 30): importing a file already in the library updates it in place and says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from engine.cli import main
from engine.storage import open_store
from tests.engine.importers.st_fixture import WORLDS, build_st_user


def _import(capsys, db: str, *args: str) -> list[dict]:
    code = main(["import", *args, "--db", db, "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_reimport_updates_in_place_and_as_new_keeps_both(tmp_path: Path, capsys) -> None:
    user = build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    card, world, chat = user / "characters" / "hero.png", user / "worlds" / "Realm.json", user / "chats/hero/voyage.jsonl"
    first = _import(capsys, db, str(card), str(world), str(chat))
    assert [r["status"] for r in first] == ["added"] * 3
    again = _import(capsys, db, str(card), str(world), str(chat))
    assert [(r["id"], r["status"]) for r in again] == [(r["id"], "unchanged") for r in first]
    # the same world under another path: the same name and content, so the same lorebook
    copy = tmp_path / "Realm.json"
    shutil.copy(world, copy)
    (found,) = _import(capsys, db, str(copy))
    assert (found["id"], found["status"]) == (first[1]["id"], "unchanged")
    # the file changed: updated in place, said so
    data = json.loads(json.dumps(WORLDS["Realm"]))
    data["entries"]["0"]["content"] = "Realm: Quill has a new lighthouse."
    world.write_text(json.dumps(data), encoding="utf-8")
    (changed,) = _import(capsys, db, str(world))
    assert (changed["id"], changed["status"]) == (first[1]["id"], "changed")
    with open_store(db, seed=False) as store:
        assert store.lorebooks.get(first[1]["id"]).entries[0].content == "Realm: Quill has a new lighthouse."
        assert len(store.lorebooks.summaries()) == 2  # Realm and the card's book; nothing twice
        assert len(store.chats.summaries()) == 1
    # --as-new keeps both
    (new,) = _import(capsys, db, str(world), "--as-new")
    assert new["status"] == "added" and new["id"] != first[1]["id"]
    with open_store(db, seed=False) as store:
        assert [b.name for b in store.lorebooks.summaries()].count("Realm") == 2


def test_a_locally_edited_import_is_never_overwritten(tmp_path: Path, capsys) -> None:
    user = build_st_user(tmp_path)
    db = str(tmp_path / "lib.db")
    chat = user / "chats/hero/voyage.jsonl"
    (first,) = _import(capsys, db, str(chat))
    with open_store(db, seed=False) as store:
        store.chats.rename(first["id"], "my edit")
    chat.write_text(chat.read_text("utf-8") + '\n{"name": "Kael", "is_user": false, "mes": "later"}', encoding="utf-8")
    code = main(["import", str(chat), "--db", db, "--format", "json"])
    out = capsys.readouterr()
    assert code == 0 and "edited in Loomscope since; kept, and the file imported as a new copy" in out.err
    (second,) = json.loads(out.out)
    assert second["status"] == "added" and second["id"] != first["id"]
    with open_store(db, seed=False) as store:
        assert store.chats.get(first["id"]).title == "my edit"
        assert store.chats.get(second["id"]).chat.messages[-1].content == "later"


def test_flags_for_the_other_kind_of_import_are_refused(tmp_path: Path, capsys) -> None:
    user = build_st_user(tmp_path)
    assert main(["import", str(user), "--as-new", "--db", str(tmp_path / "l.db")]) == 2
    assert "--as-new: INVALID_SETTINGS" in capsys.readouterr().err
    assert main(["import", str(user / "worlds" / "Realm.json"), "--on-conflict", "use-folder",
                 "--db", str(tmp_path / "l.db")]) == 2
    assert "--on-conflict: INVALID_SETTINGS" in capsys.readouterr().err
