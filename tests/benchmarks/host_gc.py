"""The garbage-collector policy the benchmark's processes apply as the app does (issue 29 item 5).

The engine leaves the collector alone: the host owns it. The app's policy (``gui/gc_policy.py``,
``CollectorPolicy``) pauses automatic collection from a chat's load to its first preview
(:func:`hold`), then freezes what is alive and resumes collection (:func:`settle`); ``loomscope
preview`` (``engine/cli.py``) runs its one-shot process without the collector. ``measure_engine.py``
and ``measure_st.py`` drive the public ``preview()`` the way the app does: :func:`hold` before the
cold preview, :func:`settle` after it, every later preview with the collector on.
"""

from __future__ import annotations

import gc


def hold() -> None:
    """A chat is loading: collect what an earlier chat left, then pause automatic collection."""
    gc.collect()
    gc.disable()


def settle() -> None:
    """The chat's first preview is done: freeze what is alive (the chat, its preview), collect again as usual."""
    gc.freeze()
    gc.enable()
