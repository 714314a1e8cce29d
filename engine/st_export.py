"""A chat's whole setup written out as a SillyTavern 1.12.6 user folder (``data/<user>/``).

:func:`plan_st_export` turns library ids into the files of a SillyTavern user folder, so that the
folder opens in SillyTavern with the same prompt and imports back into Loomscope
(``loomscope import DIR``) with the same preview. For a chat it writes everything its prompt
depends on:

- ``chats/<card file name>/<title>.jsonl``: the chat (:func:`engine.importers.export_chat_jsonl`),
  its Author's Note in ``chat_metadata.note_*``, its chat lorebook in ``chat_metadata.world_info``
  and, when several personas are exported, its persona locked in ``chat_metadata.persona``
  (``personas.js`` ``setPersonaForChat``);
- ``characters/<card file name>.png``: the card (``chara`` chunk, plus ``ccv3`` for a V3 card;
  :func:`engine.importers.card_export.export_card_png`) with its character lorebook in
  ``data.extensions.world`` (``world-info.js`` ``getCharacterLore``);
- ``worlds/<name>.json``: every linked lorebook (SillyTavern world JSON); the world's name is its
  file name (``getWorldInfoPrompt`` loads worlds by file name);
- ``settings.json``: global lorebooks (``world_info_settings.world_info.globalSelect``), extra
  character lorebooks (``world_info.charLore``), World Info settings, the persona
  (``power_user.personas`` / ``persona_descriptions``, ``user_avatar``), the Author's Note's
  ``allowWIScan``, and ``oai_settings`` (model, context size, reply length, the Prompt Manager's
  prompts and order); for a Text Completion chat also ``main_api``, the live instruct / context /
  system prompt templates and the server settings (:func:`text_completion_settings`);
- ``instruct/``, ``context/``, ``sysprompt/``: the preset libraries of a Text Completion setup
  (:func:`preset_files`; files already there are kept);
- ``User Avatars/<avatar>``: an image for each persona (SillyTavern lists personas by their image).

A chat whose character was deleted from the library is written without a card, with a warning.
Characters and lorebooks given by id are written on their own. :func:`merge_settings` merges
the ``settings.json`` written into one the target folder already has, key by key.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import NotFoundError
from .importers import export_chat_jsonl, export_world_json
from .importers.card_export import export_card_png
from .schema import Character
from .schema.sillytavern import AuthorNote, SillyTavernSetup, TextCompletionSetup

_UNSAFE = re.compile(r'[\x00-\x1f<>:"/\\|?*]')
#: The avatar SillyTavern gives the first persona (``user_avatar`` default).
DEFAULT_AVATAR = "user-default.png"
#: SillyTavern's ``world_info_character_strategy`` numbers.
CHARACTER_STRATEGY_NUMBERS = {"evenly": 0, "character_first": 1, "global_first": 2}
#: ``chat_metadata`` keys of the Author's Note and the :class:`AuthorNote` fields they hold.
NOTE_KEYS = (("note_prompt", "prompt"), ("note_interval", "interval"), ("note_position", "position"),
             ("note_depth", "depth"), ("note_role", "role"))


def safe_name(name: str, fallback: str) -> str:
    """A file name from ``name`` (characters Windows or POSIX reject replaced by ``_``)."""
    out = _UNSAFE.sub("_", name).strip().strip(".")
    return out or fallback


@dataclass
class ExportPlan:
    """What :func:`plan_st_export` found to write.

    ``items``: ``{"kind", "id", "name", "file" (relative to the folder), "data" (bytes)}`` each
    (``kind`` ``chat``, ``character``, ``lorebook``, ``persona`` (an avatar image) or
    ``settings``); ``warnings``: ``{"id", "message"}``.
    """

    items: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)


@dataclass
class _Planner:
    """One export being planned: names given out so far and what ``settings.json`` will hold."""

    store: Any
    plan: ExportPlan = field(default_factory=ExportPlan)
    worlds: dict[str, str] = field(default_factory=dict)  # lorebook id -> world name (file stem)
    cards: dict[str, str] = field(default_factory=dict)  # character id -> card file stem
    card_world: dict[str, str] = field(default_factory=dict)  # character id -> extensions.world
    taken: set[str] = field(default_factory=set)  # files given out
    global_select: list[str] = field(default_factory=list)
    char_lore: dict[str, list[str]] = field(default_factory=dict)
    personas: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    user_avatar: str | None = None
    first: Any = None  # the first exported chat: its setup and settings go into settings.json

    def warn(self, obj_id: str, message: str) -> None:
        """Record a warning about ``obj_id``."""
        self.plan.warnings.append({"id": obj_id, "message": message})

    def unique(self, folder: str, stem: str, suffix: str) -> str:
        """``stem``, or ``stem (2)``, ... so that ``folder/stem+suffix`` is given out once."""
        n, out = 1, stem
        while f"{folder}/{out}{suffix}" in self.taken:
            n += 1
            out = f"{stem} ({n})"
        self.taken.add(f"{folder}/{out}{suffix}")
        return out

    def add(self, kind: str, obj_id: str, name: str, file: str, data: bytes, **extra: Any) -> None:
        """Add one file to the plan."""
        self.plan.items.append({"kind": kind, "id": obj_id, "name": name, "file": file, "data": data, **extra})

    def world(self, book_id: str) -> str:
        """The world name of lorebook ``book_id``, writing ``worlds/<name>.json`` the first time."""
        if book_id in self.worlds:
            return self.worlds[book_id]
        book = self.store.lorebooks.get(book_id)
        stem = self.unique("worlds", safe_name(book.name, book_id), ".json")
        self.worlds[book_id] = stem
        text = json.dumps(export_world_json(book), ensure_ascii=False, indent=4) + "\n"
        self.add("lorebook", book_id, book.name, f"worlds/{stem}.json", text.encode("utf-8"))
        return stem

    def card(self, character_id: str, world: str | None) -> str:
        """The card file stem of ``character_id``, writing its PNG the first time.

        ``world`` (a world name, ``""`` for none, ``None`` to keep the card's) goes into
        ``data.extensions.world``.
        """
        if character_id in self.cards:
            if world is not None and world != self.card_world.get(character_id):
                self.warn(character_id, f"the card is exported once, with character lorebook "
                                        f"{self.card_world.get(character_id)!r}; another chat links {world!r}")
            return self.cards[character_id]
        character: Character = self.store.characters.get(character_id)
        key = self.store.sync.source_key("character", character_id)
        stem = self.unique("characters", safe_name(key.rsplit("/", 1)[-1].removesuffix(".png") if key
                                                   else character.name, "character"), ".png")
        self.cards[character_id] = stem
        if world is not None and character.extensions.get("world", "") != world:
            ext = {**character.extensions, "world": world}
            if not world:
                ext.pop("world")
            character = character.model_copy(update={"extensions": ext})
        self.card_world[character_id] = str(character.extensions.get("world") or "")
        png = export_card_png(character, self.store.characters.avatar(character_id))
        self.add("character", character_id, character.name, f"characters/{stem}.png", png)
        return stem

    def persona(self, stored: Any, setup: SillyTavernSetup) -> str:
        """The avatar of the chat's persona, recorded for ``settings.json`` (and its image written)."""
        persona = stored.persona
        avatar = str((persona.model_extra or {}).get("avatar") or DEFAULT_AVATAR) if persona else DEFAULT_AVATAR
        desc = {"description": persona.description if persona else "", "position": setup.persona_position,
                "depth": setup.persona_depth, "role": setup.persona_role}
        name = setup.user_name
        if avatar in self.personas and self.personas[avatar] != (name, desc):
            self.warn(stored.id, f"two exported chats use different personas under the avatar {avatar!r}; "
                                 "the first is written")
        if avatar not in self.personas:
            self.personas[avatar] = (name, desc)
            self.add("persona", stored.persona_id or stored.id, name, f"User Avatars/{avatar}", _avatar_png(),
                     keep_existing=True)
        if self.user_avatar is None:
            self.user_avatar = avatar
        return avatar


def _avatar_png() -> bytes:
    """A plain square PNG (SillyTavern shows a persona by its image in ``User Avatars/``)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (400, 400), (72, 64, 64)).save(buf, "PNG")
    return buf.getvalue()


def _chat_metadata(stored: Any, setup: SillyTavernSetup, chat_world: str | None, avatar: str | None,
                   user_avatar: str | None) -> dict[str, Any]:
    """The chat's ``chat_metadata`` with its Author's Note, chat world and locked persona."""
    meta = dict(stored.chat.metadata)
    an, default = setup.author_note, AuthorNote()
    for key, attr in NOTE_KEYS:
        # written where the chat had it or the setup differs from the default, so an unchanged
        # chat exports as it was read
        if key in meta or getattr(an, attr) != getattr(default, attr):
            meta[key] = getattr(an, attr)
    if chat_world:
        meta["world_info"] = chat_world
    else:
        meta.pop("world_info", None)
    if avatar is not None and (avatar != user_avatar or "persona" in meta):
        meta["persona"] = avatar
    return meta


def _chat(p: _Planner, stored: Any) -> None:
    """Plan one chat and everything its prompt depends on."""
    setup = stored.setup
    if setup is not None and setup.group is not None:  # issue 27 item 7: groups/ are not written
        p.warn(stored.id, f"a group chat ({setup.group.name!r}): exported as a 1-on-1 chat of its first member; "
                          "the group file (groups/) is not written")
    if setup is None:
        p.warn(stored.id, "made in Loomscope: SillyTavern's rules (Prompt Manager, default setup) assemble it "
                          "once imported from the exported folder")
        setup = SillyTavernSetup(user_name=stored.persona.name if stored.persona else stored.chat.user_name)
    links = p.store.chats.get_setup(stored.id).lorebooks
    chat_worlds = [p.world(link.lorebook_id) for link in links if link.scope == "chat"]
    char_worlds = [p.world(link.lorebook_id) for link in links if link.scope == "character"]
    for link in links:
        if link.scope == "global" and p.world(link.lorebook_id) not in p.global_select:
            p.global_select.append(p.world(link.lorebook_id))
    if len(chat_worlds) > 1:
        p.warn(stored.id, f"SillyTavern links one chat lorebook; {', '.join(chat_worlds[1:])} written as "
                          "character lorebooks")
        char_worlds = chat_worlds[1:] + char_worlds
    if stored.character_id is not None and stored.character is not None:
        folder = p.card(stored.character_id, char_worlds[0] if char_worlds else _kept_world(p, stored))
        if len(char_worlds) > 1:
            lore = p.char_lore.setdefault(folder, [])
            lore += [w for w in char_worlds[1:] if w not in lore]
    else:
        folder = safe_name(stored.chat.character_name or stored.title, "no character")
        p.warn(stored.id, "the chat's character is not in the library: exported without a card")
        if char_worlds:
            p.warn(stored.id, f"character lorebooks {', '.join(char_worlds)} have no card to link them")
    if p.first is None:
        p.first = stored
    avatar = p.persona(stored, setup)
    meta = _chat_metadata(stored, setup, chat_worlds[0] if chat_worlds else None, avatar, p.user_avatar)
    chat = stored.chat.model_copy(update={"metadata": meta})
    # the file name it was imported under (a chat renamed in Loomscope stays the same file), else its title
    key = p.store.sync.source_key("chat", stored.id)
    name = key.rsplit("/", 1)[-1].removesuffix(".jsonl") if key and key.startswith("chats/") else stored.title
    stem = p.unique(f"chats/{folder}", safe_name(name, stored.id), ".jsonl")
    p.add("chat", stored.id, stored.title, f"chats/{folder}/{stem}.jsonl", export_chat_jsonl(chat).encode("utf-8"))


def _kept_world(p: _Planner, stored: Any) -> str:
    """The card's own ``extensions.world`` when it is exported anyway (as a global or chat world), else ``""``."""
    world = stored.character.extensions.get("world") if stored.character else None
    return world if isinstance(world, str) and world in p.worlds.values() else ""


def plan_st_export(store: Any, ids: list[str]) -> ExportPlan:
    """The files of a SillyTavern user folder holding ``ids`` (chats, characters, lorebooks).

    Parameters
    ----------
    store:
        The :class:`~engine.storage.Store` to read from.
    ids:
        Chat, character or lorebook ids (repeats ignored). Chats bring their card, lorebooks,
        persona and ``settings.json``.

    Returns
    -------
    ExportPlan
        Files in writing order (lorebooks and cards before the chats that link them).

    Raises
    ------
    NotFoundError
        ``CHAT_NOT_FOUND`` naming an id that is no chat, character or lorebook.
    """
    p = _Planner(store)
    chats, rest = [], []
    for obj_id in dict.fromkeys(ids):
        try:
            chats.append(store.chats.get(obj_id))
        except NotFoundError:
            rest.append(obj_id)
    for stored in chats:
        _chat(p, stored)
    for obj_id in rest:
        try:
            store.characters.get(obj_id)
        except NotFoundError:
            try:
                store.lorebooks.get(obj_id)
            except NotFoundError:
                raise NotFoundError("CHAT_NOT_FOUND", "no chat, character or lorebook with that id in the library",
                                    file=obj_id) from None
            p.world(obj_id)
            continue
        p.card(obj_id, None)
    if p.first is not None:
        setup = p.first.setup or SillyTavernSetup()
        doc = settings_document(setup, p.first.settings, p.personas, p.user_avatar or DEFAULT_AVATAR,
                                p.global_select, p.char_lore)
        p.add("settings", p.first.id, "settings.json", "settings.json",
              (json.dumps(doc, ensure_ascii=False, indent=4) + "\n").encode("utf-8"))
        if setup.text_completion is not None:
            for file, data in preset_files(setup.text_completion).items():
                p.add("preset", p.first.id, file.rsplit("/", 1)[1].removesuffix(".json"), file, data,
                      keep_existing=True)
    order = {"lorebook": 0, "character": 1, "persona": 2, "chat": 3, "preset": 4, "settings": 5}
    p.plan.items.sort(key=lambda i: order[i["kind"]])
    return p.plan


def settings_document(setup: SillyTavernSetup, settings: Any, personas: dict[str, tuple[str, dict[str, Any]]],
                      user_avatar: str, global_select: list[str],
                      char_lore: dict[str, list[str]]) -> dict[str, Any]:
    """A SillyTavern ``settings.json`` holding a chat's setup (``settings.js`` / ``openai.js`` keys).

    ``personas``: avatar → (name, ``persona_descriptions`` entry); ``char_lore``: card file stem →
    extra world names.
    """
    limit = settings.context_limit or 4095
    wi = settings.world_info
    name, desc = personas.get(user_avatar, (setup.user_name, {"description": ""}))
    doc = {
        "username": name, "user_avatar": user_avatar, "main_api": "openai",
        "world_info_settings": {
            "world_info": {"globalSelect": list(global_select),
                           "charLore": [{"name": k, "extraBooks": v} for k, v in char_lore.items()]},
            "world_info_depth": wi.scan_depth, "world_info_budget": wi.budget_percent,
            "world_info_budget_cap": wi.budget_cap, "world_info_include_names": wi.include_names,
            "world_info_recursive": wi.recursive, "world_info_case_sensitive": wi.case_sensitive,
            "world_info_match_whole_words": wi.match_whole_words,
            "world_info_min_activations": wi.min_activations,
            "world_info_min_activations_depth_max": wi.min_activations_depth_max,
            "world_info_max_recursion_steps": wi.max_recursion_steps,
            "world_info_use_group_scoring": wi.use_group_scoring,
            "world_info_character_strategy": CHARACTER_STRATEGY_NUMBERS[wi.character_strategy],
        },
        "power_user": {
            "personas": {a: n for a, (n, _d) in personas.items()},
            "persona_descriptions": {a: d for a, (_n, d) in personas.items()},
            "default_persona": None, "persona_description": desc.get("description", ""),
            "persona_description_position": setup.persona_position,
            "persona_description_depth": setup.persona_depth, "persona_description_role": setup.persona_role,
            "pin_examples": setup.pin_examples, "strip_examples": setup.strip_examples,
            "prefer_character_prompt": setup.prefer_character_prompt,
            "prefer_character_jailbreak": setup.prefer_character_jailbreak,
            "collapse_newlines": setup.collapse_newlines,
            "user_prompt_bias": setup.start_reply_with,
        },
        "extension_settings": {"note": {"allowWIScan": setup.author_note.allow_wi_scan}},
        "oai_settings": _oai_settings(setup, settings, limit),
    }
    if setup.text_completion is not None:
        doc = merge_settings(doc, text_completion_settings(setup.text_completion, limit,
                                                           settings.resolve_reply_reserve(limit)))
    return doc


#: ``textgen-settings.js`` ``getTextGenModel``: the ``textgenerationwebui_settings`` key of each type's model.
TEXTGEN_MODEL_KEYS = {"ooba": "custom_model", "mancer": "mancer_model", "togetherai": "togetherai_model",
                      "infermaticai": "infermaticai_model", "dreamgen": "dreamgen_model",
                      "openrouter": "openrouter_model", "vllm": "vllm_model", "aphrodite": "aphrodite_model",
                      "ollama": "ollama_model", "featherless": "featherless_model", "tabby": "tabby_model"}


def _live_instruct(tc: TextCompletionSetup) -> dict[str, Any]:
    # separator_sequence is the pre-1.12 name of output_suffix: written, migrateInstructModeSettings would move it over
    return tc.instruct.model_dump(mode="json", exclude={"separator_sequence"})


def text_completion_settings(tc: TextCompletionSetup, max_context: int, amount_gen: int) -> dict[str, Any]:
    """The ``settings.json`` keys of a Text Completion setup (what ``st_presets.read_text_completion`` reads).

    ``main_api``; ``power_user.instruct`` / ``context`` / ``sysprompt`` (the live values), tokenizer,
    padding, stopping strings and switches; top-level ``max_context`` / ``amount_gen`` (``script.js``
    ``saveSettings``: the context window Loomscope uses); the server type, URL and model
    (``textgenerationwebui_settings``, ``api_server`` for KoboldAI, ``horde_settings.models``).
    """
    pu: dict[str, Any] = {
        "instruct": _live_instruct(tc), "context": tc.context.model_dump(mode="json", exclude_none=True),
        "sysprompt": tc.sysprompt.model_dump(mode="json"), "tokenizer": tc.tokenizer,
        "token_padding": tc.token_padding, "custom_stopping_strings": tc.custom_stopping_strings,
        "custom_stopping_strings_macro": tc.custom_stopping_strings_macro,
        "always_force_name2": tc.always_force_name2, "trim_sentences": tc.trim_sentences,
        "single_line": tc.single_line,
    }
    textgen: dict[str, Any] = {"type": tc.textgen_type, "server_urls": {tc.textgen_type: tc.server_url}}
    if tc.model and tc.textgen_type in TEXTGEN_MODEL_KEYS:
        textgen[TEXTGEN_MODEL_KEYS[tc.textgen_type]] = tc.model
    out: dict[str, Any] = {"main_api": tc.main_api, "power_user": pu, "max_context": max_context,
                           "amount_gen": amount_gen, "textgenerationwebui_settings": textgen}
    if tc.main_api == "kobold":
        out["api_server"] = tc.server_url
    if tc.main_api == "koboldhorde":
        out["horde_settings"] = {"models": [tc.model] if tc.model else []}
    return out


def preset_files(tc: TextCompletionSetup) -> dict[str, bytes]:
    """The folder's preset libraries: ``instruct/<name>.json``, ``context/<name>.json``, ``sysprompt/<name>.json``.

    As SillyTavern saves presets (``src/endpoints/presets.js``): the preset's fields with its name under ``name``.
    """
    out: dict[str, bytes] = {}

    def add(kind: str, name: str, doc: dict[str, Any]) -> None:
        out[f"{kind}/{safe_name(name, kind)}.json"] = (json.dumps(doc, ensure_ascii=False, indent=4)
                                                       + "\n").encode("utf-8")

    for ip in tc.instruct_presets:
        doc = ip.model_dump(mode="json", exclude={"separator_sequence", "enabled"})
        add("instruct", ip.preset, {"name": doc.pop("preset"), **doc})
    for cp in tc.context_presets:
        doc = cp.model_dump(mode="json", exclude_none=True)
        add("context", cp.preset, {"name": doc.pop("preset"), **doc})
    for sp in tc.sysprompt_presets:
        add("sysprompt", sp.name, sp.model_dump(mode="json", exclude={"enabled"}))
    return out


def _oai_settings(setup: SillyTavernSetup, settings: Any, limit: int) -> dict[str, Any]:
    """``oai_settings``: the model, context size, reply length and the Prompt Manager's prompts and order."""
    order = [o.model_dump(mode="json") for o in setup.prompt_order]
    return {
        "chat_completion_source": "openai", "openai_model": settings.model,
        "openai_max_context": limit, "openai_max_tokens": settings.resolve_reply_reserve(limit),
        "prompts": [p.model_dump(mode="json", exclude_none=True) for p in setup.prompts],
        "prompt_order": [{"character_id": 100001, "order": order}],
        "new_chat_prompt": setup.new_chat_prompt, "new_group_chat_prompt": setup.new_group_chat_prompt,
        "new_example_chat_prompt": setup.new_example_chat_prompt, "wi_format": setup.wi_format,
        "scenario_format": setup.scenario_format, "personality_format": setup.personality_format,
        "group_nudge_prompt": setup.group_nudge_prompt, "impersonation_prompt": setup.impersonation_prompt,
        "send_if_empty": setup.send_if_empty, "names_behavior": setup.names_behavior,
        "wrap_in_quotes": setup.wrap_in_quotes, "squash_system_messages": setup.squash_system_messages,
    }


def merge_settings(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """``existing`` with ``ours`` merged in key by key, as SillyTavern reads ``settings.json``.

    Objects are merged recursively (keys only ``existing`` has are kept); other values are ours.
    Two lists are merged rather than replaced: ``world_info.globalSelect`` (the existing global
    worlds stay active, ours are added) and ``world_info.charLore`` (by card file name).
    """
    out = dict(existing)
    for key, value in ours.items():
        old = out.get(key)
        if key == "globalSelect" and isinstance(old, list) and isinstance(value, list):
            out[key] = old + [v for v in value if v not in old]
        elif key == "charLore" and isinstance(old, list) and isinstance(value, list):
            names = {e.get("name") for e in value if isinstance(e, dict)}
            out[key] = [e for e in old if not (isinstance(e, dict) and e.get("name") in names)] + value
        elif isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge_settings(old, value)
        else:
            out[key] = value
    return out


__all__ = ["ExportPlan", "merge_settings", "plan_st_export", "preset_files", "safe_name", "settings_document",
           "text_completion_settings"]
