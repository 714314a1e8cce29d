"""A SillyTavern user folder built in code (always available, unlike ../shared/data).

Layout as SillyTavern 1.12.6 keeps it (``src/constants.js`` ``USER_DIRECTORY_TEMPLATE``):

- a global world ``Realm`` (``world_info.globalSelect``), a character world ``HeroLore`` (the
  card's ``extensions.world``), a chat world ``Voyage`` (``chat_metadata.world_info``) and a world
  linked nowhere (``Unused``);
- the card ``characters/hero.png`` (name ``Kael``, example dialogue, an embedded book that is the
  same as ``HeroLore``);
- the persona ``alex.png`` named ``Alex`` with a description, in the prompt;
- ``chats/hero/voyage.jsonl``: an Author's Note at depth 2 (system role), a message written
  under another persona's name, a hidden message, and macros in the first message;
- ``secrets.json`` holding :data:`SECRET_MARKER` (must never be read).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

SECRET_MARKER = "sk-LOOMSCOPE-SECRET-MARKER-7f3a9c"


def entry(uid: int, keys: list[str], content: str, **kw: Any) -> dict[str, Any]:
    """A SillyTavern world entry with the 1.12.6 template's defaults."""
    e: dict[str, Any] = {
        "uid": uid, "key": keys, "keysecondary": [], "comment": f"entry {uid}", "content": content,
        "constant": False, "vectorized": False, "selective": True, "selectiveLogic": 0, "addMemo": True,
        "order": 100, "position": 0, "disable": False, "excludeRecursion": False, "preventRecursion": True,
        "delayUntilRecursion": False, "probability": 100, "useProbability": True, "depth": 4, "group": "",
        "groupOverride": False, "groupWeight": 100, "scanDepth": None, "caseSensitive": None,
        "matchWholeWords": None, "useGroupScoring": None, "automationId": "", "role": None, "sticky": 0,
        "cooldown": 0, "delay": 0, "displayIndex": uid,
    }
    e.update(kw)
    return e


WORLDS: dict[str, dict[str, Any]] = {
    "Realm": {"entries": {
        "0": entry(0, ["harbor"], "Realm: the harbor city of Quill sits on a cold sea.", order=50),
        "1": entry(1, ["storm"], "Realm: storms here last three days.", order=10, position=4, depth=2),
    }},
    "HeroLore": {"entries": {
        "0": entry(0, ["sword"], "HeroLore: {{char}}'s sword is named Ember.", order=100),
        "1": entry(1, ["map"], "HeroLore: the map was drawn by {{user}}'s father.", order=90, position=1),
    }, "originalData": {"name": "HeroLore", "entries": []}},
    "Voyage": {"entries": {
        "0": entry(0, ["ship"], "Voyage: the ship is the Gull, two masts.", order=80),
    }},
    "Unused": {"entries": {"0": entry(0, ["ship"], "Unused: never linked.", constant=True)}},
}

CARD: dict[str, Any] = {
    "name": "Kael", "description": "{{char}} is a wandering swordsman who owes {{user}} a debt.",
    "personality": "wry, loyal", "scenario": "A storm drives {{char}} and {{user}} into the harbor.",
    "first_mes": "*{{char}} shakes rain from his cloak.* Evening, {{user}}.",
    "mes_example": "<START>\n{{user}}: Where to?\n{{char}}: Wherever the wind is kind.",
    "creatorcomment": "", "avatar": "none", "chat": "voyage", "talkativeness": "0.5", "fav": False,
    "tags": [], "create_date": "2024-9-28 @10h 00m 00s 000ms",
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {
        "name": "Kael", "description": "{{char}} is a wandering swordsman who owes {{user}} a debt.",
        "personality": "wry, loyal", "scenario": "A storm drives {{char}} and {{user}} into the harbor.",
        "first_mes": "*{{char}} shakes rain from his cloak.* Evening, {{user}}.",
        "mes_example": "<START>\n{{user}}: Where to?\n{{char}}: Wherever the wind is kind.",
        "creator_notes": "never sent", "system_prompt": "", "post_history_instructions": "",
        "alternate_greetings": [], "tags": ["test"], "creator": "tests", "character_version": "1",
        "extensions": {"talkativeness": "0.5", "fav": False, "world": "HeroLore",
                       "depth_prompt": {"prompt": "", "depth": 4, "role": "system"},
                       "unknown_extension": {"kept": True}},
        "unknown_data_field": "survives export",
        "character_book": {"name": "HeroLore", "entries": [
            {"id": 0, "keys": ["sword"], "secondary_keys": [], "comment": "entry 0",
             "content": "HeroLore: {{char}}'s sword is named Ember.", "constant": False, "selective": True,
             "insertion_order": 100, "enabled": True, "position": "before_char", "use_regex": True,
             "extensions": {"position": 0, "depth": 4}},
        ]},
    },
}

