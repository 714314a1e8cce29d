"""Every real file under ../shared/data imports with the values a SillyTavern user would expect.

Values were worked out by reading the files (and SOURCES.md); skipped when the folder is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import LoomscopeImportError
from engine.importers import (
    inspect_file,
    load_any,
    load_character,
    load_chat,
    load_chats,
    load_lorebook,
)
from engine.schema import InsertionPosition, SelectiveLogic

SERAPHINA_CHAT = "chats/Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"
NOVELAI = "lorebooks/New Story (Wed Oct 26 2022).lorebook"


# ------------------------------------------------------------------------------------ cards

def test_seraphina_png_v2_with_embedded_book(shared_data: Path) -> None:
    c = load_character(shared_data / "cards/default_Seraphina.png")
    assert (c.name, c.spec, c.spec_version) == ("Seraphina", "chara_card_v2", "2.0")
    assert len(c.description) == 2851 and "\u2014" in c.description  # typographic dash kept
    assert c.personality == c.scenario == c.mes_example == ""
    assert c.creator == "OtisAlejandro" and c.character_version == "1.0.0"
    assert c.creator_notes == "ST Default Bot contest winner: roleplay bots category"
    assert c.extensions == {"talkativeness": "0.5", "fav": False, "world": "Eldoria"}
    assert c.depth_prompt() is None
    book = c.character_book
    assert book is not None and book.name == "Eldoria" and len(book.entries) == 4
    assert [len(e.keys) for e in book.entries] == [4, 5, 3, 3]
    assert book.entries[0].keys == ["eldoria", "wood", "forest", "magical forest"]
    for e in book.entries:
        assert e.position == InsertionPosition.BEFORE_CHAR
        assert e.probability == 100  # extensions.probability null → ST default 100
        assert e.use_probability is False
        assert e.disable is False and e.selective is False
        assert e.extensions == {"position": 0, "probability": None, "useProbability": False}
    # the V1 fields mirrored at the top of the card are kept
    assert c.root_fields["chat"] == "Seraphina - 2023-5-12 @21h 32m 29s 224ms"


def test_sakana_png_book_details(shared_data: Path) -> None:
    c = load_character(shared_data / "cards/contest_Assistant_Sakana.png")
    assert (c.name, c.spec) == ("Sakana", "chara_card_v2")
    assert len(c.description) == 5083 and c.creator == "bronya_rand"
    assert c.extensions["depth_prompt"] == {"prompt": "", "depth": 4, "role": "system"}
    assert c.depth_prompt() is None  # empty Character's Note
    book = c.character_book
    assert book is not None and book.name == "Sakana-WI" and len(book.entries) == 14
    assert all(e.selective for e in book.entries)
    assert [e.secondary_keys for e in book.entries if e.secondary_keys] == [
        ["me"], ["me"], ["your face"], ["your hand", "your left hand", "your right hand"]]
    assert book.entries[1].keys.count("check") == 2  # duplicate key kept as written
    assert {e.position for e in book.entries} == {InsertionPosition.AFTER_CHAR}
    assert sum(e.exclude_recursion for e in book.entries) == 11
    assert sum(e.prevent_recursion for e in book.entries) == 1
    assert book.entries[0].comment == "Programming Example"
    assert book.entries[0].extensions["display_index"] == 0
    assert any("```py" in e.content for e in book.entries)
    assert "{{user}}" in book.entries[0].content and "{{char}}" in book.entries[0].content


def test_lumine_json_v2_large_book(shared_data: Path) -> None:
    c = load_character(shared_data / "cards/Lumine.json")
    assert (c.name, c.spec) == ("Lumine", "chara_card_v2")
    assert c.tags == ["genshin. genshin impact"]
    assert c.character_book is not None and c.character_book.name == "Traveler-WI"
    assert len(c.character_book.entries) == 119
    assert all(e.exclude_recursion for e in c.character_book.entries)
    assert any("\u200d" in e.content for e in c.character_book.entries)
    assert c.extensions["depth_prompt"] == {"prompt": "", "depth": 4}
    assert c.root_fields["talkativeness"] == "0.5" and c.root_fields["fav"] is False


def test_aqua_png_v1(shared_data: Path) -> None:
    item = load_any(shared_data / "cards/Aqua.png")
    c = item.value
    assert item.kind == "character" and item.spec == "chara_card_v1"
    assert c.name == "Aqua" and c.spec is None
    assert c.personality == "high-spirited, likes to party, carefree, cheerful."
    assert c.mes_example.startswith("<START>\r\n{{user}}: Hi Aqua")  # CRLF kept
    assert c.model_extra == {"avatar": "none", "chat": "1673181146000", "last_mes": "",
                             "create_date": "1674407315376"}
    assert c.character_book is None


def test_raiden_legacy_keys(shared_data: Path) -> None:
    c = load_character(shared_data / "cards/Raiden Ei (chat).json")
    assert c.name == "Raiden Ei"
    assert c.description.startswith("{{char}} = [ composed, reserved")
    assert c.first_mes.startswith("You have finally awakened.")
    assert c.personality == "" and c.scenario == ""
    assert c.model_extra["char_name"] == "Raiden Ei"
    assert c.model_extra["metadata"]["tool"]["name"] == "AI Character Editor"


def test_pygmalion_only_keys_are_mapped(shared_data: Path, tmp_path: Path) -> None:
    raw = json.loads((shared_data / "cards/Raiden Ei (chat).json").read_text("utf-8"))
    legacy = {k: v for k, v in raw.items() if k.startswith(("char_", "world_", "example_"))}
    p = tmp_path / "legacy.json"
    p.write_text(json.dumps(legacy), "utf-8")
    item = load_any(p)
    assert item.spec == "pygmalion"
    assert item.value.name == "Raiden Ei"
    assert item.value.description == raw["char_persona"]
    assert item.value.first_mes == raw["char_greeting"]


def test_chinese_v2_card(shared_data: Path) -> None:
    c = load_character(shared_data / "cards/白棠-卡.json")
    assert c.name == "白棠" and c.creator == "你的署名"
    assert len(c.system_prompt) == 254 and c.system_prompt.startswith("{{original}}")
    assert len(c.post_history_instructions) == 177
    assert c.post_history_instructions.startswith("{{original}}")
    dp = c.depth_prompt()
    assert dp is not None and dp.depth == 4 and dp.role == "system"
    assert dp.prompt.startswith("[白棠's body=")
    assert c.extensions["talkativeness"] == 0.5
    assert c.tags == ["示例", "中文", "白棠", "修表匠"]


# -------------------------------------------------------------------------------- lorebooks

def test_eldoria_minimal_fields(shared_data: Path) -> None:
    b = load_lorebook(shared_data / "lorebooks/Eldoria.json")
    assert b.name == "Eldoria" and len(b.entries) == 4
    assert [e.uid for e in b.entries] == [0, 1, 2, 3]
    e = b.entries[0]
    assert e.keys == ["eldoria", "wood", "forest", "magical forest"]
    assert e.selective is False and e.order == 100 and e.depth == 4 and e.probability == 100
    assert e.model_extra == {}


def test_gi_core(shared_data: Path) -> None:
    b = load_lorebook(shared_data / "lorebooks/GI-Core.json")
    assert len(b.entries) == 256
    assert sum(e.selective_logic == SelectiveLogic.NOT_ALL for e in b.entries) == 5
    assert sum(bool(e.secondary_keys) for e in b.entries) == 22
    assert sum(e.exclude_recursion for e in b.entries) == 239
    assert sum(e.disable for e in b.entries) == 3
    assert {int(e.position) for e in b.entries} == {0, 1, 2, 3}
    assert [e.probability for e in b.entries if e.probability != 100] == [30]
    liyue = [e for e in b.entries if e.keys == ["Liyue"] and e.secondary_keys]
    assert liyue and set(liyue[0].secondary_keys) >= {"Harbor", "Qixing"}
    assert b.entries[0].comment == "Rex Lapis"
    assert b.entries[0].model_extra["displayIndex"] == 0  # unknown field kept


def test_date_a_live(shared_data: Path) -> None:
    b = load_lorebook(shared_data / "lorebooks/Date a Live 12.0.0.json")
    assert len(b.entries) == 107
    assert sum(e.constant for e in b.entries) == 9
    assert sum(e.disable for e in b.entries) == 7
    at_depth = [e for e in b.entries if e.position == InsertionPosition.AT_DEPTH]
    assert len(at_depth) == 9 and {e.role for e in at_depth} == {0}
    assert {e.depth for e in at_depth} <= {0, 4}
    assert sum(e.depth == 0 for e in b.entries) == 19
    assert {e.order for e in b.entries} == {100}
    assert sum(not e.keys for e in b.entries) == 2
    assert sum("characterFilter" not in (e.model_extra or {}) for e in b.entries) == 1
    assert max(len(e.content) for e in b.entries) == 11626
    assert any("霊装" in e.content for e in b.entries)
    assert b.entries[0].model_extra["outletName"] == ""
    assert b.entries[0].model_extra["triggers"] == []
    # sticky/cooldown/delay 0 mean off
    assert all(e.sticky is None and e.cooldown is None and e.delay is None for e in b.entries)


def test_date_a_live_arcs(shared_data: Path) -> None:
    b = load_lorebook(shared_data / "lorebooks/Date a Live Arcs V1.1.0.json")
    assert len(b.entries) == 13
    assert all(e.constant and e.keys == [] for e in b.entries)
    assert sum(e.disable for e in b.entries) == 3
    assert max(len(e.content) for e in b.entries) == 32165
    assert sum(e.position == InsertionPosition.AT_DEPTH for e in b.entries) == 1


def test_eorzea(shared_data: Path) -> None:
    b = load_lorebook(shared_data / "lorebooks/Eorzea.json")
    assert len(b.entries) == 29
    logics = {e.selective_logic for e in b.entries if e.secondary_keys}
    assert {SelectiveLogic.NOT_ALL, SelectiveLogic.NOT_ANY} <= logics
    grid = [e for e in b.entries if "Gridania" in e.keys]
    assert grid and grid[0].secondary_keys == ["New Gridania", "Old Gridania"]
    assert sum(e.position == InsertionPosition.AN_BOTTOM for e in b.entries) == 1


def test_keqing_old_fields_and_original_data(shared_data: Path) -> None:
    b, spec, warnings = __import__("engine.importers", fromlist=["x"]).load_lorebook_with_info(
        shared_data / "lorebooks/Keqing-WI.json")
    assert spec == "sillytavern_world" and len(b.entries) == 27
    assert len(b.model_extra["originalData"]["entries"]) == 26
    assert any("originalData holds 26 entries" in w for w in warnings)
    assert b.entries[0].uid == 1 and b.entries[0].keys == ["Yuheng"]


def test_novelai_lorebook(shared_data: Path) -> None:
    item = load_any(shared_data / NOVELAI)
    assert item.kind == "lorebook" and item.spec == "novelai_lorebook" and item.spec_version == "4"
    b = item.value
    assert len(b.entries) == 1
    e = b.entries[0]
    assert e.keys == [] and e.content == "" and e.comment == "New Lorebook Entry"
    assert e.disable is False and e.constant is False
    assert e.model_extra["contextConfig"]["budgetPriority"] == 400
    assert any("NovelAI" in w for w in item.warnings)


def test_other_lorebook_shapes_are_unsupported(tmp_path: Path) -> None:
    agnai = tmp_path / "memory.json"
    agnai.write_text(json.dumps({"kind": "memory", "name": "x", "entries": [
        {"name": "a", "entry": "b", "keywords": ["c"], "priority": 1, "weight": 1, "enabled": True}]}))
    with pytest.raises(LoomscopeImportError) as ei:
        load_lorebook(agnai)
    assert ei.value.code == "IMPORT_UNSUPPORTED_FORMAT" and ei.value.file == str(agnai)


# ------------------------------------------------------------------------------------ chats

def test_seraphina_chat(shared_data: Path) -> None:
    chat = load_chat(shared_data / SERAPHINA_CHAT)
    assert (chat.user_name, chat.character_name) == ("Orion", "Seraphina")
    assert chat.metadata["chat_id_hash"] == 130419263489072
    assert chat.metadata["timedWorldInfo"] == {"sticky": {}, "cooldown": {}}
    assert chat.st_header == {"create_date": "2024-08-07@18h45m42s"}
    # malformed line 2 ({"system": ...}) is kept aside, not a message
    assert [m.role for m in chat.messages] == ["assistant", "user", "assistant"]
    assert [m.name for m in chat.messages] == ["Seraphina", "Orion", "Seraphina"]
    (extra_line,) = chat.st_extra_lines
    assert extra_line["line"] == 2 and extra_line["before"] == 0
    assert list(extra_line["data"]) == ["system"]
    user = chat.messages[1]
    assert user.meta.model_extra["force_avatar"] == "User Avatars/user-default.png"
    assert user.meta.model_extra["extra"] == {"isSmallSys": False}
    assert user.meta.model_extra["send_date"] == "August 7, 2024 8:30pm"
    last = chat.messages[2]
    assert len(last.text()) == 2051
    assert last.meta.model_extra["swipe_id"] == 0 and len(last.meta.model_extra["swipes"]) == 1
    assert last.meta.model_extra["extra"] == {"api": "tabby", "model": "gemma2-27b-6.5"}
    assert last.meta.model_extra["swipe_info"][0]["gen_started"] == "2024-08-07T12:30:37.813Z"
    assert not any(m.meta.hidden or m.meta.pinned for m in chat.messages)


def test_megumin_early_chat(shared_data: Path) -> None:
    chat = load_chat(shared_data / "chats/1673323621108.jsonl")
    assert (chat.user_name, chat.character_name) == ("You", "Megumin")
    assert chat.st_header == {"create_date": 1674559900991}
    assert set(chat.metadata) == {"note_prompt", "note_interval", "note_position", "note_depth"}
    assert [m.role for m in chat.messages] == ["assistant", "user", "assistant"]
    assert [m.meta.model_extra["is_name"] for m in chat.messages] == [True, True, False]
    assert "extra" not in chat.messages[0].meta.model_extra
    assert "is_system" not in chat.messages[0].meta.model_extra
    assert chat.messages[0].meta.model_extra["send_date"] == "2023-4-21 @20h 02m 47s 124ms"


def test_tau_bench_results(shared_data: Path) -> None:
    path = shared_data / "chats/gpt-4o-airline.json"
    chats = load_chats(path)
    assert len(chats) == 200
    assert sum(len(c.messages) for c in chats) == 5308
    assert max(len(c.messages) for c in chats) == 62
    calls = [tc for c in chats for m in c.messages for tc in (m.tool_calls or [])]
    assert len(calls) == 1164
    assert all(tc.id and tc.type == "function" for tc in calls)
    results = [m for c in chats for m in c.messages if m.role == "tool"]
    assert len(results) == 1164 and all(m.tool_call_id and m.name for m in results)
    assert all(max(len(m.tool_calls or []) for m in c.messages) <= 1 for c in chats)  # no parallel
    first = load_chat(path)  # default: the first transcript
    assert first == chats[0] and first.messages[0].role == "system"
    assert first.source_fields["task_id"] == 0
    assert load_chat(path, index=-1) == chats[-1]
    # most tool-call turns have content null (a few carry text too)
    assert sum(m.content is None for c in chats for m in c.messages if m.tool_calls) == 1074
    with pytest.raises(LoomscopeImportError) as ei:
        load_chat(path, index=200)
    assert ei.value.code == "IMPORT_INVALID_CHAT"


def test_airline_longest_request_body(shared_data: Path) -> None:
    chat = load_chat(shared_data / "chats/airline-longest-task.json")
    assert len(chat.messages) == 62 and chat.tools == []
    calls = [tc for m in chat.messages for tc in (m.tool_calls or [])]
    results = [m for m in chat.messages if m.role == "tool"]
    assert len(calls) == len(results) == 20
    assert [tc.id for tc in calls] == [m.tool_call_id for m in results]


def test_swe_agent_traj(shared_data: Path) -> None:
    chat = load_chat(shared_data / "chats/function_calling_simple.traj")
    assert len(chat.messages) == 12
    calls = [tc for m in chat.messages for tc in (m.tool_calls or [])]
    assert len(calls) == 5 and all(tc.id and tc.id.startswith("call_") for tc in calls)
    results = [m for m in chat.messages if m.role == "tool"]
    assert [m.tool_call_id for m in results] == [tc.id for tc in calls]
    assert all(m.model_extra["tool_call_ids"] == [m.tool_call_id] for m in results)
    assert [len(m.text()) for m in results] == [177, 327, 609, 111, 423]
    assert chat.messages[1].role == "user" and len(chat.messages[1].text()) == 4361
    a = chat.messages[2]
    assert a.model_extra["action"] == "find_file missing_colon.py"
    assert a.model_extra["agent"] == "main" and a.model_extra["message_type"] == "action"


def test_functionary_test_case(shared_data: Path) -> None:
    item = load_any(shared_data / "chats/test_case.json")
    chat = item.value
    assert item.spec == "openai_request"
    assert len(chat.messages) == 21 and len(chat.tools) == 3
    assert chat.tools[2] == {"type": "code_interpreter"}
    parallel = chat.messages[3]
    assert len(parallel.tool_calls) == 2 and all(tc.id is None for tc in parallel.tool_calls)
    assert [m.role for m in chat.messages[4:6]] == ["tool", "tool"]
    assert all(m.result_id() is None for m in chat.messages if m.role == "tool")
    code = chat.messages[12]
    assert code.tool_calls[0].function.name == "python"
    assert code.tool_calls[0].function.arguments.startswith("l=[int('0')")
    assert code.model_extra["metadata"] == {"masked": True}
    assert chat.messages[8].content is None
    assert chat.messages[7].model_extra["metainfo"] == {"img_path": "IMG_PATH"}


def test_toolbench_answer(shared_data: Path) -> None:
    path = shared_data / "chats/127_ChatGPT_DFS_woFilter_w2.json"
    chats = load_chats(path)
    assert [len(c.messages) for c in chats] == [3, 6, 8]
    assert all(len(c.tools) == 3 and c.tools[0]["type"] == "function" for c in chats)
    last = chats[-1]
    fcs = [m.model_extra["function_call"] for m in last.messages if m.model_extra.get("function_call")]
    assert [f["name"] for f in fcs] == ["api_tracking_for_pack_send"] * 2 + ["Finish"]
    assert "\n" in fcs[0]["arguments"]
    assert [m.role for m in last.messages].count("function") == 2
    assert last.messages[4].model_extra["valid"] is False


# ----------------------------------------------------------------------------- inspect/any

EXPECTED_INSPECT = {
    "cards/default_Seraphina.png": dict(kind="character", spec="chara_card_v2", name="Seraphina",
                                        entries=4, lorebook_name="Eldoria"),
    "cards/contest_Assistant_Sakana.png": dict(kind="character", spec="chara_card_v2",
                                               name="Sakana", entries=14),
    "cards/Lumine.json": dict(kind="character", spec="chara_card_v2", name="Lumine", entries=119),
    "cards/Aqua.png": dict(kind="character", spec="chara_card_v1", name="Aqua", entries=0),
    "cards/Raiden Ei (chat).json": dict(kind="character", spec="chara_card_v1", name="Raiden Ei"),
    "cards/白棠-卡.json": dict(kind="character", spec="chara_card_v2", name="白棠",
                              depth_prompt=True),
    "lorebooks/Eldoria.json": dict(kind="lorebook", name="Eldoria", entries=4),
    "lorebooks/GI-Core.json": dict(kind="lorebook", entries=256, enabled_entries=253),
    "lorebooks/Date a Live 12.0.0.json": dict(kind="lorebook", entries=107, enabled_entries=100,
                                              constant_entries=9),
    "lorebooks/Date a Live Arcs V1.1.0.json": dict(kind="lorebook", entries=13, constant_entries=13),
    "lorebooks/Eorzea.json": dict(kind="lorebook", entries=29),
    "lorebooks/Keqing-WI.json": dict(kind="lorebook", entries=27),
    NOVELAI: dict(kind="lorebook", spec="novelai_lorebook", entries=1),
    SERAPHINA_CHAT: dict(kind="chat", spec="sillytavern_jsonl", messages=3, swipes=1, hidden=0,
                         user_name="Orion", character_name="Seraphina", tool_calls=0),
    "chats/1673323621108.jsonl": dict(kind="chat", messages=3, character_name="Megumin"),
    "chats/gpt-4o-airline.json": dict(kind="chat", spec="tau_bench_results", transcripts=200,
                                      messages=5308, tool_calls=1164, tool_results=1164),
    "chats/airline-longest-task.json": dict(kind="chat", spec="openai_request", messages=62,
                                            tool_calls=20, tool_results=20),
    "chats/function_calling_simple.traj": dict(kind="chat", spec="swe_agent_traj", messages=12,
                                               tool_calls=5, tool_results=5),
    "chats/test_case.json": dict(kind="chat", spec="openai_request", messages=21, tool_calls=6,
                                 tool_results=6, tools=3),
    "chats/127_ChatGPT_DFS_woFilter_w2.json": dict(kind="chat", spec="toolbench_answer",
                                                   transcripts=3, messages=17, tool_calls=6,
                                                   tool_results=3, tools=3),
}


@pytest.mark.parametrize("rel", sorted(EXPECTED_INSPECT))
def test_inspect_reports(shared_data: Path, rel: str) -> None:
    report = inspect_file(shared_data / rel)
    for key, value in EXPECTED_INSPECT[rel].items():
        assert getattr(report, key) == value, key


def test_every_data_file_is_covered(shared_data: Path) -> None:
    files = {str(p.relative_to(shared_data)) for p in shared_data.glob("*/*") if p.is_file()}
    assert files == set(EXPECTED_INSPECT)


def test_load_any_rejects_other_json_shapes(tmp_path: Path) -> None:
    p = tmp_path / "tree.json"
    p.write_text(json.dumps({"tree": {"children": []}, "win": True}))
    with pytest.raises(LoomscopeImportError) as ei:
        load_any(p)
    assert ei.value.code == "IMPORT_UNSUPPORTED_FORMAT" and ei.value.place == "$"
