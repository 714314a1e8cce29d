"""Fuzzing: random mutations of real files never raise anything but LoomscopeImportError.

Two mutators: byte-level (flip, delete, insert, truncate, duplicate a slice) on the raw files,
and structural (parse the JSON, replace one node with another JSON value, write it back), which
reaches the field readers behind a successful parse. 200 examples in all (derandomized).
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import LoomscopeImportError
from engine.importers import load_any, load_character, load_chat, load_lorebook
from tests.conftest import shared_data_path

from .helpers import V2_CARD, b64, png_bytes, st_chat_lines

DATA = shared_data_path()
# Small and medium real files (the 4 MB tau-bench file is covered by its 62-message extract).
REAL = [
    "cards/Aqua.png", "cards/Lumine.json", "cards/Raiden Ei (chat).json", "cards/白棠-卡.json",
    "lorebooks/Eldoria.json", "lorebooks/Eorzea.json", "lorebooks/Keqing-WI.json",
    "lorebooks/New Story (Wed Oct 26 2022).lorebook",
    "chats/Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl", "chats/1673323621108.jsonl",
    "chats/airline-longest-task.json", "chats/function_calling_simple.traj",
    "chats/test_case.json", "chats/127_ChatGPT_DFS_woFilter_w2.json",
]


def _charx_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("card.json", json.dumps({**V2_CARD, "spec": "chara_card_v3", "spec_version": "3.0"}))
        zf.writestr("assets/icon/images/main.png", png_bytes())
    return buf.getvalue()


def _corpus() -> dict[str, bytes]:
    corpus: dict[str, bytes] = {
        "fixture_card.png": png_bytes([("tEXt", "chara", b64(V2_CARD))]),
        "fixture_card.json": json.dumps(V2_CARD).encode(),
        "fixture_chat.jsonl": "\n".join(json.dumps(x) for x in st_chat_lines()).encode(),
        "fixture_card.charx": _charx_bytes(),
    }
    if DATA is not None:
        for rel in REAL:
            corpus[Path(rel).name] = (DATA / rel).read_bytes()
    return corpus


CORPUS = _corpus()
NAMES = sorted(CORPUS)
LOADERS = (load_any, load_character, load_lorebook, load_chat)


def _check(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        for loader in LOADERS:
            try:
                loader(path)
            except LoomscopeImportError as exc:
                assert exc.code.startswith("IMPORT_") and exc.file == str(path)


@st.composite
def byte_mutation(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(NAMES))
    data = bytearray(CORPUS[name])
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        op = draw(st.sampled_from(["flip", "delete", "insert", "truncate", "dup"]))
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 64))]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16)
                             | st.sampled_from([b"{", b"}", b"[", b"\"", b",", b"null", b"\n",
                                                b"\xff", b"\xc3", b"0", b"true", b"\\u"]))
        elif op == "truncate":
            del data[i:]
        else:
            j = min(len(data), i + draw(st.integers(1, 200)))
            data[i:i] = data[i:j]
    return name, bytes(data)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in list(value.items())[:40]:
            out += _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:40]):
            out += _nodes(v, (*path, i))
    return out


KNOWN_KEYS = [
    "loomscope", "role", "content", "tool_calls", "tool_call_id", "toolCallId", "callId",
    "tool_call_ids", "function_call", "function", "arguments", "id", "type", "name", "meta",
    "extra", "pinned", "manualExcluded", "hidden", "is_user", "is_system", "mes", "swipes",
    "swipe_id", "swipe_info", "message", "fields", "tools", "messages", "history", "traj",
    "entries", "key", "keys", "keysecondary", "secondary_keys", "uid", "position", "role",
    "selectiveLogic", "delayUntilRecursion", "sticky", "extensions", "character_book", "data",
    "spec", "spec_version", "depth_prompt", "tags", "alternate_greetings", "lorebookVersion",
    "originalData", "chat_metadata", "user_name", "character_name", "insertion_order", "enabled",
]


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _json_docs() -> dict[str, list[Any]]:
    """Parsed JSON of each text file (one entry per line for JSONL)."""
    docs: dict[str, list[Any]] = {}
    for name, raw in CORPUS.items():
        if name.endswith((".png", ".charx")):
            continue
        text = raw.decode("utf-8")
        if name.endswith(".jsonl"):
            docs[name] = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            docs[name] = [json.loads(text)]
    return docs


DOCS = _json_docs()


@st.composite
def structural_mutation(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(DOCS)))
    docs = list(DOCS[name])
    for _ in range(draw(st.integers(1, 3))):
        li = draw(st.integers(0, len(docs) - 1))
        path = draw(st.sampled_from(_nodes(docs[li])))
        target = _get(docs[li], path)
        if isinstance(target, dict) and draw(st.booleans()):
            # add a known field with a random value: reaches optional-field code paths
            key = draw(st.sampled_from(KNOWN_KEYS))
            docs[li] = _replace(docs[li], path, {**target, key: draw(JSON_VALUES)})
        else:
            docs[li] = _replace(docs[li], path, draw(JSON_VALUES))
    if name.endswith(".jsonl"):
        data = "\n".join(json.dumps(x, ensure_ascii=False) for x in docs).encode()
    else:
        data = json.dumps(docs[0], ensure_ascii=False).encode()
    if name == "fixture_card.json" and draw(st.booleans()):
        return "fixture_card.png", png_bytes([("tEXt", "chara",
                                               __import__("base64").b64encode(data).decode())])
    return name, data


FUZZ_SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ_SETTINGS
@given(byte_mutation())
def test_byte_mutations_only_raise_import_errors(case: tuple[str, bytes]) -> None:
    _check(*case)


@FUZZ_SETTINGS
@given(structural_mutation())
def test_structural_mutations_only_raise_import_errors(case: tuple[str, bytes]) -> None:
    _check(*case)


def test_corpus_includes_real_files() -> None:
    if DATA is None:
        pytest.skip("../shared/data is absent")
    assert len(CORPUS) == 4 + len(REAL)
