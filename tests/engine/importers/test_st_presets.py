"""Reading SillyTavern's Text Completion setup and preset folders (issue 26, engine.importers.st_presets)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers.st_folder import read_st_folder
from engine.importers.st_presets import read_text_completion
from engine.schema.sillytavern import ContextTemplate, InstructTemplate
from tests.engine.assembly import tc_cases


def _folder(tmp_path: Path) -> Path:
    folder = tc_cases.write_case(tmp_path, "chatml", "full")
    (folder / "instruct").mkdir()
    (folder / "context").mkdir()
    good = {**tc_cases.INSTRUCT["ChatML"]}
    (folder / "instruct" / "ChatML.json").write_text(json.dumps(good), encoding="utf-8")
    (folder / "instruct" / "Broken.json").write_text("{not json", encoding="utf-8")
    odd = {**tc_cases.INSTRUCT["Alpaca"], "name": "Odd", "wrap": "yes", "sparkle": 1,
           "separator_sequence": "\n\n", "names": True}
    (folder / "instruct" / "Odd.json").write_text(json.dumps(odd), encoding="utf-8")
    (folder / "context" / "Default.json").write_text(json.dumps(tc_cases.CONTEXT["Default"]), encoding="utf-8")
    return folder


def test_presets_and_live_settings_with_bad_input(tmp_path: Path) -> None:
    """Malformed files are left out, unknown fields and wrong types are warnings naming file and field."""
    folder = _folder(tmp_path)
    settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    settings["power_user"]["instruct"]["glitter"] = True
    settings["power_user"]["context"]["chat_start"] = 7
    warnings: list[tuple[str, str]] = []
    tc = read_text_completion(folder, settings, lambda f, m: warnings.append((f, m)))
    assert tc is not None and tc.main_api == "textgenerationwebui"
    assert (tc.textgen_type, tc.server_url, tc.model) == ("llamacpp", "http://127.0.0.1:8080", None)
    # the live settings: the unknown field ignored, the bad value replaced by SillyTavern's default
    assert tc.instruct.enabled and tc.instruct.preset == "ChatML" and tc.instruct.input_sequence == "<|im_start|>user"
    assert tc.context.chat_start == ContextTemplate().chat_start
    text = "\n".join(f"{f}: {m}" for f, m in warnings)
    assert "settings.json: power_user.instruct.glitter: unknown field" in text
    assert "settings.json: power_user.context.chat_start: expected text, got int" in text
    assert "instruct/Broken.json: not a readable JSON preset" in text
    assert "instruct/Odd.json: $.sparkle: unknown field" in text
    assert "instruct/Odd.json: $.wrap: expected true/false, got str" in text
    assert "context/ChatML.json" in text and "has no file in context/" in text  # the selected one is missing
    names = [p.preset for p in tc.instruct_presets]
    assert names == ["ChatML", "Odd"]
    odd = tc.instruct_presets[1]
    # migrateInstructModeSettings: separator_sequence -> output_suffix, names -> names_behavior
    assert (odd.wrap, odd.output_suffix, odd.names_behavior) == (InstructTemplate().wrap, "\n\n", "always")
    assert [p.preset for p in tc.context_presets] == ["Default"]


def test_import_goes_on_and_reports_the_warnings(tmp_path: Path) -> None:
    """``read_st_folder``: the warnings reach ``on_warning``; the chat still gets its Text Completion setup."""
    folder = _folder(tmp_path)
    warnings: list[tuple[str, str]] = []
    plan = read_st_folder(folder, on_warning=lambda f, m: warnings.append((f, m)))
    chat = next(i for i in plan.items if i.kind == "chat")
    assert chat.setup is not None and chat.setup.text_completion is not None
    assert chat.settings is not None and (chat.settings.context_limit, chat.settings.reply_reserve) == (8192, 300)
    assert any(f == "instruct/Broken.json" for f, _ in warnings)
    assert {i.kind for i in plan.items} >= {"character", "chat", "lorebook"}


def test_chat_completion_folder_has_no_text_completion_setup(tmp_path: Path) -> None:
    folder = tc_cases.write_case(tmp_path, "plain", "full")
    settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    settings["main_api"] = "openai"
    assert read_text_completion(folder, settings, lambda f, m: None) is None
    settings.pop("main_api")
    assert read_text_completion(folder, settings, lambda f, m: None) is None


def test_missing_fields_follow_sillytavern_loading(tmp_path: Path) -> None:
    """``Object.assign`` keeps a saved object whole: a missing ``wrap`` is off; ``loadContextSettings`` defaults."""
    horde = read_text_completion(tmp_path, {"main_api": "koboldhorde",
                                            "horde_settings": {"auto_adjust_context_length": True}}, lambda f, m: None)
    assert horde is not None and horde.horde_auto_adjust_context
    settings = {"main_api": "kobold", "api_server": "http://127.0.0.1:5001/api",
                "power_user": {"instruct": {"enabled": True, "preset": "X", "input_sequence": "IN"},
                               "context": {"preset": "Y", "story_string": "{{description}}"}}}
    tc = read_text_completion(tmp_path, settings, lambda f, m: None)
    assert tc is not None and tc.server_url == "http://127.0.0.1:5001/api"
    assert (tc.instruct.wrap, tc.instruct.macro, tc.instruct.names_behavior) == (False, False, "force")
    assert (tc.context.use_stop_strings, tc.context.names_as_stop_strings, tc.context.allow_jailbreak) == (
        False, True, False)
    assert (tc.max_context, tc.amount_gen, tc.tokenizer, tc.token_padding) == (2048, 80, 99, 64)
