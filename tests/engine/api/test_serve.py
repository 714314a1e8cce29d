"""``loomscope serve``: loopback only unless --allow-remote, clean bind errors, a real run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engine.api import API_PREFIX, DEFAULT_HOST, DEFAULT_PORT, is_loopback, make_server
from engine.cli import main as cli_main
from engine.commands import serve as serve_cmd
from engine.errors import LoomscopeError
from engine.storage import open_store

from .conftest import start_server, stop_server

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "10.0.0.1", "example.com",
                                  "localhost.example.com", ""])
def test_non_loopback_hosts(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.com"])
def test_serve_refuses_remote_host_without_allow_remote(host: str, tmp_path: Path, capsys) -> None:
    db = tmp_path / "lib.sqlite3"
    assert cli_main(["serve", "--host", host, "--port", "0", "--db", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loomscope: --host: REMOTE_HOST_REFUSED: ") and err.count("\n") == 1
    assert not db.exists()  # refused before the library was opened


def test_make_server_refuses_remote_host(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False) as store:
        with pytest.raises(LoomscopeError) as info:
            make_server(store, host="0.0.0.0", port=0)
    assert info.value.code == "REMOTE_HOST_REFUSED"


def test_port_in_use_is_address_unavailable(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False) as store:
            with pytest.raises(LoomscopeError) as info:
                make_server(store, host="127.0.0.1", port=taken.getsockname()[1])
        assert info.value.code == "ADDRESS_UNAVAILABLE" and info.value.file == "--port"
    finally:
        taken.close()


def test_allow_remote_serves_and_accepts_any_host_header(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False) as store:
        server = make_server(store, host="0.0.0.0", port=0, allow_remote=True)
        thread = start_server(server)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", trust_env=False) as client:
                resp = client.get(f"{API_PREFIX}/health", headers={"host": "laptop.lan"})
                assert resp.status_code == 200 and resp.json()["chats"] == 0
        finally:
            stop_server(server, thread)


def test_cli_defaults_match_the_server_module() -> None:
    assert (serve_cmd.DEFAULT_HOST, serve_cmd.DEFAULT_PORT) == (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 8765)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery to a child differs on Windows")
def test_loomscope_serve_runs_answers_and_stops_on_sigint(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LOOMSCOPE_DB", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "--port", "0", "--db", f"sqlite:///{db}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # "loomscope: serving http://127.0.0.1:PORT/api/v2 (...)"
        assert line.startswith("loomscope: serving http://127.0.0.1:"), line + proc.stderr.read()
        base = line.split()[2]
        assert base.endswith(API_PREFIX)
        docs_line = proc.stderr.readline()  # "loomscope: interactive API docs: http://127.0.0.1:PORT/api/v2/docs"
        assert docs_line.strip() == f"loomscope: interactive API docs: {base}/docs", docs_line
        with httpx.Client(trust_env=False, timeout=10) as client:
            for _ in range(100):  # the socket is bound before the line is printed; uvicorn starts next
                try:
                    resp = client.get(f"{base}/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            assert resp.status_code == 200 and resp.json()["status"] == "ok"
            assert client.get(f"{base}/chats").json() == []
            # issue 30: the docs are served (Swagger UI from the installed package, no CDN) and / links to them
            docs = client.get(f"{base}/docs")
            assert docs.status_code == 200 and "swagger-ui" in docs.text and "cdn" not in docs.text.lower()
            assert client.get(f"{base}/docs/static/swagger-ui-bundle.js").status_code == 200
            home = client.get(base.removesuffix(API_PREFIX) + "/")
            assert home.status_code == 200 and f"href='{API_PREFIX}/docs'" in home.text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