CHAT_LINES: list[dict[str, Any]] = [
    {"user_name": "Alex", "character_name": "Kael", "create_date": "2024-09-28@10h00m00s",
     "chat_metadata": {"world_info": "Voyage", "note_prompt": "[Keep the tone {{random::tense::tense}}.]",
                       "note_interval": 1, "note_position": 1, "note_depth": 2, "note_role": 0,
                       "unknown_meta": {"x": 1}}},
    {"name": "Kael", "is_user": False, "is_system": False, "send_date": "September 28, 2024 10:00am",
     "mes": "*{{char}} shakes rain from his cloak.* Evening, {{user}}.", "extra": {}},
    {"name": "Alex", "is_user": True, "is_system": False, "send_date": "September 28, 2024 10:01am",
     "mes": "Is the ship ready?", "extra": {}, "force_avatar": "User Avatars/alex.png"},
    {"name": "Kael", "is_user": False, "is_system": True, "send_date": "September 28, 2024 10:02am",
     "mes": "(hidden note about the harbor)", "extra": {}},
    {"name": "Kael", "is_user": False, "is_system": False, "send_date": "September 28, 2024 10:03am",
     "mes": "The Gull sails at dawn, if the storm allows.", "extra": {"api": "openai"}},
    {"name": "Sam", "is_user": True, "is_system": False, "send_date": "September 28, 2024 10:04am",
     "mes": "Sam here. I brought the harbor map.", "extra": {}, "force_avatar": "User Avatars/sam.png"},
]

