"""Text Completion fixture folders for the tests (issue 26), built in code from small JSON.

Each case is a SillyTavern 1.12.6 user folder written under ``tmp_path``: ``settings.json`` (main_api
``textgenerationwebui``, the instruct / context / system prompt settings as SillyTavern holds them
after loading, persona, Author's Note defaults), a card with example dialogue and a Character's Note,
a character world with constant entries before / after the card, at depth, at the top and bottom of
the Author's Note and before / after the example dialogue, and a chat with a hidden message and an Author's Note at depth.

The preset values are copied from SillyTavern 1.12.6's ``default/content/presets/instruct`` and
``context`` files (so the tests do not read ``../shared/data``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.engine.importers.st_fixture import card_png, entry

#: SillyTavern 1.12.6 instruct presets (``default/content/presets/instruct/*.json``).
INSTRUCT: dict[str, dict[str, Any]] = {
    'ChatML': {
        'input_sequence': '<|im_start|>user',
        'output_sequence': '<|im_start|>assistant',
        'last_output_sequence': '',
        'system_sequence': '<|im_start|>system',
        'stop_sequence': '<|im_end|>',
        'wrap': True,
        'macro': True,
        'names_behavior': 'always',
        'activation_regex': '',
        'system_sequence_prefix': '',
        'system_sequence_suffix': '',
        'first_output_sequence': '',
        'skip_examples': False,
        'output_suffix': '<|im_end|>\n',
        'input_suffix': '<|im_end|>\n',
        'system_suffix': '<|im_end|>\n',
        'user_alignment_message': '',
        'system_same_as_user': False,
        'last_system_sequence': '',
        'name': 'ChatML',
    },
    'Llama 3 Instruct': {
        'input_sequence': '<|start_header_id|>user<|end_header_id|>\n\n',
        'output_sequence': '<|start_header_id|>assistant<|end_header_id|>\n\n',
        'last_output_sequence': '',
        'system_sequence': '<|start_header_id|>system<|end_header_id|>\n\n',
        'stop_sequence': '<|eot_id|>',
        'wrap': False,
        'macro': True,
        'names_behavior': 'always',
        'activation_regex': '',
        'system_sequence_prefix': '',
        'system_sequence_suffix': '',
        'first_output_sequence': '',
        'skip_examples': False,
        'output_suffix': '<|eot_id|>',
        'input_suffix': '<|eot_id|>',
        'system_suffix': '<|eot_id|>',
        'user_alignment_message': '',
        'system_same_as_user': True,
        'last_system_sequence': '',
        'name': 'Llama 3 Instruct',
    },
    'Mistral V2 & V3': {
        'input_sequence': '[INST] ',
        'output_sequence': '[/INST] ',
        'last_output_sequence': '[/INST]',
        'system_sequence': '',
        'stop_sequence': '',
        'wrap': False,
        'macro': True,
        'names_behavior': 'always',
        'activation_regex': '',
        'system_sequence_prefix': '',
        'system_sequence_suffix': '',
        'first_output_sequence': '',
        'skip_examples': False,
        'output_suffix': '</s>',
        'input_suffix': '',
        'system_suffix': '',
        'user_alignment_message': "Let's get started. Please respond based on the information and instructions provided above.",
        'system_same_as_user': True,
        'last_system_sequence': '',
        'name': 'Mistral V2 & V3',
    },
    'Gemma 2': {
        'input_sequence': '<start_of_turn>user',
        'output_sequence': '<start_of_turn>model',
        'last_output_sequence': '',
        'system_sequence': '<start_of_turn>system',
        'stop_sequence': '<end_of_turn>',
        'wrap': True,
        'macro': True,
        'names_behavior': 'none',
        'activation_regex': '',
        'system_sequence_prefix': '',
        'system_sequence_suffix': '',
        'first_output_sequence': '',
        'skip_examples': False,
        'output_suffix': '<end_of_turn>\n',
        'input_suffix': '<end_of_turn>\n',
        'system_suffix': '<end_of_turn>\n',
        'user_alignment_message': '',
        'system_same_as_user': True,
        'last_system_sequence': '',
        'name': 'Gemma 2',
    },
    'Alpaca': {
        'input_sequence': '### Instruction:',
        'output_sequence': '### Response:',
        'last_output_sequence': '',
        'system_sequence': '### Input:',
        'stop_sequence': '',
        'wrap': True,
        'macro': True,
        'names_behavior': 'force',
        'activation_regex': '',
        'system_sequence_prefix': '',
        'system_sequence_suffix': '',
        'first_output_sequence': '',
        'skip_examples': False,
        'output_suffix': '\n\n',
        'input_suffix': '\n\n',
        'system_suffix': '\n\n',
        'user_alignment_message': '',
        'system_same_as_user': False,
        'last_system_sequence': '',
        'name': 'Alpaca',
    },
}

#: SillyTavern 1.12.6 context templates (``default/content/presets/context/*.json``).
CONTEXT: dict[str, dict[str, Any]] = {
    'ChatML': {
        'story_string': "<|im_start|>system\n{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}{{trim}}<|im_end|>",
        'example_separator': '',
        'chat_start': '',
        'use_stop_strings': False,
        'allow_jailbreak': False,
        'always_force_name2': True,
        'trim_sentences': False,
        'single_line': False,
        'name': 'ChatML',
    },
    'Llama 3 Instruct': {
        'story_string': "<|start_header_id|>system<|end_header_id|>\n\n{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}{{trim}}<|eot_id|>",
        'example_separator': '',
        'chat_start': '',
        'use_stop_strings': False,
        'allow_jailbreak': False,
        'always_force_name2': True,
        'trim_sentences': False,
        'single_line': False,
        'name': 'Llama 3 Instruct',
    },
    'Mistral V2 & V3': {
        'story_string': '[INST] {{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}{{#if personality}}{{personality}}\n{{/if}}{{#if scenario}}{{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}{{trim}}[/INST] Understood.</s>',
        'example_separator': '',
        'chat_start': '',
        'use_stop_strings': False,
        'allow_jailbreak': False,
        'always_force_name2': True,
        'trim_sentences': False,
        'single_line': False,
        'name': 'Mistral V2 & V3',
    },
    'Gemma 2': {
        'story_string': "<start_of_turn>user\n{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}{{trim}}<end_of_turn>",
        'example_separator': '',
        'chat_start': '',
        'use_stop_strings': False,
        'allow_jailbreak': False,
        'always_force_name2': True,
        'trim_sentences': False,
        'single_line': False,
        'name': 'Gemma 2',
    },
    'Default': {
        'story_string': "{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}",
        'example_separator': '***',
        'chat_start': '***',
        'use_stop_strings': False,
        'allow_jailbreak': False,
        'always_force_name2': True,
        'trim_sentences': False,
        'single_line': False,
        'name': 'Default',
    },
}

#: case name -> (instruct preset or None for instruct off, context preset, persona position, depth)
CASES: dict[str, tuple[str | None, str, int]] = {
    "plain": (None, "Default", 0),
    "alpaca": ("Alpaca", "Default", 0),
    "chatml": ("ChatML", "ChatML", 0),
    "llama3": ("Llama 3 Instruct", "Llama 3 Instruct", 4),
    "mistral": ("Mistral V2 & V3", "Mistral V2 & V3", 2),
    "gemma2": ("Gemma 2", "Gemma 2", 0),
}
#: variant name -> (base case, power_user overrides (nested dicts merged), card overrides)
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "chatml-pinned-bias": ("chatml", {"pin_examples": True, "user_prompt_bias": "*He smiles* ",
                                      "collapse_newlines": True}, {}),
    "alpaca-jailbreak": ("alpaca", {"context": {"allow_jailbreak": True}, "sysprompt": {"enabled": False},
                                    "single_line": True},
                         {"post_history_instructions": "Stay in character as {{char}}."}),
    "llama3-alignment": ("llama3", {"instruct": {"user_alignment_message": "Begin.", "names_behavior": "force"},
                                    "strip_examples": True}, {}),
    "mistral-card-system": ("mistral", {"persona_description_position": 3},
                            {"system_prompt": "You are {{char}}. {{original}}"}),
    "plain-no-names": ("plain", {"always_force_name2": False, "context": {"names_as_stop_strings": False}}, {}),
    "gemma2-skip-examples": ("gemma2", {"instruct": {"skip_examples": True},
                                        "context": {"example_separator": "---", "use_stop_strings": True}}, {}),
    "alpaca-note-in-prompt": ("alpaca", {"persona_description_position": 2}, {}),
    "plain-note-before": ("plain", {}, {}),
}
#: case -> Author's Note (``chat_metadata``) overrides: position 0 after the story string, 2 before it
NOTE_CHANGES: dict[str, dict[str, Any]] = {
    "alpaca-note-in-prompt": {"note_position": 0},
    "plain-note-before": {"note_position": 2, "note_interval": 2},
}
#: budget name -> (max_context, amount_gen): everything fits / the history must be cut
BUDGETS: dict[str, tuple[int, int]] = {"full": (8192, 300), "cut": (620, 220)}

USER, CHAR = "Alex", "Kael"
CARD: dict[str, Any] = {
    "name": CHAR,
    "description": "{{char}} is a wandering swordsman who owes {{user}} a debt.",
    "personality": "stoic, dry humour",
    "scenario": "{{char}} and {{user}} wait out a storm in a harbor inn.",
    "mes_example": "<START>\n{{user}}: Where to next?\n{{char}}: Wherever the road is dry.\n"
                   "<START>\n{{user}}: Do you trust me?\n{{char}}: More than my sword.",
    "first_mes": "*The rain hammers the shutters.* Another night here, {{user}}.",
}
DEPTH_PROMPT = {"prompt": "{{char}} never lies.", "depth": 2, "role": "system"}
WORLD = {"entries": {
    "0": entry(0, [], "Lore: the harbor city of Quill sits on a cold sea.", constant=True, order=100, position=0),
    "1": entry(1, [], "Lore: storms here last three days.", constant=True, order=50, position=1),
    "2": entry(2, [], "Lore (depth): the tide is rising.", constant=True, order=10, position=4, depth=1),
    "3": entry(3, [], "Lore (AN top): fog rolls in.", constant=True, order=20, position=2),
    "4": entry(4, [], "Lore: {{user}} carries a brass compass.", constant=True, order=90, position=0),
    "5": entry(5, [], "Lore (AN bottom): the lamps gutter.", constant=True, order=15, position=3),
    "6": entry(6, [], "{{user}}: Any news from the pass?\n{{char}}: Snow. Nothing else.", constant=True, order=30,
               position=5),
    "7": entry(7, [], "<START>\n{{user}}: Your blade?\n{{char}}: Ember. It stays sheathed.", constant=True,
               order=40, position=6),
}}
NOTE = {"note_prompt": "[Style: terse, {{char}} speaks little.]", "note_interval": 1, "note_depth": 3,
        "note_position": 1, "note_role": 0}
PERSONA_DESCRIPTION = "{{user}} is a cartographer with ink-stained hands."


def note(case: str) -> dict[str, Any]:
    """The chat's Author's Note fields (``chat_metadata``) for a case."""
    return {**NOTE, **NOTE_CHANGES.get(case, {})}


def chat_messages(turns: int = 12) -> list[dict[str, Any]]:
    """The chat: a greeting, ``turns`` turns (the sixth hidden) in SillyTavern's ``.jsonl`` message shape."""
    out: list[dict[str, Any]] = [{"name": CHAR, "is_user": False, "is_system": False, "mes": CARD["first_mes"],
                                  "send_date": "2024-01-01", "extra": {}}]
    for k in range(turns):
        user = k % 2 == 0
        text = (f"Turn {k}: " + ("I unfold the map and point at the coast road, asking about the bridge."
                                  if user else "He shakes his head. \"The bridge washed out last spring.\""))
        out.append({"name": USER if user else CHAR, "is_user": user, "is_system": k == 5, "mes": text,
                    "send_date": "2024-01-01", "extra": {}})
    return out


