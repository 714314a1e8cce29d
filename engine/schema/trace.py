"""``TraceRecord``: why one lorebook entry did or did not activate (``ContextPreview.lorebook_trace``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TraceRecord(BaseModel):
    """Why one entry did or did not activate (one record per entry of every book).

    ``book_index`` is the book's index in the books activated (in a preview's
    ``lorebook_trace``: in :func:`engine.resolve.chat_lorebooks`). ``code`` is a key of
    :data:`engine.lorebook.TRACE_CODES`; ``detail`` holds the evidence (matched key, message
    index, depth, recursion pass, roll, group winner, ...); ``tokens`` is set for entries whose
    content was counted (activated or budget-dropped). Records of entries that were never
    candidates are cached and shared between results of the same books: treat ``detail`` as
    read-only.
    """

    model_config = ConfigDict(frozen=True)

    book: str
    book_index: int
    uid: int | str
    comment: str = ""
    activated: bool
    code: str
    detail: dict[str, Any] = Field(default_factory=dict)
    tokens: int | None = None


__all__ = ["TraceRecord"]
