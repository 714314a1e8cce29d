"""Deleting and re-inserting one message (the app's undoable delete) keeps indices dense and unique."""

from __future__ import annotations

import pytest

from engine.errors import NotFoundError
from engine.schema import Chat, ChatMessage
from engine.storage import open_store


def test_delete_then_insert_restores_the_chat(tmp_path):
    with open_store(f"sqlite:///{tmp_path / 'lib.sqlite3'}", seed=False) as store:
        msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(6)]
        msgs[3] = msgs[3].model_copy(update={"meta": msgs[3].meta.model_copy(update={"pinned": True})})
        cid = store.chats.add(Chat(messages=msgs), title="t")
        store.messages.delete(cid, 3)
        after = store.chats.build_request(cid).chat.messages
        assert [m.content for m in after] == ["m0", "m1", "m2", "m4", "m5"]
        store.messages.insert(cid, 3, msgs[3])
        back = store.chats.build_request(cid).chat.messages
        assert [m.content for m in back] == [m.content for m in msgs] and back[3].meta.pinned
        store.messages.insert(cid, 6, ChatMessage(role="user", content="end"))
        assert store.chats.build_request(cid).chat.messages[-1].content == "end"
        with pytest.raises(NotFoundError):
            store.messages.insert(cid, 99, ChatMessage(role="user", content="x"))
        with pytest.raises(NotFoundError):
            store.messages.delete(cid, 99)
