"""engine.tokenizers.ordinary: joined, threaded counting gives exactly ``encode_ordinary``'s counts."""

from __future__ import annotations

import array
import os
import signal
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tokenizers import get_encoding, ordinary
from engine.tokenizers.ordinary import SEPARATOR, count_ordinary

HOSTILE = [
    "", " ", "  ", "\n", "\n\n", "\r\n", "hello", " hello ", "hello\n", "\n hello", "a" * 5000,
    SEPARATOR, f"x{SEPARATOR}y", "<|endofprompt|>", "<|endoftext", "|>", "<|", "endoftext|>",
    "caf\u00e9", "\u4f60\u597d\u4e16\u754c", "\U0001f600\U0001f600", "lone \ud800 surrogate", "'s 're 've", "123456789",
    "trailing spaces   ", "   leading", "tabs\t\tand\tmore", "\u200b zero width", "x" * 300 + " " * 50,
]


def _reference(name: str, texts: list[str]) -> list[int]:
    enc = get_encoding(name)
    return [len(enc.encode_ordinary(t)) for t in texts]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_hostile_texts_count_as_encode_ordinary(name: str) -> None:
    texts = HOSTILE * 3  # over MIN_TEXTS, so the joined path runs (and falls back where it must)
    assert len(texts) >= ordinary.MIN_TEXTS
    assert count_ordinary(get_encoding(name), texts) == _reference(name, texts)
    clean = [t for t in texts if "\ud800" not in t] * 2  # no surrogate: the chunk is joined, the separator text found
    assert count_ordinary(get_encoding(name), clean) == _reference(name, clean)


def test_many_chunks_on_two_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small chunks force several encoder calls; the counts stay in order."""
    monkeypatch.setattr(ordinary, "CHUNK_CHARS", 200)
    texts = [f"message {i}: " + "word " * (i % 17) + ("\n" if i % 3 else " ") for i in range(500)]
    texts[77] = f"user wrote {SEPARATOR} here"  # this chunk falls back to one call per text
    texts[301] = "broken \udc80 text"
    assert len(ordinary._chunks(texts)) > 10
    assert count_ordinary(get_encoding("o200k_base"), texts) == _reference("o200k_base", texts)


def test_chunks_cover_every_text_once() -> None:
    texts = ["a" * n for n in (0, 1, ordinary.CHUNK_CHARS, 5, ordinary.CHUNK_CHARS * 2, 0, 3)]
    chunks = ordinary._chunks(texts)
    assert [t for c in chunks for t in c] == texts
    assert all(chunks)


_PIECES = st.sampled_from(["a", "b", " ", "  ", "\n", "\t", "'s", "1", "\u00e9", "\U0001f600", "<|", "|>",
                           "endoftext", SEPARATOR, ".", ",", "!", "\r"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_PIECES, max_size=12).map("".join), min_size=ordinary.MIN_TEXTS, max_size=80))
def test_property_joined_counts_equal_per_text_counts(texts: list[str]) -> None:
    """For any texts built from boundary-sensitive pieces (whitespace runs, contractions, the separator itself)."""
    assert count_ordinary(get_encoding("o200k_base"), texts) == _reference("o200k_base", texts)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_counts_with_its_own_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process forked after its parent counted (a server's worker, say) counts the same, without waiting
    on anything of the parent's (counting runs in the caller's thread; an encoder thread, as this
    module once had, would not exist in the child)."""
    monkeypatch.setattr(ordinary, "CHUNK_CHARS", 200)
    texts = [f"line {i} " * 20 for i in range(200)]
    enc = get_encoding("o200k_base")
    expected = _reference("o200k_base", texts)
    assert count_ordinary(enc, texts) == expected  # the parent has counted
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only when it counted right
        ok = count_ordinary(enc, texts) == expected
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:  # waiting on the parent's threads: it would never finish
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung waiting on encoder threads it does not have")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(done[1]) == 0


class _Buffer:
    """An encoder whose token buffer holds the separator's four bytes across two ids (no real encoding does).

    Each ``x`` is the ids ``0x03040000, 0x00000102`` (bytes ``00 00 04 03 02 01 00 00``: the
    separator's bytes at offset 2), and the first separator before a ``yy`` is left out, so that
    cutting at the bytes gives as many pieces as there are texts and only their lengths tell.
    """

    SEP = 0x01020304

    def __init__(self) -> None:
        self.special_tokens_set = {SEPARATOR}
        self._core_bpe = self

    def encode_to_tiktoken_buffer(self, text: str, allowed: set[str]) -> memoryview:
        parts = text.split(SEPARATOR)
        ids = self._ids(parts[0])
        dropped = False
        for part in parts[1:]:
            if part == "yy" and not dropped:
                dropped = True
            else:
                ids.append(self.SEP)
            ids += self._ids(part)
        return memoryview(array.array("I", ids))

    @staticmethod
    def _ids(part: str) -> list[int]:
        return [0x03040000, 0x00000102] * part.count("x") + [7] * part.count("y")

    def encode_single_token(self, text: str) -> int:
        return self.SEP

    def encode_ordinary(self, text: str) -> list[int]:
        return [0] * len(text)


def test_a_separator_match_across_two_ids_falls_back_to_one_call_per_text() -> None:
    texts = ["x"] + ["yy"] * ordinary.MIN_TEXTS
    assert count_ordinary(_Buffer(), texts) == [1] + [2] * ordinary.MIN_TEXTS  # type: ignore[arg-type]
