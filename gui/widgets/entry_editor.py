"""The full lorebook entry editor (issue 18): new / duplicate / delete and every entry field.

Fields and meanings follow SillyTavern 1.12.6's World Info entry (``world-info.js``
``newWorldInfoEntryTemplate`` and the entry editor): inclusion group, weight, group override and
scoring, sticky / cooldown / delay, recursion flags, per-entry case sensitivity and whole words
(tri-state: the global setting, yes, no), role for ``@depth``, character filter
(``characterFilter: {names, tags, isExclude}``), probability and scan depth.

The editor emits intents only; the window makes them undo commands.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.schema import LorebookEntry
from engine.schema.lorebook import InsertionPosition, SelectiveLogic

from .lorebook.words import LOGIC_WORDS, POSITION_WORDS, join_keys, split_keys

TRISTATE = ((None, "global setting"), (True, "yes"), (False, "no"))
ROLES = ((0, "system"), (1, "user"), (2, "assistant"))


def _tri() -> QComboBox:
    box = QComboBox()
    for value, words in TRISTATE:
        box.addItem(words, value)
    return box


def _set(box: QComboBox, value: Any) -> None:
    box.setCurrentIndex(max(0, box.findData(value)))


def _spin(lo: int, hi: int, special: str | None = None) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    if special:
        box.setSpecialValueText(special)
    return box


class EntryEditor(QScrollArea):
    """Every field of one entry, plus New / Duplicate / Delete.

    Signals
    -------
    entry_applied(str lorebook_id, object old_entry, object new_entry)
    new_requested(str lorebook_id)
    duplicate_requested(str lorebook_id, object uid)
    delete_requested(str lorebook_id, object uid)
    """

    entry_applied = Signal(str, object, object)
    new_requested = Signal(str)
    duplicate_requested = Signal(str, object)
    delete_requested = Signal(str, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("entryEditor")
        self.setWidgetResizable(True)
        self.lorebook_id: str | None = None
        self.entry: LorebookEntry | None = None
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(6, 6, 6, 6)
        self._build_header(lay)
        self._build_match_fields()
        self._build_insertion_fields()
        self._build_group_and_timing_fields()
        for combo in (self.logic, self.position, self.role, self.case_sensitive, self.whole_words, self.group_scoring):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(5)
        for w in self._fields():
            w.setMinimumWidth(48)  # the form fits the inspector: fields shrink instead of scrolling sideways
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        lay.addLayout(self._build_grid())
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip("Save the entry (undo with Ctrl+Z)")
        self.apply_button.clicked.connect(self.apply)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.apply_button)
        lay.addLayout(row)
        lay.addStretch(1)
        self.setWidget(body)
        self.load(None, None)

    def _build_header(self, lay: QVBoxLayout) -> None:
        """The book picker with New, the entry's place with Duplicate / Delete, the timer note."""
        self.book_picker = QComboBox()
        self.book_picker.setToolTip("The lorebook a new entry goes into")
        self.book_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.book_picker.setMinimumContentsLength(8)
        self.new_button = QPushButton("New entry")
        self.duplicate_button = QPushButton("Duplicate")
        self.delete_button = QPushButton("Delete")
        self.new_button.clicked.connect(self._on_new)
        self.duplicate_button.clicked.connect(self._on_duplicate)
        self.delete_button.clicked.connect(self._on_delete)
        bar = QHBoxLayout()
        bar.addWidget(self.book_picker, 1)
        bar.addWidget(self.new_button)
        lay.addLayout(bar)
        self.where = QLabel("Select an entry in the table.")
        self.where.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(self.where, 1)
        bar.addWidget(self.duplicate_button)
        bar.addWidget(self.delete_button)
        lay.addLayout(bar)
        self.timer_note = QLabel()
        self.timer_note.setObjectName("entryTimerNote")
        self.timer_note.setWordWrap(True)
        self.timer_note.hide()
        lay.addWidget(self.timer_note)

    def _build_match_fields(self) -> None:
        """Title, keys, logic, content and the switches that decide whether the entry fires."""
        self.comment = QLineEdit()
        self.keys = QLineEdit()
        self.keys.setPlaceholderText("comma-separated; /regex/i allowed")
        self.secondary = QLineEdit()
        self.logic = QComboBox()
        for logic, words in LOGIC_WORDS.items():
            self.logic.addItem(words, int(logic))
        self.content = QPlainTextEdit()
        self.content.setMinimumHeight(60)
        self.content.setMaximumHeight(110)
        self.constant = QCheckBox("Constant")
        self.constant.setToolTip("Always on")
        self.enabled = QCheckBox("Enabled")
        self.selective = QCheckBox("Selective")
        self.selective.setToolTip("Use the secondary keys with the logic")
        self.probability = QDoubleSpinBox()
        self.probability.setRange(0, 100)
        self.probability.setSuffix(" %")
        self.probability.setDecimals(0)
        self.use_probability = QCheckBox("Use probability")
        self.scan_depth = _spin(-1, 1000, "global")
        self.case_sensitive = _tri()
        self.whole_words = _tri()

    def _build_insertion_fields(self) -> None:
        """Where the content goes: order, position, depth and role."""
        self.order = QDoubleSpinBox()
        self.order.setRange(-1_000_000, 1_000_000)
        self.order.setDecimals(0)
        self.position = QComboBox()
        for pos, words in POSITION_WORDS.items():
            self.position.addItem(words, int(pos))
        self.depth_spin = _spin(0, 10_000)
        self.role = QComboBox()
        for value, words in ROLES:
            self.role.addItem(words, value)
        self.role.setToolTip("The role of the message an @depth entry is sent in")

    def _build_group_and_timing_fields(self) -> None:
        """Inclusion group, timed effects, recursion, budget and the character filter."""
        self.group = QLineEdit()
        self.group.setPlaceholderText("comma-separated")
        self.group_weight = QDoubleSpinBox()
        self.group_weight.setRange(0, 1_000_000)
        self.group_weight.setDecimals(0)
        self.group_override = QCheckBox("Prioritize")
        self.group_override.setToolTip("Group override: this entry wins its inclusion group by order")
        self.group_scoring = _tri()
        self.sticky = _spin(0, 100_000, "off")
        self.cooldown = _spin(0, 100_000, "off")
        self.delay = _spin(0, 100_000, "off")
        self.exclude_recursion = QCheckBox("Non-recursable")
        self.exclude_recursion.setToolTip("Not activated by other entries' content")
        self.prevent_recursion = QCheckBox("Prevent recursion")
        self.prevent_recursion.setToolTip("Its content does not activate other entries")
        self.delay_until_recursion = _spin(0, 1000, "off")
        self.ignore_budget = QCheckBox("Ignore budget")
        self.filter_names = QLineEdit()
        self.filter_names.setPlaceholderText("card file names (hero for hero.png), comma-separated")
        self.filter_names.setToolTip("SillyTavern compares a character filter with the card's file name "
                                     "without extension, not with the character's name")
        self.filter_exclude = QCheckBox("Exclude")
        self.filter_exclude.setToolTip("Not for these characters (else: only for them)")

    def _build_grid(self) -> QGridLayout:
        """The fields laid out: the long ones a row each, then two label / field pairs a row."""
        grid = QGridLayout()
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)

        def label(text: str) -> QLabel:
            lab = QLabel(text)
            lab.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            return lab

        r = 0
        for text, w in (("Title:", self.comment), ("Keys:", self.keys), ("Secondary:", self.secondary),
                        ("Content:", self.content), ("Char. filter:", self.filter_names)):
            grid.addWidget(label(text), r, 0)
            grid.addWidget(w, r, 1, 1, 3 if w is not self.filter_names else 2)
            if w is self.filter_names:
                grid.addWidget(self.filter_exclude, r, 3)
            r += 1
        pairs: list[tuple[str, Any, str, Any]] = [
            ("Logic:", self.logic, "", self.selective),
            ("", self.constant, "", self.enabled),
            ("Order:", self.order, "Position:", self.position),
            ("Depth:", self.depth_spin, "Role:", self.role),
            ("Probability:", self.probability, "", self.use_probability),
            ("Scan depth:", self.scan_depth, "", self.ignore_budget),
            ("Case sens.:", self.case_sensitive, "Whole words:", self.whole_words),
            ("Group:", self.group, "Weight:", self.group_weight),
            ("", self.group_override, "Scoring:", self.group_scoring),
            ("Sticky:", self.sticky, "Cooldown:", self.cooldown),
            ("Delay:", self.delay, "Until recursion:", self.delay_until_recursion),
            ("", self.exclude_recursion, "", self.prevent_recursion),
        ]
        for l1, w1, l2, w2 in pairs:
            grid.addWidget(label(l1), r, 0)
            grid.addWidget(w1, r, 1)
            grid.addWidget(label(l2), r, 2)
            grid.addWidget(w2, r, 3)
            r += 1
        return grid

    # ------------------------------------------------------------------ state
    def set_books(self, books: list[tuple[str, str]]) -> None:
        """The chat's editable lorebooks as ``(lorebook_id, name)`` for New."""
        current = self.book_picker.currentData()
        self.book_picker.clear()
        for book_id, name in books:
            self.book_picker.addItem(name, book_id)
        if current is not None:
            _set(self.book_picker, current)
        self.new_button.setEnabled(bool(books))

    def load(self, lorebook_id: str | None, entry: LorebookEntry | None, *, editable: bool = True,
             where: str = "", timers: list[str] | None = None) -> None:
        """Show ``entry`` of ``lorebook_id`` (``None``: nothing selected).

        ``timers``: the entry's running timed effects in this chat
        (:func:`engine.lorebook.running_timers`); when there are some, a note says that editing
        the entry orphans them in SillyTavern.
        """
        self.timer_note.setVisible(bool(timers) and entry is not None)
        if timers:
            self.timer_note.setText(
                f"Running timer in this chat: {', '.join(timers)}. SillyTavern finds timers by a hash of "
                "the whole entry: any edit, even of the title, orphans it (it stops applying).")
        self.lorebook_id = lorebook_id if entry is not None else None
        self.entry = entry
        e = entry or LorebookEntry()
        self.comment.setText(e.comment)
        self.keys.setText(join_keys(e.keys))
        self.secondary.setText(join_keys(e.secondary_keys))
        _set(self.logic, int(e.selective_logic))
        self.content.setPlainText(e.content)
        self.constant.setChecked(e.constant)
        self.enabled.setChecked(not e.disable)
        self.selective.setChecked(e.selective)
        self.order.setValue(float(e.order))
        _set(self.position, int(e.position))
        self.depth_spin.setValue(int(e.depth))
        _set(self.role, e.role if isinstance(e.role, int) else 0)
        self.probability.setValue(float(e.probability))
        self.use_probability.setChecked(e.use_probability)
        self.scan_depth.setValue(-1 if e.scan_depth is None else int(e.scan_depth))
        _set(self.case_sensitive, e.case_sensitive)
        _set(self.whole_words, e.match_whole_words)
        self.group.setText(e.group)
        self.group_weight.setValue(float(e.group_weight))
        self.group_override.setChecked(e.group_override)
        _set(self.group_scoring, e.use_group_scoring)
        self.sticky.setValue(int(e.sticky or 0))
        self.cooldown.setValue(int(e.cooldown or 0))
        self.delay.setValue(int(e.delay or 0))
        self.exclude_recursion.setChecked(e.exclude_recursion)
        self.prevent_recursion.setChecked(e.prevent_recursion)
        self.delay_until_recursion.setValue(int(e.delay_until_recursion or 0))
        self.ignore_budget.setChecked(e.ignore_budget)
        cf = (e.model_extra or {}).get("characterFilter")
        cf = cf if isinstance(cf, dict) else {}
        self.filter_names.setText(", ".join(str(n) for n in cf.get("names", []) or []))
        self.filter_exclude.setChecked(bool(cf.get("isExclude", False)))
        ok = entry is not None and editable
        for w in self._fields():
            w.setEnabled(ok)
        self.duplicate_button.setEnabled(ok)
        self.delete_button.setEnabled(ok)
        self.apply_button.setEnabled(ok)
        self.new_button.setEnabled(self.book_picker.count() > 0)
        if entry is None:
            self.where.setText("Select an entry in the table, or make a new one.")
        else:
            self.where.setText(where or f"Entry {e.uid}")
            if lorebook_id:
                _set(self.book_picker, lorebook_id)

    def _fields(self) -> list[QWidget]:
        return [self.comment, self.keys, self.secondary, self.logic, self.content, self.constant, self.enabled,
                self.selective, self.order, self.position, self.depth_spin, self.role, self.probability,
                self.use_probability, self.scan_depth, self.case_sensitive, self.whole_words, self.group,
                self.group_weight, self.group_override, self.group_scoring, self.sticky, self.cooldown, self.delay,
                self.exclude_recursion, self.prevent_recursion, self.delay_until_recursion, self.ignore_budget,
                self.filter_names, self.filter_exclude]

    def edited_entry(self) -> LorebookEntry | None:
        """The entry as the form shows it now (``None`` when nothing is loaded)."""
        if self.entry is None:
            return None
        data = self.entry.model_dump(mode="python")
        order = self.order.value()
        prob = self.probability.value()
        weight = self.group_weight.value()
        data.update({
            "comment": self.comment.text(), "keys": split_keys(self.keys.text()),
            "secondary_keys": split_keys(self.secondary.text()),
            "selective_logic": SelectiveLogic(self.logic.currentData()), "content": self.content.toPlainText(),
            "constant": self.constant.isChecked(), "disable": not self.enabled.isChecked(),
            "selective": self.selective.isChecked(),
            "order": int(order) if float(order).is_integer() else order,
            "position": InsertionPosition(self.position.currentData()), "depth": self.depth_spin.value(),
            "role": self.role.currentData(),
            "probability": int(prob) if float(prob).is_integer() else prob,
            "use_probability": self.use_probability.isChecked(),
            "scan_depth": None if self.scan_depth.value() < 0 else self.scan_depth.value(),
            "case_sensitive": self.case_sensitive.currentData(), "match_whole_words": self.whole_words.currentData(),
            "group": self.group.text().strip(),
            "group_weight": int(weight) if float(weight).is_integer() else weight,
            "group_override": self.group_override.isChecked(), "use_group_scoring": self.group_scoring.currentData(),
            "sticky": self.sticky.value() or (None if self.entry.sticky is None else 0),
            "cooldown": self.cooldown.value() or (None if self.entry.cooldown is None else 0),
            "delay": self.delay.value() or (None if self.entry.delay is None else 0),
            "exclude_recursion": self.exclude_recursion.isChecked(),
            "prevent_recursion": self.prevent_recursion.isChecked(),
            "delay_until_recursion": self.delay_until_recursion.value(),
            "ignore_budget": self.ignore_budget.isChecked(),
        })
        names = [n.strip() for n in self.filter_names.text().split(",") if n.strip()]
        old_cf = (self.entry.model_extra or {}).get("characterFilter")
        if names or self.filter_exclude.isChecked() or isinstance(old_cf, dict):
            cf = dict(old_cf) if isinstance(old_cf, dict) else {"tags": []}
            cf.update({"names": names, "isExclude": self.filter_exclude.isChecked()})
            data["characterFilter"] = cf
        return LorebookEntry.model_validate(data)

    def apply(self) -> bool:
        """Emit ``entry_applied`` when the form differs from the loaded entry."""
        new = self.edited_entry()
        if new is None or self.lorebook_id is None or new == self.entry:
            return False
        self.entry_applied.emit(self.lorebook_id, self.entry, new)
        return True

    def _on_new(self) -> None:
        book = self.book_picker.currentData()
        if book:
            self.new_requested.emit(book)

    def _on_duplicate(self) -> None:
        if self.entry is not None and self.lorebook_id:
            self.duplicate_requested.emit(self.lorebook_id, self.entry.uid)

    def _on_delete(self) -> None:
        if self.entry is not None and self.lorebook_id:
            self.delete_requested.emit(self.lorebook_id, self.entry.uid)
