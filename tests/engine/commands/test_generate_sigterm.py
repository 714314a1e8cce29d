"""Issue 15 (7): SIGTERM during ``loomscope generate`` behaves like Ctrl+C.

Before: SIGTERM killed the process at once: the audit stayed ``pending`` (or was never
stored) and the exit status was -15. Now the typed message is kept, the audit closes
``cancelled`` / ``CANCELLED`` and the exit status is 143 (128 + SIGTERM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.schema import Chat, ChatMessage, ContextSettings
from engine.storage import open_store
from tests.fake_provider import FakeProviderServer

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_sigterm_cancels_keeps_the_message_and_exits_143(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite3"
    with open_store(str(db), seed=False) as store:
        chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="Hello")]),
                                 settings=ContextSettings(context_limit=4096, reply_reserve=100))
    with FakeProviderServer("stall", stall_s=30) as server:
        env = {**os.environ, "LOOMSCOPE_NO_KEYRING": "1", "PYTHONPATH": str(ROOT)}
        env.pop("LOOMSCOPE_API_KEY", None)
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "generate", chat_id, "--db", str(db),
                                 "--base-url", server.base_url, "--message", "typed before the signal",
                                 "--format", "json"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests, "the CLI never reached the server"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, (proc.returncode, err)
    assert "CANCELLED" in err and err.count("\n") == 1
    with open_store(str(db), seed=False) as store:
        audit = store.audits.get(chat_id)
        assert audit is not None and (audit.status, audit.error_code) == ("cancelled", "CANCELLED")
        assert audit.finished_at is not None
        messages = store.chats.get(chat_id).chat.messages
        assert [m.content for m in messages] == ["Hello", "typed before the signal"]
