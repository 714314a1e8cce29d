"""Exact per-text token counts of many texts, in few calls into tiktoken's Rust encoder.

A chat's first preview counts every message: 10,000 texts of a few hundred characters. One
``encode_ordinary`` call per text spends about a quarter of its time crossing from Python into
Rust and back (the call, the GIL released and taken again, a list per text), and runs on one
core. :func:`count_ordinary` joins a chunk of texts with ``<|endoftext|>`` between them and
encodes the chunk in one call that allows that one special token; the tokens between two
``<|endoftext|>`` ids are exactly one text's ``encode_ordinary`` tokens, because tiktoken
splits the text at each allowed special token first and runs its ordinary encoding (the
pre-tokenizing regex, then byte-pair merges) on each piece alone (``CoreBPE::encode_native``
in tiktoken's ``src/lib.rs``). Large batches go in two chunks' worth at a time on two threads:
the Rust encoder releases the GIL for the whole call.

Texts that contain ``<|endoftext|>`` themselves (they would be cut in two) and texts Python
cannot encode as UTF-8 (lone surrogates: tiktoken's own wrapper repairs those) are counted one
by one through ``Encoding.encode_ordinary``, so every count is the one ``encode_ordinary``
gives; ``tests/engine/tokenizers/test_ordinary.py`` checks it on hostile text.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import tiktoken

#: The separator: a special token every tiktoken encoding the engine uses has.
SEPARATOR = "<|endoftext|>"
#: Characters per chunk: one encoder call each (a chunk's tokens are one Python list at a time).
CHUNK_CHARS = 262_144
#: Texts below which the per-text loop is used (joining costs more than it saves).
MIN_TEXTS = 32
#: Characters from which chunks are encoded on two threads.
THREADED_CHARS = 2 * CHUNK_CHARS

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's threads: it starts its own pool when it needs one."""
    global _POOL_LOCK
    _POOL.clear()
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _pool() -> ThreadPoolExecutor:
    """The two encoder threads (started on first use, shared by every count)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=2, thread_name_prefix="loomscope-tokens"))
        return _POOL[0]


def count_ordinary(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """``[len(enc.encode_ordinary(t)) for t in texts]``, in few encoder calls (see the module docstring).

    Parameters
    ----------
    enc:
        A tiktoken encoding with the ``<|endoftext|>`` special token (``o200k_base``,
        ``cl100k_base``, ...); without it every text is encoded on its own.
    texts:
        The texts, in any number (special-token text in them counts as ordinary text, as the
        API counts user content).

    Returns
    -------
    list of int
        Tokens per text, in order.
    """
    core = getattr(enc, "_core_bpe", None)
    if len(texts) < MIN_TEXTS or core is None or SEPARATOR not in enc.special_tokens_set:
        return _one_by_one(enc, texts)
    chunks = _chunks(texts)
    if len(chunks) > 1 and sum(map(len, texts)) >= THREADED_CHARS:
        parts = list(_pool().map(_count_chunk, [enc] * len(chunks), chunks))
    else:
        parts = [_count_chunk(enc, chunk) for chunk in chunks]
    return [n for part in parts for n in part]


def _chunks(texts: Sequence[str]) -> list[Sequence[str]]:
    """``texts`` cut into runs of about :data:`CHUNK_CHARS` characters (at least one text each)."""
    out: list[Sequence[str]] = []
    start, size = 0, 0
    for k, n in enumerate(map(len, texts)):
        size += n
        if size >= CHUNK_CHARS:
            out.append(texts[start:k + 1])
            start, size = k + 1, 0
    if start < len(texts):
        out.append(texts[start:])
    return out


def _count_chunk(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """The counts of one chunk: one encoder call, split at the separator's token id."""
    joined = SEPARATOR.join(texts)
    if joined.count(SEPARATOR) != len(texts) - 1:  # a text holds the separator itself
        return _one_by_one(enc, texts)
    try:
        tokens = enc._core_bpe.encode(joined, {SEPARATOR})
    except UnicodeEncodeError:  # lone surrogates: tiktoken's wrapper repairs them text by text
        return _one_by_one(enc, texts)
    except (AttributeError, TypeError):  # pragma: no cover - a tiktoken whose private encoder differs
        return _one_by_one(enc, texts)
    sep = enc.encode_single_token(SEPARATOR)
    out: list[int] = []
    find = tokens.index
    start = 0
    for _ in islice(texts, len(texts) - 1):
        at = find(sep, start)
        out.append(at - start)
        start = at + 1
    out.append(len(tokens) - start)
    return out


def _one_by_one(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """One ``encode_ordinary`` call per text (tiktoken's wrapper: it repairs lone surrogates)."""
    return list(map(len, map(enc.encode_ordinary, texts)))


__all__ = ["count_ordinary"]
