"""Theme helpers: light or dark palette, and the status colours of ``engine.vocabulary`` as Qt colours."""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget

from engine.vocabulary import status_colours


def is_dark(widget: QWidget) -> bool:
    """``True`` when the widget's palette has a dark base (dark theme)."""
    return widget.palette().color(QPalette.ColorRole.Base).lightness() < 128


def status_hex(status: str, dark: bool = False) -> tuple[str, str]:
    """``(foreground, background)`` ``#rrggbb`` colours of a status (block, trace row or audit).

    ``status`` is ``kept``, ``excluded``, ``truncated``, ``summarized``, ``inactive``,
    ``warning`` or an audit status (``completed``, ``failed``, ``cancelled``, ``pending``);
    anything else gets the ``inactive`` colours (``engine.vocabulary.status_colours``).
    """
    return status_colours(status, dark)


def status_qcolors(status: str, dark: bool = False) -> tuple[QColor, QColor]:
    """:func:`status_hex` as ``(foreground, background)`` :class:`QColor` objects."""
    fg, bg = status_colours(status, dark)
    return QColor(fg), QColor(bg)
