"""The HTTP API's chat preview for a chat imported from a SillyTavern folder (issue 17)."""

from __future__ import annotations

from pathlib import Path

from engine.api import API_PREFIX
from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from tests.engine.importers.st_fixture import build_st_user

from .conftest import Live

PREVIEW = f"{API_PREFIX}/context-preview"


def test_chat_preview_uses_the_stored_sillytavern_setup(live: Live, tmp_path: Path) -> None:
    report = live.store.imports.st_folder(read_st_folder(build_st_user(tmp_path)))
    chat_id = next(r.id for r in report.added + report.unchanged if r.kind == "chat")
    resp = live.client.post(PREVIEW, json={"chat_id": chat_id})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body == preview(live.store.chats.build_request(chat_id)).model_dump(mode="json")
    assert body["strategy"] == "sillytavern" and (body["context_limit"], body["reply_reserve"]) == (2000, 250)
    assert body["messages"][0] == {"role": "system", "content": "You are Kael. Reply to Alex."}
    # unsaved overrides merge over the stored settings; the setup still applies
    resp = live.client.post(PREVIEW, json={"chat_id": chat_id, "settings": {"context_limit": 3000}})
    assert resp.status_code == 200 and resp.json()["context_limit"] == 3000
    assert resp.json()["messages"][0]["content"] == "You are Kael. Reply to Alex."


def test_text_completion_chat_preview_carries_prompt_stop_and_spans(live: Live, tmp_path: Path) -> None:
    """Issue 26: a Text Completion chat's preview has ``api``, the exact ``prompt``, ``stop`` and block spans."""
    from tests.engine.assembly.tc_cases import write_case

    report = live.store.imports.st_folder(read_st_folder(write_case(tmp_path, "chatml", "cut")))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    resp = live.client.post(PREVIEW, json={"chat_id": chat_id})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body == preview(live.store.chats.build_request(chat_id)).model_dump(mode="json")
    assert body["api"] == "text_completion" and body["messages"] == []
    assert body["prompt"].startswith("<|im_start|>system\nWrite Kael's next reply")
    assert "\n<|im_end|>" in body["stop"]
    kept = [b for b in body["blocks"] if b["status"] == "kept"]
    assert all(body["prompt"][b["span"][0]:b["span"][1]] == b["text"] for b in kept)
    assert any(b["reason"] == "HISTORY_OLDEST_FIRST" and b["span"] is None for b in body["blocks"])
    # the window can be changed without saving, as for any chat
    resp = live.client.post(PREVIEW, json={"chat_id": chat_id, "settings": {"context_limit": 8000}})
    assert resp.status_code == 200 and resp.json()["budget"] == 8000 - 220
