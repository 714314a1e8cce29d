"""Hostile input corpus (issue 15): generate malformed cards, lorebooks and chats, run them all.

Usage::

    .venv/bin/python tests/benchmarks/hostile_corpus.py [--seed 15] [--per-kind 60] [--out DIR] [--keep]

Writes a corpus of hostile files built from valid ones (truncations, byte flips, wrong types at
random JSON paths, control/escape characters and newlines in keys and values, lone surrogates,
NaN/Infinity, huge numbers, deep nesting, PNG chunk damage and duplicates, bad encodings, empty
and binary files) into a temporary folder (or ``--out``), then runs every file through what a
user runs: ``inspect`` (in process), import into a real SQLite library, a preview of what was
imported (chats) or ``lint-lorebook`` (books), and the CLI's one-line error report. Prints

    tried N · clean error E · accepted A · failed F

where "clean error" is a ``LoomscopeError`` with a stable code whose CLI line is exactly one
line without control characters, "accepted" is a file that went through every stage, and
"failed" is anything else (another exception, a multi-line or escape-carrying error line, an
accepted file whose table output would carry raw control characters). Exit status 1 when F > 0.
The figures are deterministic for a given ``--seed``.
"""

from __future__ import annotations

import argparse
import base64
import copy
import io
import json
import random
import re
import shutil
import struct
import sys
import tempfile
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.cli import report_error  # noqa: E402
from engine.errors import ERROR_CODES, LoomscopeError  # noqa: E402

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")

V2_CARD: dict[str, Any] = {
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {
        "name": "Mira", "description": "A lighthouse keeper.", "personality": "dry", "scenario": "storm",
        "first_mes": "You're late.", "mes_example": "<START>\n{{user}}: hi\n{{char}}: hm.",
        "creator_notes": "", "system_prompt": "", "post_history_instructions": "",
        "alternate_greetings": ["Door's open."], "tags": ["test"], "creator": "c", "character_version": "1",
        "extensions": {"depth_prompt": {"prompt": "Mira is tired.", "depth": 2, "role": "user"}},
        "character_book": {"name": "Coast", "entries": [
            {"id": 0, "keys": ["lighthouse", "lamp"], "content": "The lamp is old.", "enabled": True,
             "insertion_order": 10, "extensions": {"position": 4, "depth": 1, "role": 2}},
            {"id": 1, "keys": ["storm"], "content": "Storms come in autumn.", "enabled": True,
             "insertion_order": 5, "secondary_keys": ["gale"], "selective": True}]},
    },
}
V3_CARD = {"spec": "chara_card_v3", "spec_version": "3.0",
           "data": {**copy.deepcopy(V2_CARD["data"]), "nickname": "M", "group_only_greetings": []}}
V1_CARD = {"name": "Mira", "description": "d", "personality": "p", "scenario": "s", "first_mes": "hi",
           "mes_example": ""}
WORLD = {"entries": {str(i): {"uid": i, "key": [f"key{i}", "fog"], "keysecondary": [], "comment": f"entry {i}",
                              "content": f"Fact {i} about the fog.", "constant": i == 0, "selective": False,
                              "order": 100 - i, "position": i % 5, "disable": False, "probability": 100,
                              "useProbability": True, "depth": 4, "group": "", "scanDepth": None,
                              "sticky": 0, "cooldown": 0, "delay": 0}
                     for i in range(4)}}
ST_CHAT = [
    {"user_name": "Ana", "character_name": "Mira", "create_date": "2024-10-18@20h52m01s", "chat_metadata": {}},
    {"name": "Mira", "is_user": False, "is_system": False, "send_date": "1729284721000", "mes": "Hello {{user}}.",
     "extra": {}, "swipe_id": 0, "swipes": ["Hello {{user}}."]},
    {"name": "Ana", "is_user": True, "is_system": False, "send_date": 1729284800000, "mes": "Ok.", "extra": {}},
]
OPENAI_CHAT = {"messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Look it up."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"q\": 1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    {"role": "user", "content": [{"type": "text", "text": "and?"}]},
], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}

