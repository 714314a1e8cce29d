"""The FastAPI application of the local HTTP API (SPEC §7).

Build it with :func:`create_app`; one app serves one :class:`~engine.storage.Store` and keeps
no module globals. Routes (all JSON, all under ``/api/v2``):

``GET /api/v2/docs`` (and ``GET /``, a page linking to it)
    Interactive API docs (Swagger UI served locally, :mod:`engine.api.docs`).
``GET /api/v2/health``
    :class:`~engine.api.models.Health`.
``GET /api/v2/chats``
    ``list[ChatSummary]``, the same objects ``loomscope chats --format json`` prints.
``GET /api/v2/chats/{chat_id}/context-audit``
    The stored :class:`~engine.schema.audit.PromptContextAudit` (what ``loomscope audit
    --format json`` prints); 404 ``CHAT_NOT_FOUND`` / ``AUDIT_NOT_FOUND``.
``POST /api/v2/context-preview``
    Body: a :class:`~engine.schema.request.PreviewRequest`, or ``{"chat_id", "settings"}``
    (:class:`~engine.api.models.ChatPreviewBody`) for a library chat. Runs
    :func:`engine.pipeline.preview` (the same persona, lorebook, memory, template, tokenizer and
    shifting stages as generation) and returns the :class:`~engine.schema.preview.ContextPreview`.
    Read-only: it creates no messages, branches or audits. A budget overflow is **not** an HTTP
    error: the answer is 200 and ``error.code`` is ``TOKEN_BUDGET_EXCEEDED``.

Errors are ``{"error": {"code", "message", "file", "place", "details"}}`` with the status taken
from the stable code (:mod:`engine.api.errors`). Requests whose ``Host`` header is not one of
``allowed_hosts`` are refused (400 ``INVALID_REQUEST``), so a web page cannot reach the API
through DNS rebinding; a body sent with a Content-Type other than JSON is refused (415
``INVALID_REQUEST``). Status by code: 400 unparsable JSON (``INVALID_REQUEST``); 404
``CHAT_NOT_FOUND`` / ``AUDIT_NOT_FOUND`` / ``ROUTE_NOT_FOUND``; 422 ``INVALID_SETTINGS``,
``INVALID_REQUEST`` (wrong fields or types), ``UNKNOWN_STRATEGY``, ``UNKNOWN_TOKENIZER``;
503 ``STORAGE_ERROR``; 500 ``INTERNAL_ERROR``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from ..assembly.st_group import with_speaker
from ..errors import LoomscopeError, NotFoundError, SettingsError
from ..pipeline import preview as run_preview
from ..schema import ContextPreview, ContextSettings, PreviewRequest
from ..schema.audit import PromptContextAudit
from ..storage import ChatSummary, Store
from .docs import install_docs
from .errors import (
    error_response,
    json_path,
    loomscope_error_response,
    status_for,
    validation_error_response,
)
from .limits import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES, BodyGuard
from .models import ChatPreviewBody, ErrorBody, Health, PreviewBody

if TYPE_CHECKING:
    from ..registries import Registries

log = logging.getLogger("loomscope.api")

API_PREFIX = "/api/v2"

#: ``Host`` header names accepted by default (the server listens on loopback).
LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")

_ERRORS_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "CHAT_NOT_FOUND or AUDIT_NOT_FOUND"}}
_ERRORS_BODY: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "INVALID_REQUEST: the body is not JSON"},
    404: {"model": ErrorBody, "description": "CHAT_NOT_FOUND (library form)"},
    422: {"model": ErrorBody, "description": "INVALID_SETTINGS, INVALID_REQUEST, UNKNOWN_STRATEGY or "
                                             "UNKNOWN_TOKENIZER"},
}


#: RFC 9110 §7.2 ``Host = uri-host [ ":" port ]`` with RFC 3986 hosts: an IP literal in brackets
#: (IPv6 hex digits, colons and dots only) or a reg-name / IPv4 (letters, digits, ``-``, ``.``); a
#: port of digits only. Anything else (``[::1]evil.com``, ``localhost:80@evil.com``, user info,
#: spaces) does not match and is refused.
_HOST_RE = re.compile(r"\[(?P<ip6>[0-9a-f:.]+)\](?::(?P<port6>[0-9]{1,5}))?|(?P<name>[a-z0-9.-]+)(?::(?P<port>[0-9]{1,5}))?")


def _host_name(header: str | None) -> str | None:
    """The host part of a ``Host`` header, parsed strictly; ``None`` when it is malformed.

    ``[::1]:8765`` → ``::1``, ``localhost:80`` → ``localhost``; ``[::1]evil.com``,
    ``localhost:80@evil.com``, ``localhost:http`` and ``localhost.`` → ``None``. A trailing dot makes a
    name fully qualified: ``localhost.`` is looked up in DNS, not in the hosts file, so it is not the
    loopback name (issue 25).
    """
    if not header:
        return None
    m = _HOST_RE.fullmatch(header.strip().lower())
    if m is None:
        return None
    name = m.group("ip6") or m.group("name") or ""
    if name.endswith("."):
        return None
    return name or None


def _version() -> str:
    """The installed distribution's version (``"0"`` when running from an uninstalled tree)."""
    try:
        return version("loomscope")
    except PackageNotFoundError:  # pragma: no cover
        return "0"


