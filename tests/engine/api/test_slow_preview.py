"""A slow preview (a catastrophic regex key given seconds to run) does not block the server.

Runs a real ``loomscope serve`` subprocess: previews run in the server's threadpool and regex
keys match with the GIL released (``regex`` ``concurrent=True``), so ``GET /api/v2/health``
answers while the preview is still running.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[3]


def test_health_answers_during_a_slow_preview(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LOOMSCOPE_DB", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "--port", "0", "--db", f"sqlite:///{tmp_path / 'l.sqlite3'}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert line.startswith("loomscope: serving http://127.0.0.1:"), line
        base = line.split()[2]
        body = {
            "chat": {"messages": [{"role": "user", "content": "a" * 40 + "!"}]},
            "lorebooks": [{"name": "slow", "entries": [{"uid": 0, "keys": ["/(a|aa)+$/"], "content": "x"}]}],
            "settings": {"world_info": {"regex_timeout_ms": 2500, "regex_total_timeout_ms": 2500}},
        }
        with httpx.Client(trust_env=False, timeout=60) as client:
            for _ in range(200):
                try:
                    client.get(f"{base}/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            result: dict[str, object] = {}

            def slow() -> None:
                started = time.monotonic()
                resp = client.post(f"{base}/context-preview", json=body)
                result["status"] = resp.status_code
                result["json"] = resp.json()
                result["seconds"] = time.monotonic() - started

            worker = threading.Thread(target=slow)
            worker.start()
            time.sleep(0.5)  # the preview is now inside its 2.5 s regex search
            health_times = []
            with httpx.Client(trust_env=False, timeout=10) as other:
                for _ in range(3):
                    started = time.monotonic()
                    resp = other.get(f"{base}/health")
                    health_times.append(time.monotonic() - started)
                    assert resp.status_code == 200 and resp.json()["status"] == "ok"
                    assert worker.is_alive()  # answered while the preview still runs
            worker.join(60)
        assert max(health_times) < 1.0, health_times
        assert result["status"] == 200 and float(result["seconds"]) >= 2.0  # type: ignore[arg-type]
        trace = result["json"]["lorebook_trace"]  # type: ignore[index]
        assert [t["code"] for t in trace] == ["LOREBOOK_REGEX_TIMEOUT"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
