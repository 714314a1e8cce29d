"""gui.widgets.lorebook.rows: rows from the chat's books and typed trace records."""

from __future__ import annotations

from engine.lorebook import TraceRecord
from engine.schema import Character, Lorebook, LorebookEntry
from gui.widgets.lorebook import LorebookTab, build_rows, index_trace
from tests.gui.widgets.lorebook.lorebook_data import TRACE, make_request


def test_index_trace_prefers_the_activated_record():
    fired = TraceRecord(book="A", book_index=0, uid=1, activated=True, code="LOREBOOK_KEY_MATCH", tokens=3)
    dup = TraceRecord(book="A", book_index=0, uid="1", activated=False, code="LOREBOOK_NOT_MATCHED")
    other = TraceRecord(book="B", book_index=1, uid=1, activated=False, code="LOREBOOK_NOT_MATCHED")
    assert index_trace([fired, dup, other]) == {(0, "1"): fired, (1, "1"): other}
    assert index_trace([dup, fired])[(0, "1")] is fired


def test_build_rows_matches_records_ids_and_budget():
    books = make_request().lorebooks
    trace = index_trace(TraceRecord.model_validate(r) for r in TRACE)
    rows = build_rows(books, listed=1, lorebook_ids=["book-1"], trace=trace, test=None, budget=500)
    assert [r.entry.uid for r in rows] == [1, 2, 3, 4]
    assert rows[0].trace is not None and rows[0].trace.tokens == 50 and rows[0].share == 0.1
    assert rows[1].tokens is None and rows[1].share is None
    assert all(r.editable and not r.embedded and r.test is None for r in rows)
    # ids that do not line up with the listed books: read-only rows
    assert not any(r.editable for r in build_rows(books, listed=1, lorebook_ids=[], trace=None, test=None,
                                                  budget=0))


def test_card_embedded_book_is_shown_read_only(qtbot):
    req = make_request().model_copy(update={"character": Character(
        name="Elara", character_book=Lorebook(entries=[LorebookEntry(uid=9, keys=["elara"], content="x")]))})
    tab = LorebookTab(None)
    qtbot.addWidget(tab)
    tab.set_state(req, None, ["book-1"])
    rows = tab.rows()
    assert len(rows) == 5
    assert rows[-1].book_name == "Elara (card)" and rows[-1].embedded and not rows[-1].editable
    assert rows[0].editable
