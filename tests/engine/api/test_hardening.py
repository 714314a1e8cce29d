"""Issue 15 (5): the HTTP API under hostile requests.

Before: a lone UTF-16 surrogate in a body was a 500; bodies of any size were read; a client
sending its body slowly held a worker forever; ``reply_reserve: false`` was read as 0 tokens;
some 422 answers had no JSON path in ``place``; ``[::1]evil.com`` and ``localhost:80@evil.com``
passed the Host allow-list.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from engine.api import API_PREFIX, make_server
from engine.api.app import _host_name
from engine.api.limits import DEFAULT_MAX_BODY_BYTES
from engine.schema import Chat, ChatMessage
from engine.storage import open_store

from .conftest import Live, start_server, stop_server

PREVIEW = f"{API_PREFIX}/context-preview"


def _post_raw(live: Live, content: bytes):
    return live.client.post(PREVIEW, content=content, headers={"content-type": "application/json"})


# ------------------------------------------------------------------------------ lone surrogates


@pytest.mark.parametrize(("body", "place"), [
    ('{"chat": {"messages": [{"role": "user", "content": "cut \\ud83d here"}]}}', "$.chat.messages[0].content"),
    ('{"chat": {"messages": [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "\\udfff"}]}}',
     "$.chat.messages[1].content"),
    ('{"chat": {"messages": [{"role": "user", "content": "hi"}]}, "system_prompt": "\\ud800"}', "$.system_prompt"),
    ('{"chat": {"messages": [{"role": "user", "content": "hi"}], "metadata": {"\\udc00": 1}}}',
     "$.chat.metadata.\\udc00"),
])
def test_lone_surrogate_is_422_with_its_path(live: Live, body: str, place: str) -> None:
    resp = _post_raw(live, body.encode())
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert err["code"] == "INVALID_REQUEST" and err["place"] == place and "surrogate" in err["message"]


def test_lone_surrogate_in_library_overrides_is_invalid_settings(live: Live) -> None:
    body = json.dumps({"chat_id": live.bare_id, "settings": {"model": "x"}}).replace('"x"', '"\\ud83d"')
    resp = _post_raw(live, body.encode())
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "INVALID_SETTINGS"
    assert resp.json()["error"]["place"] == "$.settings.model"


def test_paired_surrogates_are_text(live: Live) -> None:
    body = '{"chat": {"messages": [{"role": "user", "content": "emoji \\ud83d\\ude00"}]}}'
    resp = _post_raw(live, body.encode())
    assert resp.status_code == 200, resp.text
    assert "😀" in json.dumps(resp.json(), ensure_ascii=False)


# ------------------------------------------------------------------------------ strict booleans


@pytest.mark.parametrize(("settings", "place"), [
    ({"reply_reserve": False}, "$.settings.reply_reserve"),
    ({"context_limit": True}, "$.settings.context_limit"),
    ({"safety_margin_percent": False}, "$.settings.safety_margin_percent"),
    ({"world_info": {"scan_depth": True}}, "$.settings.world_info.scan_depth"),
    ({"world_info": {"budget_percent": False}}, "$.settings.world_info.budget_percent"),
    ({"world_info": {"recursive": 1}}, "$.settings.world_info.recursive"),
    ({"world_info": {"case_sensitive": "yes"}}, "$.settings.world_info.case_sensitive"),
])
def test_booleans_and_numbers_are_not_interchangeable(live: Live, settings: dict, place: str) -> None:
    for body in ({"chat_id": live.bare_id, "settings": settings},
                 {"chat": {"messages": [{"role": "user", "content": "hi"}]}, "settings": settings}):
        resp = live.client.post(PREVIEW, json=body)
        assert resp.status_code == 422, resp.text
        err = resp.json()["error"]
        assert err["code"] == "INVALID_SETTINGS" and err["place"] == place, err


# ------------------------------------------------------------------------------ every 422 has a JSON path


@pytest.mark.parametrize("body", [
    {"chat": {"messages": [{"role": "user", "content": "hi"}]}, "settings": {"strategy": "no-such-strategy"}},
    {"chat": {"messages": [{"role": "user", "content": "hi"}]}, "settings": {"tokenizer": "no-such-tokenizer"}},
    {"chat": {"messages": [{"role": "user", "content": "hi"}]}, "settings": {"context_limit": 100,
                                                                           "reply_reserve": 500}},
    {"chat": {"messages": [{"role": "user", "content": "hi"}]}, "settings": {"reply_reserve": "150%"}},
    {"chat": {"messages": [{"role": "wizard", "content": "hi"}]}},
    {"chat": "not an object"},
    {"chat": {"messages": []}, "no_such_field": 1},
    [],
    {"chat_id": ""},
    {"chat_id": 5},
])
def test_every_422_names_a_json_path(live: Live, body) -> None:
    resp = live.client.post(PREVIEW, json=body)
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert isinstance(err["place"], str) and err["place"].startswith("$"), err


def test_unknown_strategy_place_is_the_strategy_setting(live: Live) -> None:
    resp = live.client.post(PREVIEW, json={"chat_id": live.bare_id, "settings": {"strategy": "nope"}})
    assert resp.status_code == 422
    assert resp.json()["error"]["place"] == "$.settings.strategy"


# ------------------------------------------------------------------------------ Host header


@pytest.mark.parametrize("host", ["[::1]evil.com", "localhost:80@evil.com", "localhost:http", "127.0.0.1 evil",
                                  "evil.com#127.0.0.1", "[::1", "localhost:", "localhost:80:80", "user@localhost",
                                  "127.0.0.1.evil.com", "[::1]:80x", "", "localhost.", "LOCALHOST.:8765",
                                  "127.0.0.1.:80"])
def test_malformed_host_headers_are_refused(live: Live, host: str) -> None:
    assert _host_name(host) in (None, "127.0.0.1.evil.com")
    resp = live.client.get(f"{API_PREFIX}/health", headers={"Host": host})
    assert resp.status_code == 400, (host, resp.text)
    assert resp.json()["error"]["file"] == "Host"


@pytest.mark.parametrize(("host", "name"), [("localhost", "localhost"), ("LOCALHOST:8765", "localhost"),
                                            ("[::1]:8765", "::1"), ("[::1]", "::1"), ("127.0.0.1:1", "127.0.0.1")])
def test_wellformed_loopback_hosts_pass(live: Live, host: str, name: str) -> None:
    assert _host_name(host) == name
    assert live.client.get(f"{API_PREFIX}/health", headers={"Host": host}).status_code == 200


# ------------------------------------------------------------------------------ body size and read time


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Iterator[tuple[httpx.Client, object]]:
    """A server with a 4 KiB body limit and a 0.5 s body-read timeout."""
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('limits') / 'lib.sqlite3'}", seed=False)
    store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]))
    server = make_server(store, port=0, log_level="critical", max_body_bytes=4096)
    server.server.config.app  # noqa: B018 - built
    thread = start_server(server)
    client = httpx.Client(base_url=server.url, trust_env=False, timeout=10)
    try:
        yield client, server
    finally:
        client.close()
        stop_server(server, thread)
        store.close()


def test_default_body_limit_is_16_mib() -> None:
    assert DEFAULT_MAX_BODY_BYTES == 16 * 1024 * 1024


def test_oversized_body_is_413(small) -> None:
    client, _server = small
    big = json.dumps({"chat": {"messages": [{"role": "user", "content": "x" * 10_000}]}})
    resp = client.post(PREVIEW, content=big, headers={"content-type": "application/json"})
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "INVALID_REQUEST" and "4,096" in resp.json()["error"]["message"]
    ok = json.dumps({"chat": {"messages": [{"role": "user", "content": "x" * 100}]}})
    assert client.post(PREVIEW, content=ok, headers={"content-type": "application/json"}).status_code == 200


def test_oversized_chunked_body_is_413(small) -> None:
    client, _server = small

    def chunks():
        yield b'{"chat": {"messages": [{"role": "user", "content": "'
        for _ in range(20):
            yield b"x" * 1000
        yield b'"}]}}'

    resp = client.post(PREVIEW, content=chunks(), headers={"content-type": "application/json"})
    assert resp.status_code == 413


def _raw_request(server, head: bytes, body: bytes, wait: float) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(head + body)
        time.sleep(wait)
        sock.settimeout(10)
        data = b""
        try:
            while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
                part = sock.recv(65536)
                if not part:
                    break
                data += part
        except TimeoutError:
            pass
        return data


def test_slow_body_is_408(tmp_path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False)
    server = make_server(store, port=0, log_level="critical")
    # the body timeout is a create_app setting; rebuild the server's app with a short one
    from engine.api.app import create_app

    server.server.config.app = create_app(store, body_timeout_s=0.5)
    server.server.config.loaded = False
    thread = start_server(server)
    try:
        head = (f"POST {PREVIEW} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n").encode()
        started = time.monotonic()
        answer = _raw_request(server, head, b'{"chat": ', wait=0.1)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b'"INVALID_REQUEST"' in answer and time.monotonic() - started < 8
    finally:
        stop_server(server, thread)
        store.close()


def test_serve_flag_sets_the_body_limit(tmp_path, capsys) -> None:
    from engine.cli import build_parser

    args = build_parser().parse_args(["serve", "--max-body-mib", "0.5"])
    assert args.max_body_mib == 0.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--max-body-mib", "0"])


# ------------------------------------------------------------------------------ found by schemathesis


@pytest.mark.parametrize("uid", ["³", "٣", "²³", "1", "x"])
def test_non_ascii_digit_uids_do_not_crash_the_preview(live: Live, uid: str) -> None:
    """``"³".isdigit()`` is true but ``int("³")`` fails: a lorebook entry with such a uid was a 500
    (found by the long schemathesis run, ``tests/benchmarks/bench_api_fuzz.py``)."""
    body = {"chat": {"messages": [{"role": "user", "content": "the lamp"}]},
            "lorebooks": [{"name": "B", "entries": [{"uid": uid, "keys": ["lamp"], "content": "Old lamp."},
                                                    {"uid": 2, "keys": ["lamp"], "content": "Second."}]}]}
    resp = live.client.post(PREVIEW, json=body)
    assert resp.status_code == 200, resp.text
    assert any(b["kind"] == "lorebook" for b in resp.json()["blocks"])


def test_export_of_a_book_with_non_ascii_digit_uids(tmp_path) -> None:
    from engine.importers import load_lorebook
    from engine.importers.lorebooks import export_world_json
    from engine.schema.lorebook import Lorebook, LorebookEntry

    book = Lorebook(name="B", entries=[LorebookEntry(uid="³", keys=["a"], content="x"),
                                       LorebookEntry(uid=4, keys=["b"], content="y")])
    path = tmp_path / "B.json"
    path.write_text(json.dumps(export_world_json(book)))
    assert len(load_lorebook(path).entries) == 2


# ------------------------------------------------------------------------------ huge integers (issue 25)


@pytest.mark.parametrize(("digits", "code", "place"), [(4_000, "INVALID_SETTINGS", "$.settings.context_limit"),
                                                       (17, "INVALID_SETTINGS", "$.settings.context_limit"),
                                                       (5_000, "INVALID_REQUEST", "$")])
def test_a_huge_context_limit_is_422(live: Live, digits: int, code: str, place: str) -> None:
    body = ('{"chat": {"messages": [{"role": "user", "content": "hi"}]}, "settings": {"context_limit": '
            + "9" * digits + "}}")
    resp = _post_raw(live, body.encode())
    assert resp.status_code == 422, resp.text[:300]
    err = resp.json()["error"]
    assert err["code"] == code and err["place"] == place and "too large" in err["message"]
    assert len(resp.text) < 1_000  # the value is not echoed back


def test_a_large_but_safe_integer_still_passes(live: Live) -> None:
    body = '{"chat": {"messages": [{"role": "user", "content": "call 1234567890123456789 now"}]}, "settings": {"context_limit": 9007199254740991}}'
    assert _post_raw(live, body.encode()).status_code == 200