SETTINGS: dict[str, Any] = {
    "username": "User", "user_avatar": "alex.png", "main_api": "openai",
    "world_info_settings": {
        "world_info": {"globalSelect": ["Realm"]}, "world_info_depth": 3, "world_info_budget": 50,
        "world_info_include_names": True, "world_info_recursive": False, "world_info_case_sensitive": False,
        "world_info_match_whole_words": True, "world_info_character_strategy": 1, "world_info_budget_cap": 0,
    },
    "power_user": {
        "personas": {"alex.png": "Alex", "sam.png": "Sam"},
        "persona_descriptions": {
            "alex.png": {"description": "Alex is a young cartographer from {{char}}'s past.", "position": 0,
                         "depth": 2, "role": 0},
            "sam.png": {"description": "Sam is a dockhand.", "position": 0},
        },
        "default_persona": None, "persona_description": "", "persona_description_position": 0,
        "pin_examples": False, "strip_examples": False, "prefer_character_prompt": True,
        "prefer_character_jailbreak": True, "collapse_newlines": False,
    },
    "extension_settings": {"note": {"default": "", "chara": [], "wiAddition": []}},
    "oai_settings": {
        "openai_model": "gpt-4o", "chat_completion_source": "openai", "openai_max_context": 2000,
        "openai_max_tokens": 250, "wi_format": "[World: {0}]", "new_chat_prompt": "[Start a new Chat]",
        "new_example_chat_prompt": "[Example Chat]", "send_if_empty": "", "wrap_in_quotes": False,
        "prompts": [
            {"name": "Main Prompt", "system_prompt": True, "role": "system",
             "content": "You are {{char}}. Reply to {{user}}.", "identifier": "main"},
            {"name": "Auxiliary Prompt", "system_prompt": True, "role": "system", "content": "", "identifier": "nsfw"},
            {"identifier": "dialogueExamples", "name": "Chat Examples", "system_prompt": True, "marker": True},
            {"name": "Post-History Instructions", "system_prompt": True, "role": "system",
             "content": "Stay in character as {{char}}.", "identifier": "jailbreak"},
            {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
            {"identifier": "worldInfoAfter", "name": "World Info (after)", "system_prompt": True, "marker": True},
            {"identifier": "worldInfoBefore", "name": "World Info (before)", "system_prompt": True, "marker": True},
            {"identifier": "charDescription", "name": "Char Description", "system_prompt": True, "marker": True},
            {"identifier": "charPersonality", "name": "Char Personality", "system_prompt": True, "marker": True},
            {"identifier": "scenario", "name": "Scenario", "system_prompt": True, "marker": True},
            {"identifier": "personaDescription", "name": "Persona Description", "system_prompt": True,
             "marker": True},
            {"identifier": "style-note", "name": "Style", "system_prompt": False, "role": "system",
             "content": "Write two short paragraphs.", "injection_position": 0, "injection_depth": 4},
        ],
        "prompt_order": [{"character_id": 100001, "order": [
            {"identifier": "main", "enabled": True},
            {"identifier": "worldInfoBefore", "enabled": True},
            {"identifier": "personaDescription", "enabled": True},
            {"identifier": "charDescription", "enabled": True},
            {"identifier": "charPersonality", "enabled": True},
            {"identifier": "scenario", "enabled": True},
            {"identifier": "enhanceDefinitions", "enabled": False},
            {"identifier": "nsfw", "enabled": True},
            {"identifier": "worldInfoAfter", "enabled": True},
            {"identifier": "style-note", "enabled": True},
            {"identifier": "dialogueExamples", "enabled": True},
            {"identifier": "chatHistory", "enabled": True},
            {"identifier": "jailbreak", "enabled": True},
        ]}],
    },
}


def card_png(card: dict[str, Any], size: tuple[int, int] = (8, 12)) -> bytes:
    """A PNG whose ``chara`` tEXt chunk holds ``card`` (SillyTavern's card format)."""
    import io

    info = PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(card).encode("utf-8")).decode("ascii"))
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 20, 30)).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


def build_st_user(root: Path, *, settings: dict[str, Any] | None = None, chat_lines: list[dict[str, Any]] | None = None,
                  worlds: dict[str, dict[str, Any]] | None = None) -> Path:
    """Write the fixture user folder under ``root/data/default-user``; returns that folder."""
    user = root / "data" / "default-user"
    for d in ("characters", "worlds", "chats/hero", "OpenAI Settings", "User Avatars", "group chats", "groups"):
        (user / d).mkdir(parents=True, exist_ok=True)
    (user / "settings.json").write_text(json.dumps(settings or SETTINGS, indent=4), encoding="utf-8")
    (user / "secrets.json").write_text(json.dumps({"api_key_openai": SECRET_MARKER}), encoding="utf-8")
    for name, data in (worlds or WORLDS).items():
        (user / "worlds" / f"{name}.json").write_text(json.dumps(data, indent=4), encoding="utf-8")
    (user / "characters" / "hero.png").write_bytes(card_png(CARD))
    (user / "chats" / "hero" / "voyage.jsonl").write_text(
        "\n".join(json.dumps(x) for x in (chat_lines or CHAT_LINES)), encoding="utf-8")
    (user / "User Avatars" / "alex.png").write_bytes(card_png({"name": "not a card"}))
    (user / "group chats" / "1700000000000.jsonl").write_text('{"user_name":"unused"}', encoding="utf-8")
    (user / "OpenAI Settings" / "Default.json").write_text("{}", encoding="utf-8")
    return user