NASTY_STRINGS = [
    "\x1b]0;owned\x07\x1b[2J\x1b[H", "line\nloomscope: x.json: IMPORT_FAKE: forged", "\r\r\roverwrite",
    "\u202eevil\u202c", "\x00nul", "\x9b31m", "{{user}}{{char}}{{random::a::b}}", "[/b][bold]x", "\ud83d",
    "é" * 3, "😀" * 50, "x" * 200_000, "", " ", "\t", "💥\u200d💥",
]
NASTY_VALUES: list[Any] = [None, True, False, 0, -1, 1.5, 10**30, -(10**30), 1e308, [], {}, [None], {"": ""},
                           "text", [1, "a", None], {"a": {"b": {"c": []}}}]


# ------------------------------------------------------------------------------------------ helpers


def png_chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack("!I", len(body)) + ctype + body + struct.pack("!I", zlib.crc32(ctype + body))


def png(chunks_after_idat: list[bytes], *, width: int = 1, height: int = 1, idat: bytes | None = None,
        before: list[bytes] = ()) -> bytes:
    ihdr = struct.pack("!IIBBBBB", width, height, 8, 0, 0, 0, 0)
    data = idat if idat is not None else zlib.compress(b"\x00" + b"\x00" * width)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + b"".join(before) + png_chunk(b"IDAT", data)
            + b"".join(chunks_after_idat) + png_chunk(b"IEND", b""))


def text_chunk(keyword: str, text: str | bytes) -> bytes:
    raw = text if isinstance(text, bytes) else text.encode("latin-1", "replace")
    return png_chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + raw)


