"""Issue 30: a chat exported as a SillyTavern folder imports back with the same preview, byte for byte.

``loomscope import DIR`` → ``loomscope export CHAT_ID --to OUT`` → ``loomscope import OUT`` into a fresh
library → ``loomscope preview --chat-id ... --format json`` is the same document (the chat id aside),
for every chat of ``../shared/data/st-user/default-user`` and of the lived-in fixture folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from engine.cli import main
from engine.storage import open_store
from tests.conftest import shared_data_path
from tests.engine.importers.lived_in import LUMINE_CHAT, build_lived_in


def _cli(capsys, *args: str) -> str:
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _import(capsys, folder: Path, db: str) -> dict:
    return json.loads(_cli(capsys, "import", str(folder), "--db", db, "--format", "json"))


def _preview_digest(capsys, db: str, chat_id: str) -> tuple[str, str]:
    """The preview JSON with the chat id taken out, and its sha256."""
    text = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--format", "json").replace(chat_id, "CHAT")
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()


def _round_trip_each_chat(capsys, tmp_path: Path, folder: Path) -> list[str]:
    """Export every chat of ``folder`` alone and import it into a fresh library; the previews must be equal."""
    db = str(tmp_path / "lib.db")
    report = _import(capsys, folder, db)
    chats = [r for r in report["added"] if r["kind"] == "chat"]
    assert chats
    for n, ref in enumerate(chats):
        out = tmp_path / f"out{n}"
        _cli(capsys, "export", ref["id"], "--to", str(out), "--db", db, "--format", "json")
        db2 = str(tmp_path / f"again{n}.db")
        again = _import(capsys, out, db2)
        # nothing missing (card, worlds, persona all there): only the warnings the chat file itself raised
        before = {w["message"] for w in report["warnings"] if w["file"] == ref["key"]}
        assert {w["message"] for w in again["warnings"]} <= before, again["warnings"]
        (chat2,) = [r["id"] for r in again["added"] if r["kind"] == "chat"]
        first, digest1 = _preview_digest(capsys, db, ref["id"])
        second, digest2 = _preview_digest(capsys, db2, chat2)
        assert second == first, ref["key"]
        assert digest2 == digest1
    return [r["key"] for r in chats]


def test_lived_in_folder_round_trip(tmp_path: Path, capsys) -> None:
    folder = build_lived_in(tmp_path, shared_data_path())
    keys = _round_trip_each_chat(capsys, tmp_path, folder)
    assert f"chats/Lumine/{LUMINE_CHAT}.jsonl" in keys and len(keys) == 2


def test_shared_default_user_round_trip(shared_data: Path, tmp_path: Path, capsys) -> None:
    """The folder says ``main_api: koboldhorde``: a Text Completion chat (issue 26), exported with its presets."""
    user = shared_data / "st-user" / "default-user"
    _round_trip_each_chat(capsys, tmp_path, user)
    settings = json.loads((tmp_path / "out0" / "settings.json").read_text("utf-8"))
    original = json.loads((user / "settings.json").read_text("utf-8"))
    assert settings["main_api"] == original["main_api"] == "koboldhorde"
    assert settings["power_user"]["instruct"]["preset"] == original["power_user"]["instruct"]["preset"]
    assert settings["power_user"]["context"]["story_string"] == original["power_user"]["context"]["story_string"]
    assert sorted(p.name for p in (tmp_path / "out0" / "instruct").iterdir()) == sorted(
        p.name for p in (user / "instruct").iterdir())


def test_lumine_export_holds_everything_its_prompt_needs(tmp_path: Path, capsys) -> None:
    """The exported folder: card with its world, every world by scope, persona, note, settings."""
    folder = build_lived_in(tmp_path, shared_data_path())
    db = str(tmp_path / "lib.db")
    report = _import(capsys, folder, db)
    chat = next(r["id"] for r in report["added"] if r["key"] == f"chats/Lumine/{LUMINE_CHAT}.jsonl")
    out = tmp_path / "out"
    rows = json.loads(_cli(capsys, "export", chat, "--to", str(out), "--db", db, "--format", "json"))
    files = sorted(str(Path(r["file"]).relative_to(out)) for r in rows)
    assert files == ["User Avatars/aether.png", "characters/Lumine.png", f"chats/Lumine/{LUMINE_CHAT}.jsonl",
                     "settings.json", "worlds/GI-Core.json", "worlds/Lumine-Lore.json", "worlds/Mondstadt.json",
                     "worlds/Teyvat-Extra.json"]
    settings = json.loads((out / "settings.json").read_text("utf-8"))
    wi = settings["world_info_settings"]
    assert wi["world_info"] == {"globalSelect": ["GI-Core"],
                                "charLore": [{"name": "Lumine", "extraBooks": ["Teyvat-Extra"]}]}
    assert wi["world_info_character_strategy"] == 2 and wi["world_info_depth"] == 4
    assert settings["power_user"]["personas"] == {"aether.png": "Aether"}
    assert settings["user_avatar"] == "aether.png"
    assert [o["identifier"] for o in settings["oai_settings"]["prompt_order"][0]["order"]][9] == "style-note"
    lines = [json.loads(x) for x in (out / "chats" / "Lumine" / f"{LUMINE_CHAT}.jsonl").read_text("utf-8").splitlines()]
    meta = lines[0]["chat_metadata"]
    assert meta["world_info"] == "Mondstadt" and meta["note_prompt"].startswith("[Tone: wistful.")
    assert lines[4]["extra"]["loomscope"] == {"pinned": True}
    assert all("loomscope" not in line for line in lines)  # nothing on the line itself, no message copy


def test_chat_without_its_character_exports_with_a_warning(tmp_path: Path, capsys) -> None:
    folder = build_lived_in(tmp_path)
    db = str(tmp_path / "lib.db")
    report = _import(capsys, folder, db)
    ids = {r["key"]: r["id"] for r in report["added"]}
    with open_store(db, seed=False) as store:
        store.characters.delete(ids["characters/Kael.png"])
    chat = ids["chats/Kael/Kael - 2024-10-03 @22h 00m 00s 000ms.jsonl"]
    out = tmp_path / "out"
    code = main(["export", chat, "--to", str(out), "--db", db, "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "warning: the chat's character is not in the library: exported without a card" in captured.err
    files = sorted(str(Path(r["file"]).relative_to(out)) for r in json.loads(captured.out))
    assert not any(f.startswith("characters/") for f in files)
    assert "chats/Kael/Kael - 2024-10-03 @22h 00m 00s 000ms.jsonl" in files


def test_all_chats_exported_together_round_trip(tmp_path: Path, capsys) -> None:
    """Both chats of the lived-in folder in one export (one settings.json, two personas): same previews."""
    folder = build_lived_in(tmp_path, shared_data_path())
    db, db2 = str(tmp_path / "lib.db"), str(tmp_path / "again.db")
    report = _import(capsys, folder, db)
    chats = {r["key"]: r["id"] for r in report["added"] if r["kind"] == "chat"}
    _cli(capsys, "export", *chats.values(), "--to", str(tmp_path / "out"), "--db", db, "--format", "json")
    again = _import(capsys, tmp_path / "out", db2)
    assert not again["warnings"]
    back = {r["key"]: r["id"] for r in again["added"] if r["kind"] == "chat"}
    assert set(back) == set(chats)
    for key, chat_id in chats.items():
        assert _preview_digest(capsys, db2, back[key])[1] == _preview_digest(capsys, db, chat_id)[1], key
