"""Keep Python's cyclic garbage collector off the UI thread's critical path.

A 10,000-message chat and its preview are a few hundred thousand live Python objects (pydantic
messages and blocks, their dicts). CPython's full (generation 2) collection walks all of them:
measured 120–190 ms on this machine class, collecting nothing, and it runs whenever enough new
objects have piled up: in the middle of applying a preview, or on a worker thread holding the
GIL, which blocks the UI thread just the same. :func:`freeze_long_lived` moves every object alive
now into the permanent generation (:func:`gc.freeze`), so later collections only walk what was
allocated since. Frozen objects are still freed by reference counting when the chat or preview
they belong to is dropped; only reference cycles among them would outlive it (pydantic models
and the engine's results form none).
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> None:
    """Exempt every object alive now from future cyclic collections (:func:`gc.freeze`).

    Called on the main thread after a chat has been read (``ChatLoader``) and after a preview
    has been delivered (``PreviewController``): the points where a large set of long-lived
    objects has just been built. Constant time.
    """
    gc.freeze()
