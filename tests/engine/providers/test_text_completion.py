"""The text-completion client (``POST …/v1/completions``) against a real HTTP server on 127.0.0.1 (issue 26)."""

from __future__ import annotations

import threading

import pytest

from engine.errors import ERROR_CODES, ProviderError
from engine.providers import TextCompletionsClient, text_completions_url
from engine.providers.errors import error_for_text_status
from engine.providers.openai_compat import _StreamState
from engine.providers.text_completion import _TextStreamState, parse_text_completion, text_request_body
from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer

KEY = "sk-test-SECRET-0123456789"
#: An Alpaca-shaped prompt with characters JSON escapes (quotes, backslash, non-ASCII, a tab).
PROMPT = ('Below is an instruction.\n\n### Instruction:\nWren: "Open the parcel" \\ café\t🐦\n\n'
          "### Response:\nMarisol:")
STOP = ["\n### Instruction:", "\nWren:"]


@pytest.fixture
def server():
    with FakeProviderServer("answer", stall_s=10) as srv:
        yield srv


def test_url_of_each_server_shape() -> None:
    # SillyTavern keeps KoboldCpp / llama.cpp / TabbyAPI server URLs without /v1
    assert text_completions_url("http://127.0.0.1:5001") == "http://127.0.0.1:5001/v1/completions"
    assert text_completions_url("http://127.0.0.1:5001/") == "http://127.0.0.1:5001/v1/completions"
    assert text_completions_url("http://h/v1") == "http://h/v1/completions"
    assert text_completions_url("http://h/v1/") == "http://h/v1/completions"
    assert text_completions_url("http://h/v1/completions") == "http://h/v1/completions"
    assert text_completions_url("http://h/v1/chat/completions") == "http://h/v1/completions"
    assert KEY not in repr(TextCompletionsClient("http://h/v1", KEY))


@pytest.mark.parametrize("stream", [False, True])
def test_sends_exactly_the_prompt_max_tokens_and_stop(server, stream: bool) -> None:
    server.mode = "stream" if stream else "answer"
    seen: list[str] = []
    reply = TextCompletionsClient(server.base_url, KEY, timeout_s=5).complete(
        "koboldcpp/Llama-3", PROMPT, stop=STOP, max_tokens=300, stream=stream,
        extra_body={"temperature": 0.7, "prompt": "NOT THIS", "messages": [], "max_tokens": 9, "stop": ["x"]},
        on_delta=lambda _p, so_far: seen.append(so_far))
    assert reply.content == server.reply_text and reply.finish_reason == "stop"
    [req] = server.requests
    assert req["path"] == "/v1/completions" and req["kind"] == "text"
    assert req["body"] == {"temperature": 0.7, "model": "koboldcpp/Llama-3", "prompt": PROMPT, "stream": stream,
                           "max_tokens": 300, "stop": STOP}
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    if stream:
        assert len(seen) == len(server.reply_text.split(" ")) and seen[-1] == server.reply_text
        assert req["headers"]["Accept"] == "text/event-stream"


def test_no_stop_and_no_limit_send_neither_field() -> None:
    body = text_request_body("m", "p", stop=[], max_tokens=None, stream=False, extra_body={"max_tokens": 5})
    assert body == {"max_tokens": 5, "model": "m", "prompt": "p", "stream": False}
    assert "max_tokens" not in text_request_body("m", "p", stop=[], max_tokens=0, stream=False, extra_body=None)


@pytest.mark.parametrize("route", ["404", "405", "400_chat_only"])
@pytest.mark.parametrize("stream", [False, True])
def test_chat_only_endpoint_is_named_without_its_body(server, route: str, stream: bool) -> None:
    server.text_route = route
    with pytest.raises(ProviderError) as err:
        TextCompletionsClient(server.base_url, KEY, timeout_s=5).complete("m", PROMPT, stream=stream)
    assert err.value.code == "PROVIDER_NO_TEXT_COMPLETION" and err.value.code in ERROR_CODES
    text = str(err.value) + repr(err.value.to_dict())
    assert "Chat Completion" in text and "\n" not in err.value.message
    assert UPSTREAM_MARKER not in text and KEY not in text


