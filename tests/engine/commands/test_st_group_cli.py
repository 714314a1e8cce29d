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
