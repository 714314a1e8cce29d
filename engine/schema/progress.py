"""Progress events that long pipeline steps report (streaming, compaction, ...).

Any step reports through a callback ``on_progress(ProgressEvent)``; the GUI shows each running
step inline in the chat view like a tool-call indicator, keyed by ``step_id``, so a new step
plugs in without GUI changes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ProgressEvent(BaseModel):
    """One progress report.

    Attributes
    ----------
    step_id:
        Stable id of this run of the step (events with the same id update one indicator).
    step:
        Step kind (``"stream"``, ``"compaction"``, ``"request"``, ...).
    label:
        Human text (``"Streaming reply…"``).
    state:
        ``running`` until the step ends with ``done``, ``failed`` or ``cancelled``.
    fraction:
        0.0–1.0 when known, else ``None`` (indeterminate).
    text:
        Partial output so far (streamed reply text), when the step has any.
    """

    model_config = ConfigDict(frozen=True)

    step_id: str
    step: str
    label: str
    state: Literal["running", "done", "failed", "cancelled"] = "running"
    fraction: float | None = None
    text: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
