"""The local HTTP API over a real uvicorn server on 127.0.0.1 and a real library (SQLite; PostgreSQL too when set)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.api import API_PREFIX, create_app, merge_settings
from engine.cli import main as cli_main
from engine.errors import ERROR_CODES
from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from tests.dbtest import query, row_counts
from tests.engine.storage.samples import audit as sample_audit

from .conftest import Live

PREVIEW = f"{API_PREFIX}/context-preview"


def _error(resp, status: int, code: str) -> dict:
    """Assert the error envelope with ``status`` and ``code``; return its ``error`` object."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"code", "message", "file", "place", "details"}
    assert err["code"] == code and code in ERROR_CODES
    assert isinstance(err["message"], str) and err["message"]
    return err


def _chat_stamps(db_url: str) -> list[tuple]:
    return query(db_url, "SELECT id, updated_at, settings FROM chats ORDER BY id")


def _cli_json(capsys, *argv: str):
    capsys.readouterr()
    assert cli_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------- OpenAPI, meta


def test_openapi_lists_both_routes(live: Live) -> None:
    spec = create_app(live.store).openapi()
    paths = spec["paths"]
    assert "get" in paths[f"{API_PREFIX}/chats/{{chat_id}}/context-audit"]
    post = paths[PREVIEW]["post"]
    assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/ContextPreview")
    body = post["requestBody"]["content"]["application/json"]["schema"]
    refs = {alt["$ref"].rsplit("/", 1)[1] for alt in body["oneOf"]}
    assert refs == {"ChatPreviewBody", "PreviewRequest"}
    audit_get = paths[f"{API_PREFIX}/chats/{{chat_id}}/context-audit"]["get"]
    assert audit_get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/PromptContextAudit")
    assert "404" in audit_get["responses"]
    # the served document is the same
    assert live.client.get(f"{API_PREFIX}/openapi.json").json()["paths"].keys() == paths.keys()


def test_health(live: Live) -> None:
    resp = live.client.get(f"{API_PREFIX}/health")
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "ok" and body["api"] == "v2" and body["database"] == live.store.dialect
    assert body["chats"] == len(live.store.chats.summaries())


def test_chats_list_matches_cli_json(live: Live, capsys) -> None:
    resp = live.client.get(f"{API_PREFIX}/chats")
    assert resp.status_code == 200
    assert resp.json() == _cli_json(capsys, "chats", "--db", live.db_url, "--format", "json")
    assert {c["id"] for c in resp.json()} >= {live.sample_id, live.bare_id, live.audited_id}


def test_unknown_route_and_wrong_method(live: Live) -> None:
    _error(live.client.get(f"{API_PREFIX}/nope"), 404, "ROUTE_NOT_FOUND")
    _error(live.client.get(PREVIEW), 405, "ROUTE_NOT_FOUND")


# ------------------------------------------------------------------------------- audit


def test_audit_unknown_chat_is_chat_not_found(live: Live) -> None:
    err = _error(live.client.get(f"{API_PREFIX}/chats/no-such-chat/context-audit"), 404, "CHAT_NOT_FOUND")
    assert err["file"] == "no-such-chat"


def test_audit_missing_is_audit_not_found(live: Live) -> None:
    _error(live.client.get(f"{API_PREFIX}/chats/{live.bare_id}/context-audit"), 404, "AUDIT_NOT_FOUND")


def test_stored_audit_is_returned_as_cli_prints_it(live: Live, capsys) -> None:
    url = f"{API_PREFIX}/chats/{live.audited_id}/context-audit"
    stored = sample_audit(live.audited_id, "gen-1", status="failed", code="PROVIDER_TIMEOUT")
    live.store.audits.put(stored)
    resp = live.client.get(url)
    assert resp.status_code == 200
    assert resp.json() == stored.model_dump(mode="json")
    assert resp.json() == _cli_json(capsys, "audit", live.audited_id, "--db", live.db_url, "--format", "json")
    # a newer audit replaces it
    newer = sample_audit(live.audited_id, "gen-2")
    live.store.audits.put(newer)
    body = live.client.get(url).json()
    assert body["generation_id"] == "gen-2" and body["status"] == "completed"


# ------------------------------------------------------------------------------- preview


def _small_request() -> PreviewRequest:
    chat = Chat(user_name="Wren", character_name="Ada", messages=[
        ChatMessage(role="user", content="Tell me about the lighthouse."),
        ChatMessage(role="assistant", content="It has stood on the cape for a century."),
        ChatMessage(role="user", content="Who keeps it?"),
    ])
    return PreviewRequest(chat=chat, system_prompt="You are {{char}}.", author_note="Be terse.",
                          settings=ContextSettings(model="gpt-4o", context_limit=2000, reply_reserve=200))


