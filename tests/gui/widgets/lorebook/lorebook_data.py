"""Shared data for the Lorebook tab tests: one four-entry book, its preview trace, a tab on them."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from engine.schema import (
    Chat,
    ChatMessage,
    ContextPreview,
    InsertionPosition,
    Lorebook,
    LorebookEntry,
    PreviewRequest,
    SelectiveLogic,
    TokenizerInfo,
)
from gui.widgets.lorebook import COLUMN_INDEX, LorebookTab

DRAGON = LorebookEntry(uid=1, comment="Dragon", keys=["dragon", "wyrm"], content="Dragons hoard brass.")
CASTLE = LorebookEntry(uid=2, comment="Castle", keys=["castle"], secondary_keys=["ruined"],
                       selective_logic=SelectiveLogic.AND_ALL, order=250, content="The castle is ruined.")
RULES = LorebookEntry(uid=3, comment="Rules", constant=True, content="Magic is rare.")
OFF = LorebookEntry(uid=4, comment="Off", keys=["dragon"], disable=True, position=InsertionPosition.AT_DEPTH,
                    depth=2, probability=40, scan_depth=5, content="never")


def make_request() -> PreviewRequest:
    return PreviewRequest(
        lorebooks=[Lorebook(name="World", entries=[DRAGON, CASTLE, RULES, OFF])],
        chat=Chat(messages=[ChatMessage(role="user", content="A dragon circles the tower.")]),
    )


def make_preview(trace: list[dict]) -> ContextPreview:
    return ContextPreview(
        model="gpt-4o", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False),
        context_limit=2200, reply_reserve=200, budget=2000, safety_margin=0, headroom=1000,
        prompt_tokens=900, strategy="truncate", lorebook_trace=trace,
    )


TRACE = [
    {"book": "World", "book_index": 0, "uid": 1, "comment": "Dragon", "activated": True,
     "code": "LOREBOOK_KEY_MATCH", "detail": {"key": "dragon", "message_index": 0, "depth": 0}, "tokens": 50},
    {"book": "World", "book_index": 0, "uid": 2, "comment": "Castle", "activated": False,
     "code": "LOREBOOK_NOT_MATCHED", "detail": {}, "tokens": None},
    {"book": "World", "book_index": 0, "uid": 3, "comment": "Rules", "activated": True,
     "code": "LOREBOOK_CONSTANT", "detail": {}, "tokens": 5},
    {"book": "World", "book_index": 0, "uid": 4, "comment": "Off", "activated": False,
     "code": "LOREBOOK_DISABLED", "detail": {}, "tokens": None},
]


def make_tab(qtbot: Any) -> LorebookTab:
    """A 1000×700 tab on :func:`make_request` with :data:`TRACE`, its book in the library as ``book-1``."""
    widget = LorebookTab(None)
    qtbot.addWidget(widget)
    widget.resize(1000, 700)
    widget.set_state(make_request(), make_preview(TRACE), ["book-1"])
    return widget


def cell(tab: LorebookTab, row: int, col: str, role: Any = Qt.ItemDataRole.DisplayRole) -> Any:
    """The source model's ``data`` of column ``col`` in row ``row``."""
    return tab.model.data(tab.model.index(row, COLUMN_INDEX[col]), role)


def would_fire_uids(tab: LorebookTab) -> set[Any]:
    """Uids of the entries the test text would fire."""
    return {row.entry.uid for row in tab.rows() if row.test is not None and row.test.activated}
