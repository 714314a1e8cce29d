"""The main window's layout state: tabs, splitter sizes, geometry (split from :mod:`gui.main_window`).

The centre column (prompt blocks, chat) gets :data:`CENTRE_PREFERRED_W` first; the inspector
yields first as the window narrows, then the library. Geometry, layout, splitter sizes, tabs and
the open chat persist in ``QSettings``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray
from PySide6.QtGui import QResizeEvent, QShowEvent

from .tabs import CENTRE_TABS, INSPECTOR_TABS
from .widgets.library_panel import DEFAULT_WIDTH as LIBRARY_WIDTH

if TYPE_CHECKING:
    from .main_window import MainWindow

#: The inspector column's default (widest) and smallest width (px); it yields first when the
#: window is narrow, so the prompt blocks keep :data:`CENTRE_PREFERRED_W`.
INSPECTOR_WIDTH, INSPECTOR_MIN_W = 460, 300
#: The width (px) the centre column (prompt blocks, chat) should get before the inspector grows.
CENTRE_PREFERRED_W = 780
#: The library column on narrow windows (px; :data:`LIBRARY_WIDTH` from 1400 px on).
LIBRARY_NARROW_W = 210


class WindowStateMixin:
    """Tabs by name, splitter sizes that keep the centre wide, and the saved layout."""

    def select_tab(self: MainWindow, name: str) -> bool:
        """Show tab ``name`` (``blocks``, ``chat``, ``block``, ``lorebook``, ``audit``, ``settings``)."""
        key = name.strip().lower()
        if key == "setup":
            self.inspector_tabs.setCurrentWidget(self.library_setup.setup_panel)
            return True
        if key in ("characters", "lorebooks", "personas", "chats"):
            self.library_setup.tabs.show_kind(key[:-1])
            return True
        if key == "entry":
            self.inspector_tabs.setCurrentIndex(INSPECTOR_TABS.index("lorebook"))
            self.lorebook_tab.bottom_tabs.setCurrentWidget(self.library_setup.entry_editor)
            return True
        if key in CENTRE_TABS:
            self.centre_tabs.setCurrentIndex(CENTRE_TABS.index(key))
            return True
        if key in INSPECTOR_TABS:
            self.inspector_tabs.setCurrentIndex(INSPECTOR_TABS.index(key))
            return True
        return False

    def restore_state(self: MainWindow) -> None:
        """Window geometry, layout, splitter sizes and tabs from ``QSettings``."""
        s = self.ctx.settings
        geometry = s.value("window/geometry")
        if isinstance(geometry, QByteArray | bytes):
            self.restoreGeometry(geometry)
        state = s.value("window/state")
        if isinstance(state, QByteArray | bytes):
            self.restoreState(state)
        splitter = s.value("window/splitter")
        if isinstance(splitter, QByteArray | bytes):
            self._splitter_restored = self.splitter.restoreState(splitter)
        for key, tabs in (("window/centre_tab", self.centre_tabs), ("window/inspector_tab", self.inspector_tabs)):
            with contextlib.suppress(TypeError, ValueError):
                tabs.setCurrentIndex(int(s.value(key, 0)))

    def default_splitter_sizes(self: MainWindow, width: int | None = None) -> list[int]:
        """``[library, centre, inspector]`` for a splitter ``width`` px wide.

        The centre gets :data:`CENTRE_PREFERRED_W` first; the inspector yields first (down to
        :data:`INSPECTOR_MIN_W`), then the library (down to :data:`LIBRARY_NARROW_W`).
        """
        width = int(width if width is not None else self.splitter.width()) - 2 * self.splitter.handleWidth()
        library = LIBRARY_WIDTH if width >= 1400 else LIBRARY_NARROW_W
        inspector = max(INSPECTOR_MIN_W, min(INSPECTOR_WIDTH, width - library - CENTRE_PREFERRED_W))
        centre = max(200, width - library - inspector)
        return [library, centre, inspector]

    def _default_splitter_sizes(self: MainWindow) -> None:
        """Library and inspector at their default widths, the centre gets the rest."""
        self.splitter.setSizes(self.default_splitter_sizes())

    def resizeEvent(self: MainWindow, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # a narrower window takes from the inspector first, then the library, not from the blocks
        sizes = self.splitter.sizes()
        if len(sizes) == 3 and self.isVisible() and sizes[1] < CENTRE_PREFERRED_W and sizes[2] > INSPECTOR_MIN_W:
            give = min(CENTRE_PREFERRED_W - sizes[1], sizes[2] - INSPECTOR_MIN_W)
            self.splitter.setSizes([sizes[0], sizes[1] + give, sizes[2] - give])

    def showEvent(self: MainWindow, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._splitter_restored and not self._splitter_shown:
            # the first show is the first time the real width is known (no saved layout)
            self._splitter_shown = True
            self._default_splitter_sizes()

    def save_state(self: MainWindow) -> None:
        """Persist geometry, layout, splitter sizes, tabs and the open chat."""
        s = self.ctx.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/splitter", self.splitter.saveState())
        s.setValue("window/centre_tab", self.centre_tabs.currentIndex())
        s.setValue("window/inspector_tab", self.inspector_tabs.currentIndex())
        if self.ctx.document.chat_id:
            s.setValue("library/last_chat", self.ctx.document.chat_id)
        s.sync()

