"""``loomscope characters`` / ``lorebooks`` / ``personas`` (issue 30): ids, sources and where each is used."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import ENGINE_COMMANDS, main
from tests.engine.importers.lived_in import LUMINE_CHAT, build_lived_in


def _json(capsys, *args: str):
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_lists_drive_export_and_preview_without_the_app(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "lib.db")
    _json(capsys, "import", str(build_lived_in(tmp_path)), "--db", db, "--format", "json")
    chars = {c["name"]: c for c in _json(capsys, "characters", "--db", db, "--format", "json")}
    assert set(chars) == {"Lumine", "Kael"} and chars["Lumine"]["source"] == "characters/Lumine.png"
    (usage,) = chars["Lumine"]["used_by"]
    assert usage["title"] == LUMINE_CHAT and usage["how"] == "character"
    books = {b["name"]: b for b in _json(capsys, "lorebooks", "--db", db, "--format", "json")}
    assert {u["how"] for u in books["GI-Core"]["used_by"]} == {"global"} and len(books["GI-Core"]["used_by"]) == 2
    assert [u["how"] for u in books["Mondstadt"]["used_by"]] == ["chat"]
    assert [u["how"] for u in books["Teyvat-Extra"]["used_by"]] == ["character"]
    assert books["Drafts"]["used_by"] == [] and books["Drafts"]["entries"] == 1
    personas = {p["name"]: p for p in _json(capsys, "personas", "--db", db, "--format", "json")}
    assert [u["how"] for u in personas["Paimon"]["used_by"]] == ["persona"]
    # the ids are what export and preview take
    chat_id = usage["chat_id"]
    assert _json(capsys, "preview", "--chat-id", chat_id, "--db", db, "--format", "json")["prompt_tokens"] > 0
    rows = _json(capsys, "export", books["Drafts"]["id"], "--to", str(tmp_path / "out"), "--db", db, "--format", "json")
    assert [r["kind"] for r in rows] == ["lorebook"]
    assert main(["lorebooks", "--db", db, "--format", "table"]) == 0
    assert "Drafts" in capsys.readouterr().out


def test_list_commands_are_engine_commands() -> None:
    assert {ENGINE_COMMANDS[c] for c in ("characters", "lorebooks", "personas")} == {"listing"}
