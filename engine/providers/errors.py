"""Normalizing provider failures to Loomscope's stable codes.

The upstream response body is read only to tell a context-length rejection from other 4xx
errors (OpenAI: ``error.code == "context_length_exceeded"``, message "maximum context length";
other OpenAI-compatible servers such as vLLM, llama.cpp and LiteLLM use similar wording) and is
then dropped: no :class:`~engine.errors.ProviderError` ever carries it, nor the API key.
"""

from __future__ import annotations

import json
import re

import httpx

from ..errors import ProviderError

#: At most this many bytes of an error body are read to classify it (then discarded).
MAX_ERROR_BODY_BYTES = 64 * 1024

_CONTEXT_RE = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long"
    r"|reduce the length|exceeds? the (?:model'?s? )?(?:maximum|max)",
    re.IGNORECASE,
)


def _mentions_context_length(body: bytes) -> bool:
    try:
        doc = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return bool(_CONTEXT_RE.search(body.decode("utf-8", errors="replace")))
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        if str(err.get("code") or "") == "context_length_exceeded":
            return True
        return bool(_CONTEXT_RE.search(str(err.get("message") or "")))
    if isinstance(err, str):
        return bool(_CONTEXT_RE.search(err))
    return bool(_CONTEXT_RE.search(json.dumps(doc)[:4096]))


def _retry_after(headers: httpx.Headers | None) -> float | None:
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def error_for_status(status: int, body: bytes, headers: httpx.Headers | None = None) -> ProviderError:
    """The normalized error for a non-200 HTTP answer (``body`` is only inspected, never kept).

    401/403 → ``PROVIDER_AUTHENTICATION``; 429 → ``PROVIDER_RATE_LIMITED``; 408/504 →
    ``PROVIDER_TIMEOUT``; 413, or 400/422 whose error says the prompt is too long →
    ``PROVIDER_CONTEXT_LENGTH_EXCEEDED``; other 4xx → ``PROVIDER_BAD_REQUEST``; 5xx →
    ``PROVIDER_SERVER_ERROR``; anything else → ``PROVIDER_BAD_RESPONSE``.
    """
    details: dict[str, object] = {"status": status}
    retry_after = _retry_after(headers)
    if retry_after is not None:
        details["retry_after_s"] = retry_after
    if status in (401, 403):
        return ProviderError("PROVIDER_AUTHENTICATION", f"the provider rejected the credentials (HTTP {status})",
                             details=details)
    if status == 429:
        return ProviderError("PROVIDER_RATE_LIMITED", "the provider is rate limiting requests (HTTP 429)",
                             details=details)
    if status in (408, 504):
        return ProviderError("PROVIDER_TIMEOUT", f"the provider timed out (HTTP {status})", details=details)
    if status == 413 or (status in (400, 422) and _mentions_context_length(body[:MAX_ERROR_BODY_BYTES])):
        return ProviderError("PROVIDER_CONTEXT_LENGTH_EXCEEDED",
                             f"the provider says the prompt is too long for the model (HTTP {status})",
                             details=details)
    if 400 <= status < 500:
        return ProviderError("PROVIDER_BAD_REQUEST", f"the provider rejected the request (HTTP {status})",
                             details=details)
    if 500 <= status < 600:
        return ProviderError("PROVIDER_SERVER_ERROR", f"the provider failed (HTTP {status})", details=details)
    return ProviderError("PROVIDER_BAD_RESPONSE", f"unexpected HTTP status {status} from the provider",
                         details=details)


