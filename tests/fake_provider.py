"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol (test helper).

It stands in for an LLM provider in tests and demos: thread-based (``ThreadingHTTPServer``),
listening on an ephemeral port, recording every request it receives. Tell it how to behave
with ``server.mode`` (or a queue of modes in ``server.script``):

``answer``        200 JSON completion (``choices[0].message``), also when ``stream`` was asked
``stream``        200 Server-Sent Events in pieces, ``data: [DONE]`` at the end (chunked encoding)
``tool_call``     200 JSON completion whose message calls a tool
``stall``         accept the request, then send nothing until released (or ``stall_s`` passes)
``stall_stream``  send the headers and one SSE chunk, then stall
``401`` ``429`` ``500`` ``400_context``  the HTTP error with an OpenAI-shaped error body
``malformed``     200 whose body is not JSON
``drop``          read the request and close the connection without an answer
``drop_stream``   send headers and one chunk, then close mid-stream

Every error body, malformed body and reply contains :data:`UPSTREAM_MARKER`, so tests can
assert that no upstream body reached an audit.

Summary requests (compaction: the first message carries ``[loomscope:compaction]``) are answered
with ``server.summary_text`` in the ``answer``/``stream`` modes, and recorded with
``"kind": "summary"`` (other requests: ``"chat"``). "Fail twice, then answer" is
``server.script.extend(["429", "429"])`` with ``mode = "answer"``.

Text completions (issue 26): ``POST …/completions`` (not ``…/chat/completions``) is answered in the
legacy Completions shape (``choices[0].text``; streamed chunks carry ``choices[0].text``) in the
``answer`` / ``stream`` modes and the error modes; the request is recorded with ``"kind": "text"``.
``server.text_route`` makes the server one that speaks only Chat Completion: ``"404"`` (no such
route), ``"405"`` (method not allowed) or ``"400_chat_only"`` (a 400 whose body says the model is a
chat model, as OpenAI and vLLM answer); ``"ok"`` (default) serves it.

Run it by hand: ``python -m tests.fake_provider --mode stream`` prints its base URL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Appears in every body the server sends; must never show up in a stored audit.
UPSTREAM_MARKER = "UPSTREAM-BODY-7f3a"

MODES = ("answer", "stream", "tool_call", "stall", "stall_stream", "401", "429", "500",
         "400_context", "malformed", "drop", "drop_stream")

