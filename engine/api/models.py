"""Bodies of the local HTTP API that are not engine models themselves.

The engine models are the API's schema (STYLE §7): ``GET .../context-audit`` returns a
:class:`~engine.schema.audit.PromptContextAudit`, ``POST /api/v2/context-preview`` returns a
:class:`~engine.schema.preview.ContextPreview` and accepts a
:class:`~engine.schema.request.PreviewRequest`. This module adds the library form of the
preview body, the error envelope and the health answer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from ..schema import PreviewRequest


class ChatPreviewBody(BaseModel):
    """Preview a chat of the library, optionally with unsaved setting changes.

    Attributes
    ----------
    chat_id:
        Id of a library chat (``GET /api/v2/chats``). Unknown id → 404 ``CHAT_NOT_FOUND``.
    settings:
        A partial :class:`~engine.schema.settings.ContextSettings` merged over the chat's stored
        settings: keys given replace stored ones, nested objects (``world_info``,
        ``strategy_options``) are merged key by key, lists (``template``) are replaced whole.
        Nothing is saved. Unknown keys or bad values → 422 ``INVALID_SETTINGS``.
    speaker:
        A group chat (imported from a SillyTavern folder's ``groups/``): the member (name or card
        file name) whose next reply to preview; ``None``: the member SillyTavern's activation
        strategy picks where that is deterministic, else the first in list order (with a
        warning). On a chat that is not a group chat, or naming no member → 422 ``INVALID_SETTINGS``.
    """

    model_config = ConfigDict(extra="forbid")

    chat_id: str = Field(min_length=1)
    settings: dict[str, Any] | None = None
    speaker: str | None = None  # issue 27 item 7 (group chats)


def _preview_body_kind(value: Any) -> str:
    """``"chat"`` when the body names a library chat, else ``"request"`` (a full PreviewRequest)."""
    if isinstance(value, dict):
        return "chat" if "chat_id" in value else "request"
    return "chat" if isinstance(value, ChatPreviewBody) else "request"


#: Body of ``POST /api/v2/context-preview``: a full :class:`PreviewRequest`, or
#: ``{"chat_id": ..., "settings": {...}}`` for a library chat (chosen by the ``chat_id`` key).
PreviewBody = Annotated[
    Annotated[ChatPreviewBody, Tag("chat")] | Annotated[PreviewRequest, Tag("request")],
    Discriminator(_preview_body_kind),
]


class ErrorInfo(BaseModel):
    """A stable error: ``code`` is one of :data:`engine.errors.ERROR_CODES`; map it, never parse ``message``.

    ``file`` names the input the error is about (a chat id, ``body``, ``settings``), ``place``
    where inside it (a JSON path such as ``$.settings.reply_reserve``), ``details`` extra
    structured fields (for validation errors: ``{"errors": [{"loc", "msg", "type"}, ...]}``).
    """

    code: str
    message: str
    file: str | None = None
    place: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    """Every non-2xx answer of the API: ``{"error": {"code": ..., "message": ..., ...}}``."""

    error: ErrorInfo


class Health(BaseModel):
    """``GET /api/v2/health``: the server is up and its library answers."""

    status: Literal["ok"] = "ok"
    version: str
    api: Literal["v2"] = "v2"
    database: str = Field(description="SQLAlchemy dialect of the library (sqlite, postgresql, ...)")
    chats: int = Field(ge=0, description="number of chats in the library")
