"""A one-line label that elides its text ("…") when narrower than the text, full text as tooltip."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """A :class:`QLabel` for plain one-line text that never forces its layout wider.

    The full text is always available: :meth:`text` returns it and the tooltip shows it whenever
    the label is too narrow (or ``always_tooltip`` is set). ``mode`` is where the "…" goes.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None, *,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight, always_tooltip: bool = False) -> None:
        super().__init__(text, parent)
        self._mode = mode
        self._always_tooltip = always_tooltip
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(24)
        self._sync_tooltip()

    def setText(self, text: str) -> None:
        super().setText(text)
        self._sync_tooltip()

    def minimumSizeHint(self) -> QSize:
        return QSize(24, super().minimumSizeHint().height())

    def is_elided(self) -> bool:
        """Whether the text is shown shortened at the current width."""
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def displayed_text(self) -> str:
        """The text as painted (with "…" when elided)."""
        return self.fontMetrics().elidedText(self.text(), self._mode, max(0, self.contentsRect().width()))

    def _sync_tooltip(self) -> None:
        show = self._always_tooltip or self.is_elided()
        self.setToolTip(self.text() if show and self.text() else "")

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._sync_tooltip()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setFont(self.font())
        p.setPen(self.palette().color(self.foregroundRole()))
        p.drawText(self.contentsRect(), int(self.alignment() | Qt.AlignmentFlag.AlignVCenter), self.displayed_text())
