"""engine/importers/_io.py: the nesting check that guards every JSON import."""

from __future__ import annotations

from typing import Any

import pytest

from engine.importers._io import json_depth_ok


def _depth(value: Any) -> int:
    """Containers on the deepest path (a scalar: 0), recursively: the definition the check implements."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _nest(depth: int, leaf: Any = 1) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


SHAPES = [1, "s", None, [], {}, [1, "a", None], {"a": [1, {"b": []}]}, _nest(5), _nest(7, leaf=[]),
          [{"role": "user", "content": "x"}] * 50 + [_nest(6)], {"a": 1, "b": _nest(3), "c": [_nest(4)]}]


@pytest.mark.parametrize("value", SHAPES, ids=range(len(SHAPES)))
def test_json_depth_ok_is_depth_at_most_limit(value: Any) -> None:
    for limit in range(0, 10):
        assert json_depth_ok(value, limit) is (_depth(value) <= limit), limit


def test_json_depth_ok_needs_no_recursion_at_any_depth() -> None:
    deep = _nest(100_000)
    assert json_depth_ok(deep, 100_000) and not json_depth_ok(deep, 99_999)
