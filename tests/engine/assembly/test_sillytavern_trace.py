"""The SillyTavern assembly's World Info trace points into ``request.lorebooks`` (issue 18: the
app's Lorebook tab shows each entry's fired status by ``book_index``), even though the books are
scanned in ``getSortedEntries`` scope order (chat lore first)."""

from __future__ import annotations

from pathlib import Path

from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from tests.engine.importers.st_fixture import build_st_user


def test_trace_book_index_is_the_request_index(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    try:
        report = store.imports.st_folder(read_st_folder(build_st_user(tmp_path)))
        chat_id = next(r.id for r in report.added if r.kind == "chat")
        request = store.chats.build_request(chat_id)
        # the stored order (global Realm, chat Voyage, character HeroLore) is not the scan order
        assert [b.name for b in request.lorebooks] == ["Realm", "Voyage", "HeroLore"]
        result = preview(request)
        assert result.lorebook_trace
        for rec in result.lorebook_trace:
            assert request.lorebooks[rec.book_index].name == rec.book
        fired = {(r.book, r.uid) for r in result.lorebook_trace if r.activated}
        assert ("Voyage", 0) in fired  # the chat world's ship entry
    finally:
        store.close()
