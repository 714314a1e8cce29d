r"""Request bodies the local API accepts: size, read time and strict JSON (issue 15).

:class:`BodyGuard` is a plain ASGI middleware in front of the FastAPI app. For requests with a
body (``POST``/``PUT``/``PATCH``) it

- answers 413 ``INVALID_REQUEST`` when ``Content-Length`` or the bytes actually received exceed
  ``max_body_bytes`` (default :data:`DEFAULT_MAX_BODY_BYTES`, 16 MiB; ``loomscope serve
  --max-body-mib``), without reading the rest;
- answers 408 ``INVALID_REQUEST`` when the whole body has not arrived within ``body_timeout_s``
  seconds (a slow or stalled client cannot hold a worker);
- checks the JSON before any route sees it: ``NaN``/``Infinity``, numbers too large for a
  double (they are not JSON, and could not be answered as JSON) and strings or keys holding a
  lone UTF-16 surrogate (``"\\ud800"`` without its pair: not text, so it cannot be tokenized,
  stored or sent) and integers beyond :data:`MAX_JSON_INT` (a 4,000-digit ``context_limit``, issue 25:
  no count, limit or index is that large, and arithmetic on it overflows) are 422 with the value's JSON
  path in ``place`` (``INVALID_SETTINGS`` under ``$.settings``, else ``INVALID_REQUEST``).

The body is then handed on unchanged. Errors use the API's envelope
(:func:`engine.api.errors.error_response`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

from ..importers._io import MAX_MESSAGE_CHARS
from .errors import error_response, json_path

#: Default largest request body (bytes): 16 MiB.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: Default longest time to receive a whole request body (seconds).
DEFAULT_BODY_TIMEOUT_S = 30.0

#: Largest integer the API takes (JavaScript's ``Number.MAX_SAFE_INTEGER``, 2**53 - 1).
MAX_JSON_INT = 2**53 - 1

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONG_NUMBER = re.compile(rb"[0-9]{16,}")
#: What Python's json reads as a non-finite float: NaN, Infinity, or an exponent large enough.
_NON_FINITE = re.compile(rb"NaN|Infinity|[eE][+]?[0-9]{3,}")


def _first_unusable(value: Any) -> tuple[list[Any], str] | None:
    """``(JSON path parts, why)`` of the first value the API cannot carry, or ``None``.

    Such a value is a non-finite number (``NaN``, ``Infinity``, ``1e999``) or a string or key holding a lone UTF-16
    surrogate.
    """
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        v, path = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return path, f"{v!r} is not a JSON number (JSON has no NaN or Infinity)"
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_JSON_INT:
            digits = len(str(abs(v)))
            return path, f"a number of {digits:,} digits is too large (at most {MAX_JSON_INT:,})"
        if isinstance(v, str):
            if len(v) > MAX_MESSAGE_CHARS:
                return path, (f"a text of {len(v):,} characters is over the limit of {MAX_MESSAGE_CHARS:,} "
                              "(about a million tokens, beyond any model's context)")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                shown = v.encode("utf-8", "backslashreplace").decode("ascii")[:60]
                return path, f"a lone UTF-16 surrogate is not text ({shown!r})"
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    shown = k.encode("utf-8", "backslashreplace").decode("ascii")
                    return [*path, shown], f"a lone UTF-16 surrogate is not text (key {shown!r})"
                stack.append((x, [*path, k]))
        elif isinstance(v, list):
            stack.extend((x, [*path, i]) for i, x in reversed(list(enumerate(v))))
    return None


def body_problem(body: bytes) -> tuple[int, str, str, str] | None:
    """``(status, code, message, place)`` when ``body`` holds JSON the API refuses, else ``None``.

    Syntax errors are left to FastAPI (its 400 names the position); only what Python's ``json``
    accepts but JSON and the API cannot carry is caught here: 422 with the value's JSON path,
    ``INVALID_SETTINGS`` under ``$.settings``, else ``INVALID_REQUEST``.
    """
    try:
        value = json.loads(body)
    except RecursionError:
        return 400, "INVALID_REQUEST", "the body is not valid JSON: nested too deeply", "$"
    except (ValueError, TypeError) as exc:
        if "integer string conversion" in str(exc):  # over Python's 4,300 digits: no path to name
            return 422, "INVALID_REQUEST", f"$: a number of more than 4,300 digits is too large (at most {MAX_JSON_INT:,})", "$"
        return None  # FastAPI reports the syntax error itself
    suspicious = _SURROGATE_ESCAPE.search(body) or _NON_FINITE.search(body) or _LONG_NUMBER.search(body)
    if not suspicious and len(body) <= MAX_MESSAGE_CHARS:
        return None
    found = _first_unusable(value)
    if found is None:
        return None
    path, why = found
    where = json_path(path)
    code = "INVALID_SETTINGS" if path[:1] == ["settings"] else "INVALID_REQUEST"
    return 422, code, f"{where}: {why}", where


class BodyGuard:
    """ASGI middleware enforcing the body limit, the body-read timeout and strict JSON (see module doc)."""

    def __init__(self, app: Any, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> None:
        self.app = app
        self.max_body_bytes = int(max_body_bytes)
        self.body_timeout_s = float(body_timeout_s)

    async def _refuse(self, scope, receive, send, status: int, message: str, *, place: str | None = None,
                      close: bool = False, code: str = "INVALID_REQUEST") -> None:
        headers = {"connection": "close"} if close else None
        response = error_response(status, code, message, file="settings" if code == "INVALID_SETTINGS" else "body",
                                  place=place, headers=headers)
        await response(scope, receive, send)

    async def __call__(self, scope, receive, send) -> None:
        """The ASGI entry point: refuse a write whose body is larger than :attr:`max_body_bytes`."""
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = -1
            if size > limit:
                await self._refuse(scope, receive, send, 413,
                                   f"the body is {size:,} bytes; this server accepts at most {limit:,}", close=True)
                return
        chunks: list[bytes] = []
        total = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), remaining)
            except TimeoutError:
                await self._refuse(scope, receive, send, 408,
                                   f"the body did not arrive within {self.body_timeout_s:g} s", close=True)
                return
            if message["type"] == "http.disconnect":
                return  # the client left; nobody to answer
            part = message.get("body", b"") or b""
            total += len(part)
            if total > limit:
                await self._refuse(scope, receive, send, 413,
                                   f"the body is over {limit:,} bytes, the most this server accepts", close=True)
                return
            chunks.append(part)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        if body.strip():
            problem = body_problem(body)
            if problem is not None:
                status, code, text, place = problem
                await self._refuse(scope, receive, send, status, text, place=place, code=code)
                return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
