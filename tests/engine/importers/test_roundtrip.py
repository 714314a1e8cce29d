"""Export → re-import gives the same data (unknown fields included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.importers import (
    export_chat_jsonl,
    export_world_json,
    load_chat,
    load_chats,
    load_lorebook,
    write_chat_jsonl,
    write_world_json,
)
from engine.schema import Chat, ChatMessage, Lorebook, LorebookEntry, MessageMeta, ToolCall, ToolFunction

from .helpers import st_chat_lines, write

LOREBOOKS = ["Eldoria.json", "GI-Core.json", "Date a Live 12.0.0.json",
             "Date a Live Arcs V1.1.0.json", "Eorzea.json", "Keqing-WI.json",
             "New Story (Wed Oct 26 2022).lorebook"]
CHATS = ["Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl", "1673323621108.jsonl",
         "airline-longest-task.json", "function_calling_simple.traj", "test_case.json",
         "127_ChatGPT_DFS_woFilter_w2.json"]


#: Keys a message made in Loomscope gains as a SillyTavern line (``_new_st_line``): kept in ``meta`` on re-import.
ST_LINE_KEYS = {"st_keys", "send_date", "gen_started", "gen_finished", "swipe_id", "swipes", "swipe_info", "extra"}


def _prompt_view(chat: Chat) -> list[dict]:
    """Each message without the SillyTavern line fields an export adds (what a prompt is built from)."""
    out = []
    for m in chat.messages:
        d = m.model_dump(mode="json")
        d["meta"] = {k: v for k, v in d["meta"].items() if k not in ST_LINE_KEYS}
        out.append(d)
    return out


def _same_chat(again: Chat, chat: Chat) -> None:
    assert again.model_copy(update={"title": chat.title, "messages": []}) == chat.model_copy(update={"messages": []})
    assert _prompt_view(again) == _prompt_view(chat)


def _reload_chat(chat: Chat, tmp_path: Path, stem: str) -> Chat:
    path = tmp_path / f"{stem}.jsonl"
    write_chat_jsonl(chat, path)
    return load_chat(path)


@pytest.mark.parametrize("name", LOREBOOKS)
def test_real_world_roundtrip(shared_data: Path, tmp_path: Path, name: str) -> None:
    book = load_lorebook(shared_data / "lorebooks" / name)
    out = tmp_path / name
    write_world_json(book, out)
    again = load_lorebook(out)
    assert again == book
    assert again.model_dump() == book.model_dump()


def test_world_export_keeps_st_file_content(shared_data: Path) -> None:
    """Exported entries hold every key of the original entries with equal-meaning values."""
    raw = json.loads((shared_data / "lorebooks/Date a Live 12.0.0.json").read_text("utf-8"))
    out = export_world_json(load_lorebook(shared_data / "lorebooks/Date a Live 12.0.0.json"))
    assert set(out["entries"]) == set(raw["entries"])
    off = {"sticky", "cooldown", "delay"}  # 0 and null are both "off": written as null
    for uid, entry in raw["entries"].items():
        exported = out["entries"][uid]
        for key, value in entry.items():
            if key in off and not value:
                assert exported[key] is None
            else:
                assert exported[key] == value, (uid, key)


def test_keqing_original_data_survives(shared_data: Path) -> None:
    raw = json.loads((shared_data / "lorebooks/Keqing-WI.json").read_text("utf-8"))
    out = export_world_json(load_lorebook(shared_data / "lorebooks/Keqing-WI.json"))
    assert out["originalData"] == raw["originalData"]


@pytest.mark.parametrize("name", CHATS)
def test_real_chat_roundtrip(shared_data: Path, tmp_path: Path, name: str) -> None:
    for chat in load_chats(shared_data / "chats" / name):
        again = _reload_chat(chat, tmp_path, Path(name).stem)
        _same_chat(again, chat)
        twice = _reload_chat(again, tmp_path, "twice")
        assert twice.model_copy(update={"title": again.title}) == again  # once SillyTavern lines: exact


def test_tau_bench_roundtrip_every_transcript(shared_data: Path, tmp_path: Path) -> None:
    chats = load_chats(shared_data / "chats/gpt-4o-airline.json")
    for chat in chats[:: 10]:
        again = _reload_chat(chat, tmp_path, "t")
        _same_chat(again, chat)


@pytest.mark.parametrize("name", ["Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl",
                                  "1673323621108.jsonl"])
def test_st_chat_export_matches_original_lines(shared_data: Path, name: str) -> None:
    path = shared_data / "chats" / name
    original = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    exported = [json.loads(line) for line in export_chat_jsonl(load_chat(path)).splitlines()]
    assert exported == original
    assert [list(o) for o in exported] == [list(o) for o in original]  # key order too


def test_megumin_export_is_byte_identical(shared_data: Path) -> None:
    path = shared_data / "chats/1673323621108.jsonl"
    assert export_chat_jsonl(load_chat(path)) == path.read_text("utf-8")


def test_synthetic_st_chat_flags_roles_and_lines(tmp_path: Path) -> None:
    lines = st_chat_lines()
    path = write(tmp_path / "c.jsonl", "\n".join(json.dumps(x) for x in lines))
    chat = load_chat(path)
    assert [m.role for m in chat.messages] == ["assistant", "user", "system", "user", "assistant"]
    assert [m.meta.hidden for m in chat.messages] == [False, True, False, False, False]
    assert [m.meta.pinned for m in chat.messages] == [False, True, False, False, False]
    assert [m.meta.manualExcluded for m in chat.messages] == [False, False, False, True, False]
    assert chat.metadata["integrity"] == "abc"
    # unchanged: the export is the same lines
    assert [json.loads(x) for x in export_chat_jsonl(chat).splitlines()] == lines
    # edits in Loomscope travel through SillyTavern JSONL and back
    msgs = list(chat.messages)
    msgs[0] = msgs[0].model_copy(update={"meta": msgs[0].meta.model_copy(update={"pinned": True})})
    msgs[1] = msgs[1].model_copy(update={"meta": msgs[1].meta.model_copy(
        update={"pinned": False, "hidden": False})})
    msgs[4] = msgs[4].model_copy(update={"role": "tool", "tool_call_id": "call_1", "content": None})
    edited = chat.model_copy(update={"messages": msgs, "tools": [{"type": "function",
                                                                   "function": {"name": "f"}}]})
    again = _reload_chat(edited, tmp_path, "c")
    assert again == edited
    out = [json.loads(x) for x in export_chat_jsonl(edited).splitlines()]
    assert out[2]["extra"] == {"pinned": False} and out[2]["is_system"] is False
    assert out[1]["extra"]["loomscope"] == {"pinned": True} and "loomscope" not in out[1]


def test_openai_chat_through_st_jsonl(tmp_path: Path) -> None:
    chat = Chat(
        title="t",
        tools=[{"type": "function", "function": {"name": "get", "parameters": {}}}],
        messages=[
            ChatMessage(role="system", content="policy"),
            ChatMessage(role="user", content=[{"type": "text", "text": "hi"}]),
            ChatMessage(role="assistant", content=None, tool_calls=[
                ToolCall(id="a", function=ToolFunction(name="get", arguments="{}")),
                ToolCall(function=ToolFunction(name="get", arguments="{\"x\": 1}"))]),
            ChatMessage(role="tool", content="1", toolCallId="a"),
            ChatMessage(role="tool", content="2", callId="b", meta=MessageMeta(pinned=True)),
            ChatMessage(role="function", name="get", content="3"),
            ChatMessage(role="assistant", content="ok", function_call={"name": "get", "arguments": ""},
                        meta=MessageMeta(hidden=True, manualExcluded=True, note="x")),
        ],
        request_fields={"model": "gpt-4o"},
    )
    again = _reload_chat(chat, tmp_path, "t")
    _same_chat(again, chat)
    # SillyTavern sees plausible lines
    lines = [json.loads(x) for x in export_chat_jsonl(chat).splitlines()]
    assert lines[1]["is_user"] is False and lines[1]["mes"] == "policy"
    assert lines[2]["is_user"] is True and lines[2]["mes"] == "hi"
    assert lines[7]["is_system"] is True
    # nothing repeated: no copy of the message, only what SillyTavern's line cannot say
    assert all("loomscope" not in line and "message" not in line["extra"].get("loomscope", {}) for line in lines[1:])
    assert lines[3]["extra"]["loomscope"]["tool_calls"][0]["id"] == "a"
    assert lines[5]["extra"]["loomscope"] == {"pinned": True, "no_name": True, "role": "tool", "callId": "b"}
    # a reply has SillyTavern's reply fields (saveReply): swipes, swipe_id, swipe_info, send_date
    assert lines[7]["swipes"] == ["ok"] and lines[7]["swipe_id"] == 0 and lines[7]["send_date"]


def test_old_exports_with_a_message_copy_still_import(tmp_path: Path) -> None:
    """Loomscope before issue 30 wrote ``loomscope.message`` (the whole message) on the line."""
    lines = [{"user_name": "U", "character_name": "C", "chat_metadata": {}},
             {"name": "tool", "is_user": False, "is_system": False, "mes": "2",
              "loomscope": {"pinned": True, "message": {"role": "tool", "content": "2", "callId": "b",
                                                        "meta": {"pinned": True}}}}]
    path = write(tmp_path / "old.jsonl", "\n".join(json.dumps(x) for x in lines))
    m = load_chat(path).messages[0]
    assert (m.role, m.content, m.callId, m.meta.pinned) == ("tool", "2", "b", True)


def test_generated_reply_times_are_sillytavern_fields(tmp_path: Path) -> None:
    """``gen_started`` / ``gen_finished`` / ``send_date`` stamped on a reply become the line's own fields."""
    reply = ChatMessage(role="assistant", content="hi", name="C", meta=MessageMeta(
        send_date="June 19, 2023 2:20pm", gen_started="2023-06-19T14:20:00.000Z", gen_finished="2023-06-19T14:20:03.000Z"))
    line = json.loads(export_chat_jsonl(Chat(messages=[reply])).splitlines()[1])
    assert {k: line[k] for k in ("send_date", "gen_started", "gen_finished")} == {
        "send_date": "June 19, 2023 2:20pm", "gen_started": "2023-06-19T14:20:00.000Z",
        "gen_finished": "2023-06-19T14:20:03.000Z"}
    assert line["swipe_info"][0]["gen_finished"] == "2023-06-19T14:20:03.000Z"
    assert line["extra"] == {}  # nothing Loomscope-only to carry


