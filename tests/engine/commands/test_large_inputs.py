"""Issue 15 (8): large inputs stay bounded.

Before: a 50 MB message without whitespace took minutes and gigabytes to preview (one giant
BPE piece), and a 99,000-message import took ~45 s here with no sign of life on a terminal.
Now a message over ``MAX_MESSAGE_CHARS`` is refused with ``IMPORT_TOO_LARGE`` (CLI) or a 422
naming its JSON path (API); messages are stored in bulk batches, and ``import`` shows progress
when stderr is a terminal. Timings are in ``tests/benchmarks/bench_large_inputs.py``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

import engine.importers._io as io_mod
from engine.cli import main as cli_main
from engine.storage import open_store

ROOT = Path(__file__).resolve().parents[3]


def _chat_file(path: Path, text: str) -> Path:
    path.write_text(json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]))
    return path


def test_a_message_over_the_limit_is_refused_with_its_place(tmp_path: Path, capsys) -> None:
    big = _chat_file(tmp_path / "big.json", "x" * (io_mod.MAX_MESSAGE_CHARS + 1))
    for argv in (["preview", "--chat", str(big), "--format", "json"],
                 ["import", str(big), "--db", str(tmp_path / "lib.sqlite3"), "--format", "json"],
                 ["inspect", str(big)]):
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "IMPORT_TOO_LARGE" in err and "(message 1)" in err and err.count("\n") == 1, err
    with open_store(str(tmp_path / "lib.sqlite3"), seed=False) as store:
        assert store.chats.summaries() == []


def test_the_limit_applies_to_jsonl_lines_and_transcripts(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(io_mod, "MAX_MESSAGE_CHARS", 50)
    st = tmp_path / "chat.jsonl"
    st.write_text("\n".join(json.dumps(x) for x in [
        {"user_name": "A", "character_name": "B"},
        {"name": "A", "is_user": True, "mes": "short"},
        {"name": "B", "is_user": False, "mes": "y" * 51}]))
    assert cli_main(["inspect", str(st)]) == 2
    assert "(message 1)" in capsys.readouterr().err
    at_limit = _chat_file(tmp_path / "ok.json", "z" * 50)
    assert cli_main(["inspect", str(at_limit)]) == 0


def test_the_api_refuses_an_overlong_text_with_its_path(tmp_path: Path, monkeypatch) -> None:
    import httpx

    import engine.api.limits as limits
    from engine.api import API_PREFIX, make_server
    from tests.engine.api.conftest import start_server, stop_server

    monkeypatch.setattr(limits, "MAX_MESSAGE_CHARS", 1000)
    store = open_store(str(tmp_path / "lib.sqlite3"), seed=False)
    server = make_server(store, port=0, log_level="critical")
    thread = start_server(server)
    try:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as client:
            body = {"chat": {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "w" * 1001}]}}
            resp = client.post(f"{API_PREFIX}/context-preview", json=body)
            assert resp.status_code == 422
            assert resp.json()["error"]["place"] == "$.chat.messages[1].content"
            body["chat"]["messages"][1]["content"] = "w" * 1000
            assert client.post(f"{API_PREFIX}/context-preview", json=body).status_code == 200
    finally:
        stop_server(server, thread)
        store.close()


def _st_chat(path: Path, n: int) -> Path:
    lines = [{"user_name": "Ana", "character_name": "Mira", "chat_metadata": {}}]
    lines += [{"name": "Ana" if i % 2 else "Mira", "is_user": bool(i % 2), "mes": f"Message {i} about the fog.",
               "send_date": "2024-10-18T20:53:00Z", "extra": {}} for i in range(n)]
    path.write_text("\n".join(json.dumps(x) for x in lines))
    return path


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminal")
def test_import_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path: Path) -> None:
    chat = _st_chat(tmp_path / "long.jsonl", 12_000)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TERM": "xterm"}
    argv = [sys.executable, "-m", "engine.cli", "import", str(chat), "--db", str(tmp_path / "a.sqlite3"),
            "--format", "json"]
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            part = os.read(master, 65536)
        except OSError:
            break
        if not part:
            break
        seen += part
    out = proc.stdout.read()
    assert proc.wait(60) == 0
    os.close(master)
    text = seen.decode("utf-8", "replace")
    assert "reading long.jsonl" in text and "storing 12,000 messages of long.jsonl" in text
    assert "12000/12000" in text and "5000/12000" in text  # batches of 5,000
    [ref] = json.loads(out)
    with open_store(str(tmp_path / "a.sqlite3"), seed=False) as store:
        messages = store.chats.get(ref["id"]).chat.messages
        assert len(messages) == 12_000 and messages[11_999].content == "Message 11999 about the fog."
    piped = subprocess.run([*argv[:-4], "--db", str(tmp_path / "b.sqlite3"), "--format", "json"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == ""
