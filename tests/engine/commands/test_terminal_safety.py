"""Issue 15 (1)(2): user text never drives the terminal, and one-line errors stay one line.

Before: an ESC sequence in a card name retitled and cleared the terminal when ``inspect``,
``import``, ``chats``, ``audit`` or ``preview`` printed it, and a newline inside a JSON key printed a
second, attacker-written ``loomscope: …`` line on stderr.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.cli import main as cli_main
from engine.terminal import markup_safe, visible, visible_text
from tests.engine.importers.helpers import V2_CARD, b64, png_bytes

ESC_NAME = "Mira\x1b]0;owned\x07\x1b[2J\x1b[H"
#: a raw control character (C0 except LF, DEL, C1), or a bidi override / isolate
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
FAKE_LINE = "loomscope: other.json: IMPORT_FAKE: all good"


def _run(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "400")
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _card(tmp_path: Path, name: str = ESC_NAME, fname: str = "card.json") -> Path:
    doc = json.loads(json.dumps(V2_CARD))
    doc["data"]["name"] = name
    doc["data"]["description"] = "desc \x1b[31mred\u202eevil"
    doc["data"]["tags"] = ["tag\x1b[5m"]
    doc["data"]["character_book"]["name"] = "Book\x1b[1m"
    doc["data"]["character_book"]["entries"][0]["comment"] = "\x1b[2Jentry"
    path = tmp_path / fname
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _assert_clean(text: str) -> None:
    assert not RAW_CONTROL.search(text), repr(RAW_CONTROL.search(text).group(0))


# ------------------------------------------------------------------------------ the helpers


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain text", "plain text"),
    ("a\nb", "a\\nb"),
    ("\x1b[2J", "\\x1b[2J"),
    ("\r\t\x00\x7f\x9b", "\\r\\t\\x00\\x7f\\x9b"),
    ("left\u202eright\u2066x\u2069", "left\\u202eright\\u2066x\\u2069"),
    ("line\u2028sep", "line\\u2028sep"),
    ("emoji 👩\u200d💻 stays, é stays, 日本語 stays", "emoji 👩\u200d💻 stays, é stays, 日本語 stays"),
    ("C:\\path\\name", "C:\\path\\name"),
])
def test_visible_escapes_only_controls(raw: str, shown: str) -> None:
    assert visible(raw) == shown
    assert "\n" not in visible(raw)


def test_visible_text_keeps_lines_and_tabs() -> None:
    assert visible_text("one\n\ttwo\x1b[2J\r") == "one\n\ttwo\\x1b[2J\\r"
    assert markup_safe("[b]x\x1b") == "\\[b]x\\x1b"


# ------------------------------------------------------------------------------ one-line errors


def test_newline_in_a_json_key_cannot_forge_a_second_error_line(tmp_path: Path, capsys, monkeypatch) -> None:
    book = tmp_path / "book.json"
    book.write_text(json.dumps({"entries": {f"a\r\n{FAKE_LINE}\n": {"uid": 1, "key": 5}}}))
    for argv in (("inspect", str(book)), ("lint-lorebook", str(book)),
                 ("import", str(book), "--db", str(tmp_path / "lib.sqlite3")),
                 ("preview", "--lorebook", str(book))):
        code, _out, err = _run(capsys, monkeypatch, *argv)
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and err.startswith("loomscope: ") and "IMPORT_WRONG_TYPE" in err, (argv, err)
        _assert_clean(err)


def test_newline_and_escape_in_a_file_name_stay_on_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    missing = tmp_path / f"gone\n{FAKE_LINE}\x1b[2J.json"
    code, _out, err = _run(capsys, monkeypatch, "inspect", str(missing))
    assert code == 2 and err.count("\n") == 1 and "IMPORT_FILE_NOT_FOUND" in err
    assert "\\n" + FAKE_LINE in err and "\\x1b[2J" in err
    _assert_clean(err)


def test_usage_error_with_control_characters_is_one_line(capsys, monkeypatch) -> None:
    with pytest.raises(SystemExit):
        _run(capsys, monkeypatch, "inspect", "x.json", "--format", f"tab\n{FAKE_LINE}")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "USAGE" in err
    _assert_clean(err)


def test_unknown_chat_id_with_escapes_is_one_clean_line(tmp_path: Path, capsys, monkeypatch) -> None:
    code, _out, err = _run(capsys, monkeypatch, "audit", f"x\x1b]0;t\x07\n{FAKE_LINE}",
                           "--db", str(tmp_path / "lib.sqlite3"))
    assert code == 2 and err.count("\n") == 1 and "CHAT_NOT_FOUND" in err
    _assert_clean(err)


def test_import_warnings_are_one_clean_line_each(tmp_path: Path, capsys, monkeypatch) -> None:
    book = tmp_path / f"book\x1b[2J\n{FAKE_LINE}.json"
    book.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": "fog, mist", "comment": 7,
                                                  "content": "x"}}}))
    code, _out, err = _run(capsys, monkeypatch, "import", str(book), "--db", str(tmp_path / "lib.sqlite3"),
                           "--format", "json")
    assert code == 0, err
    lines = err.splitlines()
    assert lines and all(ln.startswith("loomscope: ") and ": warning: " in ln for ln in lines)
    assert not any(ln.startswith("loomscope: other.json") for ln in lines)
    _assert_clean(err)


# ------------------------------------------------------------------------------ tables


def test_inspect_table_makes_escapes_visible(tmp_path: Path, capsys, monkeypatch) -> None:
    card = _card(tmp_path, fname="card\x1b[2J.json")
    code, out, err = _run(capsys, monkeypatch, "inspect", str(card))
    assert code == 0, err
    _assert_clean(out)
    assert "Mira\\x1b]0;owned\\x07\\x1b[2J\\x1b[H" in out and "card\\x1b[2J.json" in out
    assert "tag\\x1b[5m" in out and "Book\\x1b[1m" in out


def test_inspect_of_a_png_card_makes_escapes_visible(tmp_path: Path, capsys, monkeypatch) -> None:
    doc = json.loads(json.dumps(V2_CARD))
    doc["data"]["name"] = ESC_NAME
    card = tmp_path / "card.png"
    card.write_bytes(png_bytes([("tEXt", "chara", b64(doc))]))
    code, out, err = _run(capsys, monkeypatch, "inspect", str(card))
    assert code == 0, err
    _assert_clean(out)
    assert "Mira\\x1b]0;owned" in out


def test_import_chats_audit_and_preview_tables_make_escapes_visible(tmp_path: Path, capsys, monkeypatch) -> None:
    from engine.schema import TokenizerInfo
    from engine.schema.audit import PromptContextAudit
    from engine.storage import open_store

    card = _card(tmp_path, fname="card\x1b]0;x\x07.json")
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(x) for x in [
        {"user_name": "Wren\x1b[8m", "character_name": ESC_NAME},
        {"name": ESC_NAME, "is_user": False, "mes": "Hello \x1b[2J\x1b[H there", "send_date": "2024-01-01"},
        {"name": "Wren", "is_user": True, "mes": "hi \x9b31m\u202ereversed", "send_date": "2024-01-01"},
    ]))
    db = tmp_path / "lib.sqlite3"
    code, out, err = _run(capsys, monkeypatch, "import", str(card), str(chat), "--db", str(db), "--format", "table")
    assert code == 0, err
    _assert_clean(out + err)
    assert "Mira\\x1b]0;owned" in out and "card\\x1b]0;x\\x07.json" in out

    with open_store(str(db), seed=False) as store:
        chat_id = next(c.id for c in store.chats.summaries())
        store.chats.rename(chat_id, "title\x1b[2J\r\nforged")
        store.audits.put(PromptContextAudit(
            generation_id="g1", chat_id=chat_id, provider="http://127.0.0.1:1/v1\x1b[2J", model="m\x1b[5m",
            status="failed", error_code="PROVIDER_BAD_RESPONSE", error_message="odd \x1b[2J answer\nsecond",
            created_at=datetime.now(UTC), finished_at=datetime.now(UTC),
            context_limit=100, reply_reserve=10, prompt_tokens=5, strategy="manual",
            tokenizer=TokenizerInfo(profile="o200k_base", approximate=False),
            warnings=["macro in \x1b[2J text"], interceptor_diagnostics=["diag \x1b[31m"]))
    code, out, err = _run(capsys, monkeypatch, "chats", "--db", str(db), "--format", "table")
    assert code == 0, err
    _assert_clean(out)
    assert "title\\x1b[2J\\r\\nforged" in out and "Mira\\x1b]0;owned" in out
    code, out, err = _run(capsys, monkeypatch, "audit", chat_id, "--db", str(db), "--format", "table")
    assert code == 0, err
    _assert_clean(out)
    assert "odd \\x1b[2J answer\\nsecond" in out and "m\\x1b[5m" in out and "diag \\x1b[31m" in out

    code, out, err = _run(capsys, monkeypatch, "preview", "--card", str(card), "--chat", str(chat),
                          "--format", "table", "--system", "sys \x1b[2J prompt")
    assert code == 0, err
    _assert_clean(out + err)
    assert "\\x1b[2J" in out


def test_lint_table_makes_escapes_visible(tmp_path: Path, capsys, monkeypatch) -> None:
    book = tmp_path / "book.json"
    book.write_text(json.dumps({"name": "Book\x1b]0;t\x07", "entries": {"0": {
        "uid": 0, "key": [], "comment": "never\x1b[2J", "content": "x", "constant": False}}}))
    code, out, err = _run(capsys, monkeypatch, "lint-lorebook", str(book), "--format", "table")
    assert code == 0, err
    _assert_clean(out)
    assert "Book\\x1b]0;t\\x07" in out and "never\\x1b[2J" in out


def test_json_output_escapes_controls_as_json(tmp_path: Path, capsys, monkeypatch) -> None:
    card = _card(tmp_path)
    code, out, err = _run(capsys, monkeypatch, "inspect", str(card), "--format", "json")
    assert code == 0, err
    assert "\x1b" not in out and json.loads(out)["name"] == ESC_NAME
