"""Property: any chat message survives a store round trip unchanged; migrations go down and up."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.schema import Chat, ChatMessage
from engine.storage import Store, open_store

_text = st.text(max_size=40)
_json_leaf = st.none() | st.booleans() | st.integers(-10**6, 10**6) | _text
_json = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=3), max_leaves=8)
_extra_key = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10).filter(
    lambda k: k not in {"role", "content", "name", "tool_calls", "tool_call_id", "meta", "swipes"}
    and k not in {"toolcallid", "callid", "pinned", "hidden"})


@st.composite
def messages(draw) -> ChatMessage:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    data: dict = {"role": role}
    data["content"] = draw(st.none() | _text | st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2))
    if draw(st.booleans()):
        data["name"] = draw(st.text(min_size=1, max_size=10))
    if role == "assistant" and draw(st.booleans()):
        data["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                               "function": {"name": draw(_text), "arguments": draw(_text)}}
                              for i in range(draw(st.integers(1, 2)))]
    if role == "tool":
        data[draw(st.sampled_from(["tool_call_id", "toolCallId", "callId"]))] = draw(st.text(min_size=1, max_size=8))
    meta = {"pinned": draw(st.booleans()), "manualExcluded": draw(st.booleans()), "hidden": draw(st.booleans())}
    if draw(st.booleans()):
        meta["swipes"] = draw(st.lists(_text, max_size=3))
    meta.update(draw(st.dictionaries(_extra_key, _json, max_size=2)))
    data["meta"] = meta
    data.update(draw(st.dictionaries(_extra_key, _json, max_size=2)))
    return ChatMessage.model_validate(data)


def test_any_messages_round_trip(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'prop.db'}", seed=False)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(messages(), max_size=6))
    def check(msgs: list[ChatMessage]) -> None:
        chat = Chat(messages=msgs)
        chat_id = store.chats.add(chat)
        assert store.chats.get(chat_id).chat.model_dump() == chat.model_dump()
        if msgs:
            store.messages.append(chat_id, msgs[0])
            assert store.chats.get(chat_id).chat.messages[-1].model_dump() == msgs[0].model_dump()

    try:
        check()
    finally:
        store.close()


def test_migrations_downgrade_and_upgrade(store: Store, db_url: str) -> None:
    from alembic import command
    from sqlalchemy import inspect

    from engine.storage.database import alembic_config

    store.chats.add(Chat(messages=[ChatMessage(role="user", content="x")]))
    cfg = alembic_config(store.database.engine)
    command.downgrade(cfg, "base")
    assert set(inspect(store.database.engine).get_table_names()) <= {"alembic_version"}
    command.upgrade(cfg, "head")
    assert store.chats.summaries() == []
    assert store.chats.add(Chat()) and len(store.chats.summaries()) == 1
