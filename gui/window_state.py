"""The main window's layout state: tabs, splitter sizes, geometry (split from :mod:`gui.main_window`).

The centre column (prompt blocks, chat) gets :data:`CENTRE_PREFERRED_W` first; the inspector
yields first as the window narrows, then the library. Geometry, layout, splitter sizes, tabs and
the open chat persist in ``QSettings``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray

from .tabs import CENTRE_TABS, INSPECTOR_TABS
from .widgets.library_panel import DEFAULT_WIDTH as LIBRARY_WIDTH

if TYPE_CHECKING:
    from .window_parts import LayoutWindow

#: The inspector column's default (widest) and smallest width (px); it yields first when the
#: window is narrow, so the prompt blocks keep :data:`CENTRE_PREFERRED_W`.
INSPECTOR_WIDTH, INSPECTOR_MIN_W = 460, 300
#: The width (px) the centre column (prompt blocks, chat) should get before the inspector grows.
CENTRE_PREFERRED_W = 780
#: The library column on narrow windows (px; :data:`LIBRARY_WIDTH` from 1400 px on).
LIBRARY_NARROW_W = 210


class WindowState:
    """Tabs by name, splitter sizes that keep the centre wide, and the saved layout of one window.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.LayoutWindow`); its splitter and tab widgets exist
        when this is built, its library setup by the time a ``setup`` tab is asked for.

    Attributes
    ----------
    splitter_restored:
        ``True`` once sizes came from a saved layout (or a caller set them and wants them kept):
        the first show then leaves the splitter alone.
    splitter_shown:
        ``True`` after the first show applied the default sizes.
    """

    def __init__(self, window: LayoutWindow) -> None:
        self._window = window
        self.splitter_restored = False
        self.splitter_shown = False

    def select_tab(self, name: str) -> bool:
        """Show tab ``name`` (``blocks``, ``chat``, ``block``, ``lorebook``, ``audit``, ``settings``, ...);
        ``False`` for a name :data:`gui.tabs.TAB_NAMES` does not list."""
        w = self._window
        key = name.strip().lower()
        if key == "setup":
            w.inspector_tabs.setCurrentWidget(w.library_setup.setup_panel)
        elif key in ("characters", "lorebooks", "personas", "chats"):
            w.library_setup.tabs.show_kind(key[:-1])
        elif key == "entry":
            w.inspector_tabs.setCurrentIndex(INSPECTOR_TABS.index("lorebook"))
            w.lorebook_tab.bottom_tabs.setCurrentWidget(w.library_setup.entry_editor)
        elif key in CENTRE_TABS:
            w.centre_tabs.setCurrentIndex(CENTRE_TABS.index(key))
        elif key in INSPECTOR_TABS:
            w.inspector_tabs.setCurrentIndex(INSPECTOR_TABS.index(key))
        else:
            return False
        return True

    def restore(self) -> None:
        """Window geometry, layout, splitter sizes and tabs from ``QSettings``."""
        w = self._window
        s = w.ctx.settings
        geometry = s.value("window/geometry")
        if isinstance(geometry, QByteArray | bytes):
            w.restoreGeometry(geometry)
        state = s.value("window/state")
        if isinstance(state, QByteArray | bytes):
            w.restoreState(state)
        splitter = s.value("window/splitter")
        if isinstance(splitter, QByteArray | bytes):
            self.splitter_restored = w.splitter.restoreState(splitter)
        for key, tabs in (("window/centre_tab", w.centre_tabs), ("window/inspector_tab", w.inspector_tabs)):
            index = s.value(key, 0)  # an int, or its text from an INI file
            if isinstance(index, int | str):
                with contextlib.suppress(ValueError):
                    tabs.setCurrentIndex(int(index))

    def save(self) -> None:
        """Persist geometry, layout, splitter sizes, tabs and the open chat."""
        w = self._window
        s = w.ctx.settings
        s.setValue("window/geometry", w.saveGeometry())
        s.setValue("window/state", w.saveState())
        s.setValue("window/splitter", w.splitter.saveState())
        s.setValue("window/centre_tab", w.centre_tabs.currentIndex())
        s.setValue("window/inspector_tab", w.inspector_tabs.currentIndex())
        if w.ctx.document.chat_id:
            s.setValue("library/last_chat", w.ctx.document.chat_id)
        s.sync()

    def default_splitter_sizes(self, width: int | None = None) -> list[int]:
        """``[library, centre, inspector]`` in px for a splitter ``width`` px wide (default: its width now).

        The centre gets :data:`CENTRE_PREFERRED_W` first; the inspector yields first (down to
        :data:`INSPECTOR_MIN_W`), then the library (down to :data:`LIBRARY_NARROW_W`).
        """
        splitter = self._window.splitter
        width = int(width if width is not None else splitter.width()) - 2 * splitter.handleWidth()
        library = LIBRARY_WIDTH if width >= 1400 else LIBRARY_NARROW_W
        inspector = max(INSPECTOR_MIN_W, min(INSPECTOR_WIDTH, width - library - CENTRE_PREFERRED_W))
        centre = max(200, width - library - inspector)
        return [library, centre, inspector]

    def apply_default_sizes(self) -> None:
        """Library and inspector at their default widths, the centre gets the rest."""
        self._window.splitter.setSizes(self.default_splitter_sizes())

    def on_resized(self) -> None:
        """After the window resized: a narrower window takes from the inspector first, then the
        library, not from the blocks."""
        splitter = self._window.splitter
        sizes = splitter.sizes()
        if len(sizes) == 3 and self._window.isVisible() and sizes[1] < CENTRE_PREFERRED_W \
                and sizes[2] > INSPECTOR_MIN_W:
            give = min(CENTRE_PREFERRED_W - sizes[1], sizes[2] - INSPECTOR_MIN_W)
            splitter.setSizes([sizes[0], sizes[1] + give, sizes[2] - give])

    def on_shown(self) -> None:
        """After the window was shown: the first show is the first time the real width is known,
        so it applies the default sizes (unless a saved layout was restored)."""
        if not self.splitter_restored and not self.splitter_shown:
            self.splitter_shown = True
            self.apply_default_sizes()
