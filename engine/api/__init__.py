"""The local HTTP API (SPEC §7): FastAPI app factory and a uvicorn server on loopback.

``create_app(store)`` builds the app over one library (no module globals);
``make_server(store, host=..., port=...)`` checks the host (loopback unless ``allow_remote``),
binds it and returns the uvicorn server that ``loomscope serve`` runs. Routes and error
envelope: see :mod:`engine.api.app` and :mod:`engine.api.errors`.
"""

from __future__ import annotations

from .app import API_PREFIX, LOOPBACK_HOSTS, create_app, merge_settings
from .errors import status_for
from .models import ChatPreviewBody, ErrorBody, ErrorInfo, Health, PreviewBody
from .server import DEFAULT_HOST, DEFAULT_PORT, ApiServer, check_host, is_loopback, make_server

__all__ = [
    "API_PREFIX", "DEFAULT_HOST", "DEFAULT_PORT", "LOOPBACK_HOSTS", "ApiServer", "ChatPreviewBody",
    "ErrorBody", "ErrorInfo", "Health", "PreviewBody", "check_host", "create_app", "is_loopback",
    "make_server", "merge_settings", "status_for",
]
