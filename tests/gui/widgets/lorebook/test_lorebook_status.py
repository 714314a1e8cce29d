"""gui.widgets.lorebook.status: a trace record in words and colours."""

from __future__ import annotations

from engine.lorebook import TraceRecord
from gui.widgets.lorebook.status import fired_rank, fired_text, status_colour, text_test_words, why_text
from gui.words import describe_detail


def _rec(code: str, activated: bool = False, **detail) -> TraceRecord:
    return TraceRecord(book="World", book_index=0, uid=1, activated=activated, code=code, detail=detail)


def test_describe_detail():
    assert describe_detail({"key": "sword", "message_index": 12, "depth": 0, "pass": 1}) == (
        'key "sword" in message 12 (depth 0), recursion pass 1')
    assert describe_detail({}) == ""
    assert "roll 73" in describe_detail({"roll": 73})


def test_words_and_colours_of_records():
    fired = _rec("LOREBOOK_KEY_MATCH", True, key="dragon", message_index=0, depth=0)
    budget = _rec("LOREBOOK_BUDGET")
    off = _rec("LOREBOOK_DISABLED")
    assert [fired_text(r) for r in (None, fired, budget, off, _rec("LOREBOOK_NOT_MATCHED"))] == [
        "", "✓ fired", "✗ over budget", "– disabled", "– no"]
    assert [text_test_words(r) for r in (None, fired, budget)] == ["", "✓ would fire", "✗ over budget"]
    assert text_test_words(off).startswith("– ")
    assert why_text(None) == "" and 'key "dragon" in message 0' in why_text(fired)
    assert [fired_rank(r) for r in (None, off, budget, fired)] == [-1, 0, 1, 2]
    assert status_colour(fired, False) != status_colour(budget, False) != status_colour(off, False)
    assert status_colour(fired, True) != status_colour(fired, False)
