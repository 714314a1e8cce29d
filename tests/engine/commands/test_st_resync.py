"""Staying in step with a SillyTavern folder (issue 30): ``loomscope import DIR`` again brings in only what changed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.cli import main
from engine.schema import ChatMessage
from engine.storage import open_store
from tests.engine.importers.lived_in import LUMINE_CHAT, build_lived_in

LUMINE = f"chats/Lumine/{LUMINE_CHAT}.jsonl"


def _import(capsys, folder: Path, db: str, *extra: str) -> tuple[dict, str]:
    code = main(["import", str(folder), "--db", db, "--format", "json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out), out.err


def _keys(refs: list[dict]) -> set[str]:
    return {r["key"] for r in refs}


def _append_line(path: Path, line: dict) -> None:
    path.write_text(path.read_text("utf-8") + "\n" + json.dumps(line), encoding="utf-8")


def test_only_what_changed_is_brought_in_and_local_edits_are_never_lost(tmp_path: Path, capsys) -> None:
    user = build_lived_in(tmp_path)
    db = str(tmp_path / "lib.db")
    first, _ = _import(capsys, user, db)
    assert first["files_changed"] is None and len(first["added"]) == 11
    ids = {r["key"]: r["id"] for r in first["added"]}

    # unchanged: nothing read again, everything unchanged (a touched file with the same content is no change)
    os.utime(user / "worlds" / "Drafts.json")
    again, _ = _import(capsys, user, db)
    assert again["files_changed"] == [] and not again["added"] and not again["changed"]
    assert _keys(again["unchanged"]) == _keys(first["added"])

    # one chat and one world changed in the folder: exactly those two are updated
    _append_line(user / LUMINE, {"name": "Lumine", "is_user": False, "is_system": False,
                                 "send_date": "October 2, 2024 7:20pm", "mes": "Then let us go.", "extra": {}})
    world = json.loads((user / "worlds" / "Mondstadt.json").read_text("utf-8"))
    world["entries"]["0"]["content"] = "Mondstadt: the city of wind and song."
    (user / "worlds" / "Mondstadt.json").write_text(json.dumps(world), encoding="utf-8")
    synced, _ = _import(capsys, user, db)
    assert synced["files_changed"] == [LUMINE, "worlds/Mondstadt.json"]
    assert _keys(synced["changed"]) == {LUMINE, "worlds/Mondstadt.json"} and not synced["added"]
    assert _keys(synced["changed"]) | _keys(synced["unchanged"]) == _keys(first["added"])  # all accounted for
    assert not synced["conflicts"]
    with open_store(db, seed=False) as store:
        assert store.chats.get(ids[LUMINE]).chat.messages[-1].content == "Then let us go."
        assert store.lorebooks.get(ids["worlds/Mondstadt.json"]).entries[0].content.endswith("wind and song.")

    # edited in Loomscope AND in the folder: a conflict, listed; Loomscope's edit is kept
    with open_store(db, seed=False) as store:
        store.messages.append(ids[LUMINE], ChatMessage(role="user", content="Written in Loomscope."))
        book = store.lorebooks.get(ids["worlds/Drafts.json"])
        store.lorebooks.update_entry(ids["worlds/Drafts.json"], book.entries[0].model_copy(update={"content": "mine"}))
    _append_line(user / LUMINE, {"name": "Aether", "is_user": True, "is_system": False,
                                 "send_date": "October 2, 2024 7:21pm", "mes": "Written in SillyTavern.", "extra": {}})
    conflicted, err = _import(capsys, user, db)
    assert [(c["key"], c["resolution"]) for c in conflicted["conflicts"]] == [(LUMINE, "unresolved")]
    assert f"{LUMINE}: conflict: changed in the folder and in Loomscope" in err
    assert LUMINE not in _keys(conflicted["changed"])
    with open_store(db, seed=False) as store:
        assert store.chats.get(ids[LUMINE]).chat.messages[-1].content == "Written in Loomscope."
        assert store.lorebooks.get(ids["worlds/Drafts.json"]).entries[0].content == "mine"  # its file did not change
    # still open: asked again next time, until the writer chooses
    asked, _ = _import(capsys, user, db)
    assert [c["key"] for c in asked["conflicts"]] == [LUMINE]
    chosen, _ = _import(capsys, user, db, "--on-conflict", "use-folder")
    assert [(c["key"], c["resolution"]) for c in chosen["conflicts"]] == [(LUMINE, "used-folder")]
    assert LUMINE in _keys(chosen["changed"])
    with open_store(db, seed=False) as store:
        assert store.chats.get(ids[LUMINE]).chat.messages[-1].content == "Written in SillyTavern."
    settled, _ = _import(capsys, user, db)
    assert settled["files_changed"] == [] and not settled["conflicts"]


def test_keep_local_takes_the_folder_version_as_seen(tmp_path: Path, capsys) -> None:
    user = build_lived_in(tmp_path)
    db = str(tmp_path / "lib.db")
    first, _ = _import(capsys, user, db)
    book_id = next(r["id"] for r in first["added"] if r["key"] == "worlds/Mondstadt.json")
    with open_store(db, seed=False) as store:
        book = store.lorebooks.get(book_id)
        store.lorebooks.update_entry(book_id, book.entries[0].model_copy(update={"content": "mine"}))
    world = json.loads((user / "worlds" / "Mondstadt.json").read_text("utf-8"))
    world["entries"]["1"]["disable"] = True
    (user / "worlds" / "Mondstadt.json").write_text(json.dumps(world), encoding="utf-8")
    kept, _ = _import(capsys, user, db, "--on-conflict", "keep-local")
    assert [(c["key"], c["resolution"]) for c in kept["conflicts"]] == [("worlds/Mondstadt.json", "kept-local")]
    again, _ = _import(capsys, user, db)
    assert not again["conflicts"] and again["files_changed"] == []
    with open_store(db, seed=False) as store:
        entries = store.lorebooks.get(book_id).entries
        assert entries[0].content == "mine" and not entries[1].disable


def test_settings_or_a_new_world_read_everything_again(tmp_path: Path, capsys) -> None:
    """settings.json and the set of worlds decide every chat's setup and links: a change there reads the whole folder."""
    user = build_lived_in(tmp_path)
    db = str(tmp_path / "lib.db")
    _import(capsys, user, db)
    settings = json.loads((user / "settings.json").read_text("utf-8"))
    settings["power_user"]["persona_descriptions"]["aether.png"]["description"] = "{{user}} travels light."
    settings["oai_settings"]["openai_max_context"] = 8192
    (user / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    report, _ = _import(capsys, user, db)
    assert report["files_changed"] == ["settings.json"]
    # the persona, and both chats (their context size)
    assert _keys(report["changed"]) == {"User Avatars/aether.png", LUMINE, "chats/Kael/Kael - 2024-10-03 @22h 00m 00s 000ms.jsonl"}
    # a chat linking a world that did not exist: linked once the world file appears
    (user / "worlds" / "Snezhnaya.json").write_text(json.dumps({"entries": {}}), encoding="utf-8")
    lines = (user / LUMINE).read_text("utf-8").split("\n")
    header = json.loads(lines[0])
    header["chat_metadata"]["world_info"] = "Snezhnaya"
    (user / LUMINE).write_text("\n".join([json.dumps(header), *lines[1:]]), encoding="utf-8")
    linked, _ = _import(capsys, user, db)
    assert linked["files_changed"] == [LUMINE, "+worlds/Snezhnaya.json"]
    assert _keys(linked["added"]) == {"worlds/Snezhnaya.json"} and LUMINE in _keys(linked["changed"])
    assert not linked["warnings"] or all("Snezhnaya" not in w["message"] for w in linked["warnings"])


def test_tuned_here_exported_there_played_there_reloaded_here(tmp_path: Path, capsys) -> None:
    """The writer's loop: edit in Loomscope, export back into the SillyTavern folder, chat there, reload: no conflicts."""
    user = build_lived_in(tmp_path)
    db = str(tmp_path / "lib.db")
    first, _ = _import(capsys, user, db)
    ids = {r["key"]: r["id"] for r in first["added"]}
    with open_store(db, seed=False) as store:
        store.chats.rename(ids[LUMINE], "Lumine, tuned")  # a chat edit (the file name stays)
        book = store.lorebooks.get(ids["worlds/Mondstadt.json"])
        store.lorebooks.update_entry(ids["worlds/Mondstadt.json"],
                                    book.entries[0].model_copy(update={"content": "Mondstadt: tuned here."}))
    assert main(["export", ids[LUMINE], "--to", str(user), "--db", db, "--force", "--merge", "--format", "json"]) == 0
    capsys.readouterr()
    assert (user / LUMINE).is_file() and not (user / "chats" / "Lumine" / "Lumine, tuned.jsonl").exists()
    # played in SillyTavern: one more message
    _append_line(user / LUMINE, {"name": "Lumine", "is_user": False, "is_system": False,
                                 "send_date": "October 5, 2024 9:00pm", "mes": "Played in SillyTavern.", "extra": {}})
    reloaded, _ = _import(capsys, user, db)
    assert not reloaded["conflicts"] and not reloaded["added"]
    assert LUMINE in _keys(reloaded["changed"])
    with open_store(db, seed=False) as store:
        assert store.chats.get(ids[LUMINE]).chat.messages[-1].content == "Played in SillyTavern."
        assert store.lorebooks.get(ids["worlds/Mondstadt.json"]).entries[0].content == "Mondstadt: tuned here."
    again, _ = _import(capsys, user, db)
    assert again["files_changed"] == [] and not again["conflicts"]
