"""SillyTavern's Advanced Formatting panel in the Setup tab: instruct and context templates, the
system prompt and the Text Completion settings of a chat (issue 26).

Every field of :class:`~engine.schema.sillytavern.TextCompletionSetup` is here: the request type
(Chat Completion or Text Completion), the instruct template (enabled, preset picker, every
sequence, wrap, macro, names behaviour, system same as user, …), the context template (preset
picker, story string, example separator, chat start, stop-string switches), the system prompt,
and the reply length, context size, tokenizer, padding, stopping strings and "Start Reply With".
Labels follow SillyTavern 1.12.6's ``index.html``.

The box only emits intents: ``edited(TextCompletionSetup | None, str label)``; the Setup panel
makes each one undo step (:class:`gui.setup_commands.SetChatSetupCommand`). Switches, pickers and
the names combo apply at once; text fields and numbers apply with their group's button (one undo
step for a group of edits). Picking a preset does what SillyTavern does
(:mod:`gui.text_completion_presets`).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.schema.sillytavern import TextCompletionSetup

from ..text_completion_presets import (
    enable_instruct,
    pick_context_preset,
    pick_instruct_preset,
    pick_sysprompt_preset,
)

#: Instruct switches (field, SillyTavern's label).
INSTRUCT_SWITCHES: tuple[tuple[str, str], ...] = (
    ("bind_to_context", "Bind to Context"), ("wrap", "Wrap Sequences with Newline"),
    ("macro", "Replace Macro in Sequences"), ("skip_examples", "Skip Example Dialogues Formatting"),
    ("system_same_as_user", "System same as User"), ("names_force_groups", "Force names for groups (legacy)"),
)
#: Instruct text fields (field, label), in the panel's order.
INSTRUCT_TEXTS: tuple[tuple[str, str], ...] = (
    ("system_sequence", "System message prefix"), ("system_suffix", "System message suffix"),
    ("input_sequence", "User message prefix"), ("input_suffix", "User message suffix"),
    ("output_sequence", "Assistant message prefix"), ("output_suffix", "Assistant message suffix"),
    ("first_input_sequence", "First User Prefix"), ("last_input_sequence", "Last User Prefix"),
    ("first_output_sequence", "First Assistant Prefix"), ("last_output_sequence", "Last Assistant Prefix"),
    ("last_system_sequence", "System Instruction Prefix"), ("stop_sequence", "Stop Sequence"),
    ("user_alignment_message", "User Filler Message"), ("activation_regex", "Activation Regex"),
    ("system_sequence_prefix", "System prompt prefix (legacy)"),
    ("system_sequence_suffix", "System prompt suffix (legacy)"),
    ("separator_sequence", "Separator (legacy output suffix)"),
)
#: ``names_behavior`` values with SillyTavern's words.
NAMES_BEHAVIOURS: tuple[tuple[str, str], ...] = (("none", "Never"), ("force", "Groups and Past Personas"),
                                                 ("always", "Always"))
#: Context switches on the context template.
CONTEXT_SWITCHES: tuple[tuple[str, str], ...] = (
    ("use_stop_strings", "Separators as Stop Strings"), ("names_as_stop_strings", "Names as Stop Strings"),
    ("allow_jailbreak", "Allow Post-History Instructions"),
)
#: Global ``power_user`` switches the context panel shows (on :class:`TextCompletionSetup`).
GLOBAL_SWITCHES: tuple[tuple[str, str], ...] = (
    ("always_force_name2", "Always add character's name to prompt"), ("trim_sentences", "Trim Incomplete Sentences"),
    ("single_line", "Generate only one line per request"), ("custom_stopping_strings_macro", "Replace Macro in Custom Stopping Strings"),
)
#: ``power_user.tokenizer`` ids (``tokenizers.js`` ``tokenizers``) with the picker's words.
TOKENIZERS: tuple[tuple[int, str], ...] = (
    (99, "Best match (recommended)"), (0, "None / Estimated"), (1, "GPT-2"), (3, "Llama 1/2"), (12, "Llama 3"),
    (13, "Gemma / Gemini"), (14, "Jamba"), (15, "Qwen2"), (16, "Command-R"), (4, "NerdStash (NovelAI Clio)"),
    (5, "NerdStash v2 (NovelAI Kayra)"), (7, "Mistral V1"), (17, "Mistral Nemo"), (8, "Yi"), (11, "Claude 1/2"),
    (6, "API (WebUI / koboldcpp)"), (2, "OpenAI"), (9, "API (text-generation-webui)"), (10, "API (KoboldAI)"),
)


def _text(rows: int = 2) -> QPlainTextEdit:
    edit = QPlainTextEdit()
    height = edit.fontMetrics().lineSpacing() * rows + 12
    edit.setFixedHeight(height)
    edit.setTabChangesFocus(True)
    edit.setPlaceholderText("(empty)")  # tells an empty field from one holding only line breaks
    return edit


def _select(box: QComboBox, value: Any) -> None:
    i = box.findData(value)
    if i < 0 and value is not None:  # a value the list does not know (a preset not in the folder)
        box.addItem(f"{value} (not in the folder)", value)
        i = box.count() - 1
    box.setCurrentIndex(max(0, i))


class TextCompletionSetupBox(QGroupBox):
    """The chat's Text Completion setup. Signal ``edited(object TextCompletionSetup | None, str label)``."""

    edited = Signal(object, str)
    #: "Start Reply With" edited (``SillyTavernSetup.start_reply_with``: both paths read it).
    start_reply_with_edited = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Advanced Formatting (Text Completion)", parent)
        self.setObjectName("textCompletionSetup")
        self.setup: TextCompletionSetup | None = None
        self._loading = False
        self._start_reply_with = ""
        lay = QVBoxLayout(self)
        form = QFormLayout()
        self.api = QComboBox()
        self.api.setObjectName("requestType")
        self.api.addItem("Chat Completion (a list of messages)", "chat_completion")
        self.api.addItem("Text Completion (one prompt string)", "text_completion")
        self.api.setToolTip("How this chat is sent: SillyTavern's Chat Completion (OpenAI and its sources) or "
                            "Text Completion (KoboldCpp, llama.cpp, text-generation-webui, TabbyAPI, …)")
        self.api.activated.connect(lambda _i: self.set_api(self.api.currentData()))
        form.addRow("Request type:", self.api)
        lay.addLayout(form)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.addWidget(self._build_instruct())
        body.addWidget(self._build_context())
        body.addWidget(self._build_sysprompt())
        body.addWidget(self._build_generation())
        lay.addWidget(self.body)
        self.set_setup(None, enabled=False)

    # ------------------------------------------------------------------ building
    def _switch(self, form: QFormLayout, label: str, on_toggle: Any) -> QCheckBox:
        box = QCheckBox(label)
        box.toggled.connect(lambda v: None if self._loading else on_toggle(bool(v)))
        form.addRow("", box)
        return box

    def _build_instruct(self) -> QGroupBox:
        group = QGroupBox("Instruct Template")
        form = QFormLayout(group)
        self.instruct_enabled = QCheckBox("Enabled")
        self.instruct_enabled.setObjectName("instructEnabled")
        self.instruct_enabled.toggled.connect(
            lambda v: None if self._loading else self._emit(enable_instruct(self._tc(), bool(v)),
                                                            f"Instruct mode {'on' if v else 'off'}"))
        form.addRow("", self.instruct_enabled)
        self.instruct_preset = QComboBox()
        self.instruct_preset.setObjectName("instructPreset")
        self.instruct_preset.activated.connect(lambda _i: self.pick_instruct(self.instruct_preset.currentData()))
        form.addRow("Preset:", self.instruct_preset)
        self.instruct_switches = {f: self._switch(form, label, lambda v, f=f: self._set_instruct(f, v))
                                  for f, label in INSTRUCT_SWITCHES}
        self.names_behavior = QComboBox()
        for value, words in NAMES_BEHAVIOURS:
            self.names_behavior.addItem(words, value)
        self.names_behavior.activated.connect(
            lambda _i: self._set_instruct("names_behavior", self.names_behavior.currentData()))
        form.addRow("Include Names:", self.names_behavior)
        self.instruct_texts = {}
        for f, label in INSTRUCT_TEXTS:
            edit = _text()
            edit.setObjectName(f"instruct_{f}")
            self.instruct_texts[f] = edit
            form.addRow(f"{label}:", edit)
        self.instruct_apply = QPushButton("Apply instruct sequences")
        self.instruct_apply.clicked.connect(self.apply_instruct_texts)
        form.addRow("", self.instruct_apply)
        return group

    def _build_context(self) -> QGroupBox:
        group = QGroupBox("Context Template")
        form = QFormLayout(group)
        self.context_preset = QComboBox()
        self.context_preset.setObjectName("contextPreset")
        self.context_preset.activated.connect(lambda _i: self.pick_context(self.context_preset.currentData()))
        form.addRow("Preset:", self.context_preset)
        self.story_string = _text(8)
        self.story_string.setObjectName("storyString")
        form.addRow("Story String:", self.story_string)
        self.example_separator = _text()
        self.chat_start = _text()
        form.addRow("Example Separator:", self.example_separator)
        form.addRow("Chat Start:", self.chat_start)
        self.context_apply = QPushButton("Apply context template")
        self.context_apply.clicked.connect(self.apply_context_texts)
        form.addRow("", self.context_apply)
        self.context_switches = {f: self._switch(form, label, lambda v, f=f: self._set_context(f, v))
                                 for f, label in CONTEXT_SWITCHES}
        self.global_switches = {f: self._switch(form, label, lambda v, f=f: self._set_global(f, v))
                                for f, label in GLOBAL_SWITCHES}
        return group

    def _build_sysprompt(self) -> QGroupBox:
        group = QGroupBox("System Prompt")
        form = QFormLayout(group)
        self.sysprompt_enabled = self._switch(form, "Enabled", lambda v: self._emit(
            self._tc().model_copy(update={"sysprompt": self._tc().sysprompt.model_copy(update={"enabled": v})}),
            f"System prompt {'on' if v else 'off'}"))
        self.sysprompt_preset = QComboBox()
        self.sysprompt_preset.activated.connect(lambda _i: self.pick_sysprompt(self.sysprompt_preset.currentData()))
        form.addRow("Preset:", self.sysprompt_preset)
        self.sysprompt_content = _text(4)
        self.sysprompt_content.setObjectName("syspromptContent")
        form.addRow("Prompt Content:", self.sysprompt_content)
        apply = QPushButton("Apply system prompt")
        apply.clicked.connect(self.apply_sysprompt)
        form.addRow("", apply)
        return group

    def _build_generation(self) -> QGroupBox:
        group = QGroupBox("Context size, reply length and tokenizer")
        form = QFormLayout(group)
        self.max_context = QSpinBox()
        self.max_context.setRange(0, 10_000_000)
        self.amount_gen = QSpinBox()
        self.amount_gen.setRange(0, 1_000_000)
        self.tokenizer = QComboBox()
        for value, words in TOKENIZERS:
            self.tokenizer.addItem(words, value)
        self.token_padding = QSpinBox()
        self.token_padding.setRange(-100_000, 100_000)
        self.stopping_strings = QLineEdit()
        self.stopping_strings.setPlaceholderText('["\\n***"] — a JSON array, as SillyTavern keeps it')
        self.prompt_bias = QLineEdit()
        for label, w in (("Context (tokens):", self.max_context), ("Response (tokens):", self.amount_gen),
                         ("Tokenizer:", self.tokenizer), ("Token Padding:", self.token_padding),
                         ("Custom Stopping Strings:", self.stopping_strings), ("Start Reply With:", self.prompt_bias)):
            form.addRow(label, w)
        self.backend = QLabel("")
        self.backend.setWordWrap(True)
        self.backend.setStyleSheet("color: #555;")
        form.addRow("Backend:", self.backend)
        self.generation_apply = QPushButton("Apply context size and tokenizer")
        self.generation_apply.clicked.connect(self.apply_generation)
        form.addRow("", self.generation_apply)
        return group

    # ------------------------------------------------------------------ state
    def set_setup(self, setup: TextCompletionSetup | None, *, enabled: bool = True, start_reply_with: str = "") -> None:
        """Show ``setup`` (``None``: the chat is Chat Completion). ``enabled`` off: no SillyTavern chat.

        ``start_reply_with``: the chat's Start Reply With (``SillyTavernSetup.start_reply_with``).
        """
        self._loading = True
        try:
            self.setup = setup
            self._start_reply_with = start_reply_with
            self.setEnabled(enabled)
            _select(self.api, "text_completion" if setup is not None else "chat_completion")
            self.body.setVisible(setup is not None)
            if setup is not None:
                self._fill(setup)
        finally:
            self._loading = False

    def _fill(self, tc: TextCompletionSetup) -> None:
        ins, ctx = tc.instruct, tc.context
        self.instruct_enabled.setChecked(ins.enabled)
        self._presets(self.instruct_preset, [p.preset for p in tc.instruct_presets], ins.preset)
        for f, box in self.instruct_switches.items():
            box.setChecked(bool(getattr(ins, f)))
        _select(self.names_behavior, ins.names_behavior)
        for f, edit in self.instruct_texts.items():
            edit.setPlainText(getattr(ins, f))
        self._presets(self.context_preset, [p.preset for p in tc.context_presets], ctx.preset)
        self.story_string.setPlainText(ctx.story_string)
        self.example_separator.setPlainText(ctx.example_separator)
        self.chat_start.setPlainText(ctx.chat_start)
        for f, box in self.context_switches.items():
            box.setChecked(bool(getattr(ctx, f)))
        for f, box in self.global_switches.items():
            box.setChecked(bool(getattr(tc, f)))
        self.sysprompt_enabled.setChecked(tc.sysprompt.enabled)
        self._presets(self.sysprompt_preset, [p.name for p in tc.sysprompt_presets], tc.sysprompt.name)
        self.sysprompt_content.setPlainText(tc.sysprompt.content)
        self.max_context.setValue(tc.max_context)
        self.amount_gen.setValue(tc.amount_gen)
        _select(self.tokenizer, tc.tokenizer)
        self.token_padding.setValue(tc.token_padding)
        self.stopping_strings.setText(tc.custom_stopping_strings)
        self.prompt_bias.setText(self._start_reply_with)
        self.backend.setText(f"{tc.main_api} · {tc.textgen_type}" + (f" · {tc.server_url}" if tc.server_url else "")
                             + (f" · model {tc.model}" if tc.model else ""))

    @staticmethod
    def _presets(box: QComboBox, names: list[str], current: str) -> None:
        box.clear()
        for name in names:
            box.addItem(name, name)
        _select(box, current)

    def _tc(self) -> TextCompletionSetup:
        assert self.setup is not None
        return self.setup

    def _emit(self, new: TextCompletionSetup | None, label: str) -> None:
        if self._loading or new == self.setup:
            return
        self.edited.emit(new, label)

    # ------------------------------------------------------------------ intents
    def set_api(self, api: str) -> None:
        """Send the chat as ``chat_completion`` or ``text_completion`` (SillyTavern's defaults for a new one)."""
        if api == "text_completion" and self.setup is None:
            self._emit(TextCompletionSetup(), "Send as Text Completion")
        elif api == "chat_completion" and self.setup is not None:
            self._emit(None, "Send as Chat Completion")

    def pick_instruct(self, name: str | None) -> None:
        """Select instruct preset ``name`` (as SillyTavern's preset picker)."""
        if self.setup is not None and name:
            self._emit(pick_instruct_preset(self.setup, name), f"Instruct preset {name!r}")

    def pick_context(self, name: str | None) -> None:
        """Select context preset ``name``."""
        if self.setup is not None and name:
            self._emit(pick_context_preset(self.setup, name), f"Context preset {name!r}")

    def pick_sysprompt(self, name: str | None) -> None:
        """Select system prompt preset ``name``."""
        if self.setup is not None and name:
            self._emit(pick_sysprompt_preset(self.setup, name), f"System prompt {name!r}")

    def _set_instruct(self, field: str, value: Any) -> None:
        if self.setup is not None:
            self._emit(self.setup.model_copy(update={"instruct": self.setup.instruct.model_copy(
                update={field: value})}), f"Instruct: {field.replace('_', ' ')}")

    def _set_context(self, field: str, value: Any) -> None:
        if self.setup is not None:
            self._emit(self.setup.model_copy(update={"context": self.setup.context.model_copy(
                update={field: value})}), f"Context: {field.replace('_', ' ')}")

    def _set_global(self, field: str, value: Any) -> None:
        if self.setup is not None:
            self._emit(self.setup.model_copy(update={field: value}), field.replace("_", " ").capitalize())

    def apply_instruct_texts(self) -> None:
        """Save every instruct sequence field (one undo step)."""
        if self.setup is not None:
            update = {f: edit.toPlainText() for f, edit in self.instruct_texts.items()}
            self._emit(self.setup.model_copy(update={"instruct": self.setup.instruct.model_copy(update=update)}),
                       "Edit instruct sequences")

    def apply_context_texts(self) -> None:
        """Save the story string, example separator and chat start (one undo step)."""
        if self.setup is not None:
            update = {"story_string": self.story_string.toPlainText(),
                      "example_separator": self.example_separator.toPlainText(),
                      "chat_start": self.chat_start.toPlainText()}
            self._emit(self.setup.model_copy(update={"context": self.setup.context.model_copy(update=update)}),
                       "Edit context template")

    def apply_sysprompt(self) -> None:
        """Save the system prompt's content."""
        if self.setup is not None:
            sp = self.setup.sysprompt.model_copy(update={"content": self.sysprompt_content.toPlainText()})
            self._emit(self.setup.model_copy(update={"sysprompt": sp}), "Edit system prompt")

    def apply_generation(self) -> None:
        """Save context size, reply length, tokenizer, padding, stopping strings and "Start Reply With"."""
        if self.setup is not None:
            self._emit(self.setup.model_copy(update={
                "max_context": self.max_context.value(), "amount_gen": self.amount_gen.value(),
                "tokenizer": int(self.tokenizer.currentData()), "token_padding": self.token_padding.value(),
                "custom_stopping_strings": self.stopping_strings.text()}),
                "Edit context size and tokenizer")
            if self.prompt_bias.text() != self._start_reply_with:
                self._start_reply_with = self.prompt_bias.text()
                self.start_reply_with_edited.emit(self._start_reply_with)
