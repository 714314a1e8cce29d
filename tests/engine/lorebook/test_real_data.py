"""Activation on real lorebooks, card-embedded books and chats from ``../shared/data``.

Expected activations were worked out by reading the files (keys, secondary logic, the chat
text); the comments say why each entry fires or not. Tokens: exact o200k_base.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.importers import load_character, load_chat, load_lorebook
from engine.lorebook import activate, lint_lorebook
from engine.schema import ChatMessage, InsertionPosition, WorldInfoSettings
from engine.tokenizers import default_tokenizer_registry

COUNT = default_tokenizer_registry().get("o200k_base").count
SERAPHINA_CHAT = "chats/Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"


def say(*texts: str) -> list[ChatMessage]:
    return [ChatMessage(role="user", content=t) for t in texts]


def run(books, messages, *, char_name: str = "Bot", user_name: str = "User", context_limit: int = 8192,
        **settings):
    return activate(books, messages, WorldInfoSettings(**settings), count_tokens=COUNT,
                    context_limit=context_limit, user_name=user_name, char_name=char_name)


def codes(result, *uids):
    return {u: result.trace_for(u).code for u in uids}


def test_eldoria_on_the_seraphina_chat(shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "Eldoria.json")
    chat = load_chat(shared_data / SERAPHINA_CHAT)
    assert len(chat.messages) == 3
    # Scan depth 1 = the last message (Seraphina's long reply): "those beasts", "the wrong glade",
    # "I used my magic". Entry 0 (eldoria/wood/forest) has no key there, but the contents of
    # 1-3 mention "Eldoria", so recursion brings it in.
    r = run([book], chat.messages, scan_depth=1, user_name=chat.user_name, char_name=chat.character_name)
    assert {a.uid for a in r.activated} == {0, 1, 2, 3}
    for uid, key in ((1, "beasts"), (2, "glade"), (3, "magic")):
        rec = r.trace_for(uid)
        assert (rec.code, rec.detail["key"], rec.detail["message_index"], rec.detail["pass"]) == (
            "LOREBOOK_KEY_MATCH", key, 2, 0)
    rec0 = r.trace_for(0)
    assert rec0.detail["source"] == "recursion" and rec0.detail["key"] == "eldoria" and rec0.detail["pass"] == 1
    # Without recursion entry 0 stays out; the greeting (message 0, "this forest") is beyond depth 1.
    r = run([book], chat.messages, scan_depth=1, recursive=False)
    assert {a.uid for a in r.activated} == {1, 2, 3}
    assert r.trace_for(0).code == "LOREBOOK_NOT_MATCHED"
    r = run([book], chat.messages, scan_depth=3, recursive=False, user_name=chat.user_name,
            char_name=chat.character_name)
    assert r.trace_for(0).detail["key"] == "forest" and r.trace_for(0).detail["message_index"] == 0
    # {{user}}/{{char}} in the contents are replaced by the chat's names
    assert all("{{" not in a.content for a in r.activated)
    assert any("Orion" in a.content and "Seraphina" in a.content for a in r.activated)


def test_seraphina_card_book_matches_the_world_file(shared_data: Path) -> None:
    card = load_character(shared_data / "cards" / "default_Seraphina.png")
    chat = load_chat(shared_data / SERAPHINA_CHAT)
    assert card.character_book is not None and len(card.character_book.entries) == 4
    r = run([card.character_book], chat.messages, scan_depth=1, recursive=False, char_name=card.name)
    assert {a.uid for a in r.activated} == {1, 2, 3}
    assert all(a.position == InsertionPosition.BEFORE_CHAR and a.reason == "LOREBOOK_MATCHED" for a in r.activated)
    # useProbability is false in the card: no rolls recorded
    assert all("probability" not in a.trace for a in r.activated)


def test_lumine_book_on_her_greeting(shared_data: Path) -> None:
    card = load_character(shared_data / "cards" / "Lumine.json")
    book = card.character_book
    assert book is not None and len(book.entries) == 119
    r = run([book], [ChatMessage(role="assistant", content=card.first_mes)], char_name="Lumine")
    # The greeting mentions "Teyvat", "treasure chests" and "her eyes"; Inazuma/Paimon/Mora have no
    # entry in this Traveler book. All entries are excludeRecursion, so nothing comes from recursion.
    assert {(a.uid, a.trace["key"]) for a in r.activated} == {(8, "Teyvat"), (42, "Chests"), (43, "Eyes")}
    # "Rain" (uid 84) occurs only inside "brain": whole words keep it out, the trace says why
    rec = r.trace_for(84)
    assert rec.code == "LOREBOOK_NOT_MATCHED"
    assert rec.detail["near_misses"][0]["why"].startswith("found only inside a longer word")
    assert len(r.trace) == 119 and r.used_tokens == sum(a.tokens for a in r.activated) <= r.budget


def test_gi_core_not_all_logic(shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "GI-Core.json")
    assert len(book.entries) == 256
    # uid 1 "Liyue (Kingdom)": key Liyue, NOT_ALL [Harbor, Qixing]; uid 26 "Liyue": AND_ANY [Harbor]
    r = run([book], say("We arrived at Liyue Harbor at dawn."))
    assert codes(r, 1, 26) == {1: "LOREBOOK_KEY_MATCH", 26: "LOREBOOK_KEY_MATCH"}
    assert r.trace_for(1).detail["logic"] == "NOT_ALL"
    r = run([book], say("Liyue Harbor, seat of the Qixing."))
    assert codes(r, 1, 26, 2) == {1: "LOREBOOK_SECONDARY_FAILED", 26: "LOREBOOK_KEY_MATCH",
                                  2: "LOREBOOK_KEY_MATCH"}  # uid 2 "Liyue Qixing" has key Qixing
    assert r.trace_for(1).detail["secondary_matched"] == ["Harbor", "Qixing"]
    r = run([book], say("Liyue at night."))
    assert codes(r, 1, 26) == {1: "LOREBOOK_KEY_MATCH", 26: "LOREBOOK_SECONDARY_FAILED"}
    disabled = [t.uid for t in r.trace if t.code == "LOREBOOK_DISABLED"]
    assert disabled == [201, 221, 237]


def test_eorzea_not_any_logic(shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "Eorzea.json")
    # uid 11 Gridania: NOT_ANY [New Gridania, Old Gridania]; uid 12 "Old" AND_ANY [Gridania];
    # uid 15 "New" AND_ANY [Gridania]
    r = run([book], say("We walked through Old Gridania."), recursive=False)
    assert {a.uid for a in r.activated} == {12}
    assert codes(r, 11, 15) == {11: "LOREBOOK_SECONDARY_FAILED", 15: "LOREBOOK_NOT_MATCHED"}
    assert r.trace_for(11).detail["logic"] == "NOT_ANY"
    r = run([book], say("Back in Gridania at last."), recursive=False)
    assert {a.uid for a in r.activated} == {11}
    assert r.trace_for(12).code == "LOREBOOK_NOT_MATCHED"


def test_date_a_live_constants_fill_the_budget(shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "Date a Live 12.0.0.json")
    r = run([book], say("Tohka smiled at Shido."), rules="loomscope")
    constants = {3, 7, 36, 76, 77, 78, 81, 89, 100}
    # the 9 constant entries are required: all kept although they take 7,000+ tokens of a 2,048 budget
    assert {a.uid for a in r.activated} == constants
    assert all(a.reason == "LOREBOOK_CONSTANT" for a in r.activated)
    assert r.budget == 2048 and r.used_tokens > 7000
    # Tohka's entry (uid 17, key "Tohka") matched but is dropped for the budget, with its tokens
    rec = r.trace_for(17)
    assert rec.code == "LOREBOOK_BUDGET" and rec.detail["match"]["key"] == "Tohka" and rec.tokens > 500
    assert 17 in {d.uid for d in r.budget_dropped}
    # every entry has order 100: the dropped list follows the uid tie-break
    dropped = [d.uid for d in r.budget_dropped]
    assert dropped == sorted(dropped)
    # disabled entries never fire
    assert {t.uid for t in r.trace if t.code == "LOREBOOK_DISABLED"} == {79, 83, 93, 94, 95, 96, 97}
    # insertion order: before-char bucket first, then the at-depth entries by depth
    positions = [(int(a.position), a.depth if a.position == InsertionPosition.AT_DEPTH else 0) for a in r.activated]
    assert positions == sorted(positions)


def test_date_a_live_under_sillytavern_rules(shared_data: Path) -> None:
    """The same chat under SillyTavern's rules (checkWorldInfo 4001–4036): every entry has order
    100, so they are taken in book order: constant 3, constant 7, Shido (16, key "Shido"), then
    Tohka (17) makes the recounted total reach the 2,048 budget; SillyTavern stops there, so the
    later constants (36, 76, ...) are dropped too, each marked as kept by the loomscope rules."""
    book = load_lorebook(shared_data / "lorebooks" / "Date a Live 12.0.0.json")
    r = run([book], say("Tohka smiled at Shido."))
    assert r.rules == "sillytavern" and r.budget == 2048
    assert {a.uid for a in r.activated} == {3, 7, 16}
    # equal orders: the entry activated last is placed first (unshift, lines 4104–4145)
    assert [a.uid for a in r.activated] == [16, 7, 3]
    assert r.used_tokens < 2048
    rec = r.trace_for(17)
    assert rec.code == "LOREBOOK_BUDGET" and "note" not in rec.detail  # the entry that overflowed
    for uid in (36, 76, 77, 78, 81, 89, 100):  # constants never reached
        rec = r.trace_for(uid)
        assert rec.code == "LOREBOOK_BUDGET" and "not reached" in rec.detail["note"]
        assert rec.detail["loomscope"]["message"].startswith("SillyTavern drops this constant")
    assert {d["uid"] for d in r.rule_differences if d["what"] == "activation"} >= {36, 76, 16}


def test_date_a_live_with_room_in_the_budget(shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "Date a Live 12.0.0.json")
    r = run([book], say("Tohka smiled at Shido."), context_limit=128_000, recursive=False)
    # budget 32,000: Tohka (17, key "Tohka") and Shido (16, key "Shido") fit beside the constants
    assert {16, 17} <= {a.uid for a in r.activated}
    assert r.trace_for(17).detail["key"] == "Tohka" and r.budget_dropped == []


def test_sakana_secondary_keys(shared_data: Path) -> None:
    card = load_character(shared_data / "cards" / "contest_Assistant_Sakana.png")
    book = card.character_book
    assert book is not None and len(book.entries) == 14
    # uid 9: keys love/...; secondary ["me"] (AND_ANY). uid 11: caress/...; secondary ["your face"].
    r = run([book], say("Do you love me? I caress your hair."), char_name=card.name, recursive=False)
    assert codes(r, 9, 11) == {9: "LOREBOOK_KEY_MATCH", 11: "LOREBOOK_SECONDARY_FAILED"}
    assert r.trace_for(9).detail["secondary_matched"] == ["me"]
    r = run([book], say("I caress your face."), char_name=card.name, recursive=False)
    assert r.trace_for(11).code == "LOREBOOK_KEY_MATCH"
    # uid 1 lists the key "check" twice: lint reports it, activation is unaffected
    findings = lint_lorebook(book, context_limit=8192, count_tokens=COUNT)
    assert (1, "LINT_DUPLICATE_KEY_IN_ENTRY") in {(f.uid, f.code) for f in findings}


def test_arcs_book_all_constant(shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "Date a Live Arcs V1.1.0.json")
    r = run([book], say("anything"), context_limit=128_000)
    assert len(r.activated) == 10 and all(a.constant for a in r.activated)
    assert sorted(t.uid for t in r.trace if t.code == "LOREBOOK_DISABLED") == [9, 10, 11]


def test_megumin_chat_with_two_books(shared_data: Path) -> None:
    """An unrelated chat activates nothing but the constants; the trace covers both books."""
    chat = load_chat(shared_data / "chats" / "1673323621108.jsonl")
    books = [load_lorebook(shared_data / "lorebooks" / "Eldoria.json"),
             load_lorebook(shared_data / "lorebooks" / "Keqing-WI.json")]
    r = run(books, chat.messages, scan_depth=10, user_name=chat.user_name, char_name=chat.character_name)
    assert len(r.trace) == 4 + len(books[1].entries)
    assert [t.book_index for t in r.trace] == sorted(t.book_index for t in r.trace)
    assert all(a.constant or a.trace["code"] == "LOREBOOK_KEY_MATCH" for a in r.activated)


@pytest.mark.parametrize("name", ["GI-Core.json", "Date a Live 12.0.0.json", "Eorzea.json", "Keqing-WI.json"])
def test_real_books_are_deterministic_and_cache_safe(shared_data: Path, name: str) -> None:
    book = load_lorebook(shared_data / "lorebooks" / name)
    msgs = say("Liyue and Mondstadt", "Tohka, Gridania and Keqing", "the Fatui Harbingers")
    a = run([book], msgs, scan_depth=3)
    b = run([book.model_copy(deep=True)], msgs, scan_depth=3)  # a fresh object: no cache hit
    assert a.model_dump() == b.model_dump()