def merge_settings(base: ContextSettings, overrides: dict[str, Any] | None) -> ContextSettings:
    """``base`` with ``overrides`` merged in (dicts key by key, everything else replaced).

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` (``place`` = JSON path of the first bad value) when the merged
        settings do not validate (unknown key, value out of range, ...).
    """
    if not overrides:
        return base

    def merge(into: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        out = dict(into)
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = value
        return out

    try:
        return ContextSettings.model_validate(merge(base.model_dump(mode="json"), overrides))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        first = errors[0]
        where = json_path(("settings", *first["loc"]))
        raise SettingsError(
            "INVALID_SETTINGS", f"{where}: {first['msg']}", file="settings", place=where,
            details={"errors": [{"loc": ["settings", *e["loc"]], "msg": e["msg"], "type": e["type"]}
                                for e in errors]},
        ) from None


def create_app(
    store: Store,
    *,
    registries: Registries | None = None,
    allowed_hosts: Iterable[str] | None = LOOPBACK_HOSTS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
) -> FastAPI:
    """Build the API over ``store``.

    Parameters
    ----------
    store:
        The library every route reads (the app never closes it; the caller owns it).
    registries:
        :class:`engine.registries.Registries` for previews; ``None`` uses the pipeline's shared
        default (built-ins plus installed plugins, as the CLI does).
    allowed_hosts:
        Accepted ``Host`` header names (without port); ``None`` accepts any (``serve
        --allow-remote``). The default accepts loopback names only. The header is parsed
        strictly (``[::1]evil.com`` and ``localhost:80@evil.com`` are refused).
    max_body_bytes:
        Largest request body (bytes, default 16 MiB); larger → 413 ``INVALID_REQUEST``.
    body_timeout_s:
        Longest time (seconds) to receive a whole body; slower → 408 ``INVALID_REQUEST``.

    Returns
    -------
    FastAPI
        The ASGI app; serve it with uvicorn (see :func:`engine.api.server.make_server`).
    """
    version = _version()
    app = FastAPI(
        title="Loomscope local API",
        version=version,
        description="See exactly what an LLM will see: context previews and generation audits. "
                    "Every error is {\"error\": {\"code\", \"message\", ...}} with a stable code.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,  # FastAPI's Swagger UI loads scripts from a CDN: engine.api.docs serves them locally
        redoc_url=None,
    )
    install_docs(app, API_PREFIX)
    app.state.store = store
    # body size, read time and strict JSON, before any route or FastAPI's own parsing (engine.api.limits)
    app.add_middleware(BodyGuard, max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s)
    hosts = None if allowed_hosts is None else frozenset(h.lower().strip("[]") for h in allowed_hosts)
    _install_request_guard(app, hosts)
    _install_error_handlers(app)
    # Plain ``def`` routes run in the threadpool: the pipeline is CPU-bound and the Store opens
    # one session per call, so concurrent requests are safe.
    app.include_router(_meta_routes(store, version))
    app.include_router(_library_routes(store))
    app.include_router(_preview_routes(store, registries))
    return app


# ---------------------------------------------------------------------- guards and errors

def _refused_request(request: Request, hosts: frozenset[str] | None) -> JSONResponse | None:
    """The error answer for a request with a foreign ``Host`` or a non-JSON body; ``None`` to go on."""
    if hosts is not None and _host_name(request.headers.get("host")) not in hosts:
        return error_response(400, "INVALID_REQUEST", "the Host header is not allowed for this "
                              "local server (start it with --allow-remote to serve other names)",
                              file="Host")
    if request.method in ("POST", "PUT", "PATCH"):
        ctype = request.headers.get("content-type")
        mime = (ctype or "").split(";", 1)[0].strip().lower()
        if ctype is not None and mime != "application/json" and not mime.endswith("+json"):
            return error_response(415, "INVALID_REQUEST",
                                  f"send the body as application/json, not {mime or ctype!r}",
                                  file="Content-Type")
    return None


def _install_request_guard(app: FastAPI, hosts: frozenset[str] | None) -> None:
    """Refuse foreign hosts and non-JSON bodies; answer an unexpected exception with a 500 envelope."""

    @app.middleware("http")
    async def _check_request(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        refused = _refused_request(request, hosts)
        if refused is not None:
            return refused
        try:
            return await call_next(request)
        except Exception as exc:
            # Answered here rather than by an ``Exception`` handler: Starlette's
            # ServerErrorMiddleware re-raises after sending its 500, and uvicorn then drops the
            # keep-alive connection, so a client's next request on it failed with a reset.
            log.error("unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
            return error_response(500, "INTERNAL_ERROR", f"unexpected {type(exc).__name__} inside Loomscope")


def _install_error_handlers(app: FastAPI) -> None:
    """Every error as the JSON envelope with the status of its stable code (:mod:`engine.api.errors`)."""

    @app.exception_handler(LoomscopeError)
    async def _on_loomscope_error(_request: Request, exc: LoomscopeError) -> JSONResponse:
        if exc.code not in ("CHAT_NOT_FOUND", "AUDIT_NOT_FOUND"):
            log.info("API error %s: %s", exc.code, exc.describe())
        return loomscope_error_response(_with_json_place(exc))

    @app.exception_handler(RequestValidationError)
    async def _on_validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error_response(exc.errors())

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(404, "ROUTE_NOT_FOUND", f"no API route at this path (see "
                                  f"{API_PREFIX}/openapi.json)", file=str(request.url.path))
        if exc.status_code == 405:
            return error_response(405, "ROUTE_NOT_FOUND", f"{request.method} is not allowed on this route",
                                  file=str(request.url.path), headers=exc.headers)
        code = "INVALID_REQUEST" if 400 <= exc.status_code < 500 else "INTERNAL_ERROR"
        return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return error_response(500, "INTERNAL_ERROR", f"unexpected {type(exc).__name__} inside Loomscope")


# ---------------------------------------------------------------------- routes, one router per resource

def _meta_routes(store: Store, version: str) -> APIRouter:
    """``GET /health``."""
    router = APIRouter()

    @router.get(f"{API_PREFIX}/health", response_model=Health, tags=["meta"])
    def health() -> Health:
        """The server is up; the library answers (its dialect and chat count)."""
        return Health(version=version, database=store.dialect, chats=len(store.chats.summaries()))

    return router


def _library_routes(store: Store) -> APIRouter:
    """``GET /chats`` and ``GET /chats/{chat_id}/context-audit``."""
    router = APIRouter()

    @router.get(f"{API_PREFIX}/chats", response_model=list[ChatSummary], tags=["library"])
    def list_chats() -> list[ChatSummary]:
        """Every chat, most recently changed first (as ``loomscope chats --format json``)."""
        return store.chats.summaries()

    @router.get(f"{API_PREFIX}/chats/{{chat_id}}/context-audit", response_model=PromptContextAudit,
                responses=_ERRORS_404, tags=["audit"])
    def context_audit(chat_id: str) -> PromptContextAudit:
        """The audit of the chat's last generation (as ``loomscope audit CHAT_ID --format json``).

        404 ``CHAT_NOT_FOUND`` when the chat does not exist, 404 ``AUDIT_NOT_FOUND`` when it
        has no stored audit yet.
        """
        audit = store.audits.get(chat_id)
        if audit is None:
            raise NotFoundError("AUDIT_NOT_FOUND", "the chat has no stored audit (no generation yet)",
                                file=chat_id)
        return audit

    return router


def _preview_routes(store: Store, registries: Registries | None) -> APIRouter:
    """``POST /context-preview``."""
    router = APIRouter()

    @router.post(f"{API_PREFIX}/context-preview", response_model=ContextPreview, responses=_ERRORS_BODY,
                 tags=["preview"])
    def context_preview(body: Annotated[PreviewBody, Body()]) -> ContextPreview:
        """Assemble and budget a prompt without sending or storing anything.

        The body is a full ``PreviewRequest``, or ``{"chat_id": ..., "settings": {...}}`` to
        preview a library chat with optional unsaved setting overrides (merged over the chat's
        stored settings). ``TOKEN_BUDGET_EXCEEDED`` is not an HTTP error: the answer is 200 and
        its ``error`` field carries the code and the overflow.
        """
        request = body if isinstance(body, PreviewRequest) else _library_request(store, body)
        return run_preview(request, registries=registries)

    return router


#: JSON path of the setting an error code is about, for 422 answers that carry no path of their own.
_PLACE_OF_CODE = {"UNKNOWN_STRATEGY": "$.settings.strategy", "UNKNOWN_TOKENIZER": "$.settings.tokenizer"}


def _with_json_place(exc: LoomscopeError) -> LoomscopeError:
    """Every 422 answer names a JSON path in ``place`` (issue 15).

    Validation errors already carry one; engine errors raised while previewing get the path of
    the setting their code is about, ``$.settings.<field>`` from a settings field or CLI flag
    they name, or ``$`` (the whole body).
    """
    if status_for(exc.code) != 422 or (exc.place or "").startswith("$"):
        return exc
    where = _PLACE_OF_CODE.get(exc.code)
    if where is None:
        hint = (exc.place or exc.file or "").strip()
        field = hint.removeprefix("--").replace("-", "_").removeprefix("settings.").split(" ")[0]
        if exc.code == "INVALID_SETTINGS":
            where = f"$.settings.{field}" if field and field in ContextSettings.model_fields else "$.settings"
        else:
            where = "$"
    exc.place = where
    return exc


def _library_request(store: Store, body: ChatPreviewBody) -> PreviewRequest:
    """The chat's stored request with ``body.settings`` merged over its settings (nothing saved)."""
    request = store.chats.build_request(body.chat_id)
    if body.settings:
        request = request.model_copy(update={"settings": merge_settings(request.settings, body.settings)})
    return with_speaker(request, body.speaker, where="$.speaker")
