"""Text Completion group chats (issue 27 item 7): the ``tc_cases`` folders with a second member and a group.

:func:`write_group_case` writes a case's folder (:func:`tc_cases.write_case`), a second card ``mira.png``
(Mira: no world, her own Character's Note) and the group "Inn" of ``kael.png`` and ``mira.png`` with one
chat (:func:`group_chat`: the case's chat plus a message from Mira, no header line). The expected
prompts (``tc_group_expected.json``) come from SillyTavern 1.12.6's own ``Generate`` (non-OpenAI branch,
dry run) with the group selected and the speaker as ``this_chid`` (``generateGroupWrapper``), run under
Node outside the repository; World Info: Kael's world ``Lore`` (all constant entries) only when Kael
speaks (``getCharacterLore``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.engine.assembly import tc_cases as T
from tests.engine.importers.st_fixture import card_png

MIRA: dict[str, Any] = {
    "name": "Mira", "description": "{{char}} is the inn's cook; she distrusts {{user}}.",
    "personality": "sharp, curious", "scenario": "{{char}} listens from the kitchen door.",
    "mes_example": "<START>\n{{user}}: Any stew left?\n{{char}}: For paying guests.",
    "first_mes": "*{{char}} wipes her hands.*", "system_prompt": "", "post_history_instructions": "",
    "character_version": "1",
    "extensions": {"world": "", "talkativeness": "0.5",
                   "depth_prompt": {"prompt": "{{char}} answers in one line.", "depth": 1, "role": "system"}},
}
GROUP: dict[str, Any] = {
    "id": "1718000000000", "name": "Inn", "members": ["kael.png", "mira.png"], "disabled_members": [],
    "activation_strategy": 0, "generation_mode": 0, "allow_self_responses": False, "chat_id": "1718000000001",
    "chats": ["1718000000001"], "generation_mode_join_prefix": "", "generation_mode_join_suffix": "",
}
#: key -> (tc_cases case, speaker, group file overrides)
CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "chatml-join-mira": ("chatml", "Mira", {"generation_mode": 1,
                                            "generation_mode_join_prefix": "[<FIELDNAME> of {{char}}]",
                                            "generation_mode_join_suffix": "[end]"}),
    "llama3-alignment-swap-kael": ("llama3-alignment", "Kael", {}),
    "plain-swap-mira": ("plain", "Mira", {}),
}


def group_chat() -> list[dict[str, Any]]:
    """The group chat's messages: the case chat (8 turns) and a line from Mira."""
    return [*T.chat_messages(8), {"name": "Mira", "is_user": False, "is_system": False, "send_date": "2024-01-01",
                                  "mes": "*Mira sets down two bowls.* Eat, both of you.", "extra": {}}]


def write_group_case(root: Path, key: str) -> Path:
    """The case's user folder with the group; returns it."""
    case, _speaker, over = CASES[key]
    user = T.write_case(root, case, "full")
    for sub in ("groups", "group chats"):
        (user / sub).mkdir(exist_ok=True)
    (user / "characters" / "mira.png").write_bytes(card_png({"spec": "chara_card_v2", "spec_version": "2.0",
                                                              **MIRA, "data": MIRA}))
    group = {**GROUP, "chat_metadata": T.note(case), **over}
    (user / "groups" / "1718000000000.json").write_text(json.dumps(group), encoding="utf-8")
    (user / "group chats" / "1718000000001.jsonl").write_text(
        "\n".join(json.dumps(m) for m in group_chat()) + "\n", encoding="utf-8")
    return user
