"""The per-chat prompt setup editor (issue 18): lorebooks by scope, persona, prompts, Author's
Note, Prompt Manager order, World Info settings, model and budget.

The panel only emits intents: ``setup_edited(SetupState new, str label)`` for anything stored on
the chat, ``persona_edited(str persona_id, Persona new)`` for the library persona's text. The
window turns them into undo commands (:mod:`gui.setup_commands`) and calls :meth:`set_state`
again with what the library now holds. Field meanings follow SillyTavern 1.12.6 (Prompt
Manager ``PromptManager.js``, ``authors-note.js``, ``power-user.js`` persona positions,
``world-info.js`` settings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.schema import Persona, WorldInfoSettings
from engine.schema.sillytavern import PromptOrderItem, SillyTavernSetup

from ..roles import PROMPT_ID_ROLE
from ..setup_commands import SetupState
from .auto_apply import AutoApply, hold
from .text_completion_setup import TextCompletionSetupBox

if TYPE_CHECKING:  # the storage package (SQLAlchemy) loads with the store, not with this widget
    from engine.storage.models import LorebookSummary, PersonaSummary

SCOPES = ("chat", "character", "global")
SCOPE_TIPS = {
    "chat": "The chat's own lorebook (SillyTavern chat lore): scanned first",
    "character": "Linked to the character (the card's world and extra books)",
    "global": "Active for every chat in SillyTavern (globalSelect)",
}
#: SillyTavern ``persona_description_positions`` → words.
PERSONA_POSITIONS = ((0, "In story string / prompt"), (1, "After character"), (2, "Top of Author's Note"),
                     (3, "Bottom of Author's Note"), (4, "In chat at depth"), (9, "Nowhere"))
#: Author's Note ``note_position`` (``extension_prompt_types``) → words.
NOTE_POSITIONS = ((1, "In chat at depth"), (0, "After main prompt"), (2, "Before main prompt"), (-1, "Off"))
ROLES = ((0, "system"), (1, "user"), (2, "assistant"))
STRATEGIES = ("evenly", "character_first", "global_first")
RULES = ("sillytavern", "loomscope")


def _combo(items: tuple[tuple[Any, str], ...] | tuple[str, ...]) -> QComboBox:
    box = QComboBox()
    for item in items:
        if isinstance(item, tuple):
            box.addItem(item[1], item[0])
        else:
            box.addItem(item, item)
    return box


def _set_combo(box: QComboBox, value: Any) -> None:
    i = box.findData(value)
    box.setCurrentIndex(max(0, i))


def _spin(lo: int, hi: int, special: str | None = None) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    if special:
        box.setSpecialValueText(special)
    return box


def _text(height: int = 70) -> QPlainTextEdit:
    edit = QPlainTextEdit()
    edit.setMinimumHeight(height)
    edit.setMaximumHeight(int(height * 1.6))
    return edit


class PromptSetupPanel(QScrollArea):
    """The chat's prompt setup; every change is emitted as one undoable intent.

    Signals
    -------
    setup_edited(object SetupState, str label)
    persona_edited(str persona_id, object Persona)
    """

    setup_edited = Signal(object, str)
    persona_edited = Signal(str, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("promptSetup")
        self.setWidgetResizable(True)
        self.state: SetupState | None = None
        self._books: list[LorebookSummary] = []
        self._personas: list[PersonaSummary] = []
        self._persona: Persona | None = None
        self._loading = False
        body = QWidget()
        lay = self._body_layout = QVBoxLayout(body)
        lay.setContentsMargins(6, 6, 6, 6)
        self.heading = QLabel("No chat open.")
        self.heading.setWordWrap(True)
        lay.addWidget(self.heading)
        lay.addWidget(self._build_lorebooks())
        lay.addWidget(self._build_persona())
        self.st_button = QPushButton("Use SillyTavern prompt setup for this chat")
        self.st_button.setToolTip("Assemble this chat as SillyTavern's Chat Completion does, with its "
                                  "default Prompt Manager prompts and order (undoable)")
        self.st_button.clicked.connect(self.enable_sillytavern)
        lay.addWidget(self.st_button)
        # issue 26: SillyTavern's Advanced Formatting (instruct / context templates, Text Completion)
        self.text_completion = TextCompletionSetupBox()
        self.text_completion.edited.connect(
            lambda tc, label: self._emit_st(label, text_completion=tc))
        self.text_completion.start_reply_with_edited.connect(
            lambda text: self._emit_st("Edit Start Reply With", start_reply_with=text))
        lay.addWidget(self.text_completion)
        lay.addWidget(self._build_prompts())
        lay.addWidget(self._build_note())
        lay.addWidget(self._build_order())
        lay.addWidget(self._build_world_info())
        lay.addWidget(self._build_model())
        lay.addStretch(1)
        self.setWidget(body)
        # the form fits the inspector's width: fields shrink instead of scrolling sideways
        for cls in (QSpinBox, QDoubleSpinBox, QComboBox, QLineEdit, QPlainTextEdit):
            for w in body.findChildren(cls):
                w.setMinimumWidth(48)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.auto_apply = self._apply_as_you_type()
        self.set_state(None)

    # ------------------------------------------------------------------ sections
    def _build_lorebooks(self) -> QGroupBox:
        box = QGroupBox("Lorebooks")
        lay = QVBoxLayout(box)
        self.books_table = QTableWidget(0, 3)
        self.books_table.setObjectName("setupLorebooks")
        self.books_table.setHorizontalHeaderLabels(["Lorebook", "Scope", "Entries"])
        self.books_table.verticalHeader().setVisible(False)
        self.books_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.books_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.books_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.books_table.horizontalHeader().setStretchLastSection(False)
        self.books_table.setColumnWidth(0, 190)
        self.books_table.setColumnWidth(1, 110)
        self.books_table.setColumnWidth(2, 60)
        self.books_table.setMinimumHeight(110)
        lay.addWidget(self.books_table)
        self.card_note = QLabel("")
        self.card_note.setWordWrap(True)
        self.card_note.setStyleSheet("color: #555;")
        lay.addWidget(self.card_note)
        row = QHBoxLayout()
        self.book_picker = QComboBox()
        self.book_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.book_picker.setMinimumContentsLength(10)
        self.attach_scope = _combo(SCOPES)
        self.attach_button = QPushButton("Attach")
        self.attach_button.clicked.connect(
            lambda: self.attach(self.book_picker.currentData(), self.attach_scope.currentData()))
        row.addWidget(self.book_picker, 1)
        row.addWidget(self.attach_scope)
        row.addWidget(self.attach_button)
        lay.addLayout(row)
        row = QHBoxLayout()
        self.detach_button = QPushButton("Detach")
        self.book_up = QPushButton("▲ Up")
        self.book_down = QPushButton("▼ Down")
        self.detach_button.clicked.connect(lambda: self.detach(self.books_table.currentRow()))
        self.book_up.clicked.connect(lambda: self.move_book(self.books_table.currentRow(), -1))
        self.book_down.clicked.connect(lambda: self.move_book(self.books_table.currentRow(), 1))
        for b in (self.detach_button, self.book_up, self.book_down):
            row.addWidget(b)
        row.addStretch(1)
        lay.addLayout(row)
        return box

    def _build_persona(self) -> QGroupBox:
        box = QGroupBox("Persona")
        form = QFormLayout(box)
        self.persona_picker = QComboBox()
        self.persona_picker.activated.connect(lambda _i: self.pick_persona(self.persona_picker.currentData()))
        form.addRow("Persona:", self.persona_picker)
        self.persona_name = QLineEdit()
        form.addRow("Name:", self.persona_name)
        self.persona_description = _text(80)
        self.persona_description.setObjectName("personaDescription")
        form.addRow("Description:", self.persona_description)
        self.persona_position = _combo(PERSONA_POSITIONS)
        self.persona_depth = _spin(0, 1000)
        self.persona_role = _combo(ROLES)
        form.addRow("Position:", self.persona_position)
        row = QHBoxLayout()
        row.addWidget(QLabel("Depth:"))
        row.addWidget(self.persona_depth)
        row.addWidget(QLabel("Role:"))
        row.addWidget(self.persona_role)
        row.addStretch(1)
        form.addRow("", row)
        self.persona_apply = QPushButton("Apply persona")
        self.persona_apply.clicked.connect(self.apply_persona)
        form.addRow("", self.persona_apply)
        return box

    def _build_prompts(self) -> QGroupBox:
        self.prompts_box = box = QGroupBox("Prompts (Prompt Manager)")
        form = QFormLayout(box)
        self.main_prompt = _text()
        self.main_prompt.setObjectName("mainPrompt")
        self.nsfw_prompt = _text(50)
        self.jailbreak_prompt = _text(50)
        form.addRow("System prompt (main):", self.main_prompt)
        form.addRow("Auxiliary prompt:", self.nsfw_prompt)
        form.addRow("Post-history instructions:", self.jailbreak_prompt)
        self.prompts_apply = QPushButton("Apply prompts")
        self.prompts_apply.clicked.connect(self.apply_prompts)
        form.addRow("", self.prompts_apply)
        return box

    def _build_note(self) -> QGroupBox:
        self.note_box = box = QGroupBox("Author's Note")
        form = QFormLayout(box)
        self.note_text = _text()
        self.note_text.setObjectName("authorsNote")
        form.addRow("Text:", self.note_text)
        self.note_position = _combo(NOTE_POSITIONS)
        self.note_depth = _spin(0, 10_000)
        self.note_role = _combo(ROLES)
        self.note_interval = _spin(0, 10_000)
        self.note_interval.setToolTip("Sent when the number of user messages is a multiple of this (0 = never)")
        form.addRow("Position:", self.note_position)
        row = QHBoxLayout()
        for label, w in (("Depth:", self.note_depth), ("Role:", self.note_role), ("Every:", self.note_interval)):
            row.addWidget(QLabel(label))
            row.addWidget(w)
        row.addStretch(1)
        form.addRow("", row)
        self.note_apply = QPushButton("Apply Author's Note")
        self.note_apply.clicked.connect(self.apply_note)
        form.addRow("", self.note_apply)
        return box

    def _build_order(self) -> QGroupBox:
        self.order_box = box = QGroupBox("Prompt order")
        lay = QVBoxLayout(box)
        self.order_list = QListWidget()
        self.order_list.setObjectName("promptOrder")
        self.order_list.setMinimumHeight(200)
        self.order_list.itemChanged.connect(self._on_order_item_changed)
        lay.addWidget(self.order_list)
        row = QHBoxLayout()
        self.order_up = QPushButton("▲ Up")
        self.order_down = QPushButton("▼ Down")
        self.order_up.clicked.connect(lambda: self.move_prompt(self.order_list.currentRow(), -1))
        self.order_down.clicked.connect(lambda: self.move_prompt(self.order_list.currentRow(), 1))
        row.addWidget(self.order_up)
        row.addWidget(self.order_down)
        row.addStretch(1)
        lay.addLayout(row)
        return box

    def _build_world_info(self) -> QGroupBox:
        box = QGroupBox("World Info")
        form = QFormLayout(box)
        self.wi_depth = _spin(0, 1000)
        self.wi_budget = QDoubleSpinBox()
        self.wi_budget.setRange(0, 100)
        self.wi_budget.setSuffix(" %")
        self.wi_cap = _spin(0, 10_000_000, "none")
        self.wi_min_act = _spin(0, 10_000)
        self.wi_min_depth = _spin(0, 10_000, "unlimited")
        self.wi_max_rec = _spin(0, 10_000, "unlimited")
        self.wi_strategy = _combo(STRATEGIES)
        self.wi_rules = _combo(RULES)
        for label, w in (("Scan depth:", self.wi_depth), ("Budget:", self.wi_budget), ("Budget cap:", self.wi_cap),
                         ("Min activations:", self.wi_min_act), ("Min act. max depth:", self.wi_min_depth),
                         ("Max recursion steps:", self.wi_max_rec), ("Character strategy:", self.wi_strategy),
                         ("Rules:", self.wi_rules)):
            form.addRow(label, w)
        self.wi_names = QCheckBox("Include names")
        self.wi_recursive = QCheckBox("Recursive scan")
        self.wi_case = QCheckBox("Case sensitive")
        self.wi_words = QCheckBox("Match whole words")
        self.wi_group_scoring = QCheckBox("Group scoring")
        for check in (self.wi_names, self.wi_recursive, self.wi_case, self.wi_words, self.wi_group_scoring):
            form.addRow("", check)
        self.wi_apply = QPushButton("Apply World Info settings")
        self.wi_apply.clicked.connect(self.apply_world_info)
        form.addRow("", self.wi_apply)
        return box

    def _build_model(self) -> QGroupBox:
        box = QGroupBox("Model and budget")
        form = QFormLayout(box)
        self.model_edit = QLineEdit()
        self.context_limit = _spin(0, 10_000_000, "model's window")
        self.reply_reserve = _spin(0, 1_000_000)
        form.addRow("Model:", self.model_edit)
        form.addRow("Context limit:", self.context_limit)
        form.addRow("Reply reserve:", self.reply_reserve)
        self.model_apply = QPushButton("Apply model and budget")
        self.model_apply.clicked.connect(self.apply_model)
        form.addRow("", self.model_apply)
        return box

    def _apply_as_you_type(self) -> list[AutoApply]:
        """Each section applies itself after a pause in editing (one undo step per burst); no Apply buttons."""
        sections = (
            (self.apply_persona, (self.persona_name, self.persona_description, self.persona_position,
                                  self.persona_depth, self.persona_role), self.persona_apply),
            (self.apply_prompts, (self.main_prompt, self.nsfw_prompt, self.jailbreak_prompt), self.prompts_apply),
            (self.apply_note, (self.note_text, self.note_position, self.note_depth, self.note_role,
                               self.note_interval), self.note_apply),
            (self.apply_world_info, (self.wi_depth, self.wi_budget, self.wi_cap, self.wi_min_act, self.wi_min_depth,
                                     self.wi_max_rec, self.wi_strategy, self.wi_rules, self.wi_names,
                                     self.wi_recursive, self.wi_case, self.wi_words, self.wi_group_scoring),
             self.wi_apply),
            (self.apply_model, (self.model_edit, self.context_limit, self.reply_reserve), self.model_apply),
        )
        out = []
        for apply, widgets, button in sections:
            auto = AutoApply(apply, widgets, loading=lambda: self._loading, parent=self)
            # a direct call (a test, a shortcut) applies now and ends the wait: never twice
            setattr(self, apply.__name__, auto.apply_now)
            button.hide()  # edits apply themselves
            out.append(auto)
        self.apply_note_label = QLabel("Edits apply as you type, after a short pause; Ctrl+Z undoes each burst.")
        self.apply_note_label.setWordWrap(True)
        self.apply_note_label.setStyleSheet("color: #666;")
        self._body_layout.insertWidget(1, self.apply_note_label)
        return out

    # ------------------------------------------------------------------ state
    def set_state(self, state: SetupState | None, books: list[LorebookSummary] | None = None,
                  personas: list[PersonaSummary] | None = None, persona: Persona | None = None,
                  card_book: str | None = None) -> None:
        """Show ``state`` (``None``: no library chat open). ``books``/``personas`` are the
        library's ``LorebookSummary``/``PersonaSummary`` rows; ``persona`` the chat's persona;
        ``card_book`` the name of the card's embedded book when the chat activates it."""
        same_chat = state is not None and self.state is not None and state.chat_id == self.state.chat_id
        self._loading = True
        try:
            self.state = state
            self._books = list(books or [])
            self._personas = list(personas or [])
            self._persona = persona
            with hold(getattr(self, "auto_apply", []), same_chat=same_chat):  # typing in progress survives
                self._fill(card_book)
        finally:
            self._loading = False

    def _fill(self, card_book: str | None) -> None:
        state = self.state
        enabled = state is not None
        st = state.sillytavern if state is not None else None
        for w in (self.books_table, self.book_picker, self.attach_button, self.detach_button, self.book_up,
                  self.book_down, self.persona_picker, self.persona_apply, self.wi_apply, self.model_apply):
            w.setEnabled(enabled)
        for box in (self.prompts_box, self.note_box, self.order_box):
            box.setEnabled(st is not None)
        self.persona_position.setEnabled(st is not None)
        self.persona_depth.setEnabled(st is not None)
        self.persona_role.setEnabled(st is not None)
        self.st_button.setVisible(enabled and st is None)
        self.text_completion.set_setup(st.text_completion if st is not None else None, enabled=st is not None,
                                       start_reply_with=st.start_reply_with if st is not None else "")
        if state is None:
            self.heading.setText("No chat open.")
            self.books_table.setRowCount(0)
            return
        self.heading.setText("Assembled as SillyTavern's Text Completion does: one prompt string from the "
                             "context and instruct templates."
                             if st is not None and st.text_completion is not None else
                             "Assembled as SillyTavern's Chat Completion does (Prompt Manager order)."
                             if st is not None else
                             "Assembled by Loomscope's stage template. The prompts, Author's Note and "
                             "prompt order apply to SillyTavern-style chats.")
        self._fill_books(state, card_book)
        self._fill_persona(state)
        if st is not None:
            self._fill_sillytavern(st)
        else:
            self.order_list.clear()
            for edit in (self.main_prompt, self.nsfw_prompt, self.jailbreak_prompt, self.note_text):
                edit.setPlainText("")
        self._fill_world_info(state.settings.world_info)
        settings = state.settings
        self.model_edit.setText(settings.model)
        self.context_limit.setValue(settings.context_limit or 0)
        self.reply_reserve.setValue(settings.reply_reserve if isinstance(settings.reply_reserve, int) else 0)

    def _fill_books(self, state: SetupState, card_book: str | None) -> None:
        """The linked books table (name, scope, entries), the card book's note and the picker."""
        names = {b.id: b for b in self._books}
        self.books_table.setRowCount(len(state.links))
        for r, (book_id, scope) in enumerate(state.links):
            summary = names.get(book_id)
            name = summary.name if summary is not None else state.names.get(book_id, book_id)
            item = QTableWidgetItem(name)
            item.setToolTip(f"{name}\nid {book_id}")
            self.books_table.setItem(r, 0, item)
            combo = _combo(SCOPES)
            for i, s in enumerate(SCOPES):
                combo.setItemData(i, SCOPE_TIPS[s], Qt.ItemDataRole.ToolTipRole)
            _set_combo(combo, scope)
            combo.currentIndexChanged.connect(lambda _i, row=r, c=combo: self.set_scope(row, c.currentData()))
            self.books_table.setCellWidget(r, 1, combo)
            count = QTableWidgetItem(str(summary.entries) if summary is not None else "")
            count.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.books_table.setItem(r, 2, count)
        self.card_note.setText(f"Also active: “{card_book}”, the book embedded in the character card."
                               if card_book else "")
        self.card_note.setVisible(bool(card_book))
        linked = {b for b, _ in state.links}
        self.book_picker.clear()
        for b in self._books:
            if b.id not in linked and b.character_id is None:
                self.book_picker.addItem(f"{b.name} ({b.entries})", b.id)
        self.attach_button.setEnabled(self.book_picker.count() > 0)

    def _fill_persona(self, state: SetupState) -> None:
        """The persona picker and the library persona's name and description."""
        self.persona_picker.clear()
        self.persona_picker.addItem("(none)", None)
        for persona in self._personas:
            self.persona_picker.addItem(persona.name, persona.id)
        _set_combo(self.persona_picker, state.persona_id)
        self.persona_name.setText(self._persona.name if self._persona else "")
        self.persona_description.setPlainText(self._persona.description if self._persona else "")
        self.persona_name.setEnabled(self._persona is not None)
        self.persona_description.setEnabled(self._persona is not None)

    def _fill_sillytavern(self, st: SillyTavernSetup) -> None:
        """A SillyTavern chat's persona placement, prompts, Author's Note and prompt order."""
        _set_combo(self.persona_position, st.persona_position)
        self.persona_depth.setValue(st.persona_depth)
        _set_combo(self.persona_role, st.persona_role)
        prompts = {p.identifier: p for p in st.prompts}
        self.main_prompt.setPlainText(prompts["main"].content or "" if "main" in prompts else "")
        self.nsfw_prompt.setPlainText(prompts["nsfw"].content or "" if "nsfw" in prompts else "")
        self.jailbreak_prompt.setPlainText(prompts["jailbreak"].content or "" if "jailbreak" in prompts else "")
        note = st.author_note
        self.note_text.setPlainText(note.prompt)
        _set_combo(self.note_position, note.position)
        self.note_depth.setValue(note.depth)
        _set_combo(self.note_role, note.role)
        self.note_interval.setValue(note.interval)
        self.order_list.clear()
        for order_item in st.prompt_order:
            prompt = prompts.get(order_item.identifier)
            li = QListWidgetItem(prompt.name or order_item.identifier if prompt is not None else order_item.identifier)
            li.setData(PROMPT_ID_ROLE, order_item.identifier)
            li.setFlags(li.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            li.setCheckState(Qt.CheckState.Checked if order_item.enabled else Qt.CheckState.Unchecked)
            marker = " (marker: filled from the chat)" if prompt is not None and prompt.marker else ""
            li.setToolTip(f"{order_item.identifier}{marker}")
            self.order_list.addItem(li)

    def _fill_world_info(self, wi: WorldInfoSettings) -> None:
        """The World Info settings box."""
        self.wi_depth.setValue(wi.scan_depth)
        self.wi_budget.setValue(wi.budget_percent)
        self.wi_cap.setValue(wi.budget_cap)
        self.wi_min_act.setValue(wi.min_activations)
        self.wi_min_depth.setValue(wi.min_activations_depth_max)
        self.wi_max_rec.setValue(wi.max_recursion_steps)
        _set_combo(self.wi_strategy, wi.character_strategy)
        _set_combo(self.wi_rules, wi.rules)
        self.wi_names.setChecked(wi.include_names)
        self.wi_recursive.setChecked(wi.recursive)
        self.wi_case.setChecked(wi.case_sensitive)
        self.wi_words.setChecked(wi.match_whole_words)
        self.wi_group_scoring.setChecked(wi.use_group_scoring)

    def _emit(self, label: str, **update: Any) -> None:
        if self.state is None or self._loading:
            return
        new = self.state.replace(**update)
        if new == self.state:
            return
        self.setup_edited.emit(new, label)

    def _emit_st(self, label: str, **update: Any) -> None:
        if self.state is None or self.state.sillytavern is None:
            return
        self._emit(label, sillytavern=self.state.sillytavern.model_copy(update=update))

    # ------------------------------------------------------------------ lorebooks
    def attach(self, book_id: str | None, scope: str = "chat") -> None:
        """Link library lorebook ``book_id`` to the chat with ``scope`` (at the end of the list)."""
        if self.state is None or not book_id or any(b == book_id for b, _ in self.state.links):
            return
        name = next((b.name for b in self._books if b.id == book_id), book_id)
        self._emit(f"Attach lorebook {name!r} ({scope})", links=(*self.state.links, (book_id, scope)))

    def detach(self, row: int) -> None:
        """Unlink the lorebook in row ``row``."""
        if self.state is None or not 0 <= row < len(self.state.links):
            return
        links = list(self.state.links)
        book_id, _ = links.pop(row)
        self._emit(f"Detach lorebook {self._name(book_id)!r}", links=tuple(links))

    def move_book(self, row: int, delta: int) -> None:
        """Move the lorebook in row ``row`` up (``-1``) or down (``+1``)."""
        if self.state is None or not 0 <= row < len(self.state.links) or not 0 <= row + delta < len(self.state.links):
            return
        links = list(self.state.links)
        links[row], links[row + delta] = links[row + delta], links[row]
        self._emit(f"Move lorebook {self._name(links[row + delta][0])!r}", links=tuple(links))
        self.books_table.selectRow(row + delta)

    def set_scope(self, row: int, scope: str) -> None:
        """Give the link in row ``row`` the scope ``scope`` (``chat``, ``character``, ``global``)."""
        if self.state is None or not 0 <= row < len(self.state.links) or scope not in SCOPES:
            return
        links = list(self.state.links)
        links[row] = (links[row][0], scope)
        self._emit(f"Lorebook {self._name(links[row][0])!r} → {scope} scope", links=tuple(links))

    def _name(self, book_id: str) -> str:
        return next((b.name for b in self._books if b.id == book_id), None) or \
            (self.state.names.get(book_id, book_id) if self.state else book_id)

    # ------------------------------------------------------------------ persona
    def pick_persona(self, persona_id: str | None) -> None:
        """Use library persona ``persona_id`` (``None``: no persona) for this chat."""
        name = next((p.name for p in self._personas if p.id == persona_id), "none")
        self._emit(f"Use persona {name!r}", persona_id=persona_id)

    def apply_persona(self) -> None:
        """Save the persona's name/description (library) and its placement (this chat)."""
        if self.state is None:
            return
        if self._persona is not None and self.state.persona_id is not None:
            new = self._persona.model_copy(update={"name": self.persona_name.text().strip() or self._persona.name,
                                                   "description": self.persona_description.toPlainText()})
            if new != self._persona:
                self.persona_edited.emit(self.state.persona_id, new)
        if self.state.sillytavern is not None:
            self._emit_st("Persona placement", persona_position=int(self.persona_position.currentData()),
                          persona_depth=self.persona_depth.value(), persona_role=int(self.persona_role.currentData()))

    # ------------------------------------------------------------------ prompts, note, order
    def apply_prompts(self) -> None:
        """Save the main prompt, auxiliary prompt and post-history instructions."""
        st = self.state.sillytavern if self.state is not None else None
        if st is None:
            return
        texts = {"main": self.main_prompt.toPlainText(), "nsfw": self.nsfw_prompt.toPlainText(),
                 "jailbreak": self.jailbreak_prompt.toPlainText()}
        prompts = [p.model_copy(update={"content": texts[p.identifier]}) if p.identifier in texts else p
                   for p in st.prompts]
        self._emit_st("Edit prompts", prompts=prompts)

    def apply_note(self) -> None:
        """Save the Author's Note (text, position, depth, role, interval)."""
        st = self.state.sillytavern if self.state is not None else None
        if st is None:
            return
        note = st.author_note.model_copy(update={
            "prompt": self.note_text.toPlainText(), "position": int(self.note_position.currentData()),
            "depth": self.note_depth.value(), "role": int(self.note_role.currentData()),
            "interval": self.note_interval.value()})
        self._emit_st("Edit Author's Note", author_note=note)

    def move_prompt(self, row: int, delta: int) -> None:
        """Move prompt ``row`` of the Prompt Manager order up (``-1``) or down (``+1``)."""
        st = self.state.sillytavern if self.state is not None else None
        if st is None or not 0 <= row < len(st.prompt_order) or not 0 <= row + delta < len(st.prompt_order):
            return
        order = list(st.prompt_order)
        order[row], order[row + delta] = order[row + delta], order[row]
        self._emit_st(f"Move prompt {order[row + delta].identifier!r}", prompt_order=order)
        self.order_list.setCurrentRow(row + delta)

    def toggle_prompt(self, row: int, enabled: bool) -> None:
        """Turn prompt ``row`` of the order on or off (as the Prompt Manager's toggle)."""
        st = self.state.sillytavern if self.state is not None else None
        if st is None or not 0 <= row < len(st.prompt_order):
            return
        order: list[PromptOrderItem] = list(st.prompt_order)
        order[row] = order[row].model_copy(update={"enabled": bool(enabled)})
        self._emit_st(f"{'Enable' if enabled else 'Disable'} prompt {order[row].identifier!r}", prompt_order=order)

    def _on_order_item_changed(self, item: QListWidgetItem) -> None:
        if self._loading:
            return
        self.toggle_prompt(self.order_list.row(item), item.checkState() == Qt.CheckState.Checked)

    def enable_sillytavern(self) -> None:
        """Give a stage-template chat SillyTavern's default prompt setup (undoable)."""
        if self.state is None or self.state.sillytavern is not None:
            return
        name = self._persona.name if self._persona is not None else "User"
        self._emit("Use SillyTavern prompt setup", sillytavern=SillyTavernSetup(user_name=name))

    # ------------------------------------------------------------------ settings
    def apply_world_info(self) -> None:
        """Save every World Info setting."""
        if self.state is None:
            return
        wi = self.state.settings.world_info.model_copy(update={
            "scan_depth": self.wi_depth.value(), "budget_percent": self.wi_budget.value(),
            "budget_cap": self.wi_cap.value(), "min_activations": self.wi_min_act.value(),
            "min_activations_depth_max": self.wi_min_depth.value(),
            "max_recursion_steps": self.wi_max_rec.value(), "character_strategy": self.wi_strategy.currentData(),
            "rules": self.wi_rules.currentData(), "include_names": self.wi_names.isChecked(),
            "recursive": self.wi_recursive.isChecked(), "case_sensitive": self.wi_case.isChecked(),
            "match_whole_words": self.wi_words.isChecked(), "use_group_scoring": self.wi_group_scoring.isChecked()})
        self._emit("Edit World Info settings", settings=self.state.settings.model_copy(update={"world_info": wi}))

    def apply_model(self) -> None:
        """Save the model, context limit (0 = the model table's window) and reply reserve (tokens)."""
        if self.state is None:
            return
        s = self.state.settings
        update: dict[str, Any] = {"model": self.model_edit.text().strip() or s.model,
                                  "context_limit": self.context_limit.value() or None}
        if isinstance(s.reply_reserve, int) or self.reply_reserve.value():
            update["reply_reserve"] = self.reply_reserve.value()
        self._emit("Edit model and budget", settings=s.model_copy(update=update))
