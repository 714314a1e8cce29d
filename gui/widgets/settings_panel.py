"""Per-chat context settings: model, limit, reserve, tokenizer, strategy and its options, lorebook budget.

The strategy list comes from the engine's strategy registry at construction (and on
:meth:`SettingsPanel.refresh_registries`), so strategies that plugins register appear without
GUI changes. The panel emits ``settings_edited(ContextSettings)``; invalid input shows a
message under the form and emits nothing.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.registries import Registries
from engine.resolve import lorebook_budget
from engine.schema import ContextPreview, ContextSettings
from engine.tokenizers import known_models, lookup_model

from .embedding_model import EmbeddingModelBox

FROM_MODEL = "(from the model table)"


#: ``ContextPreview.strategy`` of a chat assembled by SillyTavern's rules, and how the box shows it.
SILLYTAVERN_STRATEGY = "sillytavern"
SILLYTAVERN_STRATEGY_LABEL = "sillytavern (its own assembly)"
#: The line under the box (the tooltip says the rest).
SILLYTAVERN_STRATEGY_DESC = "SillyTavern's rules: newest messages first."
SILLYTAVERN_STRATEGY_TIP = ("This chat comes from a SillyTavern folder and is assembled exactly as SillyTavern "
                            "sends it: SillyTavern keeps the newest messages that fit, so Loomscope's strategies "
                            "do not apply.")

class SettingsPanel(QWidget):
    """Form over one chat's :class:`ContextSettings`. Signal ``settings_edited(object ContextSettings)``."""

    settings_edited = Signal(object)

    def __init__(self, registries: Registries, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._registries = registries
        self._settings = ContextSettings()
        self._loading = False
        self._preview_budget: int | None = None  # the last preview's prompt budget (tokens)
        self._build_model_fields()
        self._build_lorebook_fields()
        self._build_layout()
        self.refresh_registries()
        self._connect()
        self.set_settings(ContextSettings())

    def _build_model_fields(self) -> None:
        """The approximate-count badge, model, limit, reserve, tokenizer and strategy fields."""
        self.badge = QLabel(self)
        self.badge.setObjectName("approxBadge")
        self.badge.setWordWrap(True)
        self.badge.setStyleSheet("QLabel#approxBadge { background: #fff3cd; color: #7a5a00; "
                                 "border: 1px solid #e0c060; border-radius: 4px; padding: 4px; }")
        self.badge.hide()

        self.model_box = QComboBox(self)
        self.model_box.setObjectName("modelBox")
        self.model_box.setEditable(True)
        self.model_box.addItems(known_models())
        self.model_box.setToolTip("A model from the built-in table, or type any name (custom: set "
                                  "the limit and tokenizer profile yourself)")
        self.model_info = QLabel(self)
        self.model_info.setStyleSheet("color: #666;")
        self.limit_box = QSpinBox(self)
        self.limit_box.setObjectName("limitBox")
        self.limit_box.setRange(0, 10_000_000)
        self.limit_box.setSingleStep(512)
        self.limit_box.setSpecialValueText("model default")
        self.limit_box.setSuffix(" tokens")
        self.reserve_edit = QLineEdit(self)
        self.reserve_edit.setObjectName("reserveEdit")
        self.reserve_edit.setToolTip("Tokens held back for the reply: a number (1024) or a percentage of the limit (15%)")
        self.profile_box = QComboBox(self)
        self.profile_box.setObjectName("profileBox")
        self.strategy_box = QComboBox(self)
        self.strategy_box.setObjectName("strategyBox")
        self.strategy_desc = QLabel(self)
        self.strategy_desc.setWordWrap(True)
        self.strategy_desc.setStyleSheet("color: #666;")
        self.options_edit = QLineEdit(self)
        self.options_edit.setObjectName("strategyOptions")
        self.options_edit.setPlaceholderText('{} — strategy options as JSON, e.g. {"keep_recent": 10}')

    def _build_lorebook_fields(self) -> None:
        """The World Info budget, cap and scan depth, the safety margin, and the error / warning lines."""
        self.wi_percent = QDoubleSpinBox(self)
        self.wi_percent.setObjectName("lorebookBudget")
        self.wi_percent.setRange(0, 100)
        # SillyTavern's World Info budget is a share of the tokens the prompt may use: the
        # pipeline passes the prompt budget (context window − reply reserve) as its max context
        self.wi_percent.setSuffix(" % of prompt budget")
        self.wi_percent.setDecimals(1)
        self.wi_percent.setToolTip("World Info budget: this percentage of the prompt budget (the context "
                                   "window minus the reply reserve); keyword entries past it are dropped")
        self.wi_tokens = QLabel(self)
        self.wi_tokens.setObjectName("lorebookBudgetTokens")
        self.wi_tokens.setStyleSheet("color: #666;")
        self.wi_tokens.setWordWrap(True)
        self.wi_cap = QSpinBox(self)
        self.wi_cap.setRange(0, 10_000_000)
        self.wi_cap.setSpecialValueText("no cap")
        self.wi_cap.setSuffix(" tokens")
        self.wi_depth = QSpinBox(self)
        self.wi_depth.setRange(0, 1000)
        self.wi_depth.setSuffix(" messages")
        self.margin_box = QDoubleSpinBox(self)
        self.margin_box.setRange(0, 50)
        self.margin_box.setSuffix(" % (approximate profiles)")
        self.error_label = QLabel(self)
        self.error_label.setObjectName("settingsError")
        self.error_label.setStyleSheet("color: #b00020;")
        self.error_label.setWordWrap(True)
        self.warnings_label = QLabel(self)
        self.warnings_label.setWordWrap(True)
        self.warnings_label.setStyleSheet("color: #7a5a00;")
        self.warnings_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def _build_layout(self) -> None:
        """The form (with the recall model box, shown for vector-recall only) and the lines under it."""
        form = QFormLayout()
        form.addRow("Model", self.model_box)
        form.addRow("", self.model_info)
        form.addRow("Context limit", self.limit_box)
        form.addRow("Reply reserve", self.reserve_edit)
        form.addRow("Tokenizer profile", self.profile_box)
        form.addRow("Safety margin", self.margin_box)
        form.addRow("Strategy", self.strategy_box)
        form.addRow("", self.strategy_desc)
        form.addRow("Strategy options", self.options_edit)
        self.recall_model = EmbeddingModelBox(self)  # vector-recall's semantic model (issue 28)
        form.addRow("Recall model", self.recall_model)
        self._recall_row = form.rowCount() - 1
        self._form = form
        form.addRow("Lorebook budget", self.wi_percent)
        form.addRow("", self.wi_tokens)
        form.addRow("Lorebook cap", self.wi_cap)
        form.addRow("Lorebook scan depth", self.wi_depth)
        lay = QVBoxLayout(self)
        lay.addWidget(self.badge)
        lay.addLayout(form)
        lay.addWidget(self.error_label)
        lay.addWidget(self.warnings_label)
        lay.addStretch(1)

    def _connect(self) -> None:
        self.model_box.currentTextChanged.connect(self._on_model_box_changed)
        self.limit_box.valueChanged.connect(self._on_any_changed)
        self.reserve_edit.editingFinished.connect(self._on_any_changed)
        self.profile_box.currentIndexChanged.connect(self._on_any_changed)
        self.strategy_box.currentIndexChanged.connect(self._on_strategy_box_changed)
        self.options_edit.editingFinished.connect(self._on_any_changed)
        self.recall_model.model_chosen.connect(self._on_recall_model_chosen)
        self.wi_percent.valueChanged.connect(self._on_any_changed)
        self.wi_cap.valueChanged.connect(self._on_any_changed)
        self.wi_depth.valueChanged.connect(self._on_any_changed)
        self.margin_box.valueChanged.connect(self._on_any_changed)

    # -- registry-driven choices ------------------------------------------------------------
    def refresh_registries(self) -> None:
        """Re-read strategy and tokenizer names (plugins may have registered more)."""
        self._loading = True
        try:
            current = self.strategy_box.currentData()
            self.strategy_box.clear()
            for name in self._registries.strategies.names():
                info = self._registries.strategies.get(name)
                self.strategy_box.addItem(name, name)
                self.strategy_box.setItemData(self.strategy_box.count() - 1, info.description,
                                              Qt.ItemDataRole.ToolTipRole)
            if current is not None:
                self._select_data(self.strategy_box, current)
            profile = self.profile_box.currentData()
            self.profile_box.clear()
            self.profile_box.addItem(FROM_MODEL, None)
            for name in self._registries.tokenizers.names():
                self.profile_box.addItem(name, name)
            self._select_data(self.profile_box, profile)
        finally:
            self._loading = False

    @staticmethod
    def _select_data(box: QComboBox, value: Any) -> None:
        i = box.findData(value)
        if i < 0 and value is not None:
            box.addItem(f"{value} (not registered)", value)
            i = box.count() - 1
        box.setCurrentIndex(max(0, i))

    # -- state in ------------------------------------------------------------------------
    def set_settings(self, settings: ContextSettings) -> None:
        """Show ``settings`` (no signal)."""
        self._loading = True
        try:
            self._settings = settings
            self.model_box.setCurrentText(settings.model)
            self.limit_box.setValue(settings.context_limit or 0)
            self.reserve_edit.setText(str(settings.reply_reserve))
            self._select_data(self.profile_box, settings.tokenizer)
            self._select_data(self.strategy_box, settings.strategy)
            self.options_edit.setText(json.dumps(settings.strategy_options) if settings.strategy_options else "")
            opts = settings.strategy_options or {}
            self.recall_model.set_model(str(opts.get("embedding_model") or opts.get("embedding_model_path") or ""))
            self.wi_percent.setValue(settings.world_info.budget_percent)
            self.wi_cap.setValue(settings.world_info.budget_cap)
            self.wi_depth.setValue(settings.world_info.scan_depth)
            self.margin_box.setValue(settings.safety_margin_percent)
            self.error_label.clear()
            self._update_model_info()
            self._update_strategy_desc()
        finally:
            self._loading = False

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        # a wrapped label whose text changed while the tab was hidden keeps its old row height
        # until the form asks again (the strategy's description, issue 31)
        layout = self.layout()
        if layout is not None:
            layout.invalidate()

    def set_preview(self, preview: ContextPreview | None) -> None:
        """Show the approximate-profile badge, the preview's warnings and, for a chat from a
        SillyTavern folder, SillyTavern's assembly as the strategy (the header's word)."""
        self._show_sillytavern_strategy(preview is not None and preview.strategy == SILLYTAVERN_STRATEGY)
        if preview is not None and preview.tokenizer.approximate:
            self.badge.setText(f"⚠ Approximate token counts: profile <b>{preview.tokenizer.profile}</b> "
                               f"estimates this model's tokenizer; a {preview.safety_margin:,}-token "
                               "safety margin is held back.")
            self.badge.show()
        else:
            self.badge.hide()
        warnings = list(preview.warnings) if preview is not None else []
        self.warnings_label.setText("\n".join(f"⚠ {w}" for w in warnings))
        self._preview_budget = preview.budget if preview is not None else None
        self._update_wi_tokens()

    def _update_wi_tokens(self) -> None:
        """``= 1,792 tokens of the 7,168-token prompt budget`` under the lorebook percentage."""
        budget = self._preview_budget
        if budget is None:
            self.wi_tokens.setText("")
            return
        tokens = lorebook_budget(self._settings, budget)  # the rule the preview applies
        cap = " (capped)" if self._settings.world_info.budget_cap and \
            tokens == self._settings.world_info.budget_cap else ""
        self.wi_tokens.setText(f"= {tokens:,}{cap} of the {budget:,}-token prompt budget")
        self.wi_tokens.setToolTip("The prompt budget is the context window minus the reply reserve; "
                                  "World Info entries past this many tokens are dropped")

    def settings(self) -> ContextSettings:
        """The settings last shown or emitted."""
        return self._settings

    # -- edits out -----------------------------------------------------------------------
    def _update_model_info(self) -> None:
        info = lookup_model(self.model_box.currentText())
        if info.known:
            self.model_info.setText(f"table: {info.profile}, {info.context_limit:,} tokens")
        else:
            self.model_info.setText(f"custom model: estimated with {info.profile}; set the limit and profile")

    def shows_sillytavern_strategy(self) -> bool:
        """``True`` while the strategy box shows SillyTavern's assembly (and is locked)."""
        return self.strategy_box.findText(SILLYTAVERN_STRATEGY_LABEL) >= 0

    def _show_sillytavern_strategy(self, on: bool) -> None:
        """A SillyTavern chat is assembled by SillyTavern's rules, whatever ``settings.strategy`` says.

        Shown as a locked entry with no data (so an edit elsewhere keeps the stored strategy);
        off again for a Loomscope chat.
        """
        at = self.strategy_box.findText(SILLYTAVERN_STRATEGY_LABEL)
        if on == (at >= 0):
            return
        self._loading = True
        try:
            if on:
                self.strategy_box.addItem(SILLYTAVERN_STRATEGY_LABEL, None)
                self.strategy_box.setCurrentIndex(self.strategy_box.count() - 1)
            else:
                self.strategy_box.removeItem(at)
                self._select_data(self.strategy_box, self._settings.strategy)
            for w in (self.strategy_box, self.options_edit):
                w.setEnabled(not on)
                w.setToolTip(SILLYTAVERN_STRATEGY_TIP if on else "")
            self._update_strategy_desc()
        finally:
            self._loading = False

    def _update_strategy_desc(self) -> None:
        if self.strategy_box.currentText() == SILLYTAVERN_STRATEGY_LABEL:
            self.strategy_desc.setText(SILLYTAVERN_STRATEGY_DESC)
            self.strategy_desc.setToolTip(SILLYTAVERN_STRATEGY_TIP)
            self.strategy_desc.updateGeometry()
            return
        self.strategy_desc.setToolTip("")
        name = self.strategy_box.currentData()
        desc = ""
        if name in self._registries.strategies:
            desc = self._registries.strategies.get(name).description
        self.strategy_desc.setText(desc)
        self._form.setRowVisible(self._recall_row, name == "vector-recall")

    def _on_model_box_changed(self, _text: str) -> None:
        self._update_model_info()
        self._on_any_changed()

    def _on_recall_model_chosen(self, name: str) -> None:
        """Put the chosen model into the strategy options (``embedding_model``; none: BM25)."""
        text = self.options_edit.text().strip()
        try:
            options = json.loads(text) if text else {}
        except json.JSONDecodeError:
            options = None
        if not isinstance(options, dict):
            self.error_label.setText("Not applied: fix the strategy options JSON first")
            return
        options.pop("embedding_model_path", None)
        if name:
            options["embedding_model"] = name
        else:
            options.pop("embedding_model", None)
        self.options_edit.setText(json.dumps(options) if options else "")
        self._on_any_changed()

    def _on_strategy_box_changed(self, _i: int) -> None:
        self._update_strategy_desc()
        self._on_any_changed()

    def build_settings(self) -> ContextSettings:
        """A new :class:`ContextSettings` from the form; raises ``ValueError`` / ``ValidationError``."""
        text = self.options_edit.text().strip()
        options = json.loads(text) if text else {}
        if not isinstance(options, dict):
            raise ValueError("strategy options must be a JSON object")
        reserve: int | str = self.reserve_edit.text().strip() or "0"
        if str(reserve).isdigit():
            reserve = int(reserve)
        wi = self._settings.world_info.model_copy(update={
            "budget_percent": self.wi_percent.value(), "budget_cap": self.wi_cap.value(),
            "scan_depth": self.wi_depth.value()})
        data = self._settings.model_dump()
        data.update(model=self.model_box.currentText().strip() or "gpt-4o",
                    context_limit=self.limit_box.value() or None, reply_reserve=reserve,
                    tokenizer=self.profile_box.currentData(),
                    strategy=self.strategy_box.currentData() or self._settings.strategy,
                    strategy_options=options, safety_margin_percent=self.margin_box.value(),
                    world_info=wi.model_dump())
        return ContextSettings.model_validate(data)

    def _on_any_changed(self, *_args: Any) -> None:
        if self._loading:
            return
        try:
            settings = self.build_settings()
        except (ValueError, ValidationError) as exc:
            if isinstance(exc, ValidationError):
                msg = "; ".join(e.get("msg", "") for e in exc.errors())
            else:
                msg = str(exc) if isinstance(exc, json.JSONDecodeError) is False else "strategy options are not valid JSON"
            self.error_label.setText(f"Not applied: {msg}")
            return
        self.error_label.clear()
        if settings != self._settings:
            self._settings = settings
            self.settings_edited.emit(settings)
