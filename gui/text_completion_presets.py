"""What picking an instruct, context or system-prompt preset does, as SillyTavern 1.12.6's
Advanced Formatting panel does it (issue 26 item 4; Qt-free).

- Instruct preset (``instruct-mode.js``, ``#instruct_presets`` change): every property of the
  ``controls`` list that the preset has replaces the live one, and ``preset`` becomes its name;
  ``enabled`` and ``bind_to_context`` are not in 1.12.6's preset files, so they stay; ``macro`` and
  ``names_force_groups`` are not in ``controls``, so they stay too. With ``bind_to_context`` on,
  the context template of the same name is selected as well (``selectMatchingContextTemplate``).
- Context preset (``power-user.js``, ``#context_presets`` change): each ``contextControls``
  property becomes the preset's value (or the control's ``defaultValue``): ``story_string``,
  ``example_separator``, ``chat_start``, ``use_stop_strings``, ``allow_jailbreak``,
  ``names_as_stop_strings`` on the context, and the global switches ``always_force_name2``
  (default on), ``trim_sentences``, ``single_line`` (default off). With ``bind_to_context`` on, the
  instruct preset of the same name is selected as well.
- System prompt preset (``sysprompt.js``): its name and content; ``enabled`` stays.

Stored presets no longer say which fields their file left out (the importer fills defaults), so a
preset file without, say, ``first_input_sequence`` sets it to ``""`` here where SillyTavern would
keep the live value.
"""

from __future__ import annotations

from engine.schema.sillytavern import ContextTemplate, InstructTemplate, SystemPromptPreset, TextCompletionSetup

#: ``instruct-mode.js`` ``controls`` properties a preset carries (``enabled`` and
#: ``bind_to_context`` are controls too, but never in 1.12.6's preset files).
INSTRUCT_PRESET_FIELDS: tuple[str, ...] = (
    "wrap", "system_sequence_prefix", "system_sequence_suffix", "input_sequence", "input_suffix",
    "output_sequence", "output_suffix", "system_sequence", "system_suffix", "last_system_sequence",
    "user_alignment_message", "stop_sequence", "first_output_sequence", "last_output_sequence",
    "first_input_sequence", "last_input_sequence", "activation_regex", "skip_examples", "names_behavior",
    "system_same_as_user",
)
#: ``power-user.js`` ``contextControls`` on the context itself.
CONTEXT_PRESET_FIELDS: tuple[str, ...] = (
    "story_string", "example_separator", "chat_start", "use_stop_strings", "allow_jailbreak", "names_as_stop_strings",
)
#: ``contextControls`` that are global ``power_user`` switches, with their ``defaultValue``.
CONTEXT_GLOBAL_DEFAULTS: dict[str, bool] = {"always_force_name2": True, "trim_sentences": False, "single_line": False}


def _find(presets: list, name: str, key: str = "preset"):
    return next((p for p in presets if getattr(p, key) == name), None)


def _instruct_from(live: InstructTemplate, preset: InstructTemplate) -> InstructTemplate:
    update = {f: getattr(preset, f) for f in INSTRUCT_PRESET_FIELDS}
    update["preset"] = preset.preset
    return live.model_copy(update=update)


def _context_from(setup: TextCompletionSetup, preset: ContextTemplate) -> TextCompletionSetup:
    context = setup.context.model_copy(update={"preset": preset.preset,
                                               **{f: getattr(preset, f) for f in CONTEXT_PRESET_FIELDS}})
    switches = {k: (getattr(preset, k) if getattr(preset, k) is not None else default)
                for k, default in CONTEXT_GLOBAL_DEFAULTS.items()}
    return setup.model_copy(update={"context": context, **switches})


def pick_instruct_preset(setup: TextCompletionSetup, name: str) -> TextCompletionSetup:
    """``setup`` with instruct preset ``name`` selected (unchanged when the folder has none of that name)."""
    preset = _find(setup.instruct_presets, name)
    if preset is None:
        return setup
    out = setup.model_copy(update={"instruct": _instruct_from(setup.instruct, preset)})
    if out.instruct.bind_to_context:
        context = _find(out.context_presets, name)
        if context is not None:
            out = _context_from(out, context)
    return out


def pick_context_preset(setup: TextCompletionSetup, name: str) -> TextCompletionSetup:
    """``setup`` with context preset ``name`` selected (unchanged when the folder has none of that name)."""
    preset = _find(setup.context_presets, name)
    if preset is None:
        return setup
    out = _context_from(setup, preset)
    if out.instruct.bind_to_context:
        instruct = _find(out.instruct_presets, name)
        if instruct is not None:
            out = out.model_copy(update={"instruct": _instruct_from(out.instruct, instruct)})
    return out


def pick_sysprompt_preset(setup: TextCompletionSetup, name: str) -> TextCompletionSetup:
    """``setup`` with system prompt preset ``name`` selected (its name and content; ``enabled`` stays)."""
    preset: SystemPromptPreset | None = _find(setup.sysprompt_presets, name, "name")
    if preset is None:
        return setup
    return setup.model_copy(update={"sysprompt": setup.sysprompt.model_copy(
        update={"name": preset.name, "content": preset.content})})


def enable_instruct(setup: TextCompletionSetup, enabled: bool) -> TextCompletionSetup:
    """Instruct mode on or off; switched on with ``bind_to_context``, the context template named
    like the instruct preset is selected too (``instruct-mode.js`` ``#instruct_enabled`` change)."""
    out = setup.model_copy(update={"instruct": setup.instruct.model_copy(update={"enabled": bool(enabled)})})
    if enabled and out.instruct.bind_to_context:
        context = _find(out.context_presets, out.instruct.preset)
        if context is not None:
            out = _context_from(out, context)
    return out
