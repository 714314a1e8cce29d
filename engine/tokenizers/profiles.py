"""Tokenizer profiles: exact (tiktoken) and named approximations, with a count cache.

A profile counts tokens of text. Exact profiles wrap tiktoken encodings; approximate ones
estimate from characters for model families whose tokenizer cannot be loaded offline. Every
profile states ``approximate`` and a ``version``; counts are deterministic per (profile,
version, text).

Approximation rules (each documented on its profile):

* ``claude-approx``: Anthropic's tokenizer is not public. Estimate
  ``ceil(cl100k_tokens × 1.10)``: Claude 3+ tokenizers produce roughly 10 % more tokens than
  cl100k on English prose (Anthropic: "approximately 3.5 characters per token").
* ``llama3-approx``: Llama 3/3.1/3.3/4 use a 128k tiktoken-style BPE very close to cl100k;
  estimate ``ceil(cl100k_tokens × 1.02)``.
* ``mistral-approx``: Mistral's Tekken/SentencePiece tokenizers; ``ceil(cl100k_tokens × 1.08)``.
* ``gemini-approx``: Gemini's SentencePiece; Google documents "about 4 characters per token";
  estimate ``ceil(chars / 4) `` but never below ``ceil(cl100k_tokens × 0.95)``.
* ``generic-approx``: unknown models; SillyTavern's fallback ``ceil(chars / 3.35)``
  (FORMATS.md b7), never below the cl100k count.

The multiplier rules reuse the exact cl100k count so CJK text and code (where character
ratios are badly off) stay reasonable.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, repeat
from operator import is_
from typing import TYPE_CHECKING

from ..registry import NamedRegistry
from .backends import _tiktoken_spans as spans
from .ordinary import count_ordinary
from .tiktoken_offline import get_encoding

if TYPE_CHECKING:
    from .templates import ChatTemplate

#: Entries kept in each profile's count cache.
COUNT_CACHE_SIZE = 200_000
#: Texts up to this length key the count cache themselves; longer ones by a 16-byte digest.
_TEXT_KEY_MAX_CHARS = 2048


CountBatch = Callable[[Sequence[str]], list[int]]
"""Counts of many texts in one call: ``texts -> [tokens of texts[0], ...]`` (same length, ints >= 0)."""
TokenSpans = Callable[[str], list[tuple[int, int]]]
"""Character spans ``[(start, end), ...]`` of each token of one text, in order."""


class TokenizerProfile:
    """A named way to count tokens; built-ins and plugins construct it the same way.

    Parameters
    ----------
    name:
        Stable profile name (``o200k_base``, ``claude-approx``, ...); the registry key.
    approximate:
        ``True`` when counts are estimates.
    version:
        Bumped whenever the rule changes, so cached or stored counts can be told apart.
    description:
        The estimation rule in words (shown in the GUI and docs).
    count_batch:
        ``texts -> counts``: tokens of each text (no chat overhead), one int per text, in
        order. Called only for texts not already in the profile's count cache, with each
        distinct text once; it must be deterministic per (``version``, text).
    spans:
        ``text -> [(start, end), ...]``: character spans of the tokens, for showing token
        boundaries; ``None`` shows the boundaries of the cl100k tokens instead.
    chat:
        The family's chat template as exact token accounting (a :class:`.templates.ChatTemplate`),
        or ``None`` for OpenAI chat accounting (:mod:`.accounting`).
    counts_without_gil:
        ``True`` when ``count_batch`` spends its time outside the GIL (a native encoder that
        releases it, as tiktoken's does): other Python threads run at full speed meanwhile, so a
        caller may count and do other work at once (a cold preview assembles its blocks while it
        counts the chat, :func:`engine.pipeline._assemble_blocks`). Default ``False``.

    Raises
    ------
    TypeError
        When no ``count_batch`` is given.

    Notes
    -----
    ``_count_batch`` / ``_encode`` are accepted as older spellings of ``count_batch`` /
    ``spans`` (profiles written before these arguments were public).

    Examples
    --------
    A plugin's ``setup(registries)`` registering a profile::

        profile = TokenizerProfile("words", approximate=True, version="1",
                                   description="estimate: one token per word",
                                   count_batch=lambda texts: [len(t.split()) for t in texts])
        return [registries.tokenizers.register(profile)]
    """

    def __init__(self, name: str, approximate: bool, version: str, description: str,
                 count_batch: CountBatch | None = None, *, spans: TokenSpans | None = None,
                 chat: ChatTemplate | None = None, counts_without_gil: bool = False,
                 _count_batch: CountBatch | None = None, _encode: TokenSpans | None = None) -> None:
        batch = count_batch if count_batch is not None else _count_batch
        if batch is None:
            raise TypeError(f"TokenizerProfile {name!r} needs count_batch (texts -> token counts)")
        self.name = name
        self.approximate = approximate
        self.version = version
        self.description = description
        self.count_batch: CountBatch = batch
        self.spans: TokenSpans | None = spans if spans is not None else _encode
        self.chat = chat
        self.counts_without_gil = counts_without_gil
        self._cache: dict[str | bytes, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"TokenizerProfile(name={self.name!r}, approximate={self.approximate!r}, "
                f"version={self.version!r}, description={self.description!r})")

    @staticmethod
    def _key(text: str) -> str | bytes:
        # Short texts are their own key (a str caches its hash: a lookup costs no hashing of the
        # text again); long ones are keyed by a digest, so the cache does not keep them alive.
        if len(text) <= _TEXT_KEY_MAX_CHARS:
            return text
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def _keys(self, texts: Sequence[str]) -> Sequence[str | bytes]:
        # texts up to _TEXT_KEY_MAX_CHARS are their own keys: one C-level pass checks it
        if not texts or max(map(len, texts)) <= _TEXT_KEY_MAX_CHARS:
            return texts
        return list(map(self._key, texts))

    def is_cached(self, text: str) -> bool:
        """Whether ``text``'s count is in the cache (a lookup, no counting)."""
        return self._key(text) in self._cache

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no chat overhead). Cached by content."""
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts for many texts; uncached texts are encoded in one batch.

        The cache is keyed by the text itself (or its BLAKE2b digest for texts over
        ``_TEXT_KEY_MAX_CHARS`` characters) and bounded to ``COUNT_CACHE_SIZE`` entries
        (oldest first out).
        """
        keys = self._keys(texts)
        out: list[int | None] = list(map(self._cache.get, keys))
        if None not in out:
            return out  # type: ignore[return-value]
        todo = _missing(texts, keys, out)
        counted = dict(zip(todo, map(int, self.count_batch(list(todo.values())))))
        self._store(counted)
        return list(map(counted.get, keys, out))  # type: ignore[arg-type]  # a count for every key

    def prime(self, texts: Sequence[str]) -> None:
        """Count ``texts`` into the cache (for a later :meth:`count_many`), in one batch; returns nothing.

        For texts that are mostly new (a chat's first preview: :func:`engine.pipeline._beside`):
        no lookup first, so a text already cached is counted again (with the same count).
        """
        todo = dict(zip(self._keys(texts), texts))  # each key once
        self._store(dict(zip(todo, map(int, self.count_batch(list(todo.values()))))))

    def _store(self, counted: dict[str | bytes, int]) -> None:
        """Add ``counted`` to the cache, the oldest entries out beyond ``COUNT_CACHE_SIZE``."""
        with self._lock:
            self._cache.update(counted)
            if len(self._cache) > COUNT_CACHE_SIZE:
                for k in list(self._cache)[: len(self._cache) - COUNT_CACHE_SIZE]:
                    self._cache.pop(k, None)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans ``[(start, end), ...]`` of each token, for showing token boundaries.

        Exact profiles give the real token boundaries (tokens that split a multi-byte
        character are merged into the span that completes it). Approximate profiles give
        the boundaries of the cl100k tokens they estimate from.
        """
        if self.spans is None:
            return _tiktoken_spans("cl100k_base", text)
        return self.spans(text)


def _missing(texts: Sequence[str], keys: Sequence[str | bytes], out: Sequence[int | None]) -> dict[str | bytes, str]:
    """The key → text of every text whose ``out`` is ``None``, each key once, in first-seen order."""
    at = list(compress(range(len(out)), map(is_, out, repeat(None))))
    return dict(zip(map(keys.__getitem__, at), map(texts.__getitem__, at)))


def _tiktoken_spans(encoding_name: str, text: str) -> list[tuple[int, int]]:
    return spans(get_encoding(encoding_name), text, set())


def _exact_spans(encoding_name: str) -> TokenSpans:
    def run(text: str) -> list[tuple[int, int]]:
        return _tiktoken_spans(encoding_name, text)

    return run


def _exact_batch(encoding_name: str) -> Callable[[Sequence[str]], list[int]]:
    """Exact counts of ``encoding_name``: :func:`engine.tokenizers.ordinary.count_ordinary` (one encoder call per chunk)."""
    def run(texts: Sequence[str]) -> list[int]:
        # Special-token text inside user content is counted as ordinary text, as the API does.
        return count_ordinary(get_encoding(encoding_name), texts)

    return run


def _scaled(factor: float, floor_chars_per_token: float | None = None,
            floor_factor: float = 1.0) -> Callable[[Sequence[str]], list[int]]:
    base = _exact_batch("cl100k_base")

    def run(texts: Sequence[str]) -> list[int]:
        counts = base(texts)
        out = []
        for text, c in zip(texts, counts):
            estimate = math.ceil(c * factor)
            if floor_chars_per_token:
                estimate = max(math.ceil(len(text) / floor_chars_per_token), math.ceil(c * floor_factor))
            out.append(estimate)
        return out

    return run


def _estimated(name: str, description: str, factor: float, floor_chars_per_token: float | None = None,
               floor_factor: float = 1.0) -> TokenizerProfile:
    """A built-in approximate profile (version ``1``) estimated from cl100k counts (tiktoken: outside the GIL)."""
    return TokenizerProfile(name, True, "1", description, _scaled(factor, floor_chars_per_token, floor_factor),
                            counts_without_gil=True)


class TokenizerRegistry(NamedRegistry[TokenizerProfile]):
    """Named tokenizer profiles. ``register`` returns a cleanup callable; duplicates raise."""

    kind = "tokenizer profile"
    unknown_code = "UNKNOWN_TOKENIZER"

    def register(self, profile: TokenizerProfile) -> Callable[[], None]:
        """Add ``profile``; raises ``SettingsError(DUPLICATE_REGISTRATION)`` if the name exists."""
        return self._add(profile.name, profile)


def builtin_profiles() -> Iterable[TokenizerProfile]:
    """The built-in profiles (two exact, five approximate); see the module docstring."""
    for enc in ("o200k_base", "cl100k_base"):
        yield TokenizerProfile(
            name=enc, approximate=False, version=f"tiktoken-{enc}",
            description=f"exact: OpenAI {enc} via tiktoken (offline ranks)",
            count_batch=_exact_batch(enc), spans=_exact_spans(enc), counts_without_gil=True,
        )
    yield _estimated("claude-approx", "estimate: ceil(cl100k tokens × 1.10) for Anthropic Claude", 1.10)
    yield _estimated("llama3-approx", "estimate: ceil(cl100k tokens × 1.02) for Meta Llama 3/4", 1.02)
    yield _estimated("mistral-approx", "estimate: ceil(cl100k tokens × 1.08) for Mistral models", 1.08)
    yield _estimated("gemini-approx",
                     "estimate: max(ceil(chars / 4), ceil(cl100k tokens × 0.95)) for Google Gemini", 1.0, 4.0, 0.95)
    yield _estimated("generic-approx", "estimate: max(ceil(chars / 3.35), cl100k tokens) for unknown models "
                     "(SillyTavern's fallback)", 1.0, 3.35, 1.0)
