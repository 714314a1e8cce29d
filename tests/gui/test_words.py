"""The GUI names codes and colours statuses from the engine's one table (issue 10 item 5)."""

from __future__ import annotations

import re
from pathlib import Path

from engine.vocabulary import VOCABULARY, status_colours, words
from gui.theme import status_hex
from gui.words import display_status, reason_cell, reason_in_words, reason_meaning

GUI = Path(__file__).resolve().parents[2] / "gui"


def test_words_come_from_the_engine_table():
    for code, term in VOCABULARY.items():
        assert reason_in_words(code).lower() == term.words == words(code)
        assert reason_meaning(code) == term.meaning
    assert reason_in_words("LOREBOOK_STICKY") == "Still active (sticky)"
    assert reason_cell("LOREBOOK_STICKY") == "still active (sticky)"
    assert reason_in_words("SOME_NEW_CODE") == "Some new code" and reason_in_words(None) == ""


def test_status_colours_come_from_the_engine_table():
    for status in ("kept", "excluded", "truncated", "summarized", "completed", "failed", "cancelled", "pending"):
        for dark in (False, True):
            assert status_hex(status, dark) == status_colours(status, dark)
    assert status_hex("failed") == status_hex("excluded") and status_hex("completed", True) == status_hex("kept", True)
    assert display_status("truncated", "SUMMARIZED") == "summarized" and display_status("truncated", "CUT") == "truncated"


def test_no_gui_module_keeps_its_own_code_table():
    # a dict literal keyed by a stable code ("HISTORY_OLDEST_FIRST": ...) is a second vocabulary
    key = re.compile(r'^\s*"(' + "|".join(map(re.escape, VOCABULARY)) + r')"\s*:', re.MULTILINE)
    offenders = {str(p.relative_to(GUI)): m.group(1) for p in GUI.rglob("*.py")
                 for m in [key.search(p.read_text(encoding="utf-8"))] if m}
    assert not offenders, offenders
