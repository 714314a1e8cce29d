"""The next-speaker picker of a group chat (issue 27 item 7).

Shown above the prompt only when the open chat is a SillyTavern group chat: "Auto" (the member
SillyTavern's activation strategy picks, :func:`engine.assembly.st_group.next_speaker`) or one
member by name. A choice emits :attr:`SpeakerPicker.speaker_chosen`; the window hands it to the
document (:meth:`gui.document.ChatDocument.set_group_speaker`), which previews that member's
prompt. Members whose card is missing are listed greyed out (SillyTavern leaves them out).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from engine.schema.sillytavern import GroupSetup

#: The combo box's first entry.
AUTO_LABEL = "Auto (SillyTavern's pick)"


class SpeakerPicker(QWidget):
    """"Next speaker: [Auto | member…]" for a group chat; hidden for any other chat.

    Signals
    -------
    speaker_chosen(object):
        The member's name, or ``None`` for Auto.
    """

    speaker_chosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speakerPicker")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel("Next speaker:", self)
        self.combo = QComboBox(self)
        self.combo.setObjectName("speakerCombo")
        self.combo.setToolTip("Group chat: whose next reply the prompt is built for (SillyTavern's "
                              "generateGroupWrapper). Auto: the member its activation strategy picks.")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.label.setBuddy(self.combo)
        lay.addWidget(self.label)
        lay.addWidget(self.combo)
        self.combo.activated.connect(self._on_activated)
        self.hide()

    def set_group(self, group: GroupSetup | None, speaker: str | None = None) -> None:
        """Show ``group``'s members (``None``: hide), with ``speaker`` (or Auto) selected; emits nothing."""
        self.combo.blockSignals(True)
        try:
            self.combo.clear()
            if group is None:
                self.hide()
                return
            self.combo.addItem(AUTO_LABEL, None)
            model = self.combo.model()
            for m in group.members:
                if m.character is None:
                    self.combo.addItem(f"{m.name or m.avatar} (card missing)", None)
                    if isinstance(model, QStandardItemModel):
                        item = model.item(self.combo.count() - 1)
                        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
                    continue
                muted = " (muted)" if m.avatar in group.disabled_members else ""
                self.combo.addItem(f"{m.name}{muted}", m.name)
            at = self.combo.findData(speaker) if speaker else 0
            self.combo.setCurrentIndex(max(0, at))
            self.show()
        finally:
            self.combo.blockSignals(False)

    def _on_activated(self, index: int) -> None:
        self.speaker_chosen.emit(self.combo.itemData(index))


__all__ = ["AUTO_LABEL", "SpeakerPicker"]
