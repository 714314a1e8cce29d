"""SillyTavern 1.12.6's Text Completion setup, read from a user folder (issue 26).

:func:`read_text_completion` reads what SillyTavern's Text Completion path (``main_api`` other than
``openai``) builds its prompt string with:

- ``settings.json``: ``main_api``; ``power_user.instruct`` / ``power_user.context`` /
  ``power_user.sysprompt`` (the LIVE values SillyTavern builds with: ``loadPowerUserSettings``
  assigns the whole objects, ``migrateInstructModeSettings`` completes the instruct one,
  ``loadContextSettings`` the context one); ``power_user.tokenizer``, ``token_padding``,
  ``custom_stopping_strings(_macro)``, ``always_force_name2``, ``trim_sentences``, ``single_line``
  (``user_prompt_bias``, Start Reply With, is shared with Chat Completion: ``st_extras`` reads it
  into ``SillyTavernSetup.start_reply_with``); ``max_context`` and ``amount_gen`` (top level, ``script.js``
  ``saveSettings``); ``textgenerationwebui_settings.type`` / ``server_urls`` / ``<type>_model``
  (``textgen-settings.js``), ``api_server`` (KoboldAI) and ``horde_settings.models``.
- ``instruct/*.json``, ``context/*.json``, ``sysprompt/*.json``: the preset libraries
  (``getSettings`` in ``src/endpoints/settings.js`` reads these folders), kept for switching.

Bad input never stops the import: a preset file that is not a JSON object, a field SillyTavern does
not know or a value of the wrong type is a warning naming the file and the field, and SillyTavern's
default is used for that field (nothing else is skipped). A selected preset with no file is a
warning too (the live values in ``settings.json`` are still what SillyTavern sends).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import LoomscopeImportError
from ..schema.sillytavern import ContextTemplate, InstructTemplate, SystemPromptPreset, TextCompletionSetup
from ._io import read_bytes

#: ``main_api`` values that use the Text Completion path (everything but ``openai``).
TEXT_COMPLETION_APIS = ("kobold", "koboldhorde", "textgenerationwebui", "novel")
#: Preset folders and the model each file is read into.
PRESET_FOLDERS: dict[str, type[BaseModel]] = {
    "instruct": InstructTemplate, "context": ContextTemplate, "sysprompt": SystemPromptPreset,
}
#: ``migrateInstructModeSettings`` (``instruct-mode.js``): fields filled in when undefined.
_INSTRUCT_MIGRATED = ("input_suffix", "system_sequence", "system_suffix", "user_alignment_message",
                      "last_system_sequence", "first_input_sequence", "last_input_sequence",
                      "names_force_groups", "skip_examples", "system_same_as_user", "names_behavior")
#: ``contextControls`` (``power-user.js``) with a ``defaultValue``, set when undefined on load.
_CONTEXT_LOAD_DEFAULTS = {"use_stop_strings": False, "allow_jailbreak": False, "names_as_stop_strings": True}
#: The global switches a context preset file may carry (``contextControls`` ``isGlobalSetting``).
_CONTEXT_GLOBALS = ("always_force_name2", "trim_sentences", "single_line")
#: Fields of preset FILES that are not settings fields (kept by SillyTavern, not used to build).
_PRESET_FILE_ONLY = {"name"}

Warn = Callable[[str, str], None]
#: ``fn(kind)``: the ``.json`` files of the user folder's ``<kind>/`` folder, sorted by name.
Listing = Callable[[str], list[Path]]


def _coerce(model: type[BaseModel], raw: dict[str, Any], rel: str, place: str, warn: Warn,
            rename: dict[str, str] | None = None) -> dict[str, Any]:
    """The fields of ``raw`` that ``model`` knows, with the right type; warnings for the rest.

    Parameters
    ----------
    model:
        The pydantic model the values are for.
    raw:
        The JSON object read.
    rel, place:
        File (relative to the user folder) and JSON path named in warnings.
    warn:
        ``fn(file, message)``.
    rename:
        File keys stored under another field name (a preset file's ``name`` → ``preset``).

    Returns
    -------
    dict
        Field name → value, only for valid fields (the model's defaults fill the rest).
    """
    fields = model.model_fields
    out: dict[str, Any] = {}
    for key, value in raw.items():
        target = (rename or {}).get(key, key)
        if target not in fields:
            if key not in _PRESET_FILE_ONLY and key != "system_prompt":
                warn(rel, f"{place}.{key}: unknown field, ignored (SillyTavern 1.12.6 does not read it)")
            continue
        annotation = fields[target].annotation
        ok = _type_ok(annotation, value)
        if not ok:
            default = fields[target].get_default(call_default_factory=True)
            warn(rel, f"{place}.{key}: expected {_type_name(annotation)}, got {type(value).__name__}; "
                      f"SillyTavern's default {default!r} used")
            continue
        out[target] = value
    return out


def _type_ok(annotation: Any, value: Any) -> bool:
    text = str(annotation)
    if value is None:
        return "None" in text
    if "bool" in text and isinstance(value, bool):
        return True
    if "int" in text and isinstance(value, int) and not isinstance(value, bool):
        return True
    if "Literal" in text:
        return isinstance(value, str) and f"'{value}'" in text
    return "str" in text and isinstance(value, str)


def _type_name(annotation: Any) -> str:
    text = str(annotation)
    if "Literal" in text:
        return "one of " + text[text.index("[") + 1:text.rindex("]")]
    for name in ("bool", "int", "str"):
        if name in text:
            return {"bool": "true/false", "int": "a number", "str": "text"}[name]
    return text


def _migrate_instruct(raw: dict[str, Any]) -> dict[str, Any]:
    """``migrateInstructModeSettings``: ``separator_sequence`` → ``output_suffix``, ``names`` → ``names_behavior``."""
    raw = dict(raw)
    if "separator_sequence" in raw:
        raw["output_suffix"] = raw.pop("separator_sequence") or ""
    if "names" in raw:
        names = raw.pop("names")
        force = raw.pop("names_force_groups", True)
        raw["names_behavior"] = "always" if names else ("force" if force else "none")
    return raw


def read_live_instruct(raw: Any, rel: str, warn: Warn) -> InstructTemplate:
    """``power_user.instruct`` as SillyTavern holds it after loading.

    SillyTavern assigns the saved object whole (``Object.assign(power_user, settings.power_user)``),
    so a field the file lacks is ``undefined`` there, then ``migrateInstructModeSettings`` fills
    its defaults. The only settings with a truthy default that the migration does not fill are
    ``wrap`` and ``macro``: undefined, they act as off, and so they are read here.
    """
    if raw is None:
        return InstructTemplate()
    if not isinstance(raw, dict):
        warn(rel, "power_user.instruct: not a JSON object; SillyTavern's defaults used")
        return InstructTemplate()
    values = _coerce(InstructTemplate, _migrate_instruct(raw), rel, "power_user.instruct", warn)
    for key in ("wrap", "macro", "enabled"):
        values.setdefault(key, False)
    return InstructTemplate(**values)


def read_live_context(raw: Any, rel: str, warn: Warn) -> ContextTemplate:
    """``power_user.context`` as SillyTavern holds it after ``loadContextSettings``."""
    if raw is None:
        return ContextTemplate()
    if not isinstance(raw, dict):
        warn(rel, "power_user.context: not a JSON object; SillyTavern's defaults used")
        return ContextTemplate()
    values = _coerce(ContextTemplate, raw, rel, "power_user.context", warn)
    for key, default in _CONTEXT_LOAD_DEFAULTS.items():
        values.setdefault(key, default)
    for key in _CONTEXT_GLOBALS:
        values.pop(key, None)
    return ContextTemplate(**values)


def read_live_sysprompt(raw: Any, rel: str, warn: Warn) -> SystemPromptPreset:
    """``power_user.sysprompt`` (1.12.6 keeps the system prompt there, ``sysprompt.js``).

    An older ``power_user.instruct.system_prompt`` is moved here as ``migrateSystemPromptFromInstructMode``
    does (by the caller: see :func:`read_text_completion`).
    """
    if raw is None:
        return SystemPromptPreset()
    if not isinstance(raw, dict):
        warn(rel, "power_user.sysprompt: not a JSON object; SillyTavern's defaults used")
        return SystemPromptPreset()
    return SystemPromptPreset(**_coerce(SystemPromptPreset, raw, rel, "power_user.sysprompt", warn))


def read_presets(folder: Path, kind: str, warn: Warn, listing: Listing | None = None) -> list[Any]:
    """Every ``<kind>/*.json`` preset of the user folder, sorted by file name.

    ``listing(kind)`` lists the folder's ``.json`` files (the folder import's listing, which follows no
    link out of the folder, issue 25); without it the folder is globbed. ``secrets.json`` and the open
    library are never opened (:func:`engine.importers._io.read_bytes`). A file that is not a JSON object is
    a warning and is left out; each field is checked as in :func:`_coerce` (a preset's ``name`` defaults to
    the file name).
    """
    model = PRESET_FOLDERS[kind]
    base = folder / kind
    if listing is not None:
        paths = listing(kind)
    elif base.is_dir():
        paths = sorted((p for p in base.glob("*.json") if p.is_file()), key=lambda p: p.name)
    else:
        return []
    out: list[Any] = []
    for path in paths:
        rel = f"{kind}/{path.name}"
        try:
            raw = json.loads(read_bytes(path)[1].decode("utf-8-sig"))
        except (LoomscopeImportError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            why = exc.message if isinstance(exc, LoomscopeImportError) else f"{exc.__class__.__name__}: {exc}"
            warn(rel, f"not a readable JSON preset ({why}); left out")
            continue
        if not isinstance(raw, dict):
            warn(rel, "not a JSON object; left out")
            continue
        if kind == "instruct":
            raw = _migrate_instruct(raw)
        rename = {"name": "preset"} if kind in ("instruct", "context") else None
        values = _coerce(model, raw, rel, "$", warn, rename)
        name_key = "name" if kind == "sysprompt" else "preset"
        if not isinstance(values.get(name_key), str) or not values.get(name_key):
            values[name_key] = path.stem
        out.append(model(**values))
    return out


def _textgen(settings: dict[str, Any], main_api: str) -> dict[str, Any]:
    """The API type, server URL and model of ``settings.json`` (``textgen-settings.js``, ``script.js``)."""
    tg = _obj(settings.get("textgenerationwebui_settings"))
    kind = str(tg["type"]) if isinstance(tg.get("type"), str) else "ooba"
    urls = _obj(tg.get("server_urls"))
    url = urls.get(kind) or settings.get("api_server_textgenerationwebui") or ""
    model = _textgen_model(tg, kind)
    if main_api == "kobold":
        url = settings.get("api_server") or ""
    if main_api == "koboldhorde":
        horde = _obj(settings.get("horde_settings"))
        models = [m for m in horde.get("models") or [] if isinstance(m, str)]
        url, model = "", (models[0] if models else None)
    return {"textgen_type": str(kind), "server_url": str(url) if isinstance(url, str) else "",
            "model": model or None}


#: ``getTextGenModel`` (``textgen-settings.js``): the settings key holding each API type's model.
_TEXTGEN_MODEL_KEYS = {"ooba": "custom_model", "mancer": "mancer_model", "togetherai": "togetherai_model",
                       "infermaticai": "infermaticai_model", "dreamgen": "dreamgen_model",
                       "openrouter": "openrouter_model", "vllm": "vllm_model", "aphrodite": "aphrodite_model",
                       "ollama": "ollama_model", "featherless": "featherless_model", "tabby": "tabby_model"}


def _textgen_model(tg: dict[str, Any], kind: str) -> str | None:
    """``getTextGenModel()``: the model name SillyTavern sees for the API type (``None`` when it has none)."""
    if kind == "huggingface":
        return "tgi"
    value = tg.get(_TEXTGEN_MODEL_KEYS.get(kind, ""))
    return value if isinstance(value, str) and value else None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int_or(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        return int(float(value))
    except ValueError:
        return default


def read_text_completion(folder: Path, settings: dict[str, Any], warn: Warn,
                         listing: Listing | None = None) -> TextCompletionSetup | None:
    """The folder's Text Completion setup, or ``None`` when ``main_api`` is ``openai`` (or absent).

    Parameters
    ----------
    folder:
        The SillyTavern user folder (``data/<user>/``).
    settings:
        Its ``settings.json``, parsed.
    warn:
        ``fn(file, message)`` for each problem (file relative to ``folder``).
    listing:
        ``fn(kind)``: the ``.json`` files of ``folder/<kind>`` (see :func:`read_presets`).

    Returns
    -------
    TextCompletionSetup or None
    """
    main_api = settings.get("main_api")
    if main_api not in TEXT_COMPLETION_APIS:
        return None
    rel = "settings.json"
    pu = _obj(settings.get("power_user"))
    instruct_raw = pu.get("instruct")
    sysprompt_raw = pu.get("sysprompt")
    if isinstance(instruct_raw, dict) and "system_prompt" in instruct_raw:
        # migrateSystemPromptFromInstructMode (sysprompt.js)
        instruct_raw = dict(instruct_raw)
        content = str(instruct_raw.pop("system_prompt"))
        sysprompt_raw = {"enabled": bool(instruct_raw.get("enabled")), "name": "[Migrated]", "content": content}
    values: dict[str, Any] = {
        "main_api": main_api,
        "instruct": read_live_instruct(instruct_raw, rel, warn),
        "context": read_live_context(pu.get("context"), rel, warn),
        "sysprompt": read_live_sysprompt(sysprompt_raw, rel, warn),
        "tokenizer": _int_or(pu.get("tokenizer"), 99),
        "token_padding": _int_or(pu.get("token_padding"), 64),
        "max_context": _int_or(settings.get("max_context"), 2048),
        "amount_gen": _int_or(settings.get("amount_gen"), 80),
        **_textgen(settings, main_api),
    }
    horde = _obj(settings.get("horde_settings"))
    if main_api == "koboldhorde" and isinstance(horde.get("auto_adjust_context_length"), bool):
        values["horde_auto_adjust_context"] = horde["auto_adjust_context_length"]
    for key in ("always_force_name2", "trim_sentences", "single_line", "custom_stopping_strings_macro"):
        if isinstance(pu.get(key), bool):
            values[key] = pu[key]
    if isinstance(pu.get("custom_stopping_strings"), str):
        values["custom_stopping_strings"] = pu["custom_stopping_strings"]
    values["instruct_presets"] = read_presets(folder, "instruct", warn, listing)
    values["context_presets"] = read_presets(folder, "context", warn, listing)
    values["sysprompt_presets"] = read_presets(folder, "sysprompt", warn, listing)
    setup = TextCompletionSetup(**values)
    _warn_missing_selected(setup, warn)
    return setup


def _warn_missing_selected(setup: TextCompletionSetup, warn: Warn) -> None:
    """A selected preset without a file: a warning (the live settings are used all the same)."""
    checks = (("instruct", setup.instruct.preset, [p.preset for p in setup.instruct_presets]),
              ("context", setup.context.preset, [p.preset for p in setup.context_presets]),
              ("sysprompt", setup.sysprompt.name, [p.name for p in setup.sysprompt_presets]))
    for kind, name, names in checks:
        if names and name not in names:
            warn(f"{kind}/{name}.json", f"the selected {kind} preset {name!r} has no file in {kind}/; "
                                        "the values saved in settings.json are used")


__all__ = ["TEXT_COMPLETION_APIS", "read_live_context", "read_live_instruct", "read_live_sysprompt",
           "read_presets", "read_text_completion"]
