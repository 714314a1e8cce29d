"""Issue 15 (4): storage faults are clean ``STORAGE_ERROR``s, and opening a library is careful.

Before: malformed JSON in a row was a traceback in the CLI and a 500 on every API route; 2 of 8
three-way races opening a brand-new library failed with "database is locked"; a read-only
library could not be read (the open switched it to WAL and migrated); "disk full" was a generic
message; a damaged file was written into; another application's SQLite file was switched to WAL.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import event

from engine.cli import main as cli_main
from engine.errors import StorageError
from engine.schema import Chat, ChatMessage, Lorebook, LorebookEntry
from engine.storage import database as dbmod
from engine.storage import open_store

ROOT = Path(__file__).resolve().parents[3]


def _library(path: Path) -> str:
    """A small library (character, book, chat with audit) at ``path``; returns the chat id."""
    from tests.engine.storage.samples import audit

    with open_store(str(path), seed=False) as store:
        book_id = store.lorebooks.add(Lorebook(name="B", entries=[LorebookEntry(uid=1, keys=["k"], content="c")]))
        chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="t",
                                 lorebook_ids=[book_id])
        store.audits.put(audit(chat_id, "g1"))
    return chat_id


# ------------------------------------------------------------------------------ malformed JSON rows


@pytest.mark.parametrize(("table", "column", "reader"), [
    ("chats", "settings", lambda s, cid: s.chats.get(cid)),
    ("messages", "extra", lambda s, cid: s.chats.get(cid)),
    ("lorebook_entries", "data", lambda s, cid: s.chats.build_request(cid)),
    ("audits", "data", lambda s, cid: s.audits.get(cid)),
])
def test_malformed_json_row_is_a_storage_error_naming_the_table(tmp_path: Path, capsys, table, column,
                                                                reader) -> None:
    db = tmp_path / "lib.sqlite3"
    chat_id = _library(db)
    con = sqlite3.connect(db)
    with con:
        con.execute(f'UPDATE "{table}" SET "{column}" = ?', ('{"broken": [1, 2',))
    con.close()
    with open_store(str(db), seed=False) as store, pytest.raises(StorageError) as err:
        reader(store, chat_id)
    e = err.value
    assert e.code == "STORAGE_ERROR" and table in e.message and e.place.startswith(f"{table}.{column}")
    if table in ("chats", "audits"):  # `loomscope audit` reads both
        assert cli_main(["audit", chat_id, "--db", str(db), "--format", "json"]) == 2
        _out, stderr = capsys.readouterr()
        assert "STORAGE_ERROR" in stderr and table in stderr and stderr.count("\n") == 1
        assert "Traceback" not in stderr


def test_malformed_json_row_is_503_not_500_on_the_api(tmp_path: Path) -> None:
    import httpx

    from engine.api import API_PREFIX, make_server
    from tests.engine.api.conftest import start_server, stop_server

    db = tmp_path / "lib.sqlite3"
    chat_id = _library(db)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE chats SET data = 'not json at all'")
    con.close()
    store = open_store(str(db), seed=False)
    server = make_server(store, port=0, log_level="critical")
    thread = start_server(server)
    try:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as client:
            for method, path, body in [("GET", f"{API_PREFIX}/chats/{chat_id}/context-audit", None),
                                       ("POST", f"{API_PREFIX}/context-preview", {"chat_id": chat_id})]:
                resp = client.request(method, path, json=body)
                assert resp.status_code == 503, (path, resp.text)
                err = resp.json()["error"]
                assert err["code"] == "STORAGE_ERROR" and "chats" in err["message"]
    finally:
        stop_server(server, thread)
        store.close()


# ------------------------------------------------------------------------------ first-open races

_RACER = textwrap.dedent("""
    import sys, time
    url, start = sys.argv[1], float(sys.argv[2])
    from engine.storage import open_store
    while time.time() < start:
        time.sleep(0.001)
    with open_store(url, seed=False) as store:
        store.chats.summaries()
    print("ok")
""")


def test_several_processes_opening_a_new_library_at_once_all_succeed(db_url: str, tmp_path: Path) -> None:
    """8 races of 3 processes each, all on brand-new libraries (SQLite files; PostgreSQL: one database)."""
    rounds = 8 if db_url.startswith("sqlite") else 1
    urls = [f"sqlite:///{tmp_path / f'race{i}.sqlite3'}" for i in range(rounds)] if db_url.startswith("sqlite") \
        else [db_url]
    start = time.time() + 4.0  # every process has imported the engine by then
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, url, str(start)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
             for url in urls for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    failures = [err.strip().splitlines()[-1] for (out, err), p in zip(results, procs) if p.returncode != 0]
    assert failures == [], failures
    for url in urls:
        with open_store(url, seed=False) as store:
            assert store.chats.summaries() == []


# ------------------------------------------------------------------------------ read-only library

_READER = textwrap.dedent("""
    import json, sys
    from engine.errors import StorageError
    from engine.storage import open_store
    from engine.schema import Chat
    out = {}
    with open_store(sys.argv[1], seed=False) as store:
        out["titles"] = [c.title for c in store.chats.summaries()]
        try:
            store.chats.add(Chat(), title="new")
        except StorageError as exc:
            out["write"] = [exc.code, exc.message]
    print(json.dumps(out))
