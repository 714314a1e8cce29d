"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1 (tests/fake_provider.py)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ERROR_CODES, ProviderError
from engine.providers import ChatCompletionsClient, lookup_api_key, public_endpoint, resolve_api_key
from engine.providers.errors import error_for_status
from engine.providers.openai_compat import _StreamState, completions_url
from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer

KEY = "sk-test-SECRET-0123456789"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]


@pytest.fixture
def server():
    with FakeProviderServer("answer", stall_s=10) as srv:
        yield srv


def client(srv: FakeProviderServer, timeout_s: float = 5.0, key: str | None = KEY) -> ChatCompletionsClient:
    return ChatCompletionsClient(srv.base_url, key, timeout_s=timeout_s)


def test_answer_sends_openai_request(server) -> None:
    reply = client(server).complete("gpt-4o", MESSAGES, stream=False)
    assert reply.content.startswith("The ravens") and reply.finish_reason == "stop"
    assert reply.usage == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    [req] = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    assert req["body"] == {"model": "gpt-4o", "messages": MESSAGES, "stream": False}  # no empty tools


def test_no_key_sends_no_authorization(server) -> None:
    client(server, key=None).complete("m", MESSAGES, stream=False)
    assert "Authorization" not in server.requests[0]["headers"]


def test_stream_reports_deltas_on_calling_thread(server) -> None:
    server.mode = "stream"
    seen: list[tuple[str, str, str]] = []
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    reply = client(server).complete("gpt-4o", MESSAGES, tools=tools,
                                    on_delta=lambda p, s: seen.append((p, s, threading.current_thread().name)))
    assert reply.content == server.reply_text
    assert len(seen) == len(server.reply_text.split(" ")) and seen[-1][1] == server.reply_text
    assert {name for *_, name in seen} == {threading.current_thread().name}
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["tools"] == tools
    assert server.requests[0]["headers"]["Accept"] == "text/event-stream"


def test_json_answer_to_stream_request_is_accepted(server) -> None:
    reply = client(server).complete("m", MESSAGES, stream=True)  # server mode "answer" ignores stream
    assert reply.content == server.reply_text


def test_tool_call_reply(server) -> None:
    server.mode = "tool_call"
    reply = client(server).complete("m", MESSAGES, stream=False)
    assert reply.content == "" and reply.finish_reason == "tool_calls"
    assert reply.tool_calls[0]["function"]["name"] == "consult_catalogue"


@pytest.mark.parametrize(("mode", "code"), [
    ("401", "PROVIDER_AUTHENTICATION"),
    ("429", "PROVIDER_RATE_LIMITED"),
    ("500", "PROVIDER_SERVER_ERROR"),
    ("400_context", "PROVIDER_CONTEXT_LENGTH_EXCEEDED"),
    ("malformed", "PROVIDER_BAD_RESPONSE"),
    ("drop", "PROVIDER_NETWORK_ERROR"),
    ("drop_stream", "PROVIDER_NETWORK_ERROR"),
    ("stall", "PROVIDER_TIMEOUT"),
    ("stall_stream", "PROVIDER_TIMEOUT"),
])
@pytest.mark.parametrize("stream", [True, False])
def test_failures_are_normalized_without_body_or_key(server, mode: str, code: str, stream: bool) -> None:
    server.mode = mode
    start = time.monotonic()
    with pytest.raises(ProviderError) as err:
        client(server, timeout_s=0.6).complete("m", MESSAGES, stream=stream)
    assert err.value.code == code
    text = repr(err.value.to_dict()) + str(err.value)
    assert UPSTREAM_MARKER not in text and KEY not in text
    assert time.monotonic() - start < 5
    if mode == "429":
        assert err.value.details == {"status": 429, "retry_after_s": 7.0}


def test_connection_refused_is_network_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProviderError) as err:
        ChatCompletionsClient(f"http://127.0.0.1:{port}/v1", KEY, timeout_s=2).complete("m", MESSAGES)
    assert err.value.code == "PROVIDER_NETWORK_ERROR"


def test_cancel_interrupts_a_stall_quickly(server) -> None:
    server.mode = "stall"
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(ProviderError) as err:
        client(server, timeout_s=30).complete("m", MESSAGES, cancel=cancel)
    assert err.value.code == "CANCELLED"
    assert time.monotonic() - start < 1.5


def test_cancel_mid_stream(server) -> None:
    server.mode = "stream"
    server.chunk_delay_s = 0.1
    cancel = threading.Event()
    pieces: list[str] = []

    def on_delta(piece: str, _so_far: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            cancel.set()

    with pytest.raises(ProviderError) as err:
        client(server).complete("m", MESSAGES, on_delta=on_delta, cancel=cancel)
    assert err.value.code == "CANCELLED" and 2 <= len(pieces) < len(server.reply_text.split(" "))


def test_cancel_before_sending_sends_nothing(server) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ProviderError) as err:
        client(server).complete("m", MESSAGES, cancel=cancel)
    assert err.value.code == "CANCELLED" and server.requests == []


