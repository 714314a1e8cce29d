"""The lorebook tuning report: replay turn by turn, timed effects carried, reasons for silence."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from engine.lorebook import activate
from engine.lorebook.report import build_report, report_csv
from engine.schema import ChatMessage, WorldInfoSettings

from ._helpers import book, entry, words

ROOT = Path(__file__).resolve().parents[3]


def convo(*texts: str) -> list[ChatMessage]:
    """Greeting first (assistant), then user/assistant alternating."""
    out = [ChatMessage(role="assistant", content=texts[0])]
    for i, t in enumerate(texts[1:]):
        out.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=t))
    return out


MSGS = convo("Welcome, traveller. A dragon once lived here.",   # 0 greeting (not generated)
             "I draw my sword",                                 # 1 user
             "The blade gleams.",                               # 2 assistant -> turn 1 (sees 0-1)
             "Nice weather",                                    # 3
             "Indeed.",                                         # 4 assistant -> turn 2 (sees 0-3)
             "Tell me about the sword",                         # 5
             "It is old.")                                      # 6 assistant -> turn 3; turn 4 = next (sees 0-6)

BOOK = book(entry("sword", ["sword"], content="the sword of kings"),
            entry("dragon", ["dragon"]),
            entry("never", ["unicorn"]),
            entry("off", ["sword"], disable=True),
            entry("roll", ["sword"], probability=0),
            entry("sticky", ["weather"], sticky=3),
            name="lore")


def report(**s: Any):
    return build_report([BOOK], MSGS, WorldInfoSettings(**s), count_tokens=words, context_limit=10_000,
                        char_name="Bot")


@pytest.mark.parametrize("rules", ["sillytavern", "loomscope"])
def test_turns_and_entry_stats(rules: str) -> None:
    r = report(rules=rules, scan_depth=1)
    assert [(t.turn, t.message_index) for t in r.turns] == [(1, 2), (2, 4), (3, 6), (4, 7)]
    s = {e.uid: e for e in r.entries}
    # depth 1: turn 1 sees message 1 ("sword"), turn 3 message 5 ("sword"), turn 4 message 6
    assert [t for t, _ in s["sword"].fired] == [1, 3]
    assert s["sword"].first_turn == 1 and s["sword"].last_turn == 3 and s["sword"].total_tokens == 8
    assert s["sword"].keys == {"sword": 2}
    assert s["sword"].where[0] == {"turn": 1, "key": "sword", "source": "chat", "message_index": 1,
                                   "depth": 0, "from_uid": None}
    assert s["sword"].where[1]["message_index"] == 5  # absolute index although only a tail is scanned
    # "weather" is in message 3 (turn 2, chat length 4); sticky 3 (until length 7) carries it into turn 3 without the key
    assert [t for t, _ in s["sticky"].fired] == [2, 3]
    assert s["sticky"].reasons.get("LOREBOOK_STICKY") == 1
    assert s["dragon"].never_fired == "beyond_scan_depth"  # only in the greeting, depth 1
    assert s["never"].never_fired == "keys_never_appear"
    assert s["off"].never_fired == "disabled"
    assert s["roll"].never_fired == "probability"
    assert s["sword"].never_fired is None
    b = r.books[0]
    assert b.tokens_per_turn == [t.tokens for t in r.turns]
    assert b.entries_fired == 2 and b.total_tokens == sum(b.tokens_per_turn)
    assert b.max_share == round(max(b.tokens_per_turn) / r.budget, 4)


@pytest.mark.parametrize("rules", ["sillytavern", "loomscope"])
def test_replay_matches_full_activations(rules: str) -> None:
    """Scanning only the tail gives what activating the whole prefix gives, turn by turn."""
    msgs = [*MSGS, ChatMessage.model_validate({"role": "user", "content": "a sword", "meta": {"hidden": True}}), ChatMessage(role="assistant", content="weather and dragon")]
    s = WorldInfoSettings(rules=rules, scan_depth=2)
    r = build_report([BOOK], msgs, s, count_tokens=words, context_limit=10_000, char_name="Bot")
    state: dict[str, Any] = {}
    for t in r.turns:
        full = activate([BOOK], msgs[:t.message_index], s, count_tokens=words, context_limit=10_000,
                        char_name="Bot", chat_metadata={"timedWorldInfo": state}, compare_rules=False)
        state = full.timed_effects
        fired = {e.uid for e in r.entries if any(turn == t.turn for turn, _ in e.fired)}
        assert fired == {a.uid for a in full.activated}, t
        assert t.tokens == sum(a.tokens for a in full.activated)


def test_budget_drops_counted() -> None:
    big = book(entry("a", ["sword"], order=2, content="w " * 8), entry("b", ["sword"], order=1, content="w " * 8))
    r = build_report([big], MSGS, WorldInfoSettings(scan_depth=1, budget_cap=12), count_tokens=words,
                     context_limit=10_000)
    s = {e.uid: e for e in r.entries}
    assert s["a"].turns_fired == 2 and s["b"].budget_dropped == 2 and s["b"].never_fired == "budget"


def test_csv_one_row_per_entry() -> None:
    rows = list(csv.DictReader(io.StringIO(report_csv(report(scan_depth=1)))))
    assert [r["uid"] for r in rows] == ["sword", "dragon", "never", "off", "roll", "sticky"]
    assert rows[0]["turns_fired"] == "2" and rows[0]["turns"] == "4" and rows[0]["top_key"] == "sword"
    assert rows[2]["never_fired"] == "keys_never_appear"


def test_real_chats(shared_data: Path) -> None:
    from engine.importers import load_chat, load_lorebook
    from engine.tokenizers import default_tokenizer_registry

    count = default_tokenizer_registry().get("o200k_base").count
    chat = load_chat(shared_data / "chats" / "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl")
    eldoria = load_lorebook(shared_data / "lorebooks" / "Eldoria.json")
    r = build_report([eldoria], chat.messages, WorldInfoSettings(), count_tokens=count, context_limit=8192,
                     user_name=chat.user_name, char_name=chat.character_name)
    assert len(r.turns) == 2 and all(e.turns_fired == 2 for e in r.entries)
    airline = load_chat(shared_data / "chats" / "airline-longest-task.json")
    policy = load_lorebook(ROOT / "docs" / "examples" / "airline-policy-lorebook.json")
    r = build_report([policy], airline.messages, WorldInfoSettings(), count_tokens=count, context_limit=8192)
    assert len(r.turns) == 31
    s = {e.uid: e for e in r.entries}
    assert s[8].turns_fired == 31 and s[8].constant  # the constant reminder, every turn
    assert s[7].never_fired == "keys_never_appear"  # nobody travels with a pet
    assert s[3].keys and next(iter(s[3].keys)).startswith("/")  # the reservation-id regex key
