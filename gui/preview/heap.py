"""Keep Python's cyclic garbage collector off the UI thread's critical path.

A 10,000-message chat and its preview are a few hundred thousand live Python objects (pydantic
messages and blocks, their dicts). CPython's full (generation 2) collection walks all of them:
measured 120–190 ms on this machine class, collecting nothing, and it runs whenever enough new
objects have piled up: in the middle of applying a preview, or on a worker thread holding the
GIL, which blocks the UI thread just the same. :func:`freeze_long_lived` moves every object alive
now into the permanent generation (:func:`gc.freeze`), so later collections only walk what was
allocated since. The engine also pauses the collector while it builds a preview
(``engine.pipeline``), so a fresh preview arrives entirely in the youngest generation, and the
next collection would walk all of it: freezing it on arrival avoids that too. Frozen objects are still freed by reference counting when the chat or preview
they belong to is dropped; only reference cycles among them would outlive it (pydantic models
and the engine's results form none).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_long_lived() -> None:
    """Exempt every object alive now from future cyclic collections (:func:`gc.freeze`).

    Called on the main thread when a chat has been read (``ChatLoader``) and when a preview
    arrives (``PreviewController``, before the views take it): the points where a large set of
    long-lived objects has just been built. Constant time.
    """
    gc.freeze()


@contextmanager
def young_objects_frozen() -> Iterator[None]:
    """Run a preview computation (or the views' apply of its result, on the UI thread) with the
    collector paused, and freeze what it built before the collector runs again.

    The engine pauses the collector itself while it builds a preview; when it turns it back on,
    the next allocation (still on the worker, holding the GIL) would start a collection walking
    every block it made: 10-15 ms at 10,000 messages, which delays the result and stalls the UI
    thread. Pausing here makes the engine's own pause a no-op, and the freeze leaves the
    collector nothing young to walk. Restores the collector's previous state.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