""")


_NO_OVERRIDE = "-dac_override,-dac_read_search,-fowner"


def _run_as_unprivileged(argv: list[str]) -> subprocess.CompletedProcess:
    """Run ``argv`` so that file permissions apply: as root (CI), without the capabilities that
    bypass them (util-linux ``setpriv``); otherwise as ourselves."""
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
        argv = ["setpriv", f"--inh-caps={_NO_OVERRIDE}", f"--bounding-set={_NO_OVERRIDE}", *argv]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_read_only_library_reads_and_says_read_only_on_write(tmp_path_factory) -> None:
    folder = Path(tmp_path_factory.mktemp("ro", numbered=True))
    db = folder / "lib.sqlite3"
    with open_store(str(db), seed=False) as store:
        store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="kept")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    os.chmod(db, 0o444)
    os.chmod(folder, 0o555)
    try:
        proc = _run_as_unprivileged([sys.executable, "-c", _READER, str(db)])
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["titles"] == ["kept"]
        assert doc["write"][0] == "STORAGE_ERROR" and "read-only" in doc["write"][1]
        cli = _run_as_unprivileged([sys.executable, "-m", "engine.cli", "chats", "--db", str(db), "--format", "json"])
        assert cli.returncode == 0 and [c["title"] for c in json.loads(cli.stdout)] == ["kept"], cli.stderr
    finally:
        os.chmod(folder, 0o755)
        os.chmod(db, 0o644)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# ------------------------------------------------------------------------------ disk full


def test_disk_full_says_so_and_keeps_the_library(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite3"
    store = open_store(str(db), seed=False)
    try:
        chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]), title="t")
        pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]

        # SQLite's own "database or disk is full" (SQLITE_FULL): cap the file at its current size
        @event.listens_for(store.database.engine, "connect")
        def _cap(dbapi_conn, _record):
            dbapi_conn.execute(f"PRAGMA max_page_count={pages}")

        store.database.engine.dispose()
        with pytest.raises(StorageError) as err:
            store.chats.add(Chat(messages=[ChatMessage(role="user", content="x" * 20_000) for _ in range(50)]))
        assert err.value.code == "STORAGE_ERROR" and err.value.message.startswith("disk full")
        assert [c.id for c in store.chats.summaries()] == [chat_id]
    finally:
        store.close()


# ------------------------------------------------------------------------------ damaged file


def _damage(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page = 4096
    middle = (len(data) // page) // 2
    data[middle * page: middle * page + 100] = b"\xff" * 100
    db.write_bytes(bytes(data))


def test_damaged_library_is_refused_before_any_write(tmp_path: Path, capsys) -> None:
    db = tmp_path / "lib.sqlite3"
    with open_store(str(db), seed=False) as store:
        for i in range(30):
            store.chats.add(Chat(messages=[ChatMessage(role="user", content="x" * 500)] * 20), title=f"c{i}")
    _damage(db)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(StorageError) as err:
        open_store(str(db), seed=False)
    assert err.value.code == "STORAGE_ERROR" and "damaged" in err.value.message
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hello"}]))
    assert cli_main(["import", str(chat), "--db", str(db), "--format", "json"]) == 2
    err_text = capsys.readouterr().err
    assert "damaged" in err_text and err_text.count("\n") == 1
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "chat.json"}
    assert after["lib.sqlite3"] == before["lib.sqlite3"]
    assert after.get("lib.sqlite3-wal", b"") == before.get("lib.sqlite3-wal", b"")  # no page written


def test_quick_check_runs_once_per_file_identity(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "lib.sqlite3"
    _library(db)  # created, then closed
    calls: list[str] = []
    real_connect = sqlite3.connect

    def counting_connect(*args, **kwargs):
        if kwargs.get("uri") and "mode=ro" in str(args[0]):
            calls.append(str(args[0]))
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting_connect)
    dbmod._CHECKED.clear()
    for _ in range(3):
        with open_store(str(db), seed=False) as store:
            store.chats.summaries()
    assert len(calls) == 1  # unchanged file: checked once
    with open_store(str(db), seed=False) as store:
        store.chats.add(Chat(), title="changes the file")
    with open_store(str(db), seed=False) as store:
        store.chats.summaries()
    assert len(calls) == 2  # new content: checked again


# ------------------------------------------------------------------------------ another app's file


@pytest.mark.parametrize("tables", [["notes"], ["chats", "messages"], ["alembic_version", "users"]])
def test_another_applications_sqlite_file_is_refused_untouched(tmp_path: Path, tables) -> None:
    db = tmp_path / "notes.db"
    con = sqlite3.connect(db)
    with con:
        for t in tables:
            con.execute(f'CREATE TABLE "{t}" (id INTEGER PRIMARY KEY, body TEXT)')
            con.execute(f'INSERT INTO "{t}" (body) VALUES (?)', ("keep me",))
    con.close()
    before = db.read_bytes()
    with pytest.raises(StorageError) as err:
        open_store(str(db), seed=False)
    assert err.value.code == "STORAGE_ERROR" and "another application" in err.value.message
    assert tables[-1] in err.value.message
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]  # no -wal/-shm/journal left
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_not_a_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite3"
    db.write_bytes(b"this is a text file, not SQLite" * 200)
    with pytest.raises(StorageError) as err:
        open_store(str(db), seed=False)
    assert "not a SQLite database" in err.value.message
    assert db.read_bytes() == b"this is a text file, not SQLite" * 200


def test_an_up_to_date_library_opens_without_writing(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite3"
    _library(db)
    stamp = db.stat().st_mtime_ns, db.stat().st_size
    time.sleep(0.01)
    with open_store(str(db), seed=False) as store:
        store.chats.summaries()
    assert (db.stat().st_mtime_ns, db.stat().st_size) == stamp
