"""The names of the window's tabs, as ``--tab`` and :meth:`gui.main_window.MainWindow.select_tab` accept them.

Kept free of Qt so that ``loomscope gui --help`` (:mod:`gui.cli`) lists them without loading Qt.
"""

from __future__ import annotations

#: The centre column's tabs (prompt blocks, chat, the prompt text of issue 26).
CENTRE_TABS = ("blocks", "chat", "prompt")
#: The inspector column's tabs.
INSPECTOR_TABS = ("block", "lorebook", "audit", "settings")
#: Every name ``--tab`` / ``MainWindow.select_tab`` accepts: the centre and inspector tabs, then the
#: library-setup views.
TAB_NAMES = CENTRE_TABS + INSPECTOR_TABS + ("setup", "entry", "chats", "characters", "lorebooks", "personas")
