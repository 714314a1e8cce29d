"""engine.cache: every cache has one owner, and clear_caches empties all of them (issue 10 item 3)."""

from __future__ import annotations

from engine.cache import IdentityMemo, clear_caches, lru, memoized
from engine.lorebook.jsregex import compile_js


def test_clear_caches_empties_lru_memoized_and_identity_memos() -> None:
    calls: list[int] = []

    @memoized(8)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    cache = lru(4)
    memo: IdentityMemo[int] = IdentityMemo(4)
    key = object()
    cache["a"] = 1
    memo.store([key], [7])
    assert (square(3), square(3), calls) == (9, 9, [3])
    clear_caches()
    assert len(cache) == 0 and len(memo) == 0 and memo.lookup([key]) == [None]
    assert square(3) == 9 and calls == [3, 3]


def test_the_engines_memoized_functions_are_registered() -> None:
    compile_js("/harbou?r/i", "harbou?r", "i")
    assert compile_js.cache_info().currsize >= 1
    clear_caches()
    assert compile_js.cache_info().currsize == 0
