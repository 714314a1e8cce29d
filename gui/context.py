"""``AppContext``: the one object the app builds and passes down (STYLE.md 3).

Like git-cola's ``ApplicationContext``: widgets receive it in their constructor and read what
they need from it; there are no module globals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QSettings
from PySide6.QtGui import QUndoStack

from .document import ChatDocument
from .preview import PreviewController

if TYPE_CHECKING:
    from engine.registries import Registries
    from engine.storage import Store

    from .gc_policy import CollectorPolicy


@dataclass
class AppContext:
    """Everything the widgets share.

    Attributes
    ----------
    store:
        The library (:class:`engine.storage.Store`), or ``None`` when the window runs on an
        in-memory request (tests, no database).
    registries:
        The engine registries (``engine.pipeline.Registries``: ``tokenizers``, ``strategies``,
        ``interceptors``, ``stages``), shared by preview and generation.
    preview:
        The debounced preview controller; connect to ``preview.preview_ready(PreviewOutcome)``.
    undo_stack:
        Pin, exclude and lorebook edits go through it.
    settings:
        Persistent UI settings (window layout, last chat, provider).
    document:
        The open chat: its current request, chat id and lorebook ids.
    gc_policy:
        The app's garbage-collector policy (:mod:`gui.gc_policy`): held while a chat loads, frozen
        after its first preview, then the young generations collected and frozen after each later
        preview, on the main thread.
    """

    store: Store | None
    registries: Registries
    preview: PreviewController
    undo_stack: QUndoStack
    settings: QSettings
    document: ChatDocument
    gc_policy: CollectorPolicy | None = None
