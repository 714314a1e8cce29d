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
(``encode_to_tiktoken_buffer``, no Python int per token), read in place as a numpy array: the
texts' counts are the distances between the separator's ids.

Counting runs in the caller's thread. Two threads encoding at once are slower than one doing
both halves in turn (tiktoken 0.14 on this project's 2-core machine: 46 → 60–72 ms for a
10,000-message chat's two halves, against 36 → 18 ms for two SHA-256 hashes), and tiktoken
encodes more slowly in any thread but the main one (61 against 47 ms); but it releases the GIL
for the whole call, so other Python threads run at full speed meanwhile: a cold preview
assembles its blocks in a helper thread while its own thread counts the chat
(:func:`engine.pipeline._assemble_blocks`; ``/work/notes/issue-29-cold.md``).

Texts that contain ``<|endoftext|>`` themselves (they would be cut in two) and texts Python
cannot encode as UTF-8 (lone surrogates: tiktoken's own wrapper repairs those) are counted one
by one through ``Encoding.encode_ordinary``, so every count is the one ``encode_ordinary``
gives; ``tests/engine/tokenizers/test_ordinary.py`` checks it on hostile text.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate

import tiktoken

#: The separator: a special token every tiktoken encoding the engine uses has.
SEPARATOR = "<|endoftext|>"
#: Characters per chunk at most: one encoder call each (its text and its token buffer in memory
#: at once; between two calls the thread takes the GIL, up to the interpreter's switch interval
#: while another thread runs Python, so the fewer the better).
CHUNK_CHARS = 4_194_304
#: Texts below which the per-text loop is used (joining costs more than it saves).
MIN_TEXTS = 32


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
    try:
        tokens = memoryview(enc._core_bpe.encode_to_tiktoken_buffer(SEPARATOR.join(texts), {SEPARATOR}))
    except UnicodeEncodeError:  # lone surrogates: tiktoken's wrapper repairs them text by text
        return _one_by_one(enc, texts)
    except (AttributeError, TypeError):  # pragma: no cover - a tiktoken whose private encoder differs
        return _one_by_one(enc, texts)
    if tokens.itemsize != 4:  # pragma: no cover - a buffer of other than 32-bit ids
        return _one_by_one(enc, texts)
    # numpy: loaded by every preview already (the shifting columns); imported here so that the
    # tokenizers alone (``loomscope lint``) do not load it
    import numpy as np

    # the separator ids' places, as a numpy view of the buffer (no copy): each text's count is
    # the distance between two of them, less the separator itself
    ids = np.frombuffer(tokens, dtype=np.uint32)
    at = np.flatnonzero(ids == enc.encode_single_token(SEPARATOR))
    # more separators than texts less one: a text holds the separator itself (it was encoded as
    # the special token)
    if len(at) != len(texts) - 1:
        return _one_by_one(enc, texts)
    ends = np.append(at, ids.size)
    ends[1:] -= at + 1
    return ends.tolist()


def _one_by_one(enc: tiktoken.Encoding, texts: Sequence[str]) -> list[int]:
    """One ``encode_ordinary`` call per text (tiktoken's wrapper: it repairs lone surrogates)."""
    return list(map(len, map(enc.encode_ordinary, texts)))


__all__ = ["count_ordinary"]
