"""Group chats through the CLI (issue 27 item 7): ``import DIR`` and ``preview --chat-id ID --speaker NAME``."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main
from tests.engine.assembly.st_group_cases import CASES
from tests.engine.importers.st_group_fixture import build_group_user


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_import_and_preview_a_group_chat_for_a_speaker(tmp_path: Path, capsys) -> None:
    build_group_user(tmp_path)
    db = str(tmp_path / "lib.db")
    code, out, err = _cli(capsys, "import", str(tmp_path / "data"), "--db", db, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    chat_id = next(r["id"] for r in report["added"] if r["key"] == "group chats/1717000000001.jsonl")
    assert report["skipped"] == []
    code, out, err = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--speaker", "Mira", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["messages"] == CASES["natural_swap_mira"]["messages"]
    # without --speaker: natural order's mention rule (activateNaturalOrder) picks Kael
    code, out, err = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["messages"] == CASES["natural_swap_kael"]["messages"]
    code, out, err = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--speaker", "Nobody")
    assert code != 0
    assert "--speaker" in err and "INVALID_SETTINGS" in err and "no member 'Nobody'" in err


def test_speaker_without_a_group_chat_is_refused(tmp_path: Path, capsys) -> None:
    code, _out, err = _cli(capsys, "preview", "--speaker", "Kael")
    assert code != 0 and "--speaker needs --chat-id of a group chat" in err


def test_import_again_brings_in_a_changed_group_chat_and_group(tmp_path: Path, capsys) -> None:
    """engine.st_sync: groups/ and group chats/ are scanned; a change in either re-reads the folder."""
    user = build_group_user(tmp_path)
    db = str(tmp_path / "lib.db")
    key = "group chats/1717000000001.jsonl"

    def run() -> dict:
        code, out, err = _cli(capsys, "import", str(user), "--db", db, "--format", "json")
        assert code == 0, err
        return json.loads(out)

    first = run()
    again = run()
    assert again["files_changed"] == [] and not again["changed"]
    chat = user / "group chats" / "1717000000001.jsonl"
    chat.write_text(chat.read_text("utf-8") + "\n" + json.dumps(
        {"name": "Mira", "is_user": False, "is_system": False, "send_date": "x", "mes": "Dawn, then.", "extra": {}}),
        encoding="utf-8")
    synced = run()
    assert synced["files_changed"] == [key]
    assert [r["key"] for r in synced["changed"]] == [key]
    group = user / "groups" / "1717000000000.json"
    data = json.loads(group.read_text("utf-8"))
    group.write_text(json.dumps({**data, "generation_mode": 1}), encoding="utf-8")
    synced = run()
    assert synced["files_changed"] == ["groups/1717000000000.json"]
    assert [r["key"] for r in synced["changed"]] == [key]
    chat_id = next(r["id"] for r in first["added"] if r["key"] == key)
    code, out, err = _cli(capsys, "preview", "--chat-id", chat_id, "--db", db, "--speaker", "Mira", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["messages"][2]["content"].startswith("Kael is a wandering swordsman")  # joined cards


def test_export_of_a_group_chat_says_the_group_is_not_written(tmp_path: Path, capsys) -> None:
    build_group_user(tmp_path)
    db = str(tmp_path / "lib.db")
    code, out, err = _cli(capsys, "import", str(tmp_path / "data"), "--db", db, "--format", "json")
    assert code == 0, err
    chat_id = next(r["id"] for r in json.loads(out)["added"] if r["key"].startswith("group chats/"))
    code, out, err = _cli(capsys, "export", chat_id, "--to", str(tmp_path / "out"), "--db", db, "--format", "json")
    assert code == 0, err
    assert "a group chat ('Harbor crew'): exported as a 1-on-1 chat of its first member" in out + err
