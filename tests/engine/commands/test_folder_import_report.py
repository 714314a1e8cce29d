"""``loomscope import DIR`` on big and damaged folders (issue 25 items 2, 4 and 6), through the real CLI.

A warning every chat repeats is printed once with its count; a sub-folder that cannot be listed makes the import
partial (exit 5, ``"partial": true``); links out of the folder are listed as skipped with their targets; with
stderr piped there is no progress display, on a terminal (a pty) there is one.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.commands.importing import EXIT_PARTIAL
from tests.engine.importers.st_fixture import build_st_user

REPO = Path(__file__).resolve().parents[3]


def _many_chats(tmp_path: Path, n: int) -> Path:
    user = build_st_user(tmp_path)
    text = (user / "chats" / "hero" / "voyage.jsonl").read_text()  # names the missing-from-settings world Voyage
    head, *rest = text.splitlines()
    meta = json.loads(head)
    meta["chat_metadata"]["world_info"] = "Missing World"
    for i in range(n):
        (user / "chats" / "hero" / f"chat {i:03d}.jsonl").write_text("\n".join([json.dumps(meta), *rest]))
    return user


def test_a_warning_repeated_per_file_is_printed_once_with_its_count(tmp_path: Path, capsys) -> None:
    _many_chats(tmp_path, 30)
    code = main(["import", str(tmp_path / "data"), "--db", str(tmp_path / "lib.db"), "--format", "json"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "Missing World" in ln]
    assert lines == ["loomscope: warning: 30 chats: chat world 'Missing World' does not exist in worlds/; not linked "
                     "(first: chats/hero/chat 000.jsonl)"]


def test_an_unlistable_chats_folder_makes_the_import_partial(tmp_path: Path, capsys) -> None:
    user = build_st_user(tmp_path)
    for p in sorted((user / "chats").rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    (user / "chats").rmdir()
    os.mkfifo(user / "chats")  # exists, but no folder: cannot be listed (root ignores permissions)
    (user / "worlds" / "Far.json").symlink_to(tmp_path / "elsewhere.json")
    code = main(["import", str(tmp_path / "data"), "--db", str(tmp_path / "lib.db"), "--format", "json"])
    out = capsys.readouterr()
    assert code == EXIT_PARTIAL == 5, out.err
    report = json.loads(out.out)
    assert report["partial"] is True and report["unreadable"] == [{"folder": "chats", "message": "not a folder"}]
    assert {r["key"] for r in report["added"]} >= {"characters/hero.png", "worlds/Realm.json"}
    far = [s for s in report["skipped"] if s["file"] == "worlds/Far.json"]
    assert far and far[0]["code"] == "IMPORT_OUTSIDE_FOLDER" and str(tmp_path / "elsewhere.json") in far[0]["message"]
    assert "chats: warning: not a folder; nothing in it was imported" in out.err
    assert "partial import" in out.err


def _run(args: list[str], *, tty: bool) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    cmd = [sys.executable, "-m", "engine.cli", *args]
    if not tty:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
        return proc.returncode, proc.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env, cwd=REPO)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal_and_quiet_when_piped(tmp_path: Path) -> None:
    _many_chats(tmp_path, 60)
    args = ["import", str(tmp_path / "data"), "--format", "json"]
    code, err = _run([*args, "--db", str(tmp_path / "a.db")], tty=False)
    assert code == 0 and "reading files" not in err and "storing" not in err
    code, err = _run([*args, "--db", str(tmp_path / "b.db")], tty=True)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert code == 0 and "reading files" in plain and "storing" in plain
    assert "66/66" in plain  # 4 worlds, 1 card, 61 chats: the bars end full


def test_a_chats_folder_without_permission_is_partial(tmp_path: Path) -> None:
    """``chmod 000 chats``: as a user (root runs without the capabilities that bypass permissions, util-linux setpriv)."""
    user = build_st_user(tmp_path)
    argv = [sys.executable, "-m", "engine.cli", "import", str(tmp_path / "data"), "--db", str(tmp_path / "lib.db"),
            "--format", "json"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions cannot be made to apply")
        drop = "-dac_override,-dac_read_search,-fowner"
        argv = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *argv]
    (user / "chats").chmod(0)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        (user / "chats").chmod(stat.S_IRWXU)
    assert proc.returncode == EXIT_PARTIAL, proc.stderr
    report = json.loads(proc.stdout)
    assert report["partial"] and report["unreadable"][0]["folder"] == "chats"
    assert "Permission denied" in report["unreadable"][0]["message"]
    assert "worlds/Realm.json" in {r["key"] for r in report["added"]}