_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "401": (401, {"error": {"message": f"Incorrect API key provided. {UPSTREAM_MARKER}",
                            "type": "invalid_request_error", "code": "invalid_api_key"}}),
    "429": (429, {"error": {"message": f"Rate limit reached. {UPSTREAM_MARKER}",
                            "type": "requests", "code": "rate_limit_exceeded"}}),
    "500": (500, {"error": {"message": f"The server had an error. {UPSTREAM_MARKER}",
                            "type": "server_error", "code": None}}),
    "400_context": (400, {"error": {
        "message": f"This model's maximum context length is 128000 tokens. {UPSTREAM_MARKER}",
        "type": "invalid_request_error", "code": "context_length_exceeded"}}),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeProviderServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    # ------------------------------------------------------------ helpers
    def _send_json(self, status: int, doc: Any) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        if status == 429:
            self.send_header("Retry-After", "7")
        self.end_headers()
        self.wfile.write(raw)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _sse_headers(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _event(self, doc: Any) -> None:
        self._chunk(f"data: {json.dumps(doc)}\n\n".encode())

    def _delta(self, piece: str, finish: str | None = None) -> dict[str, Any]:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": self.server.model_name,
                "choices": [{"index": 0, "delta": {"content": piece} if piece else {},
                             "finish_reason": finish}]}

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()

    def _stall(self) -> None:
        self.server.release.wait(self.server.stall_s)

    # ------------------------------------------------------------ protocol
    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        mode = self.server.next_mode()
        path = self.path.rstrip("/")
        text = path.endswith("/completions") and not path.endswith("/chat/completions")
        kind = "text" if text else "summary" if _is_summary_request(body) else "chat"
        self.server.record({"method": "POST", "path": self.path, "headers": dict(self.headers.items()),
                            "body": body, "mode": mode, "kind": kind})
        if text:
            self._text_completion(mode)
            return
        if not path.endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "unknown path"}})
            return
        reply = self.server.summary_text if kind == "summary" else self.server.reply_text
        if kind == "summary" and self.server.summary_delay_s:
            self.server.release.wait(self.server.summary_delay_s)  # a slow summarizer (released early on demand)
        if mode == "answer":
            self._send_json(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": self.server.model_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})
        elif mode == "tool_call":
            self._send_json(200, {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": self.server.model_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_fake_1", "type": "function",
                     "function": {"name": "consult_catalogue", "arguments": '{"query": "atlas"}'}}]},
                    "finish_reason": "tool_calls"}]})
        elif mode == "stream":
            self._sse_headers()
            words = reply.split(" ")
            for i, word in enumerate(words):
                self._event(self._delta(word if i == 0 else " " + word))
                if self.server.chunk_delay_s:
                    time.sleep(self.server.chunk_delay_s)
            self._event(self._delta("", "stop"))
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        elif mode == "stall":
            self._stall()
            self._drop()
        elif mode == "stall_stream":
            self._sse_headers()
            self._event(self._delta(reply.split(" ")[0]))
            self._stall()
            self._drop()
        elif mode in _ERRORS:
            status, doc = _ERRORS[mode]
            self._send_json(status, doc)
        elif mode == "malformed":
            raw_out = f'{{"choices": [{{"message": {UPSTREAM_MARKER}'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw_out)))
            self.end_headers()
            self.wfile.write(raw_out)
        elif mode == "drop":
            self._drop()
        elif mode == "drop_stream":
            self._sse_headers()
            self._event(self._delta(reply.split(" ")[0]))
            self._drop()
        else:  # pragma: no cover - guarded by FakeProviderServer.mode
            self._send_json(500, {"error": {"message": f"unknown fake mode {mode}"}})

    def _text_completion(self, mode: str) -> None:
        """``POST …/completions``: the legacy Completions shape, or the chat-only refusal."""
        route = self.server.text_route
        if route in _TEXT_REFUSALS:
            status, doc = _TEXT_REFUSALS[route]
            self._send_json(status, doc)
            return
        reply = self.server.reply_text
        if mode == "answer":
            self._send_json(200, {
                "id": "cmpl-fake", "object": "text_completion", "created": int(time.time()),
                "model": self.server.model_name,
                "choices": [{"index": 0, "text": reply, "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})
        elif mode == "stream":
            self._sse_headers()
            words = reply.split(" ")
            for i, word in enumerate(words):
                self._event({"id": "cmpl-fake", "object": "text_completion", "model": self.server.model_name,
                             "choices": [{"index": 0, "text": word if i == 0 else " " + word,
                                          "finish_reason": None}]})
                if self.server.chunk_delay_s:
                    time.sleep(self.server.chunk_delay_s)
            self._event({"id": "cmpl-fake", "object": "text_completion", "model": self.server.model_name,
                         "choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        elif mode in _ERRORS:
            status, doc = _ERRORS[mode]
            self._send_json(status, doc)
        elif mode == "stall":
            self._stall()
            self._drop()
        else:
            self._drop()


#: ``server.text_route`` values that refuse ``POST …/completions`` as a chat-only server does.
_TEXT_REFUSALS: dict[str, tuple[int, dict[str, Any]]] = {
    "404": (404, {"error": {"message": f"Not Found {UPSTREAM_MARKER}"}}),
    "405": (405, {"detail": f"Method Not Allowed {UPSTREAM_MARKER}"}),
    "400_chat_only": (400, {"error": {
        "message": f"This is a chat model and not supported in the v1/completions endpoint. Did you mean to use "
                   f"v1/chat/completions? {UPSTREAM_MARKER}", "type": "invalid_request_error", "code": None}}),
}
TEXT_ROUTES = ("ok", *_TEXT_REFUSALS)


#: What marks a compaction summary request (``engine.compaction.summarizer.SUMMARY_MARKER``).
SUMMARY_MARKER = "[loomscope:compaction]"
#: Default answer to a summary request.
DEFAULT_SUMMARY = ("The customer asked to change and cancel flight reservations; the agent looked up the "
                   "reservations, searched direct and one-stop flights and explained the fare rules.")


def _is_summary_request(body: Any) -> bool:
    try:
        first = body["messages"][0]["content"]
    except (TypeError, KeyError, IndexError):
        return False
    return isinstance(first, str) and SUMMARY_MARKER in first


class FakeProviderServer(ThreadingHTTPServer):
    """The fake provider. Use as a context manager; ``base_url`` is ``http://127.0.0.1:<port>/v1``.

    Attributes
    ----------
    mode:
        Default behaviour (one of :data:`MODES`).
    script:
        Modes for the next requests, consumed first (then ``mode`` applies).
    requests:
        Every request received: ``{"method", "path", "headers", "body", "mode"}``.
    reply_text, model_name, chunk_delay_s, stall_s:
        Reply text, the model name echoed, delay between streamed pieces (s), longest stall (s).
    summary_text:
        The answer to summary (compaction) requests.
    summary_delay_s:
        Seconds a summary request waits before its answer (a slow summarizer; ``release`` ends it early).
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str = "answer", *, port: int = 0,
                 reply_text: str = f"The ravens have already told her. {UPSTREAM_MARKER}",
                 chunk_delay_s: float = 0.0, stall_s: float = 30.0, summary_text: str = DEFAULT_SUMMARY,
                 summary_delay_s: float = 0.0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.mode = mode
        self.script: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.reply_text = reply_text
        self.summary_text = summary_text
        self.summary_delay_s = summary_delay_s
        self.model_name = "fake-model"
        self.text_route = "ok"
        self.chunk_delay_s = chunk_delay_s
        self.stall_s = stall_s
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "mode" and value not in MODES:
            raise ValueError(f"unknown mode {value!r}; one of {MODES}")
        if name == "text_route" and value not in TEXT_ROUTES:
            raise ValueError(f"unknown text route {value!r}; one of {TEXT_ROUTES}")
        super().__setattr__(name, value)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def next_mode(self) -> str:
        with self._lock:
            return self.script.popleft() if self.script else self.mode

    def record(self, item: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(item)

    def start(self) -> FakeProviderServer:
        self._thread = threading.Thread(target=self.serve_forever, name="fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl+C (``python -m tests.fake_provider --mode stream --port 8765``)."""
    parser = argparse.ArgumentParser(description="fake OpenAI-compatible provider on 127.0.0.1")
    parser.add_argument("--mode", default="answer", choices=MODES)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reply", default=None, help="reply text")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between streamed pieces")
    parser.add_argument("--summary", default=None, help="answer to summary (compaction) requests")
    parser.add_argument("--summary-delay", type=float, default=0.0, help="seconds before a summary answer")
    parser.add_argument("--fail-first", type=int, default=0, metavar="N",
                        help="answer the first N requests with HTTP 429 (then --mode)")
    args = parser.parse_args(argv)
    kwargs: dict[str, Any] = {"port": args.port, "chunk_delay_s": args.delay, "summary_delay_s": args.summary_delay}
    if args.reply:
        kwargs["reply_text"] = args.reply
    if args.summary:
        kwargs["summary_text"] = args.summary
    server = FakeProviderServer(args.mode, **kwargs)
    server.script.extend(["429"] * args.fail_first)
    print(server.base_url, flush=True)

    def _stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.release.set()
        server.server_close()
        for req in server.requests:
            print(json.dumps({"path": req["path"], "mode": req["mode"], "kind": req["kind"],
                              "messages": len((req["body"] or {}).get("messages", []))}), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
