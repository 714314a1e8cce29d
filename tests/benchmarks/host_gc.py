"""The garbage-collector policy the benchmark's processes apply as the app does (issue 29 item 5).

The engine leaves the collector alone: the host owns it. The app's policy (``gui/gc_policy.py``,
``CollectorPolicy``) pauses automatic collection from a chat's load to its first preview
(:func:`hold`), then freezes what is alive and keeps automatic collection off while the chat is
open (:func:`settle`), collecting the young generations and freezing again after every later
preview once the views have applied it (:func:`tidy`: after the row is on screen, so outside a
toggle's clock; ``measure_engine.py`` reports its time apart). ``loomscope preview``
(``engine/cli.py``) runs its one-shot process without the collector.
"""

from __future__ import annotations

import gc
import time


def hold() -> None:
    """A chat is loading: collect what an earlier chat left, then pause automatic collection."""
    gc.collect()
    gc.disable()


def settle() -> None:
    """The chat's first preview is done: freeze what is alive; automatic collection stays off."""
    gc.disable()
    gc.freeze()


def tidy() -> float:
    """A later preview is applied: collect the young generations, freeze the rest; returns the seconds it took."""
    start = time.perf_counter()
    gc.collect(1)
    gc.freeze()
    return time.perf_counter() - start
