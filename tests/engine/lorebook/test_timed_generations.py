"""Timed effects over several generations, carrying ``chat_metadata.timedWorldInfo`` between them.

Expected results (``st_timed_cases.json``) come from SillyTavern 1.12.6 run under Node:
``WorldInfoTimedEffects`` (world-info.js 387–688: ``checkTimedEffects``, ``setTimedEffects``,
``onEnded.sticky``) over entries hashed as ``getSortedEntries`` hashes them (3620–3627). Each
generation is one ``activate`` call on a chat of ``chat_length`` messages whose newest message
holds the key (``matches``) or not; the stored state after it must equal SillyTavern's, hashes
included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.importers._fields import FieldReader
from engine.importers.lorebooks import parse_lorebook_data
from engine.lorebook import activate
from engine.lorebook.st_hash import entry_hash, raw_entry_hash, record_hashes
from engine.schema import Lorebook, WorldInfoSettings

from ._helpers import chat, words

CASES: dict[str, Any] = json.loads((Path(__file__).with_name("st_timed_cases.json")).read_text("utf-8"))["cases"]


def _world(raw: dict[str, Any]) -> Lorebook:
    """The world file as ``loomscope import`` reads it: parsed, SillyTavern hashes recorded."""
    book, _shape = parse_lorebook_data(raw, "Lore.json", name="Lore", reader=FieldReader("Lore.json"))
    return record_hashes(book.model_copy(update={"name": "Lore"}), raw["entries"])


def _messages(n: int, matches: bool) -> list[Any]:
    return chat(*(["nothing"] * (n - 1) + ["a dragon" if matches else "nothing"]))


def _run(case: dict[str, Any], world_of: Any, rules: str = "sillytavern") -> list[tuple[list[str], dict[str, Any]]]:
    settings = WorldInfoSettings(rules=rules, scan_depth=1, recursive=False)
    state: dict[str, Any] = {}
    out = []
    for g in case["generations"]:
        book = world_of(g)
        r = activate([book], _messages(g["chat_length"], g["matches"]), settings, count_tokens=words,
                     context_limit=10_000, user_name="User", char_name="Bot",
                     chat_metadata={"timedWorldInfo": state})
        state = r.timed_effects
        out.append(([str(a.uid) for a in r.activated], json.loads(json.dumps(state))))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_timed_effects_match_sillytavern(name: str) -> None:
    case = CASES[name]
    got = _run(case, lambda g: _world(g.get("world", case["world"])))
    for g, (activated, state) in zip(case["generations"], got, strict=True):
        assert (g["chat_length"], sorted(activated)) == (g["chat_length"], sorted(g["activated"]))
        assert state == g["timedWorldInfo"], g["chat_length"]


def test_issue_example_fires_blocks_fires_blocks() -> None:
    """Sticky 2, cooldown 2 at chat lengths 1, 6, 11, 16: the sticky's end starts a protected cooldown."""
    got = _run(CASES["issue_example"], lambda g: _world(CASES["issue_example"]["world"]))
    assert [bool(a) for a, _ in got] == [True, False, True, False]
    assert got[1][1]["cooldown"]["Lore.0"] == {"hash": 3457033708738427, "start": 6, "end": 8, "protected": True}


def test_edit_in_loomscope_orphans_the_timer() -> None:
    """An entry edited in Loomscope gets a new hash: its sticky no longer holds (as in SillyTavern)."""
    case = CASES["edit_orphans"]
    first = _world(case["world"])
    edited = first.model_copy(update={"entries": [first.entries[0].model_copy(update={"comment": "Dragon (edited)"})]})
    assert entry_hash(edited.entries[0], edited) != entry_hash(first.entries[0], first)
    got = _run(case, lambda g: first if "world" not in g else edited)
    assert [a for a, _ in got] == [g["activated"] for g in case["generations"]]
    # the orphaned effect stays until its end, then goes; only the new one's hash is Loomscope's own
    assert [s["sticky"].get("Lore.0", {}).get("start") for _, s in got] == [1, 1, 1, None, 5]


def test_loomscope_rules_keep_timers_across_edits() -> None:
    case = CASES["edit_orphans"]
    first = _world(case["world"])
    edited = first.model_copy(update={"entries": [first.entries[0].model_copy(update={"comment": "x"})]})
    got = _run(case, lambda g: first if "world" not in g else edited, rules="loomscope")
    assert [a for a, _ in got][:3] == [["0"], ["0"], ["0"]]


def test_raw_hash_of_real_world_file(shared_data: Path) -> None:
    """SillyTavern's hashes of ``Eldoria.json``'s entries (getSortedEntries under Node)."""
    path = shared_data / "st-user" / "default-user" / "worlds" / "Eldoria.json"
    if not path.exists():
        pytest.skip("shared data absent")
    raw = json.loads(path.read_text("utf-8"))
    got = [raw_entry_hash(e, "Eldoria") for e in raw["entries"].values()]
    assert got == [2425724865944486, 8357175851363033, 8346112030933010, 1131487206356401]


def test_entries_stopped_by_the_budget_start_no_timer() -> None:
    """setTimedEffects runs on allActivatedEntries only (world-info.js 4185): a budget-stopped entry gets none."""
    from engine.lorebook import without_new_timers

    state = {"sticky": {"Lore.0": {"hash": 1, "start": 5, "end": 7, "protected": False},
                        "Lore.1": {"hash": 2, "start": 3, "end": 7, "protected": False}},
             "cooldown": {"Lore.0": {"hash": 1, "start": 5, "end": 9, "protected": True}}}
    out = without_new_timers(state, ["Lore.0", "Lore.1"], 5)
    assert out == {"sticky": {"Lore.1": state["sticky"]["Lore.1"]}, "cooldown": state["cooldown"]}
