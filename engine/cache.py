"""The engine's caches, in one place (issue 10 item 3, issue 12 item 1).

Two kinds, each with one owner here:

* :func:`lru` — a bounded least-recently-used mapping (``cachetools.LRUCache``) for coarse
  results: a World Info activation, a chat's assembled history, tool groups. Every cache made
  here is registered, so :func:`clear_caches` empties all of them (tests, a library switch).
* :func:`memoized` — a pure function's results by its (hashable) arguments: ``functools.lru_cache``
  (compiled key matchers, translated regexes, word-boundary checks), registered here too.
* :class:`IdentityMemo` — values remembered per *object* (by ``id``, holding the object so the
  id stays unique), looked up for a whole list in one C-level pass. The preview re-runs on every
  click over chats of 10,000+ messages: a per-message Python lookup costs more than the work it
  saves, ``map(dict.get, map(id, objs))`` does not. Keys are objects the engine treats as
  immutable once built (prompt blocks, provider messages); see :mod:`engine.incremental`.

Per-text token counts stay on each :class:`~engine.tokenizers.TokenizerProfile` (one cache per
profile, keyed by the text; a profile owns its counts).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, Generic, ParamSpec, TypeVar

from cachetools import LRUCache

K = TypeVar("K")
P = ParamSpec("P")
R = TypeVar("R")
V = TypeVar("V")

_REGISTERED: list[weakref.ref[Any]] = []
_REGISTER_LOCK = threading.Lock()


def _register(cache: Any) -> None:
    with _REGISTER_LOCK:
        _REGISTERED[:] = [r for r in _REGISTERED if r() is not None]
        _REGISTERED.append(weakref.ref(cache))


def lru(maxsize: int) -> LRUCache[Any, Any]:
    """A new least-recently-used cache of at most ``maxsize`` entries, cleared by :func:`clear_caches`.

    Not thread-safe by itself: callers that share one across threads hold their own lock
    around a get-compute-put (the engine's caches hold immutable values, so a lost race only
    costs a recomputation).
    """
    cache: LRUCache[Any, Any] = LRUCache(maxsize=maxsize)
    _register(cache)
    return cache


class _Memo:
    """The :func:`clear_caches` handle of one :func:`memoized` function (held by the function)."""

    def __init__(self, clear: Callable[[], None]) -> None:
        self.clear = clear


def memoized(maxsize: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: ``functools.lru_cache(maxsize)`` whose cache :func:`clear_caches` also empties.

    For pure functions of hashable arguments (the result must not be mutated by callers).
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        cached = lru_cache(maxsize=maxsize)(fn)
        handle = _Memo(cached.cache_clear)
        cached.__dict__["_loomscope_cache"] = handle  # keeps the weakly registered handle alive
        _register(handle)
        return cached  # type: ignore[return-value]  # lru_cache's wrapper keeps fn's signature

    return wrap


class IdentityMemo(Generic[V]):
    """Values remembered per object identity, for whole lists at a time.

    Parameters
    ----------
    maxsize:
        Objects remembered; past it the oldest half is forgotten (insertion order).

    Notes
    -----
    The memo holds a strong reference to every key object, so an ``id`` is never reused by
    another object while it is remembered. Keys must not change after they are stored (the
    engine stores only blocks and provider messages it built and never mutates afterwards).
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._values: dict[int, V] = {}
        self._keep: dict[int, Any] = {}
        self._lock = threading.Lock()
        _register(self)

    def lookup(self, objs: Iterable[Any]) -> list[V | None]:
        """The remembered value of each object, ``None`` where there is none (one C-level pass)."""
        return list(map(self._values.get, map(id, objs)))

    def store(self, objs: Sequence[Any], values: Sequence[V]) -> None:
        """Remember ``values[i]`` for ``objs[i]``."""
        with self._lock:
            for obj, value in zip(objs, values):
                key = id(obj)
                self._values[key] = value
                self._keep[key] = obj
            if len(self._values) > self.maxsize:
                drop = len(self._values) - self.maxsize // 2
                for key in list(self._values)[:drop]:
                    del self._values[key]
                    del self._keep[key]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._values.clear()
            self._keep.clear()

    def __len__(self) -> int:
        return len(self._values)


def clear_caches() -> None:
    """Empty every cache made by :func:`lru` or :func:`memoized`, and every :class:`IdentityMemo`."""
    for ref in list(_REGISTERED):
        cache = ref()
        if cache is not None:
            cache.clear()


__all__ = ["IdentityMemo", "clear_caches", "lru", "memoized"]
