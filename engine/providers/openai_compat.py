"""A client for OpenAI-compatible ``POST {base_url}/chat/completions`` endpoints, over httpx.

Protocol (OpenAI API reference, "Create chat completion"): the body carries ``model``,
``messages``, optional ``tools``, ``stream`` and the reply limit (``max_tokens`` or
``max_completion_tokens``); a non-streamed answer is a JSON object with
``choices[0].message``; a streamed answer is Server-Sent Events, each ``data:`` line a JSON
chunk with ``choices[0].delta`` (``content`` pieces; ``tool_calls`` pieces merged by ``index``),
ending with ``data: [DONE]``. Servers that ignore ``stream`` and answer with plain JSON are read
as non-streamed.

The HTTP exchange runs on a worker thread while the calling thread waits, so that a
``threading.Event`` can cancel it at any moment (even while the server stalls): the response
is closed, the worker ends on its own, and the call raises ``CANCELLED``. ``on_delta`` is
always called on the calling thread.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from ..errors import ProviderError
from .errors import MAX_ERROR_BODY_BYTES, error_for_exception, error_for_status, error_for_stream_error
from .params import REPLY_LIMIT_FIELDS

#: How often the waiting thread checks the cancel event, in seconds.
CANCEL_POLL_S = 0.05
#: Default read timeout (no byte from the provider for this long), in seconds.
DEFAULT_TIMEOUT_S = 60.0
#: Connect timeout cap, in seconds.
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ProviderReply:
    """A finished reply.

    ``content`` is the text (``""`` when the model only called tools); ``tool_calls`` are in
    OpenAI shape (``{"id", "type": "function", "function": {"name", "arguments"}}``);
    ``usage`` holds the provider's integer token counts when it sent them.
    """

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


#: A URL path segment that looks like a secret: a vendor-style key (``sk-…``, ``sk_live_…``,
#: ``key-…``, ``token_…``) or a long random-looking token (24+ letters/digits/``-_`` with both
#: letters and digits), e.g. ``http://host/sk-proj-abc…/v1`` (a key pasted into the base URL).
_KEY_PREFIX = re.compile(r"(?i)(sk|pk|rk|ak|key|api[-_]?key|token|secret|bearer)[-_][A-Za-z0-9_\-.]{6,}")
_TOKENISH = re.compile(r"[A-Za-z0-9_\-]{24,}")
MASK = "***"


def _secret_segment(segment: str, api_key: str | None) -> bool:
    text = unquote(segment)
    if api_key and len(api_key) >= 4 and api_key in text:
        return True
    if _KEY_PREFIX.fullmatch(text):
        return True
    return bool(_TOKENISH.fullmatch(text)) and any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def mask_path(path: str, api_key: str | None = None) -> str:
    """``path`` with every segment that holds ``api_key`` or looks like a key replaced by ``***``."""
    return "/".join(MASK if seg and _secret_segment(seg, api_key) else seg for seg in path.split("/"))


def public_endpoint(base_url: str, api_key: str | None = None) -> str:
    """``base_url`` safe to store in an audit and to show.

    Without credentials, query or fragment, and with key-like path segments masked (``http://host/sk-…/v1`` →
    ``http://host/***/v1``; any segment holding ``api_key`` too).
    """
    try:
        parts = urlsplit(base_url.strip())
        port = parts.port  # ValueError for a port out of range or not a number
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    if port:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, mask_path(parts.path.rstrip("/"), api_key), "", ""))


def check_api_key(api_key: str | None) -> None:
    """Refuse a key no HTTP header can carry, before anything is sent.

    A key must be printable ASCII without spaces (RFC 9110 ``token68``-like: ``!``..``~``);
    a non-ASCII character or a CR/LF (a paste gone wrong, or a header-injection attempt) gives
    ``INVALID_API_KEY`` locally instead of an obscure provider or transport error.

    Raises
    ------
    ProviderError
        ``INVALID_API_KEY`` (the message names the first bad character's position, never the key).
    """
    if not api_key:
        return  # no key (local servers): no Authorization header is sent
    for i, ch in enumerate(api_key):
        if not "!" <= ch <= "~":
            what = {"\r": "a carriage return", "\n": "a line feed", " ": "a space", "\t": "a tab"}.get(
                ch, f"U+{ord(ch):04X}")
            raise ProviderError("INVALID_API_KEY", f"the API key holds {what} at character {i + 1}; a key is "
                                "printable ASCII without spaces (check the LOOMSCOPE_API_KEY/OPENAI_API_KEY "
                                "value or the keyring entry)", file="API key")


def completions_url(base_url: str) -> str:
    """``{base_url}/chat/completions`` (``base_url`` may already end with it)."""
    base = base_url.strip().rstrip("/")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


def _int_usage(raw: object) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {k: int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


def _bad(message: str) -> ProviderError:
    return ProviderError("PROVIDER_BAD_RESPONSE", message)


def normalize_tool_calls(raw: object) -> list[dict[str, Any]]:
    """Tool calls in OpenAI shape (``{"id", "type", "function": {"name", "arguments"}}``).

    Some OpenAI-compatible servers send ``arguments`` as a JSON object instead of a JSON
    string, or a numeric ``id``; both are converted. Anything that cannot be read as a tool
    call raises ``PROVIDER_BAD_RESPONSE``.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _bad("the provider's tool_calls are malformed")
    out: list[dict[str, Any]] = []
    for call in raw:
        if not isinstance(call, dict):
            raise _bad("the provider's tool_calls are malformed")
        fn = call.get("function")
        if fn is None:
            fn = {}
        if not isinstance(fn, dict):
            raise _bad("a tool call's function is malformed")
        name = fn.get("name")
        if name is None:
            name = ""
        if not isinstance(name, str):
            raise _bad("a tool call's function name is not text")
        arguments = fn.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (TypeError, ValueError):
                raise _bad("a tool call's arguments are malformed") from None
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            if isinstance(call_id, bool) or not isinstance(call_id, int):
                raise _bad("a tool call's id is malformed")
            call_id = str(call_id)
        call_type = call.get("type")
        fixed = {**call, "type": call_type if isinstance(call_type, str) else "function",
                 "function": {**fn, "name": name, "arguments": arguments}}
        if call_id is None:
            fixed.pop("id", None)
        else:
            fixed["id"] = call_id
        out.append(fixed)
    return out


def first_choice(doc: object) -> dict[str, Any]:
    """``doc["choices"][0]`` of a non-streamed answer (chat or text completion).

    Raises ``PROVIDER_BAD_RESPONSE`` when ``doc`` is no JSON object or has no choices, and the
    provider's normalized error when it carries ``error`` instead of choices.
    """
    if not isinstance(doc, dict):
        raise _bad("the provider's answer is not a JSON object")
    if "error" in doc and "choices" not in doc:
        raise error_for_stream_error(doc["error"])
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _bad("the provider's answer has no choices")
    return choices[0]


def parse_completion(doc: object) -> ProviderReply:
    """Read a non-streamed chat completion. Raises ``PROVIDER_BAD_RESPONSE``."""
    choice = first_choice(doc)
    assert isinstance(doc, dict)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _bad("the provider's answer has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        else:
            raise _bad("the provider's message content is not text")
    tool_calls = normalize_tool_calls(message.get("tool_calls") or [])
    finish = choice.get("finish_reason")
    return ProviderReply(content=content or "", tool_calls=tool_calls,
                         finish_reason=str(finish) if finish is not None else None,
                         usage=_int_usage(doc.get("usage")))


class _StreamState:
    """Accumulates SSE chunks into one reply."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.done = False

    def feed(self, chunk: object) -> str:
        """Apply one chunk; returns the new text piece (may be ``""``).

        Every route's chunk gets the same reading first (:meth:`_choice`); what a choice carries
        is the route's (:meth:`_apply`). Raises ``PROVIDER_BAD_RESPONSE`` on a malformed chunk
        and the provider's normalized error on an error chunk.
        """
        choice = self._choice(chunk)
        if choice is None:
            return ""
        piece = self._apply(choice)
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        return piece

    def _choice(self, chunk: object) -> dict[str, Any] | None:
        """``chunk["choices"][0]`` (``None``: a chunk without choices, e.g. the usage-only last one).

        Records the chunk's ``usage``; raises the provider's error for an error chunk.
        """
        if not isinstance(chunk, dict):
            raise _bad("a streamed chunk is not a JSON object")
        if "error" in chunk and not chunk.get("choices"):
            raise error_for_stream_error(chunk["error"])
        if chunk.get("usage"):
            self.usage = _int_usage(chunk["usage"])
        choices = chunk.get("choices")
        if choices is None:
            return None
        if not isinstance(choices, list):
            raise _bad("a streamed chunk has malformed choices")
        if not choices:
            return None
        choice = choices[0]
        if not isinstance(choice, dict):
            raise _bad("a streamed chunk has a malformed choice")
        return choice

    def _apply(self, choice: dict[str, Any]) -> str:
        """A chat chunk's ``delta``: its content piece (returned) and tool-call fragments."""
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            raise _bad("a streamed chunk has a malformed delta")
        piece = delta.get("content") or ""
        if not isinstance(piece, str):
            raise _bad("a streamed chunk's content is not text")
        self.parts.append(piece)
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                raise _bad("a streamed tool call is malformed")
            index = call.get("index", len(self.calls))
            slot = self.calls.setdefault(int(index), {"id": None, "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                slot["id"] = call["id"]
            fn = call.get("function") or {}
            if isinstance(fn, dict):
                slot["function"]["name"] += str(fn.get("name") or "")
                args = fn.get("arguments") or ""
                slot["function"]["arguments"] += args if isinstance(args, str) else json.dumps(args)
        return piece

    def reply(self) -> ProviderReply:
        calls = normalize_tool_calls(
            [{k: v for k, v in self.calls[i].items() if v is not None} for i in sorted(self.calls)])
        return ProviderReply(content="".join(self.parts), tool_calls=calls,
                             finish_reason=self.finish_reason, usage=self.usage)



def _request_body(model: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None, stream: bool,
                  extra_body: dict[str, Any] | None, reply_limit: dict[str, int] | None) -> dict[str, Any]:
    """The chat-completions body: ``extra_body`` under the fixed fields; ``reply_limit`` replaces its limit fields."""
    extra = dict(extra_body or {})
    if reply_limit:
        for key in REPLY_LIMIT_FIELDS:
            extra.pop(key, None)
    body: dict[str, Any] = {**extra, "model": model, "messages": messages, "stream": stream,
                            **(reply_limit or {})}
    if tools:
        body["tools"] = tools
    return body


class OpenAICompatClient:
    """What every OpenAI-compatible route shares.

    The URL, the key, timeouts, the worker thread that runs the exchange, cancel, SSE reading
    and error normalization.

    Subclasses give the route (:meth:`route_url`), the reply parsers (:meth:`_parse`,
    :meth:`_stream_state`) and the error mapping (:meth:`_status_error`); parameters as
    :class:`ChatCompletionsClient`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_api_key(api_key)
        self.url = self.route_url(base_url)
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
        self._transport = transport

    @staticmethod
    def route_url(base_url: str) -> str:
        """The URL requests go to for ``base_url``."""
        raise NotImplementedError

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}({public_endpoint(self.url)!r})"

    def _headers(self, stream: bool) -> dict[str, str]:
        headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream" if stream else "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _run(self, body: dict[str, Any], stream: bool, on_delta: Callable[[str, str], None] | None,
             cancel: threading.Event | None) -> ProviderReply:
        """POST ``body`` on a worker thread; relay its pieces, honour ``cancel``; the reply or the error."""
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        aborted = threading.Event()
        holder: dict[str, Any] = {}

        def work() -> None:
            try:
                events.put(("done", self._exchange(body, stream, events, holder, aborted)))
            except BaseException as exc:  # delivered to the waiting thread
                events.put(("error", exc))

        if cancel is not None and cancel.is_set():
            raise ProviderError("CANCELLED", "the generation was cancelled before it was sent")
        worker = threading.Thread(target=work, name="loomscope-provider", daemon=True)
        worker.start()
        return self._wait_for_reply(events, worker, holder, aborted, cancel, on_delta)

    def _wait_for_reply(self, events: queue.Queue[tuple[str, Any]], worker: threading.Thread,
                        holder: dict[str, Any], aborted: threading.Event, cancel: threading.Event | None,
                        on_delta: Callable[[str, str], None] | None) -> ProviderReply:
        """Relay the worker's streamed pieces to ``on_delta`` until its reply or error; abort on ``cancel``."""
        text_so_far: list[str] = []
        while True:
            if cancel is not None and cancel.is_set():
                aborted.set()
                self._abort(holder)
                worker.join(timeout=0.2)  # daemon; it ends at its own read timeout
                raise ProviderError("CANCELLED", "the generation was cancelled")
            try:
                kind, value = events.get(timeout=CANCEL_POLL_S)
            except queue.Empty:
                continue
            if kind == "delta":
                text_so_far.append(value)
                if on_delta is not None:
                    on_delta(value, "".join(text_so_far))
            elif kind == "done":
                return value
            else:
                if isinstance(value, ProviderError):
                    raise value
                raise error_for_exception(value) from None

    @staticmethod
    def _abort(holder: dict[str, Any]) -> None:
        for key in ("response", "client"):
            obj = holder.get(key)
            if obj is not None:
                # closing from another thread may race; the worker ends anyway
                with contextlib.suppress(Exception):
                    obj.close()

    # hooks a client for another OpenAI-compatible route overrides (TextCompletionsClient)
    def _parse(self, doc: object) -> ProviderReply:
        return parse_completion(doc)

    def _stream_state(self) -> _StreamState:
        return _StreamState()

    def _status_error(self, status: int, raw: bytes, headers: httpx.Headers) -> ProviderError:
        return error_for_status(status, raw, headers)

    def _exchange(self, body: dict[str, Any], stream: bool, events: queue.Queue,
                  holder: dict[str, Any], aborted: threading.Event) -> ProviderReply:
        with httpx.Client(timeout=self._timeout, transport=self._transport,
                          follow_redirects=False, trust_env=True) as client:
            holder["client"] = client
            with client.stream("POST", self.url, json=body, headers=self._headers(stream)) as response:
                holder["response"] = response
                if response.status_code != 200:
                    raw = b""
                    for chunk in response.iter_bytes():
                        raw += chunk
                        if len(raw) >= MAX_ERROR_BODY_BYTES:
                            break
                    error = self._status_error(response.status_code, raw, response.headers)
                    del raw  # classified; never kept
                    raise error
                ctype = response.headers.get("content-type", "")
                if not stream or "text/event-stream" not in ctype:
                    raw = response.read()
                    try:
                        doc = json.loads(raw)
                    except ValueError:
                        raise _bad("the provider's answer is not valid JSON") from None
                    reply = self._parse(doc)
                    if stream and reply.content:
                        events.put(("delta", reply.content))
                    return reply
                state = self._stream_state()
                for line in response.iter_lines():
                    if aborted.is_set():
                        raise ProviderError("CANCELLED", "the generation was cancelled")
                    line = line.strip()
                    if not line or line.startswith(":") or not line.startswith("data:"):
                        continue  # blank separators, comments, event:/id: fields
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        state.done = True
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        raise _bad("a streamed chunk is not valid JSON") from None
                    piece = state.feed(chunk)
                    if piece:
                        events.put(("delta", piece))
                if not state.done and state.finish_reason is None:
                    raise ProviderError("PROVIDER_NETWORK_ERROR",
                                        "the stream ended before the reply was complete")
                return state.reply()


class ChatCompletionsClient(OpenAICompatClient):
    """One OpenAI-compatible chat-completions endpoint.

    Parameters
    ----------
    base_url:
        E.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``.
    api_key:
        Sent as ``Authorization: Bearer <key>``; ``None`` sends no header (local servers).
        Never logged, stored, or put into an error.
    timeout_s:
        Read timeout in seconds: the longest silence tolerated between bytes from the
        provider (a stalled server fails with ``PROVIDER_TIMEOUT``).
    transport:
        Optional httpx transport (tests).
    """

    @staticmethod
    def route_url(base_url: str) -> str:
        """``{base_url}/chat/completions`` (:func:`completions_url`)."""
        return completions_url(base_url)

    def complete(
        self,
        model: str,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        stream: bool = True,
        extra_body: dict[str, Any] | None = None,
        on_delta: Callable[[str, str], None] | None = None,
        cancel: threading.Event | None = None,
        reply_limit: dict[str, int] | None = None,
    ) -> ProviderReply:
        """Send one chat-completions request and return the reply.

        Parameters
        ----------
        model, messages, tools:
            The request body's fields (``tools`` omitted when empty).
        stream:
            Ask for SSE streaming.
        extra_body:
            Further body fields (they never replace ``model``, ``messages`` or ``stream``).
        reply_limit:
            The reply limit fields (``{"max_tokens": n}`` or ``{"max_completion_tokens": n}``, in
            tokens; see ``engine.providers.params``). When given, they replace any
            ``max_tokens`` / ``max_completion_tokens`` in ``extra_body``.
        on_delta:
            Called on the calling thread with ``(piece, text_so_far)`` for each streamed piece.
        cancel:
            Setting it aborts the request; the call then raises ``CANCELLED``.

        Raises
        ------
        ProviderError
            ``PROVIDER_TIMEOUT``, ``PROVIDER_RATE_LIMITED``, ``PROVIDER_AUTHENTICATION``,
            ``PROVIDER_CONTEXT_LENGTH_EXCEEDED``, ``PROVIDER_BAD_REQUEST``,
            ``PROVIDER_SERVER_ERROR``, ``PROVIDER_NETWORK_ERROR``, ``PROVIDER_BAD_RESPONSE`` or
            ``CANCELLED``.
        """
        body = _request_body(model, messages, tools=tools, stream=stream, extra_body=extra_body,
                             reply_limit=reply_limit)
        return self._run(body, stream, on_delta, cancel)
