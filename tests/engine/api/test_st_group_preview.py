"""The HTTP API's chat preview of a group chat takes a ``speaker`` (issue 27 item 7)."""

from __future__ import annotations

from pathlib import Path

from engine.api import API_PREFIX
from engine.importers.st_folder import read_st_folder
from tests.engine.assembly.st_group_cases import CASES
from tests.engine.importers.st_group_fixture import build_group_user

from .conftest import Live


def test_http_preview_takes_a_speaker(live: Live, tmp_path: Path) -> None:
    report = live.store.imports.st_folder(read_st_folder(build_group_user(tmp_path)))
    chat_id = next(r.id for r in report.added if r.key.startswith("group chats/"))
    preview_url = f"{API_PREFIX}/context-preview"
    resp = live.client.post(preview_url, json={"chat_id": chat_id, "speaker": "Mira"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["messages"] == CASES["natural_swap_mira"]["messages"]
    resp = live.client.post(preview_url, json={"chat_id": chat_id, "speaker": "Nobody"})
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "INVALID_SETTINGS" and resp.json()["error"]["place"] == "$.speaker"
