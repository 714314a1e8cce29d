"""Terminal tables fit the terminal (issue 16 item 6): at ``COLUMNS=80`` no line of ``preview``,
``chats``, ``import`` or ``lint-lorebook`` is wider than 80 cells, so no row spills onto a second
terminal line; ids stay whole; lint names entries by title; lint and preview share a default limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.cells import cell_len

from engine.cli import main as cli_main

WIDTH = 80


def _run(capsys, monkeypatch, *argv: str, columns: int = WIDTH) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _assert_fits(out: str, width: int = WIDTH) -> None:
    wide = [(cell_len(line), line) for line in out.splitlines() if cell_len(line) > width]
    assert not wide, wide[:3]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A long chat with tool calls, a lorebook with titled entries sharing a key, and a card."""
    msgs = [{"role": "system", "content": "You are the night archivist of a harbour city. " * 3}]
    for i in range(40):
        if i % 9 == 4:
            cid = f"call_{i}"
            msgs.append({"role": "assistant", "tool_calls": [{"id": cid, "type": "function", "function": {
                "name": "lookup_the_harbour_register_entry", "arguments": json.dumps({"query": "lanterns " * 5})}}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "content": "Register: " + "ship arrived; " * 30})
            continue
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append({"role": role, "content": f"Message {i}: the courier counts lanterns along the quay. " * (1 + i % 5)})
    chat = tmp_path / "a chat with a rather long file name for the harbour story.json"
    chat.write_text(json.dumps(msgs))
    book = tmp_path / "Harbour world.json"
    entries = {str(i): {"uid": i, "key": ["lantern", f"pier {i}"], "keysecondary": [], "comment": title,
                        "content": "The lanterns of the harbour are lit at dusk. " * 8, "order": 100,
                        "position": 0, "disable": False, "constant": False, "selective": False}
               for i, title in enumerate(["Lanterns of the quay", "The harbour master", "Pier nine"])}
    book.write_text(json.dumps({"entries": entries}))
    card = tmp_path / "Marisol Quill, night archivist of the harbour.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                                "data": {"name": "Marisol Quill, night archivist", "description": "An archivist."}}))
    return {"chat": chat, "book": book, "card": card}


def test_preview_table_fits_80_columns_and_shows_specific_reasons(files, capsys, monkeypatch):
    out = _run(capsys, monkeypatch, "preview", "--chat", str(files["chat"]), "--lorebook", str(files["book"]),
               "--card", str(files["card"]), "--context-limit", "2500", "--strategy", "truncate",
               "--format", "table")
    _assert_fits(out)
    assert "HISTORY_OLDEST_FIRST" in out  # key columns are never cut
    assert "free" in out  # the figures of the specific reason ("msg 37: 180 > 12 free")
    # every block has its row: its position starts a line
    positions = [line.split()[0] for line in out.splitlines() if line.strip() and line.split()[0].isdigit()]
    assert len(positions) >= 40


def test_preview_json_carries_the_specific_reason(files, capsys, monkeypatch):
    out = _run(capsys, monkeypatch, "preview", "--chat", str(files["chat"]), "--context-limit", "2500",
               "--strategy", "truncate", "--format", "json")
    blocks = json.loads(out)["blocks"]
    contiguous = [b for b in blocks if (b.get("reason_data") or {}).get("blocked_by_tokens")]
    assert contiguous and all("contiguous" in b["reason_detail"] for b in contiguous)
    assert all(b["fit_window"] is not None for b in blocks if b["message_index"] is not None)


def test_chats_and_import_tables_fit_80_columns_with_whole_ids(files, tmp_path, capsys, monkeypatch):
    db = tmp_path / "lib.sqlite3"
    out = _run(capsys, monkeypatch, "import", str(files["card"]), str(files["chat"]), str(files["book"]),
               "--db", str(db), "--format", "table")
    _assert_fits(out)
    out = _run(capsys, monkeypatch, "chats", "--db", str(db), "--format", "table")
    _assert_fits(out)
    ids = json.loads(_run(capsys, monkeypatch, "chats", "--db", str(db), "--format", "json"))
    assert ids and all(any(c["id"] in line for line in out.splitlines()) for c in ids)


def test_lint_table_fits_80_columns_and_names_entries_by_title(files, capsys, monkeypatch):
    out = _run(capsys, monkeypatch, "lint-lorebook", str(files["book"]), "--format", "table")
    _assert_fits(out)
    entry_cells = " ".join(line[10:32] for line in out.splitlines())  # the entry column, wrapped in its cell
    assert "“Lanterns of" in entry_cells and "quay” #0" in entry_cells
    report = json.loads(_run(capsys, monkeypatch, "lint-lorebook", str(files["book"]), "--format", "json"))
    dup = [f for f in report["findings"] if f["code"] == "LINT_DUPLICATE_KEY" and f["uid"] == 0]
    assert dup and "“The harbour master” #1" in dup[0]["message"]


def test_lint_and_preview_default_to_the_same_context_limit(files, capsys, monkeypatch):
    pv = json.loads(_run(capsys, monkeypatch, "preview", "--chat", str(files["chat"]), "--format", "json"))
    report = json.loads(_run(capsys, monkeypatch, "lint-lorebook", str(files["book"]), "--format", "json"))
    # both default to gpt-4o's context window; the lint budget is 25 % of it
    assert report["budget"] == round(pv["context_limit"] * 25 / 100)


def test_wide_terminals_keep_the_full_table(files, capsys, monkeypatch):
    out = _run(capsys, monkeypatch, "preview", "--chat", str(files["chat"]), "--context-limit", "2500",
               "--format", "table", columns=200)
    _assert_fits(out, 200)
    assert "role" in out and "source" in out and "message:3" in out


@pytest.mark.parametrize("columns", [100, 110, 119])
def test_preview_table_fits_between_the_narrow_and_the_wide_layout(files, capsys, monkeypatch, columns):
    # the wide layout (role and source columns) needs about 105 cells at its minimum; below that the
    # narrow layout is used, so the right border is never cropped at 100-119 columns
    out = _run(capsys, monkeypatch, "preview", "--chat", str(files["chat"]), "--lorebook", str(files["book"]),
               "--card", str(files["card"]), "--context-limit", "2500", "--strategy", "truncate",
               "--format", "table", columns=columns)
    _assert_fits(out, columns)
    assert all(line.rstrip().endswith(("│", "┃", "┓", "┩", "┘", "┐", "┤", "┫", "┛", "╇", "┷", "─", "━"))
               for line in out.splitlines() if line.startswith(("│", "┃", "┏", "┡", "└")))
