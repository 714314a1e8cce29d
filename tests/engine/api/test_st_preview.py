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
    report = live.store.import_st_folder(read_st_folder(build_st_user(tmp_path)))
    chat_id = next(r.id for r in report.added + report.unchanged if r.kind == "chat")
    resp = live.client.post(PREVIEW, json={"chat_id": chat_id})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body == preview(live.store.build_request(chat_id)).model_dump(mode="json")
    assert body["strategy"] == "sillytavern" and (body["context_limit"], body["reply_reserve"]) == (2000, 250)
    assert body["messages"][0] == {"role": "system", "content": "You are Kael. Reply to Alex."}
    # unsaved overrides merge over the stored settings; the setup still applies
    resp = live.client.post(PREVIEW, json={"chat_id": chat_id, "settings": {"context_limit": 3000}})
    assert resp.status_code == 200 and resp.json()["context_limit"] == 3000
    assert resp.json()["messages"][0]["content"] == "You are Kael. Reply to Alex."
