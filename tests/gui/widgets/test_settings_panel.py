"""Settings panel: registry-driven choices, custom models, validation, the approximate badge."""

from __future__ import annotations

from engine.pipeline import default_registries
from engine.schema import ContextSettings
from gui.widgets.settings_panel import SettingsPanel
from tests.gui.helpers import make_block, make_preview


def test_choices_come_from_the_registries(qtbot) -> None:
    reg = default_registries()
    panel = SettingsPanel(reg)
    qtbot.addWidget(panel)
    assert [panel.strategy_box.itemData(i) for i in range(panel.strategy_box.count())] == reg.strategies.names()
    profiles = [panel.profile_box.itemData(i) for i in range(1, panel.profile_box.count())]
    assert profiles == reg.tokenizers.names()


def test_custom_model_with_limit_and_profile_emits_settings(qtbot) -> None:
    panel = SettingsPanel(default_registries())
    qtbot.addWidget(panel)
    panel.set_settings(ContextSettings(model="gpt-4o"))
    got: list[ContextSettings] = []
    panel.settings_edited.connect(got.append)
    panel.model_box.setCurrentText("my-local-model")
    assert "custom model" in panel.model_info.text()
    panel.limit_box.setValue(16384)
    panel.profile_box.setCurrentIndex(panel.profile_box.findData("llama3-approx"))
    panel.reserve_edit.setText("15%")
    panel.reserve_edit.editingFinished.emit()
    panel.wi_percent.setValue(10)
    last = got[-1]
    assert (last.model, last.context_limit, last.tokenizer, last.reply_reserve) == \
        ("my-local-model", 16384, "llama3-approx", "15%")
    assert last.world_info.budget_percent == 10
    # bad strategy options are refused with a message, nothing emitted
    n = len(got)
    panel.options_edit.setText("[1, 2]")
    panel.options_edit.editingFinished.emit()
    assert len(got) == n and panel.error_label.text().startswith("Not applied")


def test_approximate_badge(qtbot) -> None:
    panel = SettingsPanel(default_registries())
    qtbot.addWidget(panel)
    panel.set_preview(make_preview([make_block(0)], approximate=True))
    assert not panel.badge.isHidden() and "Approximate" in panel.badge.text()
    panel.set_preview(make_preview([make_block(0)], approximate=False))
    assert panel.badge.isHidden()
