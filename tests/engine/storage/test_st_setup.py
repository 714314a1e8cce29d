"""The Store's setup API (issue 17): per-chat SillyTavern setup and scoped lorebook links."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import LoomscopeError
from engine.importers.st_folder import read_st_folder
from engine.schema import Chat, ChatMessage, Lorebook
from engine.schema.sillytavern import SillyTavernSetup
from engine.storage import LorebookLink, open_store
from tests.engine.importers.st_fixture import build_st_user


def test_setup_round_trip_links_and_branches(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(build_st_user(tmp_path)))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    setup = store.chats.get_setup(chat_id)
    assert setup.sillytavern is not None
    changed = setup.sillytavern.model_copy(update={"new_chat_prompt": "[New scene]"})
    store.chats.save_setup(chat_id, changed)
    assert store.chats.get_setup(chat_id).sillytavern.new_chat_prompt == "[New scene]"
    req = store.chats.build_request(chat_id)
    assert req.sillytavern.lorebook_scopes == ["global", "chat", "character"]
    assert {"role": "system", "content": "[New scene]"} in __import__("engine.pipeline").pipeline.preview(req).messages
    extra = store.lorebooks.add(Lorebook(name="Extra"))
    store.chats.set_lorebook_links(chat_id, [LorebookLink(lorebook_id=extra, scope="global"),
                                            (setup.lorebooks[1].lorebook_id, "chat")])
    assert [(link.name, link.scope) for link in store.chats.get_setup(chat_id).lorebooks] == [
        ("Extra", "global"), ("Voyage", "chat")]
    with pytest.raises(LoomscopeError) as err:
        store.chats.set_lorebook_links(chat_id, [(extra, "galaxy")])
    assert err.value.code == "INVALID_SETTINGS"
    branch = store.chats.branch(chat_id, 1)
    b = store.chats.get_setup(branch)
    assert b.sillytavern == store.chats.get_setup(chat_id).sillytavern
    assert [(link.name, link.scope) for link in b.lorebooks] == [("Extra", "global"), ("Voyage", "chat")]
    store.chats.save_setup(chat_id, None)
    assert store.chats.build_request(chat_id).sillytavern is None


def test_plain_chats_have_no_setup(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    chat_id = store.chats.add(Chat(messages=[ChatMessage(role="user", content="hi")]))
    assert store.chats.get_setup(chat_id).sillytavern is None
    assert store.chats.build_request(chat_id).sillytavern is None
    store.chats.save_setup(chat_id, SillyTavernSetup())
    assert store.chats.build_request(chat_id).sillytavern == SillyTavernSetup()