def test_stream_state_merges_tool_call_deltas_and_errors() -> None:
    state = _StreamState()
    state.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "loo", "arguments": '{"q"'}}]}}]})
    state.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "kup", "arguments": ': 1}'}}]}}]})
    state.feed({"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": {"total_tokens": 5}})
    reply = state.reply()
    assert reply.tool_calls == [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": 1}'}}]
    assert reply.usage == {"total_tokens": 5}
    with pytest.raises(ProviderError) as err:
        _StreamState().feed({"error": {"message": f"slow down {UPSTREAM_MARKER}", "code": "rate_limit_exceeded"}})
    assert err.value.code == "PROVIDER_RATE_LIMITED" and UPSTREAM_MARKER not in str(err.value)
    with pytest.raises(ProviderError) as err:
        _StreamState().feed({"choices": [{"delta": {"content": 5}}]})
    assert err.value.code == "PROVIDER_BAD_RESPONSE"


@pytest.mark.parametrize(("status", "body", "code"), [
    (403, b"", "PROVIDER_AUTHENTICATION"),
    (413, b"", "PROVIDER_CONTEXT_LENGTH_EXCEEDED"),
    (422, b'{"error": "prompt is too long: 9000 tokens > 8192 maximum"}', "PROVIDER_CONTEXT_LENGTH_EXCEEDED"),
    (400, b'{"error": {"message": "bad temperature"}}', "PROVIDER_BAD_REQUEST"),
    (404, b"not here", "PROVIDER_BAD_REQUEST"),
    (408, b"", "PROVIDER_TIMEOUT"),
    (502, b"<html>bad gateway</html>", "PROVIDER_SERVER_ERROR"),
    (504, b"", "PROVIDER_TIMEOUT"),
    (302, b"", "PROVIDER_BAD_RESPONSE"),
])
def test_status_table(status: int, body: bytes, code: str) -> None:
    assert error_for_status(status, body).code == code


@settings(max_examples=200, deadline=None)
@given(status=st.integers(100, 599), body=st.text(min_size=12, max_size=200))
def test_any_status_gives_a_stable_code_without_the_body(status: int, body: str) -> None:
    body = f"UPSTREAM<{body}>"  # marked, so a body that happens to spell a code or a word of ours is no false alarm
    err = error_for_status(status, body.encode())
    assert err.code in ERROR_CODES
    assert body not in err.message and body not in repr(err.to_dict())


def test_urls_and_key_resolution(monkeypatch) -> None:
    assert public_endpoint("https://user:pw@api.example.com:8443/v1/?key=abc#x") == "https://api.example.com:8443/v1"
    assert completions_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"
    assert KEY not in repr(ChatCompletionsClient("http://h/v1", KEY))
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")
    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert resolve_api_key() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert resolve_api_key() == "sk-openai"
    monkeypatch.setenv("LOOMSCOPE_API_KEY", "sk-loom")
    assert resolve_api_key() == "sk-loom"


def test_key_lookup_names_its_source(monkeypatch) -> None:
    import keyring

    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")
    assert lookup_api_key() == (None, "keyring-disabled")
    assert "LOOMSCOPE_NO_KEYRING" in lookup_api_key().description
    assert lookup_api_key(use_keyring=False) == (None, "keyring-skipped")
    monkeypatch.delenv("LOOMSCOPE_NO_KEYRING")
    stored = {"value": None}
    monkeypatch.setattr(keyring, "get_password", lambda service, user: stored["value"])
    assert lookup_api_key() == (None, "none")
    stored["value"] = "  sk-ring \n"
    assert lookup_api_key() == ("sk-ring", "keyring") and lookup_api_key().description == "OS keyring"
    monkeypatch.setenv("OPENAI_API_KEY", "   ")  # whitespace only: unset, as the client sees it
    assert lookup_api_key().source == "keyring"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert lookup_api_key() == ("sk-openai", "OPENAI_API_KEY")
    monkeypatch.setenv("LOOMSCOPE_API_KEY", "sk-loom")
    found = lookup_api_key()
    assert found.key == resolve_api_key() == "sk-loom"
    assert found.description == "environment (LOOMSCOPE_API_KEY)"


# ------------------------------------------------------------------ tool calls in unusual shapes


class _RawServer:
    """A real HTTP server on 127.0.0.1 that answers every POST with one fixed body."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

        self.body, self.content_type = body, content_type
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _completion(tool_calls: object) -> bytes:
    import json as _json

    return _json.dumps({"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                                     "finish_reason": "tool_calls"}]}).encode()


def test_tool_call_arguments_as_object_and_numeric_id_are_normalized() -> None:
    srv = _RawServer(_completion([{"id": 7, "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]))
    try:
        reply = ChatCompletionsClient(srv.base_url, None, timeout_s=5).complete("m", MESSAGES, stream=False)
    finally:
        srv.close()
    [call] = reply.tool_calls
    assert call["id"] == "7" and call["function"] == {"name": "f", "arguments": '{"a": 1}'}


def test_streamed_tool_call_arguments_as_object_are_json() -> None:
    state = _StreamState()
    state.feed({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f",
                                                                                          "arguments": {"a": 1}}}]}}]})
    assert state.reply().tool_calls[0]["function"]["arguments"] == '{"a": 1}'


@pytest.mark.parametrize("calls", [
    [{"id": "c", "function": None, "type": "function"}],
    [{"id": "c", "function": {"name": 5, "arguments": "{}"}}],
    [{"id": ["x"], "function": {"name": "f"}}],
    "not a list",
    [3],
])
def test_unreadable_tool_calls_are_bad_response(calls) -> None:
    srv = _RawServer(_completion(calls))
    try:
        c = ChatCompletionsClient(srv.base_url, None, timeout_s=5)
        if calls == [{"id": "c", "function": None, "type": "function"}]:
            # a missing function is read as an empty one (as the importers do)
            assert c.complete("m", MESSAGES, stream=False).tool_calls[0]["function"] == {"name": "", "arguments": ""}
            return
        with pytest.raises(ProviderError) as err:
            c.complete("m", MESSAGES, stream=False)
    finally:
        srv.close()
    assert err.value.code == "PROVIDER_BAD_RESPONSE"