def test_preview_by_body_equals_pipeline(live: Live) -> None:
    request = _small_request()
    resp = live.client.post(PREVIEW, json=request.model_dump(mode="json"))
    assert resp.status_code == 200, resp.text
    assert resp.json() == preview(request).model_dump(mode="json")
    assert resp.json()["error"] is None


def test_preview_of_full_library_request_by_body_equals_pipeline(live: Live) -> None:
    # character, persona, lorebooks, settings: everything the sample chat has, sent as a body
    doc = live.store.chats.build_request(live.sample_id).model_dump(mode="json")
    resp = live.client.post(PREVIEW, json=doc)
    assert resp.status_code == 200, resp.text
    assert resp.json() == preview(PreviewRequest.model_validate(doc)).model_dump(mode="json")


def test_preview_by_chat_id_equals_pipeline(live: Live) -> None:
    resp = live.client.post(PREVIEW, json={"chat_id": live.sample_id})
    assert resp.status_code == 200, resp.text
    expected = preview(live.store.chats.build_request(live.sample_id)).model_dump(mode="json")
    assert resp.json() == expected
    assert any(b["status"] == "excluded" for b in expected["blocks"])  # the sample shifts
    assert any(b["kind"] == "lorebook" for b in expected["blocks"])


def test_preview_by_chat_id_with_setting_overrides(live: Live) -> None:
    stored = live.store.chats.get(live.sample_id).settings
    overrides = {"context_limit": 3000, "reply_reserve": "10%", "world_info": {"scan_depth": 7}}
    resp = live.client.post(PREVIEW, json={"chat_id": live.sample_id, "settings": overrides})
    assert resp.status_code == 200, resp.text
    merged = merge_settings(stored, overrides)
    assert merged.world_info.scan_depth == 7
    assert merged.world_info.budget_percent == stored.world_info.budget_percent  # merged, not replaced
    assert merged.model == stored.model and merged.template == stored.template
    request = live.store.chats.build_request(live.sample_id).model_copy(update={"settings": merged})
    assert resp.json() == preview(request).model_dump(mode="json")
    assert resp.json()["context_limit"] == 3000 and resp.json()["reply_reserve"] == 300
    assert live.store.chats.get(live.sample_id).settings == stored  # nothing saved


def test_budget_overflow_is_not_an_http_error(live: Live) -> None:
    request = PreviewRequest(
        chat=Chat(messages=[ChatMessage(role="user", content="hello " * 400)]),
        settings=ContextSettings(model="gpt-4o", context_limit=120, reply_reserve=20))
    resp = live.client.post(PREVIEW, json=request.model_dump(mode="json"))
    assert resp.status_code == 200, resp.text
    assert resp.json()["error"]["code"] == "TOKEN_BUDGET_EXCEEDED"
    assert resp.json() == preview(request).model_dump(mode="json")


def test_previews_create_no_rows(live: Live) -> None:
    before, stamps = row_counts(live.db_url), _chat_stamps(live.db_url)
    bodies = [
        {"chat_id": live.sample_id},
        {"chat_id": live.bare_id, "settings": {"context_limit": 50, "reply_reserve": 10}},
        live.store.chats.build_request(live.sample_id).model_dump(mode="json"),
        _small_request().model_dump(mode="json"),
        {"chat_id": live.sample_id, "settings": {"reply_reserve": -5}},
        {"chat_id": "missing"},
    ]
    for body in bodies:
        assert live.client.post(PREVIEW, json=body).status_code in (200, 404, 422)
    assert row_counts(live.db_url) == before
    assert before["messages"] > 0 and before["chats"] >= 3
    assert _chat_stamps(live.db_url) == stamps


