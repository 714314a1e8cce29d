"""The Setup tab's Advanced Formatting box (issue 26): instruct / context presets, every field, undoable.

Preset rules cite SillyTavern 1.12.6: ``public/scripts/instruct-mode.js`` (``#instruct_presets``
change, ``selectMatchingContextTemplate``, ``#instruct_enabled`` change) and
``public/scripts/power-user.js`` (``#context_presets`` change, ``contextControls``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.schema.sillytavern import ContextTemplate, InstructTemplate, SystemPromptPreset, TextCompletionSetup
from gui.text_completion_presets import (
    INSTRUCT_PRESET_FIELDS,
    enable_instruct,
    pick_context_preset,
    pick_instruct_preset,
    pick_sysprompt_preset,
)
from gui.widgets.text_completion_setup import INSTRUCT_SWITCHES, INSTRUCT_TEXTS, TextCompletionSetupBox

CHATML = InstructTemplate(preset="ChatML", input_sequence="<|im_start|>user", output_sequence="<|im_start|>assistant",
                          system_sequence="<|im_start|>system", input_suffix="<|im_end|>\n",
                          output_suffix="<|im_end|>\n", system_suffix="<|im_end|>\n", stop_sequence="<|im_end|>",
                          names_behavior="force", macro=False)
CHATML_CONTEXT = ContextTemplate(preset="ChatML", story_string="<|im_start|>system\n{{#if system}}{{system}}\n{{/if}}",
                                 chat_start="", example_separator="", always_force_name2=None, trim_sentences=True)


def _setup(**kw) -> TextCompletionSetup:
    values = dict(main_api="koboldhorde", instruct=InstructTemplate(enabled=True, preset="Alpaca"),
                  instruct_presets=[InstructTemplate(preset="Alpaca"), CHATML],
                  context_presets=[ContextTemplate(preset="Default"), CHATML_CONTEXT],
                  sysprompt_presets=[SystemPromptPreset(name="Neutral - Chat"),
                                     SystemPromptPreset(name="Roleplay - Simple", content="You're {{char}}.")])
    values.update(kw)
    return TextCompletionSetup(**values)


def test_instruct_preset_copies_the_controls_and_keeps_the_rest() -> None:
    live = _setup().instruct.model_copy(update={"macro": True, "bind_to_context": False})
    out = pick_instruct_preset(_setup(instruct=live), "ChatML")
    assert out.instruct.preset == "ChatML" and out.instruct.input_sequence == "<|im_start|>user"
    assert all(getattr(out.instruct, f) == getattr(CHATML, f) for f in INSTRUCT_PRESET_FIELDS)
    # not in instruct-mode.js controls / not in preset files: the live values stay
    assert out.instruct.enabled is True and out.instruct.macro is True
    assert out.context.preset == "Default"  # not bound to the context
    assert pick_instruct_preset(_setup(), "No such preset") == _setup()


def test_bind_to_context_selects_the_matching_template_both_ways() -> None:
    bound = _setup(instruct=InstructTemplate(enabled=True, preset="Alpaca", bind_to_context=True))
    out = pick_instruct_preset(bound, "ChatML")
    assert out.context.preset == "ChatML" and out.context.story_string == CHATML_CONTEXT.story_string
    # the global switches follow the preset, or contextControls' defaultValue when it has none
    assert out.trim_sentences is True and out.always_force_name2 is True and out.single_line is False
    back = pick_context_preset(out, "Default")
    assert back.context.preset == "Default" and back.instruct.preset == "ChatML"  # no "Default" instruct preset
    ctx = pick_context_preset(bound, "ChatML")
    assert ctx.instruct.preset == "ChatML"
    off = bound.model_copy(update={"instruct": bound.instruct.model_copy(update={"enabled": False, "preset": "ChatML"})})
    assert enable_instruct(off, True).context.preset == "ChatML"
    assert enable_instruct(off, False).context.preset == "Default"


def test_sysprompt_preset_keeps_enabled() -> None:
    tc = _setup(sysprompt=SystemPromptPreset(enabled=False))
    out = pick_sysprompt_preset(tc, "Roleplay - Simple")
    assert (out.sysprompt.name, out.sysprompt.content, out.sysprompt.enabled) == (
        "Roleplay - Simple", "You're {{char}}.", False)


@pytest.fixture
def box(qtbot):
    widget = TextCompletionSetupBox()
    qtbot.addWidget(widget)
    widget.set_setup(_setup())
    return widget


def _edits(box):
    seen: list = []
    box.edited.connect(lambda tc, label: seen.append((tc, label)))
    return seen


def test_box_shows_every_field(box) -> None:
    tc = _setup()
    fields = set(InstructTemplate.model_fields) - {"enabled", "preset", "names_behavior"}
    assert fields == {f for f, _ in INSTRUCT_SWITCHES} | {f for f, _ in INSTRUCT_TEXTS}
    assert box.instruct_enabled.isChecked()
    assert [box.instruct_preset.itemData(i) for i in range(box.instruct_preset.count())] == ["Alpaca", "ChatML"]
    assert box.instruct_preset.currentData() == "Alpaca" and box.context_preset.currentData() == "Default"
    assert box.instruct_texts["input_sequence"].toPlainText() == "### Instruction:"
    assert box.story_string.toPlainText() == tc.context.story_string
    assert box.names_behavior.currentData() == "force" and box.tokenizer.currentData() == 99
    assert box.amount_gen.value() == tc.amount_gen and "koboldhorde" in box.backend.text()


def test_box_emits_one_intent_per_edit(box) -> None:
    seen = _edits(box)
    box.instruct_preset.setCurrentIndex(box.instruct_preset.findData("ChatML"))
    box.instruct_preset.activated.emit(box.instruct_preset.currentIndex())
    assert seen[-1][0].instruct.preset == "ChatML" and seen[-1][1] == "Instruct preset 'ChatML'"
    box.instruct_switches["wrap"].setChecked(False)
    assert seen[-1][0].instruct.wrap is False
    box.names_behavior.setCurrentIndex(box.names_behavior.findData("always"))
    box.names_behavior.activated.emit(box.names_behavior.currentIndex())
    assert seen[-1][0].instruct.names_behavior == "always"
    box.instruct_texts["stop_sequence"].setPlainText("</s>")
    box.instruct_texts["input_sequence"].setPlainText("[INST]")
    box.apply_instruct_texts()
    assert (seen[-1][0].instruct.stop_sequence, seen[-1][0].instruct.input_sequence) == ("</s>", "[INST]")
    box.story_string.setPlainText("{{description}}\n")
    box.chat_start.setPlainText("<START>")
    box.apply_context_texts()
    assert (seen[-1][0].context.story_string, seen[-1][0].context.chat_start) == ("{{description}}\n", "<START>")
    box.context_switches["names_as_stop_strings"].setChecked(False)
    assert seen[-1][0].context.names_as_stop_strings is False
    box.global_switches["single_line"].setChecked(True)
    assert seen[-1][0].single_line is True
    box.amount_gen.setValue(512)
    box.tokenizer.setCurrentIndex(box.tokenizer.findData(12))
    box.apply_generation()
    assert (seen[-1][0].amount_gen, seen[-1][0].tokenizer) == (512, 12)
    # Start Reply With belongs to the chat's SillyTavern setup (both paths read it): its own intent
    replies: list[str] = []
    box.start_reply_with_edited.connect(replies.append)
    box.apply_generation()
    assert replies == []  # unchanged: nothing said
    box.prompt_bias.setText("{{char}} smiles:")
    box.apply_generation()
    assert replies == ["{{char}} smiles:"]
    box.set_api("chat_completion")
    assert seen[-1] == (None, "Send as Chat Completion")
    n = len(seen)
    box.set_setup(_setup())  # showing a state emits nothing
    assert len(seen) == n


def test_a_chat_completion_chat_can_switch(box) -> None:
    seen = _edits(box)
    box.set_setup(None)
    assert box.body.isHidden() and box.api.currentData() == "chat_completion"
    box.set_api("text_completion")
    assert isinstance(seen[-1][0], TextCompletionSetup)


# ------------------------------------------------------------------ in the window, undoable


@pytest.fixture
def tc_window(qtbot, tmp_path: Path, qsettings, shared_data):
    """A window on the shared SillyTavern user folder (koboldhorde, Alpaca, Default), imported."""
    from tests.gui.test_library_setup import _close, _open_window

    user = shared_data / "st-user" / "default-user"
    if not (user / "instruct").is_dir():
        pytest.skip("the shared user folder has no instruct presets")
    win = _open_window(qtbot, f"sqlite:///{tmp_path / 'library.sqlite3'}", qsettings)
    with qtbot.waitSignal(win.preview_applied, timeout=60000):
        win.library_setup.import_folder(user)
    win.library_setup.summary_box.close()
    yield win
    _close(win)


def test_preset_switch_in_the_window_is_undoable(qtbot, tc_window) -> None:
    from tests.gui.test_library_setup import ctrl_shift_z, ctrl_z, rerun

    win = tc_window
    panel = win.library_setup.setup_panel
    box = panel.text_completion
    st = panel.state.sillytavern
    assert st is not None and st.text_completion is not None
    assert (box.instruct_preset.currentData(), box.context_preset.currentData()) == ("Alpaca", "Default")
    assert box.instruct_preset.count() >= 20 and box.context_preset.findData("ChatML") >= 0
    rerun(qtbot, win, lambda: box.pick_instruct("ChatML"))
    tc = panel.state.sillytavern.text_completion
    assert tc.instruct.preset == "ChatML" and tc.instruct.input_sequence == "<|im_start|>user"
    assert win.ctx.store.chats.get_setup(panel.state.chat_id).sillytavern.text_completion.instruct.preset == "ChatML"
    assert box.instruct_preset.currentData() == "ChatML"
    ctrl_z(qtbot, win)
    assert panel.state.sillytavern.text_completion.instruct.preset == "Alpaca"
    assert box.instruct_preset.currentData() == "Alpaca"
    ctrl_shift_z(qtbot, win)
    assert panel.state.sillytavern.text_completion.instruct.preset == "ChatML"
    box.instruct_texts["stop_sequence"].setPlainText("<|im_end|>\n")
    rerun(qtbot, win, box.apply_instruct_texts)
    assert panel.state.sillytavern.text_completion.instruct.stop_sequence == "<|im_end|>\n"
    ctrl_z(qtbot, win)
    assert panel.state.sillytavern.text_completion.instruct.stop_sequence == "<|im_end|>"
