"""A SillyTavern group chat folder built in code (issue 27 item 7).

On top of :func:`st_fixture.build_st_user` (the card ``hero.png`` = Kael, whose character world
is ``HeroLore``): a second card ``mira.png`` (Mira, no world, a Character's Note at depth 1) and
the group ``groups/1717000000000.json`` "Harbor crew" with members Kael and Mira (natural order,
swap mode) and one chat ``group chats/1717000000001.jsonl``. :func:`build_group_user` takes
overrides of the group file (join mode, list order, a missing member, ...).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from .st_fixture import CARD, build_st_user, card_png

MIRA: dict[str, Any] = copy.deepcopy(CARD)
MIRA.update(name="Mira", description="{{char}} is the Gull's navigator; she distrusts {{user}}.",
            personality="sharp, curious", scenario="{{char}} studies the charts by lamplight.",
            first_mes="*{{char}} taps the chart.*", mes_example="<START>\n{{user}}: Which way?\n{{char}}: North, by the stars.")
MIRA["data"] = {**copy.deepcopy(CARD["data"]), "name": "Mira", "description": MIRA["description"],
                "personality": MIRA["personality"], "scenario": MIRA["scenario"], "first_mes": MIRA["first_mes"],
                "mes_example": MIRA["mes_example"], "character_book": None}
MIRA["data"]["extensions"] = {"talkativeness": "0.5", "fav": False, "world": "",
                              "depth_prompt": {"prompt": "{{char}} speaks in short sentences.", "depth": 1,
                                               "role": "system"}}

GROUP_ID = "1717000000000"
CHAT_ID = "1717000000001"

GROUP: dict[str, Any] = {
    "id": GROUP_ID, "name": "Harbor crew", "members": ["hero.png", "mira.png"], "avatar_url": "",
    "allow_self_responses": False, "activation_strategy": 0, "generation_mode": 0, "disabled_members": [],
    "chat_metadata": {"note_prompt": "", "note_interval": 1}, "fav": False, "chat_id": CHAT_ID, "chats": [CHAT_ID],
    "auto_mode_delay": 5, "generation_mode_join_prefix": "", "generation_mode_join_suffix": "",
    "hideMutedSprites": False,
}

#: The group chat: no header line (saveGroupChat writes the messages only).
GROUP_CHAT: list[dict[str, Any]] = [
    {"name": "Kael", "is_user": False, "is_system": False, "send_date": "June 1, 2024 10:00am",
     "mes": "*{{char}} shakes rain from his cloak.* Evening, {{user}}.", "extra": {},
     "original_avatar": "hero.png", "force_avatar": "characters/hero.png"},
    {"name": "Mira", "is_user": False, "is_system": False, "send_date": "June 1, 2024 10:00am",
     "mes": "*Mira taps the chart.*", "extra": {}, "original_avatar": "mira.png",
     "force_avatar": "characters/mira.png"},
    {"name": "Alex", "is_user": True, "is_system": False, "send_date": "June 1, 2024 10:01am",
     "mes": "Where is your sword, Kael? Mira says the ship sails at dawn.", "extra": {}},
]


def build_group_user(root: Path, *, group: dict[str, Any] | None = None,
                     chat: list[dict[str, Any]] | None = None, mira_world: dict[str, Any] | None = None) -> Path:
    """The fixture user folder with the group; ``group`` holds keys replacing :data:`GROUP`'s.

    ``mira_world``: a world ``MiraLore`` with these entries, linked as Mira's character world.
    """
    user = build_st_user(root)
    (user / "group chats" / "1700000000000.jsonl").unlink()
    mira = copy.deepcopy(MIRA)
    if mira_world is not None:
        mira["data"]["extensions"]["world"] = "MiraLore"
        (user / "worlds" / "MiraLore.json").write_text(json.dumps({"entries": mira_world}), encoding="utf-8")
    (user / "characters" / "mira.png").write_bytes(card_png(mira))
    g = {**GROUP, **(group or {})}
    (user / "groups" / f"{GROUP_ID}.json").write_text(json.dumps(g, indent=4), encoding="utf-8")
    (user / "group chats" / f"{CHAT_ID}.jsonl").write_text(
        "\n".join(json.dumps(x) for x in (chat or GROUP_CHAT)), encoding="utf-8")
    return user
