"""Text Completion fixture folders for the SillyTavern rules issue 27 added (regex scripts, Start Reply With
from a message, the card's own Author's Note, macros in World Info), built on :mod:`tc_cases`.

Each case takes a :mod:`tc_cases` case's folder and changes it: ``settings.json``
``extension_settings`` (the Regex extension's global scripts and ``character_allowed_regex``, the
card's note in ``note.chara``, global variables), the card (its own ``regex_scripts``), the chat
(a user message's ``extra.bias``, ``chat_metadata.variables``) and the world (entries with macros).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.engine.assembly import tc_cases
from tests.engine.importers.st_fixture import card_png, entry


def _script(name: str, find: str, replace: str, placement: list[int], **kw: Any) -> dict[str, Any]:
    """A Regex extension script as SillyTavern 1.12.6 saves it (``extensions/regex/index.js``)."""
    s: dict[str, Any] = {"id": f"id-{name}", "scriptName": name, "findRegex": find, "replaceString": replace,
                         "trimStrings": [], "placement": placement, "disabled": False, "markdownOnly": False,
                         "promptOnly": False, "runOnEdit": True, "substituteRegex": False, "minDepth": None,
                         "maxDepth": None}
    s.update(kw)
    return s


#: ``extension_settings.regex``: user input, AI output from depth 3 on, World Info (no depth limit but
#: ``maxDepth`` 0, so not the at-depth entry), a macro-substituted find, one for display only, one disabled.
GLOBAL_REGEX = [
    _script("road", "/coast road/g", "{{char}}'s old road", [1], promptOnly=True),
    _script("bridge", "/(B|b)ridge/g", "[$0]", [2], minDepth=3),
    _script("lore tag", "/^Lore/gm", "LORE", [5], maxDepth=0),
    _script("user name", "/{{user}}/g", "$0 (the cartographer)", [5], substituteRegex=True),
    _script("display only", "/Turn/g", "XX", [1, 2], markdownOnly=True),
    _script("off", "/the/g", "THE", [1, 2, 5], disabled=True),
]
#: The card's own scripts (``data.extensions.regex_scripts``), allowed by ``character_allowed_regex``.
CARD_REGEX = [_script("rain", "/rain/gi", "{{match}}storm", [2], trimStrings=["a"])]
#: A Start Reply With stored on the newest user message (``extra.bias``, ``extractMessageBias``'s form).
MESSAGE_BIAS = " *{{char}} leans closer*"
#: ``extension_settings.note.chara``: the card's own Author's Note, before the chat's.
CHARA_NOTE = {"name": "kael", "prompt": "[{{char}} hides a limp from {{user}}.]", "useChara": True, "position": 1}
#: World entries whose content uses the macro engine (variables, last messages, instruct and system prompt
#: macros, ``{{newline}}``, ``{{trim}}``).
MACRO_ENTRIES = {
    "8": entry(8, [], "Lore: mood {{getvar::mood}}, weather {{getglobalvar::weather}}.", constant=True, order=95,
               position=0),
    "9": entry(9, [], "Lore: {{user}} last said \"{{lastUserMessage}}\" (message {{lastMessageId}}).",
               constant=True, order=60, position=1),
    "10": entry(10, [], "Lore: the ledger reads {{instructInput}}|{{instructOutput}}|{{chatStart}}|"
                        "{{systemPrompt}}.{{newline}}Lore: lamps lit.\n{{trim}}", constant=True, order=70, position=0),
}

#: case -> (tc_cases case it builds on, what it changes)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "plain-regex": ("plain", {"regex": True}),
    "chatml-regex": ("chatml", {"regex": True}),
    "plain-message-bias": ("plain-no-names", {"bias": MESSAGE_BIAS}),
    "llama3-message-bias": ("llama3", {"bias": MESSAGE_BIAS}),
    "alpaca-chara-note": ("alpaca", {"chara_note": CHARA_NOTE}),
    "mistral-wi-macros": ("mistral", {"macros": True}),
}


def chat_messages(case: str) -> list[dict[str, Any]]:
    """The chat of a case (:func:`tc_cases.chat_messages`; the newest user message biased, a caption title on an
    older one, when the case asks)."""
    msgs = tc_cases.chat_messages()
    if CASES[case][1].get("regex"):  # a caption the Image Captioning extension asked to append
        msgs[3]["extra"] = {"title": "[Kael looks at the map: a coast road]", "append_title": True}
    bias = CASES[case][1].get("bias")
    if bias:
        last_user = max(i for i, m in enumerate(msgs) if m["is_user"] and not m["is_system"])
        msgs[last_user]["extra"] = {"bias": bias}
    return msgs


def chat_metadata(case: str) -> dict[str, Any]:
    """``chat_metadata`` of a case (the base case's Author's Note, variables for the macro case)."""
    meta = tc_cases.note(CASES[case][0])
    if CASES[case][1].get("macros"):
        meta["variables"] = {"mood": "wary"}
    return meta


def extension_settings(case: str) -> dict[str, Any]:
    """The ``extension_settings`` keys a case adds (Regex extension, card notes, global variables)."""
    change = CASES[case][1]
    out: dict[str, Any] = {}
    if change.get("regex"):
        out.update(regex=GLOBAL_REGEX, character_allowed_regex=["kael.png"])
    if change.get("chara_note"):
        out["note_chara"] = [change["chara_note"]]
    if change.get("macros"):
        out["variables"] = {"global": {"weather": "sleet"}}
    return out


def card_data(case: str) -> dict[str, Any]:
    """The card's ``data`` of a case."""
    data = tc_cases.card_data(CASES[case][0])
    if CASES[case][1].get("regex"):
        data["extensions"] = {**data["extensions"], "regex_scripts": CARD_REGEX}
    return data


def world(case: str) -> dict[str, Any]:
    """The character world of a case."""
    entries = dict(tc_cases.WORLD["entries"])
    if CASES[case][1].get("macros"):
        entries.update(MACRO_ENTRIES)
    return {"entries": entries}


def write_case(root: Path, case: str, budget: str, *, main_api: str | None = None) -> Path:
    """Write the case's user folder under ``root`` (``root/default-user``); ``main_api`` as in :mod:`tc_cases`."""
    base = CASES[case][0]
    user = tc_cases.write_case(root, base, budget, main_api=main_api)
    settings_file = user / "settings.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    ext = extension_settings(case)
    note_chara = ext.pop("note_chara", None)
    settings["extension_settings"].update(ext)
    if note_chara is not None:
        settings["extension_settings"]["note"]["chara"] = note_chara
    settings_file.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    card = {"spec": "chara_card_v2", "spec_version": "2.0", **tc_cases.CARD, "data": card_data(case)}
    (user / "characters" / "kael.png").write_bytes(card_png(card))
    (user / "worlds" / "Lore.json").write_text(json.dumps(world(case)), encoding="utf-8")
    header = {"user_name": tc_cases.USER, "character_name": tc_cases.CHAR, "create_date": "2024-01-01",
              "chat_metadata": chat_metadata(case)}
    lines = [json.dumps(header)] + [json.dumps(m) for m in chat_messages(case)]
    (user / "chats" / "kael" / "inn.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return user