def power_user(case: str) -> dict[str, Any]:
    """``power_user`` as SillyTavern holds it after loading, written whole into ``settings.json``."""
    if case in VARIANTS:
        base, overrides, _card = VARIANTS[case]
        pu = power_user(base)
        for key, value in overrides.items():
            pu[key] = {**pu[key], **value} if isinstance(value, dict) else value
        if "persona_description_position" in overrides:
            pu["persona_descriptions"]["alex.png"]["position"] = overrides["persona_description_position"]
        return pu
    instruct_name, context_name, persona_position = CASES[case]
    preset = INSTRUCT[instruct_name or "Alpaca"]
    instruct = {k: v for k, v in preset.items() if k != "name"}
    instruct.update(enabled=instruct_name is not None, preset=preset["name"], first_input_sequence="",
                    last_input_sequence="", names_force_groups=True, bind_to_context=False)
    ctx = CONTEXT[context_name]
    context = {"preset": ctx["name"], "story_string": ctx["story_string"], "example_separator": ctx["example_separator"],
               "chat_start": ctx["chat_start"], "use_stop_strings": ctx["use_stop_strings"],
               "allow_jailbreak": ctx["allow_jailbreak"], "names_as_stop_strings": True}
    return {
        "instruct": instruct, "context": context,
        "sysprompt": {"enabled": True, "name": "Neutral - Chat",
                      "content": "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."},
        "tokenizer": 99, "token_padding": 64, "always_force_name2": True, "trim_sentences": False,
        "single_line": False, "collapse_newlines": False, "pin_examples": False, "strip_examples": False,
        "user_prompt_bias": "", "custom_stopping_strings": "[\"\\n###\", \"{{user}}:\"]",
        "custom_stopping_strings_macro": True, "prefer_character_prompt": True, "prefer_character_jailbreak": True,
        "persona_description": PERSONA_DESCRIPTION, "persona_description_position": persona_position,
        "persona_description_depth": 1, "persona_description_role": 0,
        "personas": {"alex.png": USER}, "default_persona": "alex.png",
        "persona_descriptions": {"alex.png": {"description": PERSONA_DESCRIPTION, "position": persona_position,
                                              "depth": 1, "role": 0}},
    }


