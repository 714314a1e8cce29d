"""SillyTavern-exact Chat Completion assembly (``engine.assembly.sillytavern``), issue 17.

The expected messages below are derived by hand from SillyTavern 1.12.6's code (the function
names and line ranges are cited where a rule is used) and written out role by role. Long texts
are spelled as the source field they come from (``DESCRIPTION`` = the card's ``data.description``
read straight from the PNG chunk here, ``wi(3)`` = world entry 3's ``content``), with exactly
the changes SillyTavern makes to them, so that no shared file is copied into the project.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from PIL import Image

from engine.importers.st_folder import read_st_folder
from engine.pipeline import default_registries, preview
from engine.resolve import honours_exclusions
from engine.storage import open_store
from tests.conftest import st_user_copy
from tests.engine.importers.st_fixture import SETTINGS, build_st_user

ST_USER = "st-user/default-user"
CHAT_KEY = "chats/Seraphina/Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"


def _import(folder: Path, tmp_path: Path, **kw):
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder, **kw))
    return store, report


def _chat_id(report, key=None) -> str:
    refs = [r for r in report.added + report.changed + report.unchanged if r.kind == "chat"]
    return next(r.id for r in refs if key is None or r.key == key)


def _pairs(pv) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in pv.messages]


# ---------------------------------------------------------------------------------------------
# the pristine SillyTavern folder (../shared/data/st-user/default-user)


class Seraphina:
    """Source texts of the Seraphina chat, read straight from the files (not via Loomscope)."""

    def __init__(self, shared: Path) -> None:
        user = shared / ST_USER
        with Image.open(user / "characters" / "default_Seraphina.png") as im:
            card = json.loads(base64.b64decode(im.text["chara"]))
        entries = json.loads((user / "worlds" / "Eldoria.json").read_text(encoding="utf-8"))["entries"]
        lines = [json.loads(x) for x in (user / CHAT_KEY).read_text(encoding="utf-8").splitlines()]
        # names: name1 = settings.username "User" (no personas saved), name2 = the card's name
        self.sub = lambda s: s.replace("{{user}}", "User").replace("{{char}}", "Seraphina")
        # getCharacterCardFields: baseChatReplace(character.description.trim())
        self.description = self.sub(card["data"]["description"].strip()).replace("\r", "")
        self.entries = entries
        self.greeting = lines[2]["mes"]
        self.user_mes = lines[3]["mes"]
        self.reply = lines[4]["mes"]

    def wi(self, uid: int) -> str:
        # checkWorldInfo: entry.content = substituteParams(entry.content)
        return self.sub(self.entries[str(uid)]["content"])


MAIN = "Write Seraphina's next reply in a fictional chat between Seraphina and User."


def test_seraphina_messages_at_its_own_settings(shared_data: Path, tmp_path: Path) -> None:
    """Context 4,095, reply 300, gpt-4-turbo (oai_settings); the default prompt order (the folder's
    prompt_order has no entry for the global dummy id 100001: sanitizeServiceSettings adds
    promptManagerDefaultPromptOrder)."""
    s = Seraphina(shared_data)
    store, report = _import(st_user_copy(shared_data, tmp_path), tmp_path)
    pv = preview(store.chats.build_request(_chat_id(report)))
    assert (pv.context_limit, pv.reply_reserve, pv.model) == (4095, 300, "gpt-4-turbo")
    assert pv.error is None and pv.tokenizer.profile == "cl100k_base"
    # World Info (checkWorldInfo, world-info.js 3986-4062): budget round(25 % × (4095 − 300)) = 949.
    # Scan depth 2 ("Orion: …", "Seraphina: …"): entries 1 (beasts), 2 (glade), 3 (magic) in pass 0;
    # running counts of their text as {role: system} messages: 214, 432, 591 < 949. Recursion
    # (world_info_recursive) finds entry 0 ("Eldoria" in entry 2): 591 + 378 = 969 ≥ 949, so the
    # scan stops without it. Equal `order` (100): unshift reverses activation order → 3, 2, 1.
    expected = [
        ("system", MAIN),                                   # main (Prompt Manager), {{charIfNotGroup}} → Seraphina
        ("system", "\n".join([s.wi(3), s.wi(2), s.wi(1)])),  # worldInfoBefore, wi_format "{0}"
        ("system", s.description),                          # charDescription (personality/scenario empty)
        ("system", "[Start a new Chat]"),                    # populateChatHistory: new_chat_prompt
        ("assistant", s.greeting),                          # the foreign {"system": …} line has no mes: sends nothing
        ("user", "Orion: " + s.user_mes),                    # setOpenAIMessages DEFAULT names: force_avatar, name ≠ name1
        ("assistant", s.reply),
    ]
    assert _pairs(pv) == expected
    assert pv.prompt_tokens == 2025
    # the Eldoria world's entries once: the card's embedded copy of the book is never activated
    lore = [b for b in pv.blocks if b.kind == "lorebook"]
    sent_parts = [p["source"] for b in lore if b.status == "kept" for p in b.trace["parts"]]
    assert sent_parts == ["lorebook:Eldoria:3", "lorebook:Eldoria:2", "lorebook:Eldoria:1"]
    assert [(b.source, b.reason) for b in lore if b.status == "excluded"] == [("lorebook:Eldoria:0", "LOREBOOK_BUDGET")]


def test_seraphina_messages_at_context_1800(shared_data: Path, tmp_path: Path) -> None:
    s = Seraphina(shared_data)
    store, report = _import(st_user_copy(shared_data, tmp_path), tmp_path)
    request = store.chats.build_request(_chat_id(report))
    request = request.model_copy(update={"settings": request.settings.model_copy(update={"context_limit": 1800})})
    pv = preview(request)
    # WI budget round(25 % × 1500) = 375: entry 1 (214) fits, entry 1 + 2 (432) does not → stop.
    # ChatCompletion budget 1500 − 3 (primer) − main 22 − WI 212 − description 697 − new chat 10 = 556:
    # newest first, the reply (477) and the user message (39) fit, the greeting (188) does not.
    expected = [
        ("system", MAIN),
        ("system", s.wi(1)),
        ("system", s.description),
        ("system", "[Start a new Chat]"),
        ("user", "Orion: " + s.user_mes),
        ("assistant", s.reply),
    ]
    assert _pairs(pv) == expected
    assert pv.prompt_tokens == 1460 and pv.budget == 1500
    dropped = [(b.source, b.reason) for b in pv.blocks if b.status == "excluded"]
    assert ("message:0", "HISTORY_OLDEST_FIRST") in dropped
    assert {("lorebook:Eldoria:0", "LOREBOOK_BUDGET"), ("lorebook:Eldoria:2", "LOREBOOK_BUDGET"),
            ("lorebook:Eldoria:3", "LOREBOOK_BUDGET")} <= set(dropped)


def test_required_prompts_over_budget_are_token_budget_exceeded(shared_data: Path, tmp_path: Path) -> None:
    """SillyTavern sends a partial prompt when a required prompt throws TokenBudgetExceededError;
    Loomscope reports TOKEN_BUDGET_EXCEEDED and sends nothing (documented difference)."""
    store, report = _import(st_user_copy(shared_data, tmp_path), tmp_path)
    request = store.chats.build_request(_chat_id(report))
    request = request.model_copy(update={"settings": request.settings.model_copy(
        update={"context_limit": 900, "reply_reserve": 300})})
    pv = preview(request)
    assert pv.error is not None and pv.error.code == "TOKEN_BUDGET_EXCEEDED"
    assert pv.error.details["prompt"] == "charDescription"
    assert pv.messages == [] and pv.prompt_tokens == 0


# ---------------------------------------------------------------------------------------------
# the fixture folder: every lorebook scope, a persona, an Author's Note at depth 2


FIXTURE_EXPECTED = [
    ("system", "You are Kael. Reply to Alex."),
    # chat lore (Voyage) is scanned first, then character (HeroLore) then global (Realm) lore;
    # placed by order ascending: Realm 0 (50), Voyage 0 (80) — joined, wi_format applied
    ("system", "[World: Realm: the harbor city of Quill sits on a cold sea.\nVoyage: the ship is the Gull, two masts.]"),
    ("system", "Alex is a young cartographer from Kael's past."),       # persona, IN_PROMPT
    ("system", "Kael is a wandering swordsman who owes Alex a debt."),
    ("system", "[Kael's personality: wry, loyal]"),
    ("system", "[Circumstances and context of the dialogue: A storm drives Kael and Alex into the harbor.]"),
    ("system", "[World: HeroLore: the map was drawn by Alex's father.]"),  # character lore, after
    ("system", "Write two short paragraphs."),                           # a user prompt, relative
    ("system", "[Example Chat]"),
    ("system", "Where to?"),
    ("system", "Wherever the wind is kind."),
    ("system", "[Start a new Chat]"),
    ("assistant", "*Kael shakes rain from his cloak.* Evening, Alex."),  # first message's macros
    ("user", "Is the ship ready?"),
    # depth 2, system: the Author's Note and World Info at the same depth and role, one message
    ("system", "[Keep the tone tense.]\nRealm: storms here last three days."),
    ("assistant", "The Gull sails at dawn, if the storm allows."),      # the hidden message is not sent
    ("user", "Sam: Sam here. I brought the harbor map."),                # written as another persona
    ("system", "Stay in character as Kael."),                           # post-history instructions
]


def test_fixture_folder_messages(tmp_path: Path) -> None:
    store, report = _import(build_st_user(tmp_path) .parent, tmp_path)
    pv = preview(store.chats.build_request(_chat_id(report)))
    assert pv.error is None
    expected = FIXTURE_EXPECTED
    assert _pairs(pv) == expected
    assert [m.get("name") for m in pv.messages[9:11]] == ["example_user", "example_assistant"]
    # every lorebook contributes with its scope, no entry twice, "Unused" (linked nowhere) never
    sources = [p["source"] for b in pv.blocks if b.status == "kept" for p in (b.trace or {}).get("parts", [])]
    lore = [x for x in sources if x.startswith("lorebook:")]
    assert sorted(lore) == sorted(["lorebook:Realm:0", "lorebook:Voyage:0", "lorebook:HeroLore:1", "lorebook:Realm:1"])
    assert len(lore) == len(set(lore))
    joined = next(b for b in pv.blocks if b.source == "injection:depth2:system")
    assert [p["source"] for p in joined.trace["parts"]] == ["author_note", "lorebook:Realm:1"]
    hidden = next(b for b in pv.blocks if b.source == "message:2")
    assert (hidden.status, hidden.reason) == ("excluded", "HIDDEN")
    # prompt_tokens is the exact recount of the messages sent, the blocks' tokens add up to it
    assert pv.prompt_tokens == sum(b.tokens for b in pv.blocks if b.status == "kept") + 3


def test_persona_positions_and_author_note_positions(tmp_path: Path) -> None:
    settings = json.loads(json.dumps(SETTINGS))
    settings["power_user"]["persona_descriptions"]["alex.png"]["position"] = 4   # AT_DEPTH
    settings["power_user"]["persona_descriptions"]["alex.png"]["depth"] = 0
    settings["power_user"]["persona_descriptions"]["alex.png"]["role"] = 1
    store, report = _import(build_st_user(tmp_path, settings=settings).parent, tmp_path)
    pv = preview(store.chats.build_request(_chat_id(report)))
    pairs = _pairs(pv)
    # persona at depth 0 in the user role: after the last message, before the post-history prompt
    assert pairs[-2] == ("user", "Alex is a young cartographer from Kael's past.")
    assert ("system", "Alex is a young cartographer from Kael's past.") not in pairs

    settings["power_user"]["persona_descriptions"]["alex.png"]["position"] = 2  # top of the Author's Note
    store2, report2 = _import(build_st_user(tmp_path / "b", settings=settings).parent, tmp_path / "b")
    pairs = _pairs(preview(store2.chats.build_request(_chat_id(report2))))
    assert ("system", "Alex is a young cartographer from {{char}}'s past.\n[Keep the tone tense.]\n"
            "Realm: storms here last three days.".replace("{{char}}", "Kael")) in pairs


def test_names_completion_and_squash(tmp_path: Path) -> None:
    settings = json.loads(json.dumps(SETTINGS))
    settings["oai_settings"]["names_behavior"] = 1          # COMPLETION: a name field, no prefix
    settings["oai_settings"]["squash_system_messages"] = True
    store, report = _import(build_st_user(tmp_path, settings=settings).parent, tmp_path)
    pv = preview(store.chats.build_request(_chat_id(report)))
    sam = next(m for m in pv.messages if m["content"].startswith("Sam here"))
    assert sam["name"] == "Sam"
    # squashSystemMessages: the system prompts before the examples become one message
    assert pv.messages[0]["content"].startswith("You are Kael. Reply to Alex.\n[World: Realm")
    assert pv.messages[0]["content"].endswith("Write two short paragraphs.")
    assert {"role": "system", "content": "[Start a new Chat]"} in pv.messages


def test_history_is_filled_newest_first_then_examples(tmp_path: Path) -> None:
    """populateChatCompletion without pin_examples: history first (newest first while it fits),
    then the examples get what is left."""
    store, report = _import(build_st_user(tmp_path).parent, tmp_path)
    request = store.chats.build_request(_chat_id(report))
    full = preview(request)
    msgs = [b for b in full.blocks if b.kind == "message" and b.status == "kept"]
    examples = sum(b.tokens for b in full.blocks if b.kind == "example" and b.status == "kept")

    def at(limit: int):
        return preview(request.model_copy(update={"settings": request.settings.model_copy(
            update={"context_limit": limit})}))

    # a few tokens less: the examples go first, every message stays
    pv = at(full.context_limit - (full.budget - full.prompt_tokens) - 1)
    assert [b.source for b in pv.blocks if b.kind == "message" and b.status == "kept"] == [b.source for b in msgs]
    assert any(b.reason == "EXAMPLES_PUSHED_OUT" for b in pv.blocks)
    # less again: the oldest message goes too
    pv = at(full.context_limit - (full.budget - full.prompt_tokens) - examples - msgs[0].tokens)
    assert pv.error is None and pv.prompt_tokens <= pv.budget
    assert [b.source for b in pv.blocks if b.kind == "message" and b.status == "kept"] == [b.source for b in msgs[1:]]
    assert ("message:0", "HISTORY_OLDEST_FIRST") in [(b.source, b.reason) for b in pv.blocks]


@pytest.mark.parametrize("interval,expect", [(1, True), (0, False), (2, True), (3, False)])
def test_author_note_interval(tmp_path: Path, interval: int, expect: bool) -> None:
    """setFloatingPrompt: sent when the number of user messages (2 here) is a multiple of it."""
    from tests.engine.importers.st_fixture import CHAT_LINES

    lines = json.loads(json.dumps(CHAT_LINES))
    lines[0]["chat_metadata"]["note_interval"] = interval
    store, report = _import(build_st_user(tmp_path, chat_lines=lines).parent, tmp_path)
    contents = [m["content"] for m in preview(store.chats.build_request(_chat_id(report))).messages]
    assert any("[Keep the tone tense.]" in c for c in contents) is expect


# Variants of the fixture folder; expected messages written out (they equal what SillyTavern
# 1.12.6's openai.js prepareOpenAIMessages returns for them, given the same World Info result).
_BASE = FIXTURE_EXPECTED
_STYLE = ("system", "Write two short paragraphs.")
_NOTE = ("system", "[Keep the tone tense.]\nRealm: storms here last three days.")
_STORM = ("system", "Realm: storms here last three days.")


def _without(items, *drop):
    return [x for x in items if x not in drop]


def _replace(items, old, new):
    return [new if x == old else x for x in items]


VARIANTS = {
    # Author's Note IN_PROMPT (0): authorsNote inserted at the end of the main prompt's collection;
    # the World Info at depth 2 stays alone in the chat
    "note_in_prompt": (lambda c: c[0]["chat_metadata"].update(note_position=0), None,
                       _replace([*_BASE[:1], ("system", "[Keep the tone tense.]"), *_BASE[1:]], _NOTE, _STORM)),
    # BEFORE_PROMPT (2), user role: at the start of the main prompt's collection
    "note_before_prompt": (lambda c: c[0]["chat_metadata"].update(note_position=2, note_role=1), None,
                           _replace([("user", "[Keep the tone tense.]"), *_BASE], _NOTE, _STORM)),
    # an absolute Prompt Manager prompt at depth 2: joined before the extension prompts of that
    # depth and role (populationInjectionPrompts)
    "absolute_prompt": (None, lambda s: next(p for p in s["oai_settings"]["prompts"]
                                             if p["identifier"] == "style-note").update(
                                                 injection_position=1, injection_depth=2),
                        _replace(_without(_BASE, _STYLE), _NOTE,
                                 ("system", "Write two short paragraphs.\n" + _NOTE[1]))),
    # no prompt_order for the global id 100001: SillyTavern's default order (no custom prompt)
    "default_order": (None, lambda s: s["oai_settings"].update(prompt_order=[{"character_id": 100000, "order": []}]),
                      _without(_BASE, _STYLE)),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_fixture_variants(tmp_path: Path, name: str) -> None:
    from tests.engine.importers.st_fixture import CHAT_LINES

    chat_mut, settings_mut, expected = VARIANTS[name]
    lines = json.loads(json.dumps(CHAT_LINES))
    settings = json.loads(json.dumps(SETTINGS))
    if chat_mut:
        chat_mut(lines)
    if settings_mut:
        settings_mut(settings)
    store, report = _import(build_st_user(tmp_path, settings=settings, chat_lines=lines).parent, tmp_path)
    pv = preview(store.chats.build_request(_chat_id(report)))
    assert _pairs(pv) == expected


def test_partial_prompt_is_token_budget_exceeded(tmp_path: Path) -> None:
    """At context 430 with the note in the prompt, SillyTavern's insert of the new-chat marker
    throws TokenBudgetExceededError and it sends the prompts added so far without the chat;
    Loomscope reports the overflow instead."""
    from tests.engine.importers.st_fixture import CHAT_LINES

    lines = json.loads(json.dumps(CHAT_LINES))
    lines[0]["chat_metadata"]["note_position"] = 0
    store, report = _import(build_st_user(tmp_path, chat_lines=lines).parent, tmp_path)
    request = store.chats.build_request(_chat_id(report))
    pv = preview(request.model_copy(update={"settings": request.settings.model_copy(update={"context_limit": 430})}))
    assert pv.error is not None and pv.error.code == "TOKEN_BUDGET_EXCEEDED"
    assert pv.error.details["prompt"] == "newMainChat" and pv.messages == []


def test_interceptors_are_not_applied_and_said_so(tmp_path: Path) -> None:
    from engine.pipeline import default_registries

    store, report = _import(build_st_user(tmp_path).parent, tmp_path)
    request = store.chats.build_request(_chat_id(report))
    regs = default_registries()
    regs.interceptors.register("shout", lambda msgs, ctx: ([{**m, "content": str(m["content"]).upper()}
                                                            for m in msgs], []))
    pv = preview(request, registries=regs)
    assert _pairs(pv) == FIXTURE_EXPECTED
    assert any("interceptors (shout) are not applied" in d for d in pv.diagnostics)


def test_prompt_manager_edge_cases(tmp_path: Path) -> None:
    """populateChatCompletion's strict checks: only ``system_prompt === false`` prompts are the
    user's relative prompts; an absolute prompt needs a numeric depth and a role to be injected."""
    settings = json.loads(json.dumps(SETTINGS))
    prompts = settings["oai_settings"]["prompts"]
    style = next(p for p in prompts if p["identifier"] == "style-note")
    del style["system_prompt"]                              # undefined: neither system nor user prompt
    prompts.append({"identifier": "no-depth", "name": "x", "system_prompt": False, "role": "system",
                    "content": "never injected", "injection_position": 1})
    prompts.append({"identifier": "no-role", "name": "y", "system_prompt": False,
                    "content": "never injected either", "injection_position": 1, "injection_depth": 1})
    order = settings["oai_settings"]["prompt_order"][0]["order"]
    order[-1:-1] = [{"identifier": "no-depth", "enabled": True}, {"identifier": "no-role", "enabled": True}]
    store, report = _import(build_st_user(tmp_path, settings=settings).parent, tmp_path)
    pairs = _pairs(preview(store.chats.build_request(_chat_id(report))))
    assert pairs == _without(FIXTURE_EXPECTED, _STYLE)


