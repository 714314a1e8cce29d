"""Error answers of the local HTTP API: stable codes in one JSON envelope.

Every non-2xx answer is ``{"error": {"code", "message", "file", "place", "details"}}``
(:class:`~engine.api.models.ErrorBody`). The HTTP status is chosen from the error's ``code``
(:func:`status_for`), never from its message. ``TOKEN_BUDGET_EXCEEDED`` is not an HTTP error:
a preview whose protected blocks overflow the budget is a successful answer whose
``error`` field carries the code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.responses import JSONResponse

from ..errors import LoomscopeError

#: Codes answered with 422 Unprocessable Content (the body parsed, but its values are wrong).
_UNPROCESSABLE = frozenset({
    "INVALID_REQUEST", "INVALID_SETTINGS", "UNKNOWN_STRATEGY", "UNKNOWN_TOKENIZER",
})


def status_for(code: str) -> int:
    """HTTP status for a stable error code.

    ``*_NOT_FOUND`` → 404; settings and validation codes → 422; ``IMPORT_*`` → 422;
    ``STORAGE_ERROR`` → 503 (the library is unavailable); anything else → 500.
    """
    if code.endswith("_NOT_FOUND") and not code.startswith("IMPORT_"):
        return 404
    if code in _UNPROCESSABLE or code.startswith("IMPORT_"):
        return 422
    if code == "STORAGE_ERROR":
        return 503
    return 500


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    file: str | None = None,
    place: str | None = None,
    details: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The JSON error envelope with ``status``."""
    body = {"error": {"code": code, "message": message, "file": file, "place": place,
                      "details": dict(details or {})}}
    return JSONResponse(body, status_code=status, headers=headers)


def loomscope_error_response(exc: LoomscopeError) -> JSONResponse:
    """Map a :class:`LoomscopeError` to its status (by ``exc.code``) and envelope.

    Server-side failures (5xx) keep only the code, message and file: their ``details`` may hold
    database driver text, which is logged, not sent.
    """
    status = status_for(exc.code)
    details = exc.details if status < 500 else {}
    return error_response(status, exc.code, exc.message, file=exc.file, place=exc.place,
                          details=_jsonable(details))


def json_path(loc: Sequence[Any]) -> str:
    """``("settings", "world_info", "scan_depth")`` → ``$.settings.world_info.scan_depth``; ints → ``[i]``."""
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validation_error_response(errors: Sequence[dict[str, Any]]) -> JSONResponse:
    """A request-validation failure as a stable code.

    Unparsable JSON → 400 ``INVALID_REQUEST``; a value under ``settings`` → 422
    ``INVALID_SETTINGS``; any other field → 422 ``INVALID_REQUEST``. ``place`` is the JSON path
    of the first problem; ``details.errors`` lists them all as ``{"loc", "msg", "type"}``
    (the rejected input itself is not echoed back).
    """
    cleaned = []
    for err in errors:
        loc = list(err.get("loc", ()))
        if loc[:1] == ["body"]:
            loc = loc[1:]
            if loc[:1] in (["chat"], ["request"]):  # the PreviewBody union's tag, not a field
                loc = loc[1:]
        msg = str(err.get("msg", ""))
        if err.get("type") == "json_invalid":
            # FastAPI puts the decoder's reason in ctx and the character offset in loc
            reason = (err.get("ctx") or {}).get("error")
            offset = loc[0] if loc and isinstance(loc[0], int) else None
            msg = f"{reason or msg}" + (f" at character {offset}" if offset is not None else "")
            loc = []
        cleaned.append({"loc": [p if isinstance(p, (int, str)) else str(p) for p in loc],
                        "msg": msg, "type": str(err.get("type", ""))})
    first = cleaned[0] if cleaned else {"loc": [], "msg": "invalid request", "type": ""}
    if first["type"] == "json_invalid":
        return error_response(400, "INVALID_REQUEST", f"the body is not valid JSON: {first['msg']}",
                              file="body", place=None, details={"errors": cleaned})
    settings_err = any(e["loc"][:1] == ["settings"] for e in cleaned)
    code = "INVALID_SETTINGS" if settings_err else "INVALID_REQUEST"
    bad = next((e for e in cleaned if e["loc"][:1] == ["settings"]), first) if settings_err else first
    where = json_path(bad["loc"])
    more = f" (and {len(cleaned) - 1} more)" if len(cleaned) > 1 else ""
    return error_response(422, code, f"{where}: {bad['msg']}{more}", file="settings" if settings_err else "body",
                          place=where, details={"errors": cleaned})


def _jsonable(value: Any) -> Any:
    """Details made safe for JSON (unknown objects become their ``repr``)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)
