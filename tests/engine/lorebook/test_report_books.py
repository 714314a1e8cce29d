"""Issue 31 item 4: the lorebook report replays exactly the books the preview uses.

SillyTavern uses a card's embedded ``character_book`` only once it is linked as a world
(public/scripts/world-info.js ``getCharacterLore`` reads ``extensions.world``); the imported
world made from it replaces it, so the report must not replay the embedded book beside it.
"""

from __future__ import annotations

from pathlib import Path

from engine.lorebook_report import report_for_request
from engine.pipeline import preview
from engine.resolve import chat_lorebooks
from tests.engine.assembly.test_st_story_order import _request


def test_report_uses_the_preview_books(tmp_path: Path) -> None:
    request = _request(tmp_path)
    card = request.character
    assert card is not None and card.character_book is not None
    # the card's embedded book under another name than the world linked from it (Keqing / Keqing-WI)
    book = card.character_book.model_copy(update={"name": "Kael's card book"})
    request = request.model_copy(update={"character": card.model_copy(update={"character_book": book})})
    report = report_for_request(request)
    books = {b.book for b in report.books}
    assert books == {b.name for b in chat_lorebooks(request)} == {"Realm", "HeroLore", "Voyage"}
    assert "Kael's card book" not in books  # before: replayed beside HeroLore, its entries twice
    # the last turn replays the whole chat: what fires there is what the preview sends
    fired_in_preview = {(r.book, r.uid) for r in preview(request).lorebook_trace if r.activated}
    assert fired_in_preview == {(e.book, e.uid) for e in report.entries if e.last_turn == len(report.turns)}
    assert len({(e.book, e.uid) for e in report.entries}) == len(report.entries)
