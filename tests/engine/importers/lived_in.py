"""A lived-in SillyTavern 1.12.6 user folder, built in code (issue 30's round trips).

What a writer's folder looks like after a few weeks (``src/constants.js`` ``USER_DIRECTORY_TEMPLATE``):

- ``characters/Lumine.png`` (V2 card, ``chara`` chunk; the real ``cards/Lumine.json`` of
  ``../shared/data`` when present, with its 119-entry embedded book) whose ``extensions.world``
  links the character world ``Lumine-Lore``, plus ``Teyvat-Extra`` as an extra character book
  (``world_info.charLore``); ``characters/Kael.png`` (V3 card, ``chara`` and ``ccv3`` chunks);
- worlds: ``GI-Core`` global (``globalSelect``; the real 256-entry book when present),
  ``Lumine-Lore`` and ``Teyvat-Extra`` character worlds, ``Mondstadt`` a chat world
  (``chat_metadata.world_info``), ``Drafts`` linked nowhere;
- personas ``Aether`` (the current one) and ``Paimon`` (locked to one chat by
  ``chat_metadata.persona``), each with a description, one at a depth;
- chats with an Author's Note, swipes, a hidden message, a generated reply with
  ``gen_started`` / ``gen_finished`` and a message pinned in Loomscope (``extra.loomscope``).
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from .st_fixture import entry

LUMINE_CHAT = "Lumine - 2024-10-02 @19h 12m 40s 512ms"


def _png(chunks: dict[str, dict[str, Any]], size: tuple[int, int] = (40, 60)) -> bytes:
    info = PngInfo()
    for keyword, doc in chunks.items():
        info.add_text(keyword, base64.b64encode(json.dumps(doc, ensure_ascii=False).encode("utf-8")).decode("ascii"))
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 180, 120)).save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


def _lumine_card(shared: Path | None) -> dict[str, Any]:
    if shared is not None and (shared / "cards" / "Lumine.json").is_file():
        card = json.loads((shared / "cards" / "Lumine.json").read_text("utf-8"))
    else:
        data = {"name": "Lumine", "description": "{{char}} is a traveler from another world searching for her "
                "brother across Teyvat.", "personality": "calm, determined, kind",
                "scenario": "{{char}} and {{user}} arrive at the gates of Mondstadt.",
                "first_mes": "*{{char}} lowers her sword.* You followed me all the way here, {{user}}?",
                "mes_example": "<START>\n{{user}}: Any news of your brother?\n{{char}}: Only rumours, again.",
                "creator_notes": "", "system_prompt": "", "post_history_instructions": "",
                "alternate_greetings": [], "tags": ["genshin"], "creator": "tests", "character_version": "1",
                "extensions": {"talkativeness": "0.5", "fav": False, "world": "",
                               "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}}}
        card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": data, **{k: data[k] for k in (
            "name", "description", "personality", "scenario", "first_mes", "mes_example")}}
    card["data"]["extensions"]["world"] = "Lumine-Lore"
    return card


KAEL_V3: dict[str, Any] = {
    "spec": "chara_card_v3", "spec_version": "3.0",
    "data": {"name": "Kael", "description": "{{char}} is a knight of Favonius on night watch.",
             "personality": "dutiful", "scenario": "The city walls, after midnight.",
             "first_mes": "Halt. Who walks the walls at this hour?", "mes_example": "",
             "creator_notes": "", "system_prompt": "", "post_history_instructions": "",
             "alternate_greetings": [], "tags": [], "creator": "tests", "character_version": "3",
             "group_only_greetings": [], "nickname": "Sir Kael",
             "extensions": {"talkativeness": "0.5", "fav": False, "world": "",
                            "depth_prompt": {"prompt": "", "depth": 4, "role": "system"}}},
}


def _worlds(shared: Path | None) -> dict[str, dict[str, Any]]:
    if shared is not None and (shared / "lorebooks" / "GI-Core.json").is_file():
        core = json.loads((shared / "lorebooks" / "GI-Core.json").read_text("utf-8"))
    else:
        core = {"entries": {str(i): entry(i, [k], f"GI-Core: {k} is a place in Teyvat.", order=100 - i)
                            for i, k in enumerate(["Mondstadt", "Liyue", "Inazuma", "Sumeru", "Fontaine"])}}
    return {
        "GI-Core": core,
        "Lumine-Lore": {"entries": {
            "0": entry(0, ["brother", "Aether"], "Lumine-Lore: {{char}}'s twin was taken by an unknown god."),
            "1": entry(1, ["sword"], "Lumine-Lore: {{char}} fights with a plain traveler's sword.", position=1),
        }},
        "Teyvat-Extra": {"entries": {
            "0": entry(0, ["Paimon"], "Teyvat-Extra: Paimon is the best travel companion.", position=4, depth=1),
        }},
        "Mondstadt": {"entries": {
            "0": entry(0, ["gate", "gates"], "Mondstadt: the city of freedom, guarded by the Knights of Favonius."),
            "1": entry(1, [], "Mondstadt: the wind always blows from the sea.", constant=True, order=5),
        }},
        "Drafts": {"entries": {"0": entry(0, ["draft"], "Drafts: never linked.", constant=True)}},
    }


def _settings() -> dict[str, Any]:
    from .st_fixture import SETTINGS

    s = json.loads(json.dumps(SETTINGS))
    s["username"], s["user_avatar"] = "Aether", "aether.png"
    s["world_info_settings"].update({
        "world_info": {"globalSelect": ["GI-Core"], "charLore": [{"name": "Lumine", "extraBooks": ["Teyvat-Extra"]}]},
        "world_info_depth": 4, "world_info_budget": 30, "world_info_recursive": True,
        "world_info_character_strategy": 2})
    s["power_user"]["personas"] = {"aether.png": "Aether", "paimon.png": "Paimon"}
    s["power_user"]["persona_descriptions"] = {
        "aether.png": {"description": "{{user}} is Lumine's twin, travelling under a false name.", "position": 0,
                       "depth": 2, "role": 0},
        "paimon.png": {"description": "{{user}} is a small floating companion who loves food.", "position": 4,
                       "depth": 3, "role": 0}}
    s["extension_settings"]["note"].update({"allowWIScan": True, "default": ""})
    s["oai_settings"].update({"openai_max_context": 4096, "openai_max_tokens": 400})
    return s


def _lumine_lines() -> list[dict[str, Any]]:
    return [
        {"user_name": "Aether", "character_name": "Lumine", "create_date": "2024-10-02@19h12m40s",
         "chat_metadata": {"world_info": "Mondstadt", "note_prompt": "[Tone: wistful. {{char}} misses her brother.]",
                           "note_interval": 1, "note_position": 1, "note_depth": 2, "note_role": 0,
                           "chat_id_hash": 8817263}},
        {"name": "Lumine", "is_user": False, "is_system": False, "send_date": "October 2, 2024 7:12pm",
         "mes": "*{{char}} lowers her sword.* You followed me all the way here, {{user}}?", "extra": {},
         "swipe_id": 0, "swipes": ["*{{char}} lowers her sword.* You followed me all the way here, {{user}}?"]},
        {"name": "Aether", "is_user": True, "is_system": False, "send_date": "October 2, 2024 7:13pm",
         "mes": "I heard the gates of Mondstadt are open tonight.", "extra": {}},
        {"name": "Lumine", "is_user": False, "is_system": True, "send_date": "October 2, 2024 7:14pm",
         "mes": "(hidden: an aside the writer took out)", "extra": {}},
        {"name": "Lumine", "is_user": False, "is_system": False, "send_date": "October 2, 2024 7:15pm",
         "mes": "They are. Paimon went ahead to find food, of course.",
         "extra": {"api": "openai", "model": "gpt-4o", "loomscope": {"pinned": True}},
         "gen_started": "2024-10-02T19:15:01.000Z", "gen_finished": "2024-10-02T19:15:04.200Z", "swipe_id": 1,
         "swipes": ["They are open, yes.", "They are. Paimon went ahead to find food, of course."],
         "swipe_info": [{"send_date": "October 2, 2024 7:14pm", "extra": {}},
                        {"send_date": "October 2, 2024 7:15pm", "extra": {}}]},
        {"name": "Aether", "is_user": True, "is_system": False, "send_date": "October 2, 2024 7:16pm",
         "mes": "Tell me about your brother and the sword you carry.", "extra": {}},
    ]


def _kael_lines() -> list[dict[str, Any]]:
    return [
        {"user_name": "Paimon", "character_name": "Kael", "create_date": "2024-10-03@22h00m00s",
         "chat_metadata": {"persona": "paimon.png", "note_prompt": "", "note_interval": 1, "note_position": 1,
                           "note_depth": 4, "note_role": 0}},
        {"name": "Kael", "is_user": False, "is_system": False, "send_date": "October 3, 2024 10:00pm",
         "mes": "Halt. Who walks the walls at this hour?", "extra": {}},
        {"name": "Paimon", "is_user": True, "is_system": False, "send_date": "October 3, 2024 10:01pm",
         "mes": "Just Paimon! Is there food near the gate?", "extra": {}},
    ]


def build_lived_in(root: Path, shared: Path | None = None) -> Path:
    """Write the folder under ``root/data/default-user``; returns that folder.

    ``shared`` is ``../shared/data`` when present: its Lumine card and GI-Core book are used.
    """
    user = root / "data" / "default-user"
    for d in ("characters", "worlds", "chats/Lumine", "chats/Kael", "User Avatars"):
        (user / d).mkdir(parents=True, exist_ok=True)
    (user / "settings.json").write_text(json.dumps(_settings(), indent=4), encoding="utf-8")
    for name, data in _worlds(shared).items():
        (user / "worlds" / f"{name}.json").write_text(json.dumps(data, indent=4, ensure_ascii=False), encoding="utf-8")
    (user / "characters" / "Lumine.png").write_bytes(_png({"chara": _lumine_card(shared)}))
    v2 = {**KAEL_V3, "spec": "chara_card_v2", "spec_version": "2.0"}
    (user / "characters" / "Kael.png").write_bytes(_png({"chara": v2, "ccv3": KAEL_V3}))
    for folder, name, lines in (("Lumine", LUMINE_CHAT, _lumine_lines()),
                                ("Kael", "Kael - 2024-10-03 @22h 00m 00s 000ms", _kael_lines())):
        (user / "chats" / folder / f"{name}.jsonl").write_text(
            "\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    for avatar in ("aether.png", "paimon.png"):
        (user / "User Avatars" / avatar).write_bytes(_png({}, (16, 16)))
    return user
