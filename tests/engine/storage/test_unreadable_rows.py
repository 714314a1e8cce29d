"""Rows this version cannot read (hand edits, another version on a shared database) give
STORAGE_ERROR with a stable code, never a pydantic traceback."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.cli import main as cli_main
from engine.errors import StorageError
from engine.schema import Chat, ChatMessage, TokenizerInfo
from engine.schema.audit import PromptContextAudit
from engine.storage import open_store


def _library(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "lib.sqlite3"
    with open_store(str(db), seed=False) as store:
        chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="t")
        store.audits.put(PromptContextAudit(
            generation_id="g1", chat_id=chat_id, provider="http://127.0.0.1:1/v1", model="m",
            status="completed", created_at=datetime.now(UTC), context_limit=100, reply_reserve=10,
            prompt_tokens=5, strategy="manual", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False)))
    return db, chat_id


def test_unreadable_audit_is_a_storage_error(tmp_path: Path, capsys) -> None:
    db, chat_id = _library(tmp_path)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE audits SET data = ?", (json.dumps({"generation_id": "g1", "status": "exploded"}),))
    con.close()
    with open_store(str(db), seed=False) as store, pytest.raises(StorageError) as err:
        store.audits.get(chat_id)
    assert err.value.code == "STORAGE_ERROR"
    assert cli_main(["audit", chat_id, "--db", str(db), "--format", "json"]) == 2
    out, stderr = capsys.readouterr()
    assert out == "" and "STORAGE_ERROR" in stderr and stderr.count("\n") == 1


def test_unreadable_message_is_a_storage_error(tmp_path: Path) -> None:
    db, chat_id = _library(tmp_path)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE messages SET role = 'wizard'")
    con.close()
    with open_store(str(db), seed=False) as store:
        with pytest.raises(StorageError) as err:
            store.chats.get(chat_id)
        assert err.value.code == "STORAGE_ERROR" and "message" in err.value.message.lower()
        assert [c.id for c in store.chats.summaries()] == [chat_id]  # the rest of the library still reads
