"""Exact per-text token counts of many texts, in few calls into tiktoken's Rust encoder.

A chat's first preview counts every message: 10,000 texts of a few hundred characters. One
``encode_ordinary`` call per text spends about a quarter of its time crossing from Python into
Rust and back (the call, the GIL released and taken again, a list per text), and runs on one
core. :func:`count_ordinary` joins a chunk of texts with ``<|endoftext|>`` between them and
encodes the chunk in one call that allows that one special token; the tokens between two
``<|endoftext|>`` ids are exactly one text's ``encode_ordinary`` tokens, because tiktoken
splits the text at each allowed special token first and runs its ordinary encoding (the
pre-tokenizing regex, then byte-pair merges) on each piece alone (``CoreBPE::encode_native``
in tiktoken's ``src/lib.rs``). The chunk's tokens come back as one buffer of 32-bit ids
(``encode_to_tiktoken_buffer``, no Python int per token) and are cut at the separator's four
bytes.

Counting runs in one thread at a time. Two threads encoding at once are slower than one
doing both halves in turn (tiktoken 0.14 on this project's 2-core machine: 46 → 60–72 ms for a
10,000-message chat's two halves, against 69 → 33 ms for two SHA-256 hashes:
``/work/notes/issue-29-cold.md``). :func:`count_ordinary` encodes in the caller's thread.
:func:`start_count_ordinary` encodes in a thread of its own and returns at once: the Rust
encoder releases the GIL for the whole call, so the caller does its own Python work meanwhile
(a cold preview assembles its blocks) and waits only for what is left.

Texts that contain ``<|endoftext|>`` themselves (they would be cut in two) and texts Python
cannot encode as UTF-8 (lone surrogates: tiktoken's own wrapper repairs those) are counted one
by one through ``Encoding.encode_ordinary``, so every count is the one ``encode_ordinary``
gives; ``tests/engine/tokenizers/test_ordinary.py`` checks it on hostile text.
"""

from __future__ import annotations

import os
import sys
import threading
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import partial
from itertools import accumulate, repeat
from operator import and_, rshift

import tiktoken

#: The separator: a special token every tiktoken encoding the engine uses has.
SEPARATOR = "<|endoftext|>"
#: Characters per chunk at most: one encoder call each (its text and its token buffer in memory
#: at once; between two calls an encoder thread waits for the GIL, up to the interpreter's switch
#: interval while the caller runs Python, so the fewer the better).
CHUNK_CHARS = 4_194_304
#: Texts below which the per-text loop is used (joining costs more than it saves).
MIN_TEXTS = 32
#: Characters from which :func:`start_count_ordinary` counts in a thread of its own (below, the
#: caller's thread counts when it asks for the counts).
THREADED_CHARS = 65_536

Counts = Callable[[], list[int]]
"""Waits for the counts a :func:`start_count_ordinary` started and returns them (one int per text, in order)."""


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
    if not _joinable(enc, texts):
        return _one_by_one(enc, texts)
    return _count_chunks(enc, _chunks(texts))


def start_count_ordinary(enc: tiktoken.Encoding, texts: Sequence[str]) -> Counts:
    """Start :func:`count_ordinary` of ``texts``; the function it returns waits for the counts.

    A batch of :data:`THREADED_CHARS` characters or more is encoded in a thread of its own,
    started now, so that the caller can go on with other work meanwhile; a smaller one is
    counted in the caller's thread when the returned function is called.

    Parameters
    ----------
    enc, texts:
        As for :func:`count_ordinary`; ``texts`` must not change until the counts are in.

    Returns
    -------
    Callable[[], list[int]]
        Returns the tokens per text, in order (call it once); an error of the encoder thread
        is raised there.
    """
    if not _joinable(enc, texts):
        return partial(_one_by_one, enc, texts)
    chunks = _chunks(texts)
    if sum(map(len, texts)) < THREADED_CHARS:
        return partial(_count_chunks, enc, chunks)
    counts: list[list[int]] = []
    failed: list[BaseException] = []

    def work() -> None:
        try:
            counts.append(_count_chunks(enc, chunks))
        except BaseException as exc:  # handed to the caller's thread by wait()
            failed.append(exc)

    # a thread of its own: start() returns once it runs, and it holds the GIL from there to the
    # encoder call (an idle pool's worker would wait up to a switch interval for it first)
    helper = threading.Thread(target=work, name="loomscope-tokens", daemon=True)
    helper.start()
    pid = os.getpid()

    def wait() -> list[int]:
        if os.getpid() != pid:  # a forked child: the encoder thread is not in it
            return _count_chunks(enc, chunks)
        helper.join()
        if failed:
            raise failed[0]
        return counts[0]

    return wait


def _joinable(enc: tiktoken.Encoding, texts: Sequence[str]) -> bool:
    """Whether ``texts`` are counted joined: enough of them, and an encoding with the separator."""
    return (len(texts) >= MIN_TEXTS and getattr(enc, "_core_bpe", None) is not None
            and SEPARATOR in enc.special_tokens_set)


def _count_chunks(enc: tiktoken.Encoding, chunks: list[Sequence[str]]) -> list[int]:
    """The counts of ``chunks``, one after another in this thread."""
    return [n for chunk in chunks for n in _count_chunk(enc, chunk)]


def _chunks(texts: Sequence[str], size: int | None = None) -> list[Sequence[str]]:
    """``texts`` cut into runs of about ``size`` (default :data:`CHUNK_CHARS`) characters (at least one text each)."""
    limit = CHUNK_CHARS if size is None else size
    ends = list(accumulate(map(len, texts)))  # characters of texts[0..k]
    out: list[Sequence[str]] = []
    start, before = 0, 0
    while start < len(texts):
        k = bisect_left(ends, before + limit, start)  # the first run reaching the limit
        out.append(texts[start:k + 1])
        if k + 1 < len(texts):
            before = ends[k]
        start = k + 1
    return out


def _count_chunk(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """The counts of one chunk: one encoder call, its token buffer cut at the separator's id."""
    joined = SEPARATOR.join(texts)
    if joined.count(SEPARATOR) != len(texts) - 1:  # a text holds the separator itself
        return _one_by_one(enc, texts)
    try:
        tokens = memoryview(enc._core_bpe.encode_to_tiktoken_buffer(joined, {SEPARATOR}))
    except UnicodeEncodeError:  # lone surrogates: tiktoken's wrapper repairs them text by text
        return _one_by_one(enc, texts)
    except (AttributeError, TypeError):  # pragma: no cover - a tiktoken whose private encoder differs
        return _one_by_one(enc, texts)
    if tokens.itemsize != 4:  # pragma: no cover - a buffer of other than 32-bit ids
        return _one_by_one(enc, texts)
    sep = enc.encode_single_token(SEPARATOR).to_bytes(4, sys.byteorder)
    lengths = list(map(len, tokens.tobytes().split(sep)))
    # a run of bytes can match the separator's bytes across two ids only when some length is
    # not a whole number of ids: then this split is not the ids' split
    if len(lengths) != len(texts) or any(map(and_, lengths, repeat(3))):
        return _one_by_one(enc, texts)
    return list(map(rshift, lengths, repeat(2)))


def _one_by_one(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """One ``encode_ordinary`` call per text (tiktoken's wrapper: it repairs lone surrogates)."""
    return list(map(len, map(enc.encode_ordinary, texts)))


__all__ = ["count_ordinary", "start_count_ordinary"]
