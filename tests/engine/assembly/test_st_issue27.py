"""SillyTavern rules of issue 27 through the whole Chat Completion path (fixture folder of issue 17).

Each expected result is derived from SillyTavern 1.12.6's code, cited per test; the folder is
``tests/engine/importers/st_fixture.py`` with one setting changed per case.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from tests.engine.importers.st_fixture import CHAT_LINES, SETTINGS, WORLDS, build_st_user


def _preview(tmp_path: Path, *, settings: Callable[[dict[str, Any]], None] | None = None,
             worlds: Callable[[dict[str, Any]], None] | None = None,
             chat: Callable[[list[dict[str, Any]]], None] | None = None,
             warnings: list[tuple[str, str]] | None = None) -> Any:
    s = json.loads(json.dumps(SETTINGS))
    w = json.loads(json.dumps(WORLDS))
    c = json.loads(json.dumps(CHAT_LINES))
    for fn, obj in ((settings, s), (worlds, w), (chat, c)):
        if fn is not None:
            fn(obj)
    user = build_st_user(tmp_path, settings=s, worlds=w, chat_lines=c)
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    plan = read_st_folder(user.parent, on_warning=(lambda f, m: warnings.append((f, m))) if warnings is not None
                          else None)
    report = store.imports.st_folder(plan)
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    return preview(store.chats.build_request(chat_id))


def _text(pv: Any) -> str:
    return "\n".join(str(m.get("content") or "") for m in pv.messages)


HARBOR = "Realm: the harbor city of Quill sits on a cold sea."


# ------------------------------------------------------------------ item 4: character and tag filters
@pytest.mark.parametrize(("flt", "sent"), [
    # checkWorldInfo (world-info.js 3801–3809): names.includes(getCharaFilename()), the card's file
    # name without extension ("hero" for characters/hero.png), never the character's name "Kael"
    ({"names": ["hero"], "isExclude": False, "tags": []}, True),
    ({"names": ["Kael"], "isExclude": False, "tags": []}, False),
    ({"names": ["hero"], "isExclude": True, "tags": []}, False),
    ({"names": ["Kael"], "isExclude": True, "tags": []}, True),
    # (3811–3827): tag_map[avatar] (tag ids) against the filter's tag ids, never tag names
    ({"names": [], "isExclude": False, "tags": ["1700"]}, True),
    ({"names": [], "isExclude": False, "tags": ["sailor"]}, False),
    ({"names": [], "isExclude": True, "tags": ["1700"]}, False),
])
def test_character_filters_compare_file_name_and_tag_ids(tmp_path: Path, flt: dict[str, Any], sent: bool) -> None:
    def settings(s: dict[str, Any]) -> None:
        s["tag_map"] = {"hero.png": ["1700"]}
        s["tags"] = [{"id": "1700", "name": "sailor"}, {"id": "1800", "name": "Kael"}]

    def worlds(w: dict[str, Any]) -> None:
        w["Realm"]["entries"]["0"]["characterFilter"] = flt

    pv = _preview(tmp_path, settings=settings, worlds=worlds)
    assert (HARBOR in _text(pv)) is sent
    rec = next(t for t in pv.lorebook_trace if t.book == "Realm" and str(t.uid) == "0")
    assert rec.activated is sent
    if not sent:
        assert rec.code == "LOREBOOK_FILTERED_CHARACTER"


# ------------------------------------------------------------------ item 5: entries without a position
def test_entry_without_position_is_activated_but_placed_nowhere(tmp_path: Path) -> None:
    """checkWorldInfo's output ``switch (entry.position)`` (world-info.js 4133–4173) has no case for an
    entry whose world file has no ``position``: it is activated (and counted) but inserts nothing."""
    def worlds(w: dict[str, Any]) -> None:
        del w["Realm"]["entries"]["0"]["position"]

    warnings: list[tuple[str, str]] = []
    pv = _preview(tmp_path, worlds=worlds, warnings=warnings)
    assert HARBOR not in _text(pv)
    rec = next(t for t in pv.lorebook_trace if t.book == "Realm" and str(t.uid) == "0")
    assert rec.activated and rec.detail.get("no_position") is True
    assert any(f == "worlds/Realm.json" and "uid 0" in m and "no position" in m for f, m in warnings)


def test_entry_with_position_is_placed(tmp_path: Path) -> None:
    assert HARBOR in _text(_preview(tmp_path))


# ------------------------------------------------------------------ item 6: Start Reply With
def test_start_reply_with_is_the_last_prompt(tmp_path: Path) -> None:
    """getBiasStrings (script.js 4714–4746): no message bias, so power_user.user_prompt_bias,
    substituteParams'd; preparePromptsForChatCompletion appends it as the system prompt ``bias``
    (openai.js 1139) after the ordered prompts, and populateChatCompletion adds it last (1036)."""
    pv = _preview(tmp_path, settings=lambda s: s["power_user"].update(user_prompt_bias="{{char}} grins:"))
    assert pv.messages[-1] == {"role": "system", "content": "Kael grins:"}
    block = next(b for b in pv.blocks if b.source == "prompt:bias")
    assert block.status == "kept"


def test_message_bias_wins_over_start_reply_with(tmp_path: Path) -> None:
    """The newest user message's ``extra.bias`` (stored by sendMessageAsUser) comes before the setting."""
    def chat(lines: list[dict[str, Any]]) -> None:
        lines[-1]["extra"] = {"bias": " {{user}} nods."}

    pv = _preview(tmp_path, chat=chat, settings=lambda s: s["power_user"].update(user_prompt_bias="ignored"))
    # {{user}} is name1, the chat's persona (Alex), whoever wrote the message
    assert pv.messages[-1] == {"role": "system", "content": " Alex nods."}


