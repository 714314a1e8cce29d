"""``loomscope lorebook-report``: files or a library chat; table, JSON and CSV; bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.storage import open_store

ROOT = Path(__file__).resolve().parents[3]
SERAPHINA = "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["lorebook-report", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_on_the_seraphina_chat(shared_data: Path, capsys) -> None:
    code, out, err = _run(capsys, "--chat", str(shared_data / "chats" / SERAPHINA), "--card",
                          str(shared_data / "cards" / "default_Seraphina.png"), "--lorebook",
                          str(shared_data / "lorebooks" / "Eldoria.json"), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["rules"] == "sillytavern" and doc["messages"] == 3 and len(doc["turns"]) == 2
    # the card's book is Eldoria again: it is reported once
    assert [b["book"] for b in doc["books"]] == ["Eldoria"]
    assert {e["uid"]: e["turns_fired"] for e in doc["entries"]} == {0: 2, 1: 2, 2: 2, 3: 2}


def test_csv_and_table_on_the_airline_chat(shared_data: Path, capsys) -> None:
    args = ("--chat", str(shared_data / "chats" / "airline-longest-task.json"), "--lorebook",
            str(ROOT / "docs" / "examples" / "airline-policy-lorebook.json"))
    code, out, _ = _run(capsys, *args, "--format", "csv", "--rules", "loomscope", "--scan-depth", "4")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 10 and {r["turns"] for r in rows} == {"31"}
    code, out, _ = _run(capsys, *args, "--format", "table")
    assert code == 0 and "31 turns" in out and "tokens per turn:" in out and "Pets" in out


def test_library_chat(tmp_path: Path, capsys) -> None:
    db = f"sqlite:///{tmp_path / 'lib.sqlite3'}"
    with open_store(db, seed=True) as store:
        chat_id = store.chats.summaries()[0].id
    code, out, err = _run(capsys, "--chat-id", chat_id, "--db", db, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["turns"] and doc["entries"]


def test_bad_input(tmp_path: Path, capsys) -> None:
    code, _, err = _run(capsys, "--chat", str(tmp_path / "missing.json"))
    assert code == 2 and err.startswith("loomscope: ") and err.count("\n") == 1
    code, _, err = _run(capsys, "--chat-id", "nope", "--db", f"sqlite:///{tmp_path / 'l.sqlite3'}")
    assert code == 2 and "CHAT_NOT_FOUND" in err
    with pytest.raises(SystemExit) as info:
        main(["lorebook-report", "--chat", str(tmp_path / "x.json"), "--chat-id", "y"])
    assert info.value.code == 2 and "USAGE" in capsys.readouterr().err
    (tmp_path / "c.json").write_text('[{"role": "user", "content": "hi"}]')
    code, _, err = _run(capsys, "--chat", str(tmp_path / "c.json"), "--scan-depth", "-3")
    assert code == 2 and "--scan-depth" in err and "INVALID_SETTINGS" in err