def error_for_stream_error(error: object) -> ProviderError:
    """The normalized error for an ``{"error": {...}}`` object sent inside a 200 stream."""
    code = ""
    etype = ""
    status = None
    if isinstance(error, dict):
        code = str(error.get("code") or "")
        etype = str(error.get("type") or "")
        raw_status = error.get("status") or error.get("status_code")
        status = raw_status if isinstance(raw_status, int) else None
    body = json.dumps({"error": error}).encode()
    if status is not None:
        return error_for_status(status, body)
    lowered = f"{code} {etype}".lower()
    if "rate" in lowered:
        return error_for_status(429, body)
    if "auth" in lowered or "invalid_api_key" in lowered:
        return error_for_status(401, body)
    if _mentions_context_length(body):
        return error_for_status(400, body)
    if "server" in lowered or "overloaded" in lowered:
        return error_for_status(500, body)
    return ProviderError("PROVIDER_BAD_RESPONSE", "the provider reported an error inside the stream")


def error_for_exception(exc: BaseException) -> ProviderError:
    """The normalized error for an httpx transport exception (message without URL or key)."""
    name = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError("PROVIDER_TIMEOUT", f"the provider did not answer in time ({name})")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProviderError("PROVIDER_NETWORK_ERROR", f"the provider URL is not usable ({name})")
    if isinstance(exc, httpx.TransportError | httpx.StreamError):
        return ProviderError("PROVIDER_NETWORK_ERROR", f"the connection to the provider failed ({name})")
    if isinstance(exc, OSError):
        return ProviderError("PROVIDER_NETWORK_ERROR", f"the connection to the provider failed ({name})")
    return ProviderError("PROVIDER_BAD_RESPONSE", f"the provider's answer could not be read ({name})")


#: An error body that says the endpoint (or the model behind it) serves only chat completions:
#: OpenAI ("This is a chat model and not supported in the v1/completions endpoint. Did you mean to
#: use v1/chat/completions?"), vLLM / LiteLLM / OpenRouter ("does not support the Completions API",
#: "completions endpoint is not supported", "only supports chat").
_CHAT_ONLY_RE = re.compile(
    r"chat model|not supported in the v1/completions|did you mean to use v1/chat/completions"
    r"|does(?: not|n't) support (?:the )?(?:legacy )?(?:text )?completions?(?: api| endpoint)?\b"
    r"|(?:text )?completions? (?:api|endpoint|route) (?:is )?(?:not supported|unsupported|not available)"
    r"|only supports? (?:the )?chat|use (?:the )?/?(?:v1/)?chat/completions",
    re.IGNORECASE,
)
#: Statuses a server without the text-completion route answers with (no such route, method not
#: allowed on it, not implemented).
NO_ROUTE_STATUSES = (404, 405, 501)


def _says_chat_only(body: bytes) -> bool:
    text = body[:MAX_ERROR_BODY_BYTES].decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except ValueError:
        return bool(_CHAT_ONLY_RE.search(text))
    err = doc.get("error") if isinstance(doc, dict) else None
    message = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    if message is None and isinstance(doc, dict):
        message = doc.get("detail") or doc.get("message")
    return bool(_CHAT_ONLY_RE.search(str(message if message is not None else text)))


def error_for_text_status(status: int, body: bytes, headers: httpx.Headers | None = None) -> ProviderError:
    """The normalized error for a non-200 answer on the text-completion route (``POST …/completions``).

    No such route (HTTP 404 / 405 / 501), or a 4xx body saying the endpoint or model serves only
    chat completions → ``PROVIDER_NO_TEXT_COMPLETION`` (the body is only inspected, never kept);
    anything else as :func:`error_for_status`.
    """
    if status in NO_ROUTE_STATUSES or (400 <= status < 500 and status not in (401, 403, 429)
                                       and _says_chat_only(body)):
        return ProviderError(
            "PROVIDER_NO_TEXT_COMPLETION",
            f"the endpoint only speaks Chat Completion: it has no text-completion route (HTTP {status} on "
            "POST /v1/completions); send this Text Completion prompt to a server that serves /v1/completions "
            "(llama.cpp, KoboldCpp, TabbyAPI, vLLM, text-generation-webui)",
            details={"status": status})
    return error_for_status(status, body, headers)