def settings(case: str, budget: str) -> dict[str, Any]:
    """``settings.json`` of a case."""
    max_context, amount_gen = BUDGETS[budget]
    return {
        "username": USER, "user_avatar": "alex.png", "main_api": "textgenerationwebui",
        "max_context": max_context, "amount_gen": amount_gen,
        "textgenerationwebui_settings": {"type": "llamacpp", "server_urls": {"llamacpp": "http://127.0.0.1:8080"}},
        "power_user": power_user(case),
        "world_info_settings": {"world_info": {"globalSelect": [], "charLore": []}, "world_info_depth": 2,
                                "world_info_budget": 100, "world_info_recursive": False,
                                "world_info_include_names": True},
        "extension_settings": {"note": {"default": "", "defaultInterval": 1, "defaultDepth": 4, "defaultPosition": 1,
                                        "defaultRole": 0, "allowWIScan": False}},
        "oai_settings": {},
    }


def card_data(case: str) -> dict[str, Any]:
    """The card's ``data`` (spec v2) for a case."""
    extra = VARIANTS[case][2] if case in VARIANTS else {}
    return {**CARD, "system_prompt": "", "post_history_instructions": "", "character_version": "1",
            "extensions": {"world": "Lore", "depth_prompt": DEPTH_PROMPT}, **extra}