def test_card_overrides_notes_and_examples(tmp_path: Path) -> None:
    """The card's system prompt and post-history instructions with {{original}}
    (preparePromptsForChatCompletion), its Character's Note at depth 1 as the assistant
    (Generate: DEPTH_PROMPT), and example dialogue with a preamble line, a `<start>` in lower case
    and a speaker twice in a row (parseMesExamples / parseExampleIntoIndividual, quirks included:
    only the first "Alex:" of a message is removed)."""
    import copy

    from tests.engine.importers.st_fixture import CARD, card_png

    user = build_st_user(tmp_path)
    card = copy.deepcopy(CARD)
    card["data"]["extensions"]["depth_prompt"] = {"prompt": "{{char}} hides a limp.", "depth": 1, "role": "assistant"}
    card["data"]["mes_example"] = ("Intro line\n{{user}}: Hi\n{{char}}: Hm.\n{{char}}: Still here.\n<START>\n"
                                   "{{char}}: Alone.\n<start>\n{{user}}: Only me.")
    card["data"]["system_prompt"] = "Card main: {{original}} Also {{char}}."
    card["data"]["post_history_instructions"] = "{{original}} (card jb)"
    (user / "characters" / "hero.png").write_bytes(card_png(card))
    store, report = _import(user.parent, tmp_path)
    expected = [
        ("system", "Card main: You are Kael. Reply to Alex. Also Kael."),
        *FIXTURE_EXPECTED[1:8],
        ("system", "[Example Chat]"),
        ("system", "Intro line\n Hi"),
        ("system", "Hm.\nKael: Still here."),
        ("system", "[Example Chat]"),
        ("system", "Alone."),
        ("system", "[Example Chat]"),
        ("system", "Only me."),
        *FIXTURE_EXPECTED[11:16],
        ("assistant", "Kael hides a limp."),
        ("user", "Sam: Sam here. I brought the harbor map."),
        ("system", "Stay in character as Kael. (card jb)"),
    ]
    assert _pairs(preview(store.chats.build_request(_chat_id(report)))) == expected


def test_a_message_the_writer_excluded_is_never_sent(tmp_path: Path) -> None:
    # issue 9: "a manual exclusion is never sent", in the SillyTavern-exact assembly too
    store, report = _import(build_st_user(tmp_path).parent, tmp_path)
    chat_id = _chat_id(report)
    pv = preview(store.chats.build_request(chat_id))
    target = next(b for b in pv.blocks if b.status == "kept" and b.source.startswith("message:")
                  and b.message_index and b.text.strip())
    store.messages.set_flags(chat_id, target.message_index, manual_excluded=True)
    pv = preview(store.chats.build_request(chat_id))
    block = next(b for b in pv.blocks if b.source == target.source)
    # the block says it was excluded by hand, as the stage pipeline's blocks do (the GUI's check box
    # reads manual_excluded to confirm an optimistic click)
    assert (block.status, block.reason, block.manual_excluded) == ("excluded", "MANUAL_EXCLUDED", True)
    assert all(target.text.strip() not in str(m.get("content")) for m in pv.messages)
    request = store.chats.build_request(chat_id)
    assert honours_exclusions(request.settings.model_copy(update={"strategy": "truncate"}),
                              default_registries().strategies, sillytavern=request.sillytavern is not None)