def test_concurrent_previews_agree(live: Live) -> None:
    body = {"chat_id": live.sample_id}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: live.client.post(PREVIEW, json=body), range(16)))
    assert {r.status_code for r in answers} == {200}
    first = answers[0].json()
    assert all(r.json() == first for r in answers)


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("content", "status", "code", "place"), [
    ("{not json", 400, "INVALID_REQUEST", None),
    ("[" * 50_000, 400, "INVALID_REQUEST", None),
    ("[1, 2]", 422, "INVALID_REQUEST", "$"),
    ('"text"', 422, "INVALID_REQUEST", "$"),
    ('{"chat": {"messages": [{"role": "robot", "content": "x"}]}}', 422, "INVALID_REQUEST",
     "$.chat.messages[0].role"),
    ('{"unknown_field": 1}', 422, "INVALID_REQUEST", "$.unknown_field"),
    ('{"settings": {"reply_reserve": -1}}', 422, "INVALID_SETTINGS", "$.settings.reply_reserve"),
    ('{"settings": {"world_info": {"scan_depth": -3}}}', 422, "INVALID_SETTINGS",
     "$.settings.world_info.scan_depth"),
    ('{"settings": {"strategy": "no-such-strategy"}}', 422, "UNKNOWN_STRATEGY", None),
    ('{"settings": {"tokenizer": "no-such-tokenizer"}}', 422, "UNKNOWN_TOKENIZER", None),
    ('{"settings": {"context_limit": 100, "reply_reserve": 100}}', 422, "INVALID_SETTINGS", None),
    ('{"settings": {"safety_margin_percent": NaN}}', 422, "INVALID_SETTINGS", "$.settings.safety_margin_percent"),
    ('{"settings": {"context_limit": Infinity}}', 422, "INVALID_SETTINGS", "$.settings.context_limit"),
    ('{"chat_id": 5}', 422, "INVALID_REQUEST", "$.chat_id"),
    ('{"chat_id": ""}', 422, "INVALID_REQUEST", "$.chat_id"),
    ('{"chat_id": "x", "extra": 1}', 422, "INVALID_REQUEST", "$.extra"),
    ('{"chat_id": "no-such-chat"}', 404, "CHAT_NOT_FOUND", None),
])
def test_malformed_bodies_have_stable_codes(live: Live, content: str, status: int, code: str,
                                            place: str | None) -> None:
    resp = live.client.post(PREVIEW, content=content.encode(), headers={"content-type": "application/json"})
    err = _error(resp, status, code)
    if place is not None:
        assert err["place"] == place


@pytest.mark.parametrize(("overrides", "place"), [
    ({"bogus_key": 1}, "$.settings.bogus_key"),
    ({"world_info": {"budget_percent": 250}}, "$.settings.world_info.budget_percent"),
    ({"reply_reserve": "lots"}, "$.settings.reply_reserve"),
])
def test_bad_overrides_for_a_library_chat_are_invalid_settings(live: Live, overrides: dict, place: str) -> None:
    resp = live.client.post(PREVIEW, json={"chat_id": live.sample_id, "settings": overrides})
    err = _error(resp, 422, "INVALID_SETTINGS")
    assert err["place"] == place and err["file"] == "settings"


def test_non_json_content_type_is_refused(live: Live) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    resp = live.client.post(PREVIEW, content=b"chat_id=x", headers=form)
    _error(resp, 415, "INVALID_REQUEST")
    resp = live.client.post(PREVIEW, content=b"{}", headers={"content-type": "text/plain"})
    _error(resp, 415, "INVALID_REQUEST")


def test_foreign_host_header_is_refused(live: Live) -> None:
    _error(live.client.get(f"{API_PREFIX}/health", headers={"host": "evil.example"}), 400, "INVALID_REQUEST")
    _error(live.client.get(f"{API_PREFIX}/health", headers={"host": "127.0.0.1.evil.example:80"}), 400,
           "INVALID_REQUEST")
    for host in (f"localhost:{live.server.port}", f"[::1]:{live.server.port}", "127.0.0.1"):
        assert live.client.get(f"{API_PREFIX}/health", headers={"host": host}).status_code == 200


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_keys = st.sampled_from(["chat", "character", "persona", "lorebooks", "system_prompt", "author_note",
                         "memory", "settings", "chat_id", "messages"])
_settings_keys = st.sampled_from(["model", "context_limit", "reply_reserve", "strategy", "tokenizer",
                                  "safety_margin_percent", "template", "world_info", "strategy_options"])
_bodies = st.dictionaries(_keys, _json_values | st.dictionaries(_settings_keys, _json_values, max_size=4),
                          max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_bodies)
def test_any_json_body_gets_a_stable_answer(live: Live, body: dict) -> None:
    """Bad input never crashes the server: 200 with a preview, or a known code (never 500)."""
    resp = live.client.post(PREVIEW, json=body)
    if resp.status_code == 200:
        assert {"blocks", "prompt_tokens", "budget"} <= resp.json().keys()
    else:
        assert resp.status_code in (400, 404, 422), resp.text
        assert resp.json()["error"]["code"] in ERROR_CODES
