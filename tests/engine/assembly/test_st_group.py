"""Group chats (issue 27 item 7): import, the next speaker, and the prompt SillyTavern 1.12.6 builds for it.

Expected prompts: :mod:`tests.engine.assembly.st_group_cases` (derived from SillyTavern's
``group-chats.js`` / ``openai.js`` functions, see there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.assembly.st_group import extract_all_words, joined_cards, with_speaker
from engine.errors import SettingsError
from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.schema import PreviewRequest
from engine.storage import open_store
from tests.engine.assembly.st_group_cases import CASES
from tests.engine.importers.st_fixture import entry
from tests.engine.importers.st_group_fixture import GROUP_CHAT, build_group_user


def group_request(tmp_path: Path, group: dict[str, Any] | None = None, chat: list[dict[str, Any]] | None = None,
                  **kw: Any) -> tuple[PreviewRequest, list[tuple[str, str]]]:
    """Import the fixture group folder into a new library; the group chat's request and the import warnings."""
    user = build_group_user(tmp_path, group=group, chat=chat, **kw)
    warnings: list[tuple[str, str]] = []
    plan = read_st_folder(user, on_warning=lambda f, m: warnings.append((f, m)))
    with open_store(f"sqlite:///{tmp_path / 'lib.db'}") as store:
        store.imports.st_folder(plan)
        chat_id = next(c.id for c in store.chats.summaries() if c.title.startswith("Harbor crew"))
        return store.chats.build_request(chat_id), warnings


@pytest.mark.parametrize("case", sorted(CASES))
def test_next_speaker_prompt_equals_sillytavern(case: str, tmp_path: Path) -> None:
    """group-chats.js generateGroupWrapper → Generate for the speaker; openai.js populateChatHistory."""
    c = CASES[case]
    request, _ = group_request(tmp_path, c["group"], [*GROUP_CHAT, *c["extra"]])
    auto = preview(request)
    assert auto.error is None
    assert f"the next speaker, {c['st_speaker']} (" in auto.diagnostics[0]
    pv = preview(with_speaker(request, c["speaker"]))
    assert pv.error is None
    assert pv.messages == c["messages"]


def test_joined_cards_equal_get_group_character_cards(tmp_path: Path) -> None:
    """getGroupCharacterCards (join mode, <FIELDNAME> prefix and suffix with the member's {{char}})."""
    group = {"generation_mode": 1, "generation_mode_join_prefix": "[<FIELDNAME> of {{char}}]",
             "generation_mode_join_suffix": "[end of {{char}}]"}
    request, _ = group_request(tmp_path, group)
    setup = request.sillytavern
    assert setup is not None and setup.group is not None

    def replace(text: str, char: str) -> str:
        return text.replace("{{char}}", char).replace("{{user}}", "Alex")

    got = joined_cards(setup.group, "mira.png", replace, "")
    assert got == {  # SillyTavern 1.12.6 getGroupCharacterCards on the same cards
        "description": "[Description of Kael]\nKael is a wandering swordsman who owes Alex a debt.\n[end of Kael]\n"
                       "[Description of Mira]\nMira is the Gull's navigator; she distrusts Alex.\n[end of Mira]",
        "personality": "[Personality of Kael]\nwry, loyal\n[end of Kael]\n[Personality of Mira]\nsharp, curious\n"
                       "[end of Mira]",
        "scenario": "[Scenario of Kael]\nA storm drives Kael and Alex into the harbor.\n[end of Kael]\n"
                    "[Scenario of Mira]\nMira studies the charts by lamplight.\n[end of Mira]",
        "mesExamples": "[Example Messages of Kael]\n<START>\nAlex: Where to?\nKael: Wherever the wind is kind.\n"
                       "[end of Kael]\n[Example Messages of Mira]\n<START>\nAlex: Which way?\nMira: North, by the "
                       "stars.\n[end of Mira]",
    }
    # a chat scenario override replaces the joined scenarios as written
    assert joined_cards(setup.group, "mira.png", replace, " At sea. ")["scenario"] == "At sea."  # type: ignore[index]


def test_extract_all_words_is_ascii_like_javascript() -> None:
    r"""utils.js extractAllWords: /\b\w+\b/gim, lower-cased (JavaScript's \w is ASCII)."""
    assert extract_all_words("Where is your sword, Kael? Zoë!") == ["where", "is", "your", "sword", "kael", "zo"]


def test_only_the_speakers_character_lore_is_scanned(tmp_path: Path) -> None:
    """world-info.js getCharacterLore reads characters[this_chid]: Kael's HeroLore only when Kael speaks."""
    request, _ = group_request(tmp_path)
    kael = preview(with_speaker(request, "Kael"))
    mira = preview(with_speaker(request, "Mira"))
    assert any("HeroLore" in m["content"] for m in kael.messages)
    assert not any("HeroLore" in m["content"] for m in mira.messages)
    assert all(r.book != "HeroLore" for r in mira.lorebook_trace)


