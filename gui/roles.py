"""Custom Qt item data roles of every GUI model and list, in one place (numbers unique).

Each role means one thing wherever it is used: :data:`ROW_ROLE` is the row's own object (a
``PreviewBlock`` or ``CompareRow`` in the audit tables, an ``EntryRow`` in the lorebook
editor), :data:`SORT_ROLE` a value that sorts right (numbers as numbers).
"""

from __future__ import annotations

from PySide6.QtCore import Qt

_USER = int(Qt.ItemDataRole.UserRole)

#: The id of a prompt-order item (``PromptOrderItem.identifier``) in the prompt setup's list.
PROMPT_ID_ROLE = _USER
#: The row's own object (audit tables, lorebook editor).
ROW_ROLE = _USER + 1
#: A sortable value: numbers as numbers, text lower-cased (blocks table, lorebook editor, lint report).
SORT_ROLE = _USER + 2
#: The ``PreviewBlock`` of a blocks-table row.
BLOCK_ROLE = _USER + 3

# chat view (gui.models.chat_model)
#: The ``ChatMessage`` of a chat-view row.
MESSAGE_ROLE = _USER + 10
#: The message's fate in the current preview (status, reason, tokens).
FATE_ROLE = _USER + 11
#: The progress event of a row that stands for a generation under way.
PROGRESS_ROLE = _USER + 12
#: ``True`` on the row of the oldest message that still fits (the fit marker).
MARKER_ROLE = _USER + 13
#: ``True`` when the row is shown greyed (not sent in the current preview).
GREYED_ROLE = _USER + 14
#: The speaker name shown for the row.
SPEAKER_ROLE = _USER + 15
#: On the message row the compaction summary is sent before: the summary's preview block.
SUMMARY_ROLE = _USER + 16
#: ``(pinned, manual_excluded)`` as the buttons show them (a pending click, else the preview, else the message).
FLAGS_ROLE = _USER + 17

# library (gui.widgets.library_panel, gui.widgets.library_tabs)
#: The chat id of a library row.
CHAT_ID_ROLE = _USER + 20
#: Lower-cased text the library filters search.
SEARCH_ROLE = _USER + 21
#: The second line of a library row (message count, character, audit mark).
SUBTITLE_ROLE = _USER + 22
#: The id of a library-tab item (character, lorebook, persona).
ID_ROLE = _USER + 40
