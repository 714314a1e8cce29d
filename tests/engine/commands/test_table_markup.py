"""Table output shows user text as written: brackets in chats, names and files are not rich markup.

``[/b]`` used to crash the table with a traceback (rich MarkupError) and ``[sigh]`` vanished.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from engine.cli import main as cli_main

TRICKY = "*sighs* [sigh] then [/b] and [bold]loud"


def _run(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "400")
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_preview_table_shows_brackets_verbatim(tmp_path: Path, capsys, monkeypatch) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "system", "content": "Rules [/i]"},
                                {"role": "user", "content": TRICKY}]))
    code, out, err = _run(capsys, monkeypatch, "preview", "--chat", str(chat), "--format", "table",
                          "--system", "Main [/x] prompt")
    assert code == 0, err
    assert "[sigh]" in out and "[/b]" in out and "Traceback" not in err


def test_chats_import_and_audit_tables_show_brackets_verbatim(tmp_path: Path, capsys, monkeypatch) -> None:
    from engine.schema import TokenizerInfo
    from engine.schema.audit import PromptContextAudit
    from engine.storage import open_store

    chat = tmp_path / "[sigh] chat [-b].json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    db = tmp_path / "lib.sqlite3"
    code, out, err = _run(capsys, monkeypatch, "import", str(chat), "--db", str(db), "--format", "table")
    assert code == 0, err
    assert "[sigh] chat [-b]" in out
    with open_store(str(db), seed=False) as store:
        [summary] = store.chats.summaries()
        store.chats.rename(summary.id, TRICKY)
        store.audits.put(PromptContextAudit(
            generation_id="g1", chat_id=summary.id, provider="http://127.0.0.1:1/v1", model="m [/m]",
            status="failed", error_code="PROVIDER_BAD_RESPONSE", error_message="odd [/x] answer",
            created_at=datetime.now(UTC), finished_at=datetime.now(UTC),
            context_limit=100, reply_reserve=10, prompt_tokens=5, strategy="manual",
            tokenizer=TokenizerInfo(profile="o200k_base", approximate=False),
            warnings=["unknown macro {{x}} in [/b] text"]))
    code, out, err = _run(capsys, monkeypatch, "chats", "--db", str(db), "--format", "table")
    assert code == 0, err
    assert "[sigh]" in out and "[/b]" in out
    code, out, err = _run(capsys, monkeypatch, "audit", summary.id, "--db", str(db), "--format", "table")
    assert code == 0, err
    assert "m [/m]" in out and "odd [/x] answer" in out and "in [/b] text" in out