def test_mes_edited_in_sillytavern_wins(tmp_path: Path) -> None:
    chat = Chat(messages=[ChatMessage(role="assistant", content="before")])
    lines = export_chat_jsonl(chat).splitlines()
    msg = json.loads(lines[1])
    msg["mes"] = "after"
    path = write(tmp_path / "e.jsonl", "\n".join([lines[0], json.dumps(msg)]))
    assert load_chat(path).messages[0].content == "after"


def test_world_roundtrip_of_constructed_book(tmp_path: Path) -> None:
    book = Lorebook(name="b", description="d", scan_depth=3, entries=[
        LorebookEntry(uid=5, keys=["a"], order=7.5, sticky=2, delay_until_recursion=2,
                      case_sensitive=True, role=None, customField={"k": [1]}),
        LorebookEntry(uid="x", content="c", extensions={"e": 1}),
    ], somethingElse=1)
    write_world_json(book, tmp_path / "b.json")
    assert load_lorebook(tmp_path / "b.json") == book
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write leaves no temp file


def test_unused_header_placeholders(tmp_path: Path) -> None:
    lines = [{"chat_metadata": {"integrity": "u-1"}, "user_name": "unused", "character_name": "unused"},
             {"name": "Mira", "is_user": False, "mes": "hi", "original_avatar": "mira.png"}]
    path = write(tmp_path / "g.jsonl", "\n".join(json.dumps(x) for x in lines))
    chat = load_chat(path)
    assert (chat.user_name, chat.character_name) == ("User", "")
    out = [json.loads(x) for x in export_chat_jsonl(chat).splitlines()]
    assert out == lines
    assert _reload_chat(chat, tmp_path, "g") == chat
