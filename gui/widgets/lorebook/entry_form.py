"""The Lorebook tab's entry form: the common fields of one entry, edited in place.

The form reports what the user changed (:meth:`EntryForm.changes`, a ``model_copy`` update) and
asks for it to be applied (:attr:`EntryForm.apply_requested`); the tab turns that into an
``entry_edited`` intent. The full editor with every field is :mod:`gui.widgets.entry_editor`.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from engine.schema import InsertionPosition, LorebookEntry, SelectiveLogic

from .rows import EntryRow
from .status import fired_text, why_text
from .words import LOGIC_WORDS, POSITION_WORDS, entry_title, escape, join_keys, split_keys


def _label(text: str) -> QLabel:
    """A form label, right-aligned next to its field."""
    lab = QLabel(text)
    lab.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return lab


class EntryForm(QGroupBox):
    """Editor of one entry. :meth:`changes` gives the ``model_copy`` update of what the user changed.

    Only fields whose widget value differs from what :meth:`load` put there are reported, so a
    value the widget cannot show exactly (an order of 100.25 in a whole-number box) is never
    rewritten by accident.
    """

    apply_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Entry", parent)
        self._row: EntryRow | None = None
        self._loaded: dict[str, Any] = {}
        self._loading = False

        grid = QGridLayout(self)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        self.where = QLabel("Select an entry in the table.")
        self.where.setWordWrap(True)
        grid.addWidget(self.where, 0, 0, 1, 4)
        self._build_keys(grid)
        self._build_short_fields(grid)
        self._build_flags_and_content(grid)
        self._build_buttons(grid)
        self._connect_fields()
        self.load(None)

    def _build_keys(self, grid: QGridLayout) -> None:
        """Rows 1-3: title, keys, secondary keys."""
        label = _label
        self.comment = QLineEdit()
        self.comment.setPlaceholderText("title / memo")
        grid.addWidget(label("Title:"), 1, 0)
        grid.addWidget(self.comment, 1, 1, 1, 3)
        self.keys = QLineEdit()
        self.keys.setPlaceholderText("comma-separated; /regex/i allowed")
        grid.addWidget(label("Keys:"), 2, 0)
        grid.addWidget(self.keys, 2, 1, 1, 3)
        self.secondary = QLineEdit()
        self.secondary.setPlaceholderText("optional filter keys")
        grid.addWidget(label("Secondary:"), 3, 0)
        grid.addWidget(self.secondary, 3, 1, 1, 3)

    def _build_short_fields(self, grid: QGridLayout) -> None:
        """Row 4: logic, position, order, depth, probability and scan depth, in pairs when there is room."""
        label = _label
        self.logic = QComboBox()
        for logic, words in LOGIC_WORDS.items():
            self.logic.addItem(words, int(logic))
        self.position = QComboBox()
        for pos, words in POSITION_WORDS.items():
            self.position.addItem(words, int(pos))
        for combo in (self.logic, self.position):
            # Let the panel shrink: combos otherwise claim their longest item's width.
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(6)
        self.order = QDoubleSpinBox()
        self.order.setRange(-1_000_000, 1_000_000)
        self.order.setDecimals(0)
        self.depth_spin = QSpinBox()
        self.depth_spin.setRange(0, 10_000)
        self.probability = QDoubleSpinBox()
        self.probability.setRange(0, 100)
        self.probability.setDecimals(0)
        self.probability.setSuffix(" %")
        self.scan_depth = QSpinBox()
        self.scan_depth.setRange(-1, 1000)
        self.scan_depth.setSpecialValueText("global")
        # The six short fields sit in pairs when there is room, one per row when narrow.
        self._pairs = [
            (label("Logic:"), self.logic, label("Position:"), self.position),
            (label("Order:"), self.order, label("Depth:"), self.depth_spin),
            (label("Probability:"), self.probability, label("Scan depth:"), self.scan_depth),
        ]
        self._pair_grid = QGridLayout()
        self._pair_grid.setContentsMargins(0, 0, 0, 0)
        self._two_columns: bool | None = None
        self._arrange_pairs(True)
        grid.addLayout(self._pair_grid, 4, 0, 1, 4)

    def _build_flags_and_content(self, grid: QGridLayout) -> None:
        """Rows 7-9: the Constant / Enabled switches, the content and the preview's word on the entry."""
        label = _label
        flags = QHBoxLayout()
        self.constant = QCheckBox("Constant")
        self.constant.setToolTip("Always on and protected: never dropped for the budget")
        self.enabled = QCheckBox("Enabled")
        flags.addWidget(self.constant)
        flags.addWidget(self.enabled)
        flags.addStretch(1)
        grid.addLayout(flags, 7, 0, 1, 4)

        self.content = QPlainTextEdit()
        self.content.setMinimumHeight(70)
        content_label = label("Content:")
        content_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        grid.addWidget(content_label, 8, 0)
        grid.addWidget(self.content, 8, 1, 1, 3)
        grid.setRowStretch(8, 1)

        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        grid.addWidget(label("Preview:"), 9, 0)
        grid.addWidget(self.status, 9, 1, 1, 3)

    def _build_buttons(self, grid: QGridLayout) -> None:
        """Row 10: Revert and Apply."""
        buttons = QHBoxLayout()
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip("Save the entry (undo with Ctrl+Z)")
        self.revert_button = QPushButton("Revert")
        buttons.addStretch(1)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.apply_button)
        grid.addLayout(buttons, 10, 0, 1, 4)

    def _connect_fields(self) -> None:
        self.apply_button.clicked.connect(self.apply_requested)
        self.revert_button.clicked.connect(self._on_revert_button_clicked)
        for edit in (self.comment, self.keys, self.secondary):
            edit.returnPressed.connect(self.apply_requested)
            edit.textChanged.connect(self._on_field_changed)
        for box in (self.constant, self.enabled):
            box.toggled.connect(self._on_field_changed)
        for combo in (self.logic, self.position):
            combo.currentIndexChanged.connect(self._on_field_changed)
        for spin in (self.order, self.depth_spin, self.probability, self.scan_depth):
            spin.valueChanged.connect(self._on_field_changed)
        self.content.textChanged.connect(self._on_field_changed)

    # -- layout
    #: Below this width (px) the short fields go one per row.
    NARROW_WIDTH = 440

    def _arrange_pairs(self, two_columns: bool) -> None:
        if two_columns == self._two_columns:
            return
        self._two_columns = two_columns
        g = self._pair_grid
        for pair in self._pairs:
            for w in pair:
                g.removeWidget(w)
        for r, (lab1, w1, lab2, w2) in enumerate(self._pairs):
            if two_columns:
                g.addWidget(lab1, r, 0)
                g.addWidget(w1, r, 1)
                g.addWidget(lab2, r, 2)
                g.addWidget(w2, r, 3)
            else:
                g.addWidget(lab1, 2 * r, 0)
                g.addWidget(w1, 2 * r, 1)
                g.addWidget(lab2, 2 * r + 1, 0)
                g.addWidget(w2, 2 * r + 1, 1)
        for c in range(4):
            g.setColumnStretch(c, 1 if (c in (1, 3) and two_columns) or (c == 1 and not two_columns) else 0)

    def resizeEvent(self, event: Any) -> None:
        self._arrange_pairs(event.size().width() >= self.NARROW_WIDTH)
        super().resizeEvent(event)

    # -- state
    def row(self) -> EntryRow | None:
        """The row the form was loaded with (``None``: empty form)."""
        return self._row

    def load(self, row: EntryRow | None) -> None:
        """Fill the form from ``row`` (``None`` clears and disables it)."""
        self._loading = True
        try:
            self._row = row
            e = row.entry if row is not None else LorebookEntry()
            self.comment.setText(e.comment)
            self.keys.setText(join_keys(e.keys))
            self.secondary.setText(join_keys(e.secondary_keys))
            self.logic.setCurrentIndex(max(0, self.logic.findData(int(e.selective_logic))))
            self.constant.setChecked(e.constant)
            self.enabled.setChecked(not e.disable)
            self.order.setValue(float(e.order))
            self.position.setCurrentIndex(max(0, self.position.findData(int(e.position))))
            self.depth_spin.setValue(int(e.depth))
            self.probability.setValue(float(e.probability))
            self.scan_depth.setValue(-1 if e.scan_depth is None else int(e.scan_depth))
            self.content.setPlainText(e.content)
            self._loaded = self._values()
        finally:
            self._loading = False
        editable = row is not None and row.editable
        for w in (self.comment, self.keys, self.secondary, self.logic, self.constant, self.enabled,
                  self.order, self.position, self.depth_spin, self.probability, self.scan_depth):
            w.setEnabled(editable)
        self.content.setReadOnly(not editable)
        if row is None:
            self.where.setText("Select an entry in the table.")
            self.status.setText("")
        else:
            where = f"<b>{escape(row.book_name or 'Book')}</b> · {escape(entry_title(row.entry))}"
            if not row.editable:
                where += ("<br><i>Embedded in the character card: read-only here.</i>" if row.embedded else
                          "<br><i>This lorebook is not in the library: read-only here.</i>")
            self.where.setText(where)
            self.set_status(row)
        self._update_buttons()

    def set_status(self, row: EntryRow) -> None:
        """Show what the preview said about ``row``: fired or why not, and its tokens and budget share."""
        rec = row.trace
        if rec is None:
            self.status.setText("no preview yet")
            return
        parts = [f"{fired_text(rec)} — {why_text(rec)}"]
        tokens = row.tokens
        if tokens is not None:
            share = row.share
            parts.append(f"{tokens:,} tokens" + (f" ({share * 100:.1f} % of the {row.budget:,}-token "
                                                  "lorebook budget)" if share is not None else ""))
        self.status.setText("\n".join(parts))

    def is_dirty(self) -> bool:
        """Whether the user changed a field since :meth:`load`."""
        return self._row is not None and bool(self.changes())

    def _values(self) -> dict[str, Any]:
        return {
            "comment": self.comment.text(),
            "keys": tuple(split_keys(self.keys.text())),
            "secondary_keys": tuple(split_keys(self.secondary.text())),
            "selective_logic": self.logic.currentData(),
            "constant": self.constant.isChecked(),
            "disable": not self.enabled.isChecked(),
            "order": self.order.value(),
            "position": self.position.currentData(),
            "depth": self.depth_spin.value(),
            "probability": self.probability.value(),
            "scan_depth": self.scan_depth.value(),
            "content": self.content.toPlainText(),
        }

    def changes(self) -> dict[str, Any]:
        """``{field: new value}`` for the fields the user changed since :meth:`load`."""
        if self._row is None:
            return {}
        now = self._values()
        out: dict[str, Any] = {}
        for name, value in now.items():
            if value == self._loaded.get(name):
                continue
            if name in ("keys", "secondary_keys"):
                out[name] = list(value)
            elif name == "selective_logic":
                out[name] = SelectiveLogic(value)
            elif name == "position":
                out[name] = InsertionPosition(value)
            elif name == "scan_depth":
                out[name] = None if value < 0 else int(value)
            elif name in ("order", "probability"):
                out[name] = int(value) if float(value).is_integer() else float(value)
            else:
                out[name] = value
        return out

    def set_values(self, update: dict[str, Any]) -> None:
        """Put ``update`` (a :meth:`changes`-style dict) into the widgets, as if typed."""
        for name, value in update.items():
            if name == "comment":
                self.comment.setText(value)
            elif name == "keys":
                self.keys.setText(join_keys(list(value)))
            elif name == "secondary_keys":
                self.secondary.setText(join_keys(list(value)))
            elif name == "selective_logic":
                self.logic.setCurrentIndex(max(0, self.logic.findData(int(value))))
            elif name == "constant":
                self.constant.setChecked(bool(value))
            elif name == "disable":
                self.enabled.setChecked(not value)
            elif name == "order":
                self.order.setValue(float(value))
            elif name == "position":
                self.position.setCurrentIndex(max(0, self.position.findData(int(value))))
            elif name == "depth":
                self.depth_spin.setValue(int(value))
            elif name == "probability":
                self.probability.setValue(float(value))
            elif name == "scan_depth":
                self.scan_depth.setValue(-1 if value is None else int(value))
            elif name == "content":
                self.content.setPlainText(value)
        self._update_buttons()

    def _update_buttons(self) -> None:
        dirty = self.is_dirty()
        editable = self._row is not None and self._row.editable
        self.apply_button.setEnabled(editable and dirty)
        self.revert_button.setEnabled(dirty)

    def _on_field_changed(self, *_: Any) -> None:
        if not self._loading:
            self._update_buttons()

    def _on_revert_button_clicked(self) -> None:
        self.load(self._row)