def b64json(doc: Any) -> str:
    return base64.b64encode(json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")).decode()


def paths(doc: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


def set_path(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return out


def rename_key(doc: Any, path: tuple, new: str) -> Any:
    if not path:
        return doc
    out = copy.deepcopy(doc)
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    if isinstance(cur, dict):
        cur[new] = cur.pop(path[-1])
    return out


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")


def jsonl(lines: list[Any]) -> bytes:
    return b"\n".join(dumps(x) for x in lines)


# ------------------------------------------------------------------------------------------ corpus


def mutations(rng: random.Random, base: Any, render: Callable[[Any], bytes], n: int) -> Iterator[tuple[str, bytes]]:
    """``n`` hostile variants of ``base`` (a JSON document) rendered with ``render``."""
    all_paths = list(paths(base))
    good = render(base)
    kinds = ["type", "nasty_value", "nasty_key", "truncate", "flip", "nan", "deep", "surrogate_escape",
             "duplicate_key", "encoding"]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        path = rng.choice(all_paths)
        if kind == "type":
            yield kind, render(set_path(base, path, rng.choice(NASTY_VALUES)))
        elif kind == "nasty_value":
            yield kind, render(set_path(base, path, rng.choice(NASTY_STRINGS)))
        elif kind == "nasty_key":
            yield kind, render(rename_key(base, path, rng.choice(NASTY_STRINGS[:8]) + "k"))
        elif kind == "truncate":
            yield kind, good[: rng.randrange(1, max(2, len(good)))]
        elif kind == "flip":
            data = bytearray(good)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            yield kind, bytes(data)
        elif kind == "nan":
            marker = "\"__NUM__\""
            yield kind, render(set_path(base, path, "__NUM__")).replace(
                marker.encode(), rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400",
                                             b"123456789012345678901234567890"]))
        elif kind == "deep":
            depth = rng.choice([150, 250, 5000, 100_000])
            yield kind, render(set_path(base, path, "__DEEP__")).replace(b"\"__DEEP__\"",
                                                                          b"[" * depth + b"]" * depth)
        elif kind == "surrogate_escape":
            yield kind, render(set_path(base, path, "__S__")).replace(b"__S__", rng.choice(
                [b"\\ud83d", b"\\udfff tail", b"\\ud83d\\ude00", b"\\u0000", b"\\u001b[2J"]))
        elif kind == "duplicate_key":
            text = good.decode("utf-8", "replace")
            yield kind, ("{\"spec\": \"x\", " + text[1:]).encode() if text.startswith("{") else good + good
        else:
            enc = rng.choice(["utf-16", "utf-16-le", "latin-1-broken", "bom", "cp1252"])
            text = good.decode("utf-8", "replace")
            if enc == "bom":
                yield kind, b"\xef\xbb\xbf" + good
            elif enc == "latin-1-broken":
                yield kind, good.replace(b"e", b"\xe9", 3)
            else:
                yield kind, text.encode(enc, "replace")


def build_corpus(folder: Path, seed: int, per_kind: int) -> list[Path]:
    rng = random.Random(seed)
    files: list[Path] = []

    def add(name: str, data: bytes) -> None:
        p = folder / f"{len(files):04d}-{name}"
        p.write_bytes(data)
        files.append(p)

    # JSON documents: cards (V1, V2, V3), a world book, an OpenAI chat
    for label, base in (("card-v2", V2_CARD), ("card-v3", V3_CARD), ("card-v1", V1_CARD), ("world", WORLD),
                        ("openai-chat", OPENAI_CHAT)):
        for kind, data in mutations(rng, base, dumps, per_kind):
            add(f"{label}-{kind}.json", data)
    # SillyTavern JSONL chats: mutate one line at a time
    for i in range(per_kind):
        lines = copy.deepcopy(ST_CHAT)
        k = rng.randrange(len(lines))
        [(kind, data)] = list(mutations(rng, lines[k], dumps, 1 + i % 10))[-1:]
        raw = jsonl(lines[:k]) + b"\n" + data + b"\n" + jsonl(lines[k + 1:])
        add(f"st-chat-{kind}.jsonl", raw)
    # PNG cards
    good = b64json(V2_CARD)
    png_cases: list[tuple[str, bytes]] = [
        ("two-chara", png([text_chunk("chara", b64json({**V2_CARD, "data": {**V2_CARD["data"], "name": "A"}})),
                           text_chunk("chara", b64json({**V2_CARD, "data": {**V2_CARD["data"], "name": "B"}}))])),
        ("huge-declared", png([text_chunk("chara", good)], width=30000, height=30000, idat=b"garbage")),
        ("no-card", png([text_chunk("Comment", "hello")])),
        ("ztxt-bomb", png([png_chunk(b"zTXt", b"chara\0\0" + zlib.compress(b"A" * 70_000_000))])),
        ("itxt-bad-utf8", png([png_chunk(b"iTXt", b"chara\0\0\0\0\0\xff\xfe")])),
        ("no-ihdr", b"\x89PNG\r\n\x1a\n" + text_chunk("chara", good) + png_chunk(b"IEND", b"")),
        ("only-signature", b"\x89PNG\r\n\x1a\n"),
        ("plain-json-chunk", png([text_chunk("chara", json.dumps(V2_CARD).encode())])),
        ("escape-name", png([text_chunk("chara", b64json({**V2_CARD, "data": {**V2_CARD["data"],
                                                                            "name": NASTY_STRINGS[0]}}))])),
        ("ccv3-broken-chara-good", png([text_chunk("chara", good), text_chunk("ccv3", "!!!")])),
    ]
    for label, data in png_cases:
        add(f"png-{label}.png", data)
    for i in range(per_kind):
        base_png = png([text_chunk("chara", good)], width=4, height=4)
        data = bytearray(base_png)
        how = i % 4
        if how == 0:
            data = data[: rng.randrange(8, len(data))]
        elif how == 1:
            for _ in range(rng.randint(1, 5)):
                data[rng.randrange(8, len(data))] = rng.randrange(256)
        elif how == 2:
            inner = b64json(set_path(V2_CARD, rng.choice(list(paths(V2_CARD))), rng.choice(NASTY_VALUES)))
            data = bytearray(png([text_chunk("chara", inner)]))
        else:
            bad = rng.choice(["@@@", good[:-5] + "*", "", " ", "e30=", base64.b64encode(b"\xff\xfe").decode()])
            data = bytearray(png([text_chunk("chara", bad)]))
        add(f"png-mutated-{how}.png", bytes(data))
    # plain garbage
    garbage = [b"", b"   \n\t ", b"\x00" * 100, bytes(range(256)) * 10, b"PK\x03\x04not a zip", b"GIF89a",
               b"null", b"[]", b"{}", b"42", b"\"string\"", b"true", b"[1,2,3]", b"{\"messages\": []}",
               b"{\"entries\": {}}", b"{\"entries\": []}", b"{\"spec\": \"chara_card_v9\", \"data\": {}}",
               b"\xff\xfe{\x00}\x00", b"{\"name\": \"x\"}" * 3, b"\n".join([b"{}"] * 10)]
    for i, data in enumerate(garbage):
        add(f"garbage-{i}.json", data)
    return files


# ------------------------------------------------------------------------------------------ running


def check_line(exc: LoomscopeError) -> str | None:
    """Why the CLI error line for ``exc`` is not a clean one-line error (``None`` when it is)."""
    buf = io.StringIO()
    real = sys.stderr
    sys.stderr = buf
    try:
        report_error(exc)
    finally:
        sys.stderr = real
    line = buf.getvalue()
    if exc.code not in ERROR_CODES:
        return f"unknown code {exc.code}"
    if line.count("\n") != 1 or not line.endswith("\n"):
        return "error line is not one line"
    if RAW_CONTROL.search(line):
        return "error line carries a control character"
    return None


def run_one(path: Path, store) -> tuple[str, str]:
    """``("accepted" | "clean error" | "failed", detail)`` for one file."""
    from engine.commands.inspect import format_table
    from engine.importers import inspect_file
    from engine.lorebook.lint import lint_lorebook
    from engine.pipeline import preview

    try:
        report = inspect_file(path)
        if RAW_CONTROL.search(format_table(report)):
            return "failed", "inspect table carries a control character"
        refs = store.imports.files([path])
        for ref in refs:
            if ref.kind == "chat":
                pv = preview(store.chats.build_request(ref.id))
                pv.model_dump_json()
            elif ref.kind == "lorebook":
                lint_lorebook(store.lorebooks.get(ref.id), context_limit=8192, count_tokens=len)
        return "accepted", report.kind
    except LoomscopeError as exc:
        why = check_line(exc)
        return ("failed", why) if why else ("clean error", exc.code)
    except Exception as exc:
        return "failed", f"{type(exc).__name__}: {exc}"[:200] + "\n" + traceback.format_exc(limit=-3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--per-kind", type=int, default=60, help="mutations per base document (default 60)")
    ap.add_argument("--out", type=Path, default=None, help="write the corpus here (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the corpus folder")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    args = ap.parse_args(argv)

    from engine.storage import open_store

    folder = args.out or Path(tempfile.mkdtemp(prefix="loomscope-hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    files = build_corpus(folder, args.seed, args.per_kind)
    counts: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    failures: list[tuple[Path, str]] = []
    with tempfile.TemporaryDirectory() as lib_dir:
        store = open_store(f"sqlite:///{Path(lib_dir) / 'library.sqlite3'}", seed=False)
        try:
            for path in files:
                outcome, detail = run_one(path, store)
                counts[outcome] += 1
                if outcome == "clean error":
                    codes[detail] += 1
                elif outcome == "failed":
                    failures.append((path, detail))
        finally:
            store.close()
    print(f"hostile corpus (seed {args.seed}, {folder}):")
    print(f"tried {len(files)} · clean error {counts['clean error']} · accepted {counts['accepted']} · "
          f"failed {counts['failed']}")
    print("clean errors by code: " + ", ".join(f"{c} {n}" for c, n in codes.most_common()))
    for path, detail in failures[: None if args.verbose else 10]:
        print(f"FAILED {path.name}: {detail}")
    if not args.keep and args.out is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
