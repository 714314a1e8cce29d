"""Large inputs stay bounded (issue 15, 3 and 8): prints wall time and peak memory of each case.

    .venv/bin/python tests/benchmarks/bench_large_inputs.py

Each case runs the real CLI in a child process (``os.wait4`` gives its own peak RSS):

1. ``preview`` of a chat holding one 50 MB message without whitespace (target: < 10 s and
   < 1 GB, or refused with a clear code: it is refused with ``IMPORT_TOO_LARGE``);
2. ``preview`` of a chat holding a message just under ``MAX_MESSAGE_CHARS`` (4 Mi characters,
   no whitespace): the largest that is tokenized;
3. ``import`` of a 99,000-message SillyTavern chat with stderr on a pseudo-terminal (progress
   shown; target < 15 s);
4. ``import`` of a 9000×9000 PNG card (text chunks read without decoding the pixels).
"""

from __future__ import annotations

import json
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def run(argv: list[str], *, tty_stderr: bool = False) -> tuple[int, float, float, str]:
    """``(exit code, seconds, peak RSS MB of this child, stderr text)``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    started = time.perf_counter()
    if tty_stderr:
        master, slave = pty.openpty()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                part = os.read(master, 65536)
            except OSError:
                break
            if not part:
                break
            chunks.append(part)
        os.close(master)
        err = b"".join(chunks).decode("utf-8", "replace")
    else:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        err = proc.stderr.read().decode("utf-8", "replace")
    _pid, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (KB on Linux)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    return proc.returncode, seconds, usage.ru_maxrss / 1024, err


def png_card(path: Path, width: int, height: int, card: dict) -> None:
    """A real grayscale PNG of ``width``×``height`` (zero pixels, streamed) with a ``chara`` chunk."""
    import base64

    def chunk(ctype: bytes, body: bytes) -> bytes:
        return struct.pack("!I", len(body)) + ctype + body + struct.pack("!I", zlib.crc32(ctype + body))

    comp = zlib.compressobj(6)
    row = b"\x00" * (width + 1)
    idat = bytearray()
    for _ in range(height):
        idat += comp.compress(row)
    idat += comp.flush()
    text = b"chara\0" + base64.b64encode(json.dumps(card).encode())
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack("!IIBBBBB", width, height, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", bytes(idat)) + chunk(b"tEXt", text) + chunk(b"IEND", b""))


def main() -> int:
    from engine.importers._io import MAX_MESSAGE_CHARS

    cli = [sys.executable, "-m", "engine.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        huge = d / "huge.json"
        huge.write_text(json.dumps([{"role": "user", "content": "ab" * 25_000_000}]))
        code, s, mb, err = run([*cli, "preview", "--chat", str(huge), "--format", "json"])
        print(f"50 MB message without whitespace: exit {code} in {s:.1f} s, peak {mb:.0f} MB: {err.strip()[:160]}")

        edge = d / "edge.json"
        edge.write_text(json.dumps([{"role": "user", "content": "ab" * (MAX_MESSAGE_CHARS // 2)}]))
        code, s, mb, err = run([*cli, "preview", "--chat", str(edge), "--format", "json"])
        print(f"{MAX_MESSAGE_CHARS:,}-character message (the limit): exit {code} in {s:.1f} s, peak {mb:.0f} MB")

        chat = d / "long.jsonl"
        lines = [{"user_name": "Ana", "character_name": "Mira", "create_date": "2024-10-18@20h52m01s",
                  "chat_metadata": {}}]
        lines += [{"name": "Ana" if i % 2 else "Mira", "is_user": bool(i % 2), "is_system": False,
                   "send_date": "2024-10-18T20:53:00Z", "extra": {},
                   "mes": f"Message {i}: the fog rolls in over the harbour and the lamp turns."} for i in range(99_000)]
        chat.write_text("\n".join(json.dumps(x) for x in lines))
        code, s, mb, err = run([*cli, "import", str(chat), "--db", str(d / "lib.sqlite3"), "--format", "json"],
                               tty_stderr=True)
        shown = "storing 99,000 messages" in err and "99000/99000" in err
        print(f"99,000-message import on a terminal: exit {code} in {s:.1f} s, peak {mb:.0f} MB, "
              f"progress shown: {'yes' if shown else 'NO'}")

        card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Huge", "description": "d"}}
        png_card(d / "huge.png", 9000, 9000, card)
        size = (d / "huge.png").stat().st_size
        code, s, mb, err = run([*cli, "import", str(d / "huge.png"), "--db", str(d / "lib2.sqlite3"),
                                "--format", "json"])
        print(f"9000x9000 PNG card ({size / 1e6:.1f} MB file): exit {code} in {s:.1f} s, peak {mb:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
