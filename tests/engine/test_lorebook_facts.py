"""Issue 31 item 1: which World Info entries a block holds, and why, in words (engine.lorebook_facts).

SillyTavern's World Info (public/scripts/world-info.js ``checkWorldInfo``): keys matched in the
scanned chat, recursion over activated entries' content, constant entries, sticky timed effects
(``WorldInfoTimedEffects``: an effect ends when the chat reaches ``end``).
"""

from __future__ import annotations

from pathlib import Path

from engine.lorebook_facts import block_entry_facts, block_source_label, entry_title, key_spans, why_fired
from engine.pipeline import preview
from engine.schema import (
    Chat,
    ChatMessage,
    ContextSettings,
    Lorebook,
    LorebookEntry,
    PreviewRequest,
    WorldInfoSettings,
)
from tests.engine.assembly.test_st_story_order import _request


def _loomscope_preview():
    msgs = [ChatMessage(role="user", content="The dragon flies over the tower."),
            ChatMessage(role="assistant", content="Yes.")]
    book = Lorebook(name="City", entries=[
        LorebookEntry(uid=1, keys=["dragon"], content="Dragons nest above the bell tower.", comment="Dragons",
                      prevent_recursion=False),
        LorebookEntry(uid=2, keys=["x"], content="The tower is old and tall.", comment="", constant=True),
        LorebookEntry(uid=3, keys=["bell"], content="The bell rings.", comment="Bell"),
    ])
    return preview(PreviewRequest(chat=Chat(messages=msgs), lorebooks=[book], settings=ContextSettings(
        model="gpt-4o", world_info=WorldInfoSettings(recursive=True))))


def test_loomscope_blocks_name_entries_and_say_why() -> None:
    pv = _loomscope_preview()
    facts = {f.uid: f for b in pv.blocks for f in block_entry_facts(b, pv)}
    assert facts[1].title == "Dragons" and facts[1].book == "City"
    assert facts[1].why == 'key "dragon" in message 0 (depth 1)' and facts[1].key == "dragon"
    assert facts[3].why == 'key "bell" via recursion from #1 Dragons'
    assert facts[2].why == "constant" and facts[2].title == "The tower is old and tall."  # no comment: its words
    assert all(f.tokens and f.position for f in facts.values())
    lore = next(b for b in pv.blocks if b.source == "lorebook:City:1")
    assert block_source_label(lore, pv) == "Dragons (City #1)"  # not lorebook:City:1
    message = next(b for b in pv.blocks if b.message_index == 0)
    assert block_entry_facts(message, pv) == []


def test_sillytavern_joined_blocks_list_each_entry(tmp_path: Path) -> None:
    pv = preview(_request(tmp_path))
    before = next(b for b in pv.blocks if b.source == "prompt:worldInfoBefore")
    facts = block_entry_facts(before, pv)
    assert [(f.book, f.uid) for f in facts] == [("Realm", 0), ("Voyage", 0)]
    # the chat's own message numbers (message 2 is hidden; the scan leaves it out, the index does not)
    assert facts[0].why == 'key "harbor" in message 4 (depth 0)' and facts[1].why == 'key "ship" in message 1 (depth 2)'
    assert "harbor" in pv.blocks[[b.message_index for b in pv.blocks].index(4)].text
    assert all(f.position == "before the character (World Info before)" for f in facts)
    assert block_source_label(before, pv) == "World Info before: entry 0, entry 0"
    note = next(b for b in pv.blocks if b.source.startswith("injection:"))
    (storm,) = block_entry_facts(note, pv)
    assert storm.position == "Author's Note bottom, @depth 2 as system" and storm.key == "storm"
    plain = next(b for b in pv.blocks if b.message_index == 0)
    assert block_entry_facts(plain, pv) == [] and block_source_label(plain, pv) == "message:0"


def test_why_in_words_for_timed_and_recursive_entries() -> None:
    assert why_fired("LOREBOOK_STICKY", {"until": 12}, chat_length=10) == "sticky, 2 turns left"
    assert why_fired("LOREBOOK_STICKY", {"until": 11}, chat_length=10) == "sticky, 1 turn left"
    assert why_fired("LOREBOOK_STICKY", {"until": 11}) == "sticky (still active)"
    assert why_fired("LOREBOOK_CONSTANT", {"pass": 0}) == "constant"
    assert why_fired("LOREBOOK_KEY_MATCH", {"key": "k", "source": "recursion", "from_uid": 7}) == \
        'key "k" via recursion from #7'
    assert why_fired("LOREBOOK_KEY_MATCH", {"key": "k", "message_index": 0}, scanned="the test text") == \
        'key "k" in the test text'
    assert entry_title("", 4) == "entry #4" and entry_title("  Liyue  Harbor ", 3) == "Liyue Harbor"


def test_key_spans_for_highlighting() -> None:
    assert key_spans("A Dragon and dragons", "dragon") == [(2, 8), (13, 19)]
    assert key_spans("a bell rang", "/b(e)ll/i") == [(2, 6)]
    assert key_spans("text", "/[/") == []
