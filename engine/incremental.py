"""The incremental preview: what one pipeline run remembers for the next (issue 12 item 1).

The preview re-runs on every click and keystroke over chats of 10,000+ messages, and between
two runs almost nothing changes (one message pinned or excluded, one typed). Within a run
(:func:`blocks_frozen`) the engine treats every prompt block as immutable once built, so work
that depends only on blocks can be remembered per block *object*:

* tool groups (:func:`remembered_groups`): per list of blocks, reused when only blocks with the
  same tool shape changed (a toggle changes flags, not calls or results);
* per-message blocks and their token counts (:mod:`engine.assembly.stages`,
  :mod:`engine.pipeline`): a chat message's block is rebuilt only when the message, its position
  or its macro context changed; counts are remembered per block for each tokenizer profile.

Every cache lives in :mod:`engine.cache` (one owner). Outside a pipeline run nothing is
remembered: the public functions behave exactly as before for callers that build and mutate
their own blocks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import compress
from operator import is_not
from typing import Any, TypeVar

from .cache import lru

T = TypeVar("T")

_FROZEN: ContextVar[bool] = ContextVar("loomscope_blocks_frozen", default=False)

#: Tool groups per exact list of block objects, and the latest per list length (for reuse
#: across a toggle: same length, a few blocks replaced).
_GROUPS = lru(16)
_GROUPS_BY_LENGTH = lru(8)
_GROUPS_LOCK = threading.Lock()
#: Changed blocks above which tool groups are recomputed rather than compared shape by shape.
_REUSE_MAX_CHANGED = 256


@contextmanager
def frozen_blocks() -> Iterator[None]:
    """Mark the current pipeline run: blocks are not mutated once built, so they may be remembered."""
    token = _FROZEN.set(True)
    try:
        yield
    finally:
        _FROZEN.reset(token)


def blocks_frozen() -> bool:
    """Whether the caller runs inside :func:`frozen_blocks` (a pipeline run)."""
    return _FROZEN.get()


def changed_positions(new: Sequence[Any], old: Sequence[Any]) -> list[int]:
    """Positions ``i < min(len)`` where ``new[i] is not old[i]`` (one C-level pass)."""
    return list(compress(range(min(len(new), len(old))), map(is_not, new, old)))


def remembered_groups(blocks: Sequence[Any], shape: Callable[[Any], Any],
                      compute: Callable[[Sequence[Any]], T]) -> T:
    """``compute(blocks)``, remembered per list of block objects.

    A list seen before gives the remembered result. A list of the same length as the latest
    one, whose replaced blocks all have the same ``shape`` as the blocks they replace, gives the
    latest result too (tool groups depend on shapes and positions only).
    """
    key = tuple(map(id, blocks))
    hit = _GROUPS.get(key)
    if hit is not None:
        return hit[1]
    result: Any = None
    prev = _GROUPS_BY_LENGTH.get(len(blocks))
    if prev is not None:
        changed = changed_positions(blocks, prev[0])
        if len(changed) <= _REUSE_MAX_CHANGED and all(shape(blocks[i]) == shape(prev[0][i]) for i in changed):
            result = prev[1]
    if result is None:
        result = compute(blocks)
    entry = (tuple(blocks), result)  # holds the blocks: their ids stay unique while remembered
    with _GROUPS_LOCK:
        _GROUPS[key] = entry
        _GROUPS_BY_LENGTH[len(blocks)] = entry
    return result


__all__ = ["blocks_frozen", "changed_positions", "frozen_blocks", "remembered_groups"]