def write_case(root: Path, case: str, budget: str, *, turns: int = 12, main_api: str | None = None) -> Path:
    """Write the case's user folder under ``root``; returns it (``root/default-user``).

    ``turns``: chat length after the greeting; ``main_api``: replaces ``textgenerationwebui`` (e.g.
    ``openai`` for the same folder over Chat Completion, with the same window in ``oai_settings``).
    """
    user = root / "default-user"
    for sub in ("characters", "worlds", "chats/kael", "User Avatars"):
        (user / sub).mkdir(parents=True, exist_ok=True)
    data = settings(case, budget)
    if main_api is not None:
        data["main_api"] = main_api
        data["oai_settings"] = {"openai_max_context": data["max_context"], "openai_max_tokens": data["amount_gen"],
                                "openai_model": "gpt-4-turbo"}
    (user / "settings.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    card = {"spec": "chara_card_v2", "spec_version": "2.0", **CARD, "data": card_data(case)}
    (user / "characters" / "kael.png").write_bytes(card_png(card))
    (user / "worlds" / "Lore.json").write_text(json.dumps(WORLD), encoding="utf-8")
    header = {"user_name": USER, "character_name": CHAR, "create_date": "2024-01-01", "chat_metadata": note(case)}
    lines = [json.dumps(header)] + [json.dumps(m) for m in chat_messages(turns)]
    (user / "chats" / "kael" / "inn.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return user