def test_no_start_reply_with_sends_nothing(tmp_path: Path) -> None:
    pv = _preview(tmp_path)
    assert not any(b.source == "prompt:bias" for b in pv.blocks)


# ------------------------------------------------------------------ item 7: regex scripts on the prompt
def _script(name: str, find: str, replace: str, placement: list[int], **kw: Any) -> dict[str, Any]:
    return {"id": name, "scriptName": name, "findRegex": find, "replaceString": replace, "trimStrings": [],
            "placement": placement, "disabled": False, "markdownOnly": False, "promptOnly": False,
            "runOnEdit": True, "substituteRegex": False, "minDepth": None, "maxDepth": None, **kw}


def test_regex_scripts_run_on_messages_and_world_info(tmp_path: Path) -> None:
    """Generate (script.js 3567–3583): each coreChat message through getRegexedString (AI output for
    the character's); checkWorldInfo (world-info.js 4128): each placed entry as World Info."""
    scripts = [_script("swan", "/Gull/g", "Swan", [2]), _script("lore", "/two masts/g", "three masts", [5])]
    pv = _preview(tmp_path, settings=lambda s: s["extension_settings"].update(regex=scripts))
    text = _text(pv)
    assert "The Swan sails at dawn" in text and "The Gull sails" not in text
    assert "Voyage: the ship is the Gull, three masts." in text  # the WI placement only
    msg = next(b for b in pv.blocks if b.source == "message:3")
    assert msg.trace["regex"] == [{"source": "message:3", "script": "swan",
                                   "before": "The Gull sails at dawn, if the storm allows.",
                                   "after": "The Swan sails at dawn, if the storm allows."}]
    wi = next(b for b in pv.blocks if any(p.get("source") == "lorebook:Voyage:0" for p in b.trace.get("parts", [])))
    assert [r["script"] for r in wi.trace["regex"]] == ["lore"]


def test_world_info_scans_the_regexed_chat(tmp_path: Path) -> None:
    """chatForWI is built from the regexed coreChat (script.js 3662): a user-input script that
    rewrites "harbor" hides the key from World Info."""
    scripts = [_script("port", "/harbor/g", "port", [1])]
    pv = _preview(tmp_path, settings=lambda s: s["extension_settings"].update(regex=scripts))
    rec = next(t for t in pv.lorebook_trace if t.book == "Realm" and str(t.uid) == "0")
    assert not rec.activated and HARBOR not in _text(pv)


def test_card_scripts_run_only_when_allowed(tmp_path: Path) -> None:
    from tests.engine.importers import st_fixture

    card_script = [_script("card", "/Gull/g", "Heron", [2])]
    original = json.loads(json.dumps(st_fixture.CARD))
    try:
        st_fixture.CARD["data"]["extensions"]["regex_scripts"] = card_script
        denied = _text(_preview(tmp_path / "a"))
        allowed = _text(_preview(tmp_path / "b", settings=lambda s: s["extension_settings"].update(
            character_allowed_regex=["hero.png"])))
    finally:
        st_fixture.CARD.clear()
        st_fixture.CARD.update(original)
    assert "The Gull sails" in denied and "The Heron sails" in allowed


def test_a_script_javascript_rejects_is_a_warning_naming_it(tmp_path: Path) -> None:
    scripts = [_script("broken", "/(unclosed/g", "x", [2])]
    pv = _preview(tmp_path, settings=lambda s: s["extension_settings"].update(regex=scripts))
    assert any("'broken'" in w and "does not compile" in w for w in pv.warnings)
    assert "The Gull sails" in _text(pv)


# ------------------------------------------------------------------ item 8: the card's own Author's Note
@pytest.mark.parametrize(("position", "use", "expected"), [
    # setFloatingPrompt (authors-note.js 329–346): chara_note_position replace 0, before 1, after 2
    (0, True, "Kael speaks softly."),
    (1, True, "Kael speaks softly.\n[Keep the tone tense.]"),
    (2, True, "[Keep the tone tense.]\nKael speaks softly."),
    (1, False, "[Keep the tone tense.]"),
])
def test_character_note_relative_to_the_chat_note(tmp_path: Path, position: int, use: bool, expected: str) -> None:
    def settings(s: dict[str, Any]) -> None:
        s["extension_settings"]["note"]["chara"] = [
            {"name": "other", "prompt": "never", "useChara": True, "position": 0},
            {"name": "hero", "prompt": "{{char}} speaks softly.", "useChara": use, "position": position}]

    pv = _preview(tmp_path, settings=settings)
    note = next(b for b in pv.blocks if b.source.startswith("injection:depth2"))
    # the note's macros are substituted where the extension prompt is used; World Info at depth 2 follows
    assert note.text.startswith(expected + "\n") or note.text == expected


# ------------------------------------------------------------------ item 2 through the whole path
def test_world_info_macros_in_the_chat_completion_path(tmp_path: Path) -> None:
    """checkWorldInfo (world-info.js 4027) substitutes every macro in the content: a comment is gone,
    {{getvar}} reads chat_metadata.variables, {{lastUserMessage}} the newest user message (macros.js 221)."""
    def worlds(w: dict[str, Any]) -> None:
        w["Realm"]["entries"]["0"]["content"] = ("Realm: {{// secret}}mood {{getvar::mood}}; "
                                                 "heard: {{lastUserMessage}}{{trim}}\n")

    def chat(lines: list[dict[str, Any]]) -> None:
        lines[0]["chat_metadata"]["variables"] = {"mood": "grim"}

    pv = _preview(tmp_path, worlds=worlds, chat=chat)
    assert "Realm: mood grim; heard: Sam here. I brought the harbor map." in _text(pv)
    assert "secret" not in _text(pv)