@pytest.mark.parametrize(("mode", "code"), [
    ("401", "PROVIDER_AUTHENTICATION"), ("429", "PROVIDER_RATE_LIMITED"), ("500", "PROVIDER_SERVER_ERROR"),
    ("400_context", "PROVIDER_CONTEXT_LENGTH_EXCEEDED"), ("stall", "PROVIDER_TIMEOUT"),
])
def test_other_failures_keep_their_codes(server, mode: str, code: str) -> None:
    server.mode = mode
    with pytest.raises(ProviderError) as err:
        TextCompletionsClient(server.base_url, KEY, timeout_s=0.6).complete("m", PROMPT, stream=False)
    assert err.value.code == code and UPSTREAM_MARKER not in str(err.value)


@pytest.mark.parametrize(("status", "body", "code"), [
    (404, b"", "PROVIDER_NO_TEXT_COMPLETION"),
    (501, b"not implemented", "PROVIDER_NO_TEXT_COMPLETION"),
    (400, b'{"error": {"message": "The model `m` does not support the Completions API"}}',
     "PROVIDER_NO_TEXT_COMPLETION"),
    (400, b'{"detail": "This model only supports chat"}', "PROVIDER_NO_TEXT_COMPLETION"),
    (400, b'{"error": {"message": "bad temperature"}}', "PROVIDER_BAD_REQUEST"),
    (401, b'{"error": {"message": "This is a chat model"}}', "PROVIDER_AUTHENTICATION"),
    (400, b'{"error": {"message": "maximum context length is 4096 tokens"}}', "PROVIDER_CONTEXT_LENGTH_EXCEEDED"),
])
def test_error_for_text_status(status: int, body: bytes, code: str) -> None:
    assert error_for_text_status(status, body).code == code


def test_parse_reads_text_or_chat_shaped_choices() -> None:
    assert parse_text_completion({"choices": [{"text": "hi", "finish_reason": "length"}]}).content == "hi"
    assert parse_text_completion({"choices": [{"message": {"content": "yo"}}]}).content == "yo"
    with pytest.raises(ProviderError) as err:
        parse_text_completion({"choices": [{"text": 5}]})
    assert err.value.code == "PROVIDER_BAD_RESPONSE"


def test_streamed_text_chunks_accumulate_with_usage_and_finish() -> None:
    state = _TextStreamState()
    assert state.feed({"choices": [{"text": "Fog "}]}) == "Fog "
    assert state.feed({"choices": [{"delta": {"content": "rolls"}}]}) == "rolls"  # a chat-shaped server
    assert state.feed({"choices": [{"text": "", "finish_reason": "stop"}]}) == ""
    assert state.feed({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}) == ""
    reply = state.reply()
    assert (reply.content, reply.finish_reason, reply.usage) == ("Fog rolls", "stop",
                                                                 {"prompt_tokens": 7, "completion_tokens": 2})


@pytest.mark.parametrize(("chunk", "code"), [
    ([], "PROVIDER_BAD_RESPONSE"),  # not a JSON object
    ({"choices": "text"}, "PROVIDER_BAD_RESPONSE"),
    ({"choices": [5]}, "PROVIDER_BAD_RESPONSE"),
    ({"error": {"message": f"slow down {UPSTREAM_MARKER}", "code": "rate_limit_exceeded"}}, "PROVIDER_RATE_LIMITED"),
    ({"choices": None, "error": {"message": "context_length_exceeded"}}, "PROVIDER_CONTEXT_LENGTH_EXCEEDED"),
])
def test_both_routes_read_a_streamed_chunk_alike(chunk: object, code: str) -> None:
    """The chunk preamble (object, error chunk, usage, choices) is one reading for chat and text streams."""
    for state in (_StreamState(), _TextStreamState()):
        with pytest.raises(ProviderError) as err:
            state.feed(chunk)
        assert err.value.code == code and UPSTREAM_MARKER not in str(err.value)


def test_cancel_interrupts_a_stalled_text_completion(server) -> None:
    server.mode = "stall"
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(ProviderError) as err:
        TextCompletionsClient(server.base_url, None, timeout_s=30).complete("m", PROMPT, cancel=cancel)
    assert err.value.code == "CANCELLED"
