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


# ---------------------------------------------------------------------------- issue 31 item 8
@pytest.mark.parametrize("columns", [80, 100, 120, 160, 200])
def test_sillytavern_preview_and_report_fit_every_width_without_losing_letters(tmp_path, capsys, monkeypatch,
                                                                               columns):
    from engine.importers.st_folder import read_st_folder
    from engine.storage import open_store
    from tests.engine.importers.st_fixture import build_st_user

    db = tmp_path / "lib.db"
    store = open_store(f"sqlite:///{db}", seed=False)
    report = store.imports.st_folder(read_st_folder(build_st_user(tmp_path)))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    store.close()
    out = _run(capsys, monkeypatch, "preview", "--chat-id", chat_id, "--db", str(db), "--format", "table",
               columns=columns)
    _assert_fits(out, columns)
    words = " ".join(out.replace("│", " ").replace("┃", " ").split())
    # rich once laid the table out a few cells wider than the terminal and cropped each wrapped
    # line's end: "You are Kael" (no "."), "Alex is a yo" (no "ung")
    assert "Kael." in words and "young" in words
    out = _run(capsys, monkeypatch, "lorebook-report", "--chat-id", chat_id, "--db", str(db), "--format", "table",
               columns=columns)
    _assert_fits(out, columns)
    words = " ".join(out.replace("│", " ").replace("┃", " ").split())  # wrapped cells, read in order
    assert "none of its keys appears anywhere in the chat" in words  # the reason, whole
    assert "HeroLore" in words.replace("HeroLo re", "HeroLore")


def test_cli_errors_in_words(tmp_path, capsys) -> None:
    from engine.cli import build_parser

    code = cli_main(["preview", "--chat", str(tmp_path / "missing.json")])
    err = capsys.readouterr().err
    assert code == 2 and "file not found" in err and "Error" not in err  # no FileNotFoundError
    assert "--screenshot" in build_parser().format_help()
    chat = tmp_path / "c.json"
    chat.write_text(json.dumps([{"role": "system", "content": "rule " * 1200}, {"role": "user", "content": "hi"}]))
    code = cli_main(["preview", "--chat", str(chat), "--context-limit", "1500", "--format", "table"])
    out, err = capsys.readouterr()
    assert code == 3
    assert "the default reply reserve of 1,024 tokens: set --reply-reserve" in err
    assert "TOKEN_BUDGET_EXCEEDED" not in out and err.count("TOKEN_BUDGET_EXCEEDED") == 1  # once
    cli_main(["preview", "--chat", str(chat), "--model", "gpt4o", "--format", "json"])
    assert "did you mean 'gpt-4o'?" in capsys.readouterr().out
