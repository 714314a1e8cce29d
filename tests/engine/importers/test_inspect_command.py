"""``loomscope inspect FILE`` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

from .helpers import V2_CARD, b64, png_bytes, st_chat_lines, write


def test_inspect_card_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path / "mira.png", png_bytes([("tEXt", "chara", b64(V2_CARD))]))
    assert main(["inspect", str(p)]) == 0
    out = capsys.readouterr().out
    assert "chara_card_v2" in out and "Mira" in out
    assert "entries" in out and "Coast" in out
    assert "greetings           2" in out and "tags                test" in out
    assert "warning: $.data.character_book.entries[1].keys: keys given as a comma-separated" in out


def test_inspect_chat_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path / "c.jsonl", "\n".join(json.dumps(x) for x in st_chat_lines()))
    assert main(["inspect", "--format", "json", str(p)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "chat" and report["spec"] == "sillytavern_jsonl"
    assert (report["messages"], report["hidden"], report["swipes"]) == (5, 1, 2)
    assert (report["user_name"], report["character_name"]) == ("Ana", "Mira")
    assert report["entries"] is None


def test_inspect_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path / "bad.json", '{"entries": {"0": {"key": [}}}')
    assert main(["inspect", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"loomscope: {p}: IMPORT_INVALID_JSON: invalid JSON: Expecting value (line 1, column 28)"


def test_inspect_several_files_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "w.json", {"entries": {"0": {"uid": 0, "key": ["a"], "constant": True}}})
    bad = write(tmp_path / "empty.json", b"")
    assert main(["inspect", "--format", "json", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    reports = json.loads(captured.out)
    assert len(reports) == 1 and reports[0]["entries"] == 1 and reports[0]["constant_entries"] == 1
    assert "IMPORT_EMPTY_FILE" in captured.err


def test_inspect_real_files(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [shared_data / "lorebooks/GI-Core.json", shared_data / "chats/test_case.json"]
    assert main(["inspect", "--format", "json", *map(str, files)]) == 0
    gi, tc = json.loads(capsys.readouterr().out)
    assert (gi["kind"], gi["entries"], gi["enabled_entries"]) == ("lorebook", 256, 253)
    assert (tc["messages"], tc["tool_calls"], tc["tools"]) == (21, 6, 3)