def test_trace_indexes_the_chats_own_books(tmp_path: Path) -> None:
    """The speaker's request leaves Kael's world out; the trace still indexes request.lorebooks."""
    request, _ = group_request(tmp_path, mira_world={"0": entry(0, ["chart"], "MiraLore: the chart is forged.")})
    names = [b.name for b in request.lorebooks]
    assert names.index("HeroLore") < names.index("MiraLore")
    pv = preview(with_speaker(request, "Mira"))
    recs = [r for r in pv.lorebook_trace if r.book == "MiraLore"]
    assert recs and all(r.book_index == names.index("MiraLore") for r in recs)
    assert any(r.activated for r in recs)
    assert any(m["content"] == "[World: MiraLore: the chart is forged.]" for m in pv.messages)
    assert all(r.book != "HeroLore" for r in pv.lorebook_trace)


def test_missing_member_card_is_a_warning_and_the_others_are_kept(tmp_path: Path) -> None:
    """A member whose card is gone: SillyTavern skips it (characters.find fails); the import names it."""
    request, warnings = group_request(tmp_path, {"members": ["ghost.png", "hero.png", "mira.png"]})
    assert ("groups/1717000000000.json",
            "group 'Harbor crew': member card characters/ghost.png is missing; left out (SillyTavern skips it)") in warnings
    pv = preview(with_speaker(request, "Mira"))
    assert pv.error is None
    assert "members without a card, left out: ghost.png" in pv.diagnostics[0]
    assert any(m["content"] == "[Start a new group chat. Group members: Kael, Mira]" for m in pv.messages)
    with pytest.raises(SettingsError, match="no member 'ghost'"):
        with_speaker(request, "ghost")


def test_random_natural_order_previews_the_first_in_list_order_with_a_warning(tmp_path: Path) -> None:
    """activateNaturalOrder without a mention rolls talkativeness at random: first enabled member, said."""
    chat = [*GROUP_CHAT[:2], {"name": "Alex", "is_user": True, "is_system": False, "send_date": "x",
                              "mes": "Anyone awake?", "extra": {}}]
    request, _ = group_request(tmp_path, chat=chat)
    pv = preview(request)
    assert "the next speaker, Kael (first enabled member in list order)" in pv.diagnostics[0]
    assert any("natural order picks by talkativeness rolls" in w for w in pv.warnings)


def test_speaker_only_for_a_group_chat(tmp_path: Path) -> None:
    request, _ = group_request(tmp_path)
    plain = request.model_copy(update={"sillytavern": request.sillytavern.model_copy(update={"group": None})})  # type: ignore[union-attr]
    with pytest.raises(SettingsError, match="only for a group chat") as exc:
        with_speaker(plain, "Kael", where="$.speaker")
    assert exc.value.place == "$.speaker"


def test_group_chat_no_group_lists_is_skipped(tmp_path: Path) -> None:
    user = build_group_user(tmp_path)
    (user / "group chats" / "999.jsonl").write_text('{"name":"x","is_user":true,"mes":"hi"}', encoding="utf-8")
    plan = read_st_folder(user)
    assert [(s.file, s.message) for s in plan.skipped] == [
        ("group chats/999.jsonl", "no group in groups/ lists this chat; skipped")]
    chat = next(i for i in plan.items if i.kind == "chat" and i.key.startswith("group chats/"))
    assert chat.character_key == "characters/hero.png"
    assert chat.setup is not None and chat.setup.group is not None
    assert [m.avatar for m in chat.setup.group.members] == ["hero.png", "mira.png"]
    assert chat.setup.group.members[0].worlds == ["HeroLore"]
    assert ("worlds/HeroLore.json", "character") in chat.lorebook_links


def test_a_strategy_sillytavern_1_12_6_does_not_know_warns(tmp_path: Path) -> None:
    """group-chats.js 1.12.6 has NATURAL and LIST only: any other strategy activates nobody."""
    request, _ = group_request(tmp_path, {"activation_strategy": 2})
    pv = preview(request)
    assert "the next speaker, Kael (first enabled member in list order)" in pv.diagnostics[0]
    assert any("activation strategy 2 is not one SillyTavern 1.12.6 knows" in w for w in pv.warnings)


def test_self_responses_let_the_last_speaker_be_mentioned(tmp_path: Path) -> None:
    """activateNaturalOrder: the last speaker is banned unless allow_self_responses."""
    chat = [*GROUP_CHAT, {"name": "Kael", "is_user": False, "is_system": False, "send_date": "x",
                          "mes": "Kael will go first; Mira follows.", "extra": {}}]
    banned, _ = group_request(tmp_path / "a", chat=chat)
    allowed, _ = group_request(tmp_path / "b", {"allow_self_responses": True}, chat=chat)
    assert "the next speaker, Mira (natural order" in preview(banned).diagnostics[0]
    assert "the next speaker, Kael (natural order" in preview(allowed).diagnostics[0]
