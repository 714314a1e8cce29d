"""Crash safety: a writer killed with SIGKILL mid-replace leaves the previous audit intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.storage import Store, open_store

from .samples import audit, rich_chat

ROOT = Path(__file__).resolve().parents[3]

WRITER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from engine.storage import open_store
    from tests.engine.storage.samples import audit

    store = open_store({url!r}, seed=False)

    def hold() -> None:
        # inside put_audit's transaction: old row deleted, new row flushed, not committed
        print("FLUSHED", flush=True)
        time.sleep(120)

    store.audits.after_flush = hold
    store.audits.put(audit({chat_id!r}, "new-generation", status="failed", code="PROVIDER_SERVER_ERROR"))
    print("COMMITTED", flush=True)
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_sigkill_mid_replace_keeps_previous_audit(store: Store, db_url: str) -> None:
    chat_id = store.chats.add(rich_chat())
    previous = audit(chat_id, "old-generation")
    store.audits.put(previous)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=str(ROOT), url=db_url, chat_id=chat_id)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
    )
    try:
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert line == "FLUSHED", proc.stderr.read()  # type: ignore[union-attr]
        # while the writer holds its transaction, readers still see the old audit (WAL / MVCC)
        assert store.audits.get(chat_id).generation_id == "old-generation"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # a fresh process-level view of the database: the old audit is intact and readable
    reopened = open_store(db_url, seed=False)
    try:
        got = reopened.audits.get(chat_id)
        assert got is not None
        assert got.model_dump(mode="json") == store.audits.get(chat_id).model_dump(mode="json")
        assert got.generation_id == "old-generation" and got.status == "completed"
        assert [b.id for b in got.blocks] == ["b0", "b1"]
        # and the library is writable again (no stale lock)
        reopened.audits.put(audit(chat_id, "after-crash"))
        assert reopened.audits.get(chat_id).generation_id == "after-crash"
    finally:
        reopened.close()
