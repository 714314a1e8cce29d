"""The Lorebook tab, split by concern.

- :mod:`.words`: field words (logic, position, role) and the comma-separated key text.
- :mod:`.rows`: :class:`EntryRow` and building the rows from the chat's books and typed traces.
- :mod:`.status`: a trace record in words and colours (from ``engine.vocabulary``).
- :mod:`.table_model`: the read-only table adapter and its columns (item roles: :mod:`gui.roles`).
- :mod:`.proxy`: sorting and the "fired only" filter.
- :mod:`.entry_form`: the entry form.
- :mod:`.test_text`: the test box's engine call and its worker.
- :mod:`.panel`: :class:`LorebookTab`, which puts them together.
"""

from __future__ import annotations

from .entry_form import EntryForm
from .panel import TEST_TEXT_DEBOUNCE_MS, LorebookTab
from .proxy import EntriesProxy
from .rows import EntryRow, build_rows, index_trace, trace_key
from .table_model import COLUMN_INDEX, COLUMNS, LorebookEntriesModel
from .test_text import TextTestOutcome, TextTestRunner, run_text_test
from .words import LOGIC_WORDS, POSITION_WORDS, ROLE_WORDS, join_keys, split_keys

__all__ = [
    "COLUMNS", "COLUMN_INDEX", "LOGIC_WORDS", "POSITION_WORDS", "ROLE_WORDS", "TEST_TEXT_DEBOUNCE_MS",
    "EntriesProxy", "EntryForm", "EntryRow", "LorebookEntriesModel", "LorebookTab",
    "TextTestOutcome", "TextTestRunner", "build_rows", "index_trace", "join_keys", "run_text_test",
    "split_keys", "trace_key",
]
