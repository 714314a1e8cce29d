"""A SillyTavern user data folder (``data/<user>/``) read as SillyTavern 1.12.x reads it.

:func:`read_st_folder` returns a :class:`FolderPlan`: every character card, world, persona and
(1-on-1) chat of the folder, each with its identity (its path relative to the user folder), a
digest of what it becomes, and, for chats, the setup SillyTavern would use for them. The
:class:`~engine.storage.Store` stores a plan in one transaction
(:meth:`~engine.storage.Store.imports.st_folder`). Reading never writes into the folder and never
opens ``secrets.json`` (only the files listed below are opened).

What is read (``src/constants.js`` ``USER_DIRECTORY_TEMPLATE``; FORMATS.md b1, b4, b5):

- ``settings.json``: ``world_info_settings`` (global lorebooks ``world_info.globalSelect``,
  extra character books ``world_info.charLore``, activation settings), ``power_user``
  (personas, persona descriptions and positions, ``default_persona``, example and prompt
  switches), ``oai_settings`` (model, ``openai_max_context`` → context limit,
  ``openai_max_tokens`` → reply reserve, the Prompt Manager's ``prompts`` and ``prompt_order``;
  read whatever ``main_api`` says), ``extension_settings.note`` (Author's Note defaults),
  ``username`` and ``user_avatar``.
- ``characters/*.png`` (cards; the identity SillyTavern uses, ``getCharaFilename``, is the file
  name without ``.png``), ``worlds/*.json`` (the world's name is the file name without
  ``.json``), ``chats/<card file name>/*.jsonl``, ``groups/*.json`` with their ``group chats/<chat id>.jsonl``
  (:mod:`engine.importers.st_groups`; a group chat file no group lists is skipped).

The folder is read without leaving it (issue 25): a symbolic link (file or folder) whose target
resolves outside the folder the writer pointed at is not followed, and a link whose target is named
``secrets.json`` is never opened, wherever it points; each is listed in ``plan.skipped``
(``IMPORT_OUTSIDE_FOLDER`` / ``IMPORT_FORBIDDEN_FILE``) with its target. A sub-folder that exists but
cannot be listed (no permission, not a folder, a dangling link) is a warning and is listed in
``plan.unreadable``: the import is partial. Only names taken from the listing are opened; names read from
files (a chat's world, a persona's avatar) are only looked up among what was listed.

Links, as ``world-info.js`` makes them (``getGlobalLore``, ``getCharacterLore``,
``getChatLore``): global books = ``globalSelect``; character books = the card's
``data.extensions.world`` plus the ``charLore`` extra books of its file name; chat book =
``chat_metadata.world_info``. A world already active globally is not linked again as chat or
character lore; one active as chat lore is not linked again as character lore. A link to a world
that does not exist is a warning on the chat.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypeVar

from .. import library_files
from ..errors import LoomscopeImportError
from ..schema import Character, Chat, ContextSettings, Persona
from ..schema.sillytavern import (
    GLOBAL_PROMPT_ORDER_ID,
    AuthorNote,
    GroupMember,
    GroupSetup,
    PromptDefinition,
    PromptOrderItem,
    SillyTavernSetup,
    TextCompletionSetup,
    default_prompt_order,
    default_prompts,
)
from ._guard import guarded
from ._io import SECRETS_FILE, decode_utf8, link_target, parse_json_document, read_bytes
from .cards import load_character_with_info
from .chats import load_chats_with_info
from .lorebooks import load_lorebook_with_info
from .st_extras import extend_setup, with_entry_hashes
from .st_groups import NO_HEADER, chat_metadata, group_chat_ids, group_member, group_setup, read_group_file
from .st_presets import PRESET_FOLDERS, read_text_completion

#: The Text Completion preset folders of a user folder (read with ``settings.json``, issue 26).
PRESET_KINDS = tuple(PRESET_FOLDERS)
#: Folders of a SillyTavern user folder; a folder with ``settings.json`` and one of these is one.
ST_USER_MARKERS = ("characters", "worlds", "chats")
#: The user SillyTavern creates (``src/constants.js`` ``DEFAULT_USER``).
DEFAULT_ST_USER = "default-user"
#: ``world_info_character_strategy`` → :attr:`WorldInfoSettings.character_strategy`.
CHARACTER_STRATEGIES = {0: "evenly", 1: "character_first", 2: "global_first"}
#: ``oai_settings.chat_completion_source`` → the settings key holding its model.
MODEL_KEYS = {"openai": "openai_model", "claude": "claude_model", "openrouter": "openrouter_model",
              "ai21": "ai21_model", "makersuite": "google_model", "mistralai": "mistralai_model",
              "custom": "custom_model", "cohere": "cohere_model", "perplexity": "perplexity_model",
              "groq": "groq_model", "01ai": "zerooneai_model", "blockentropy": "blockentropy_model",
              "windowai": "windowai_model", "scale": "openai_model"}

ItemKind = Literal["character", "lorebook", "chat", "persona"]
T = TypeVar("T")


@dataclass
class FolderItem:
    """One object of the folder.

    ``key`` is its identity: the path relative to the user folder (``characters/x.png``,
    ``worlds/Eldoria.json``, ``chats/x/y.jsonl``, ``User Avatars/user-default.png`` for a
    persona). ``digest`` (sha256 hex) changes exactly when what the item becomes changes.
    For chats: ``character_key``, ``persona_key``, ``lorebook_links`` (``(world key, scope)`` in
    link order), ``setup`` and ``settings``. For characters: ``avatar`` (the card PNG's bytes).
    """

    kind: ItemKind
    key: str
    name: str
    value: Any
    digest: str = ""
    warnings: list[str] = field(default_factory=list)
    character_key: str | None = None
    persona_key: str | None = None
    lorebook_links: list[tuple[str, str]] = field(default_factory=list)
    setup: SillyTavernSetup | None = None
    settings: ContextSettings | None = None
    avatar: bytes | None = None


@dataclass
class SkippedFile:
    """A file not imported: its path (relative to the user folder), code and reason."""

    file: str
    code: str
    message: str
    place: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"file", "code", "message", "place"}``."""
        return {"file": self.file, "code": self.code, "message": self.message, "place": self.place}


@dataclass
class FolderPlan:
    """What :func:`read_st_folder` found: the user folder, its items and the files skipped.

    The items are characters, worlds, personas and chats, in that order; the files skipped are group chat files no
    group lists and, under ``skip_bad``, bad files.
    """

    folder: Path
    user: str
    items: list[FolderItem] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    #: ``(folder relative to the user folder, why)`` of each folder that exists but could not be listed
    #: (``chats/``, ``worlds/``, ``characters/``, a character's chat folder): the import is partial.
    unreadable: list[tuple[str, str]] = field(default_factory=list)


def _digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for p in parts:
        if hasattr(p, "model_dump"):
            p = p.model_dump(mode="json")
        h.update(json.dumps(p, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


#: The content digest of a folder item (public name: the library compares it to spot local edits).
content_digest = _digest


def is_st_user_folder(path: Path) -> bool:
    """True when ``path`` holds ``settings.json`` and one of ``characters/``, ``worlds/``, ``chats/``."""
    return (path / "settings.json").is_file() and any((path / m).is_dir() for m in ST_USER_MARKERS)


def resolve_user_folder(path: str | Path, st_user: str | None = None) -> tuple[Path, str]:
    """The user folder for ``path``: itself, or ``path/<st_user or default-user>`` for the ``data/`` root.

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_UNSUPPORTED_FORMAT`` naming ``path`` when neither is a SillyTavern user folder,
        ``IMPORT_FILE_NOT_FOUND`` when ``path`` is not a folder.
    """
    p = Path(path)
    if not p.is_dir():
        raise LoomscopeImportError("IMPORT_FILE_NOT_FOUND", "not a folder", file=str(path))
    if st_user is None and is_st_user_folder(p):
        return p, p.name
    user = st_user or DEFAULT_ST_USER
    if is_st_user_folder(p / user):
        return p / user, user
    if st_user is not None and is_st_user_folder(p) and p.name == st_user:
        return p, p.name
    hint = (f"no user folder {user!r} in it" if (p / user).exists() or st_user
            else "expected settings.json with characters/, worlds/ or chats/ (or a data/ folder holding "
                 f"{DEFAULT_ST_USER}/)")
    raise LoomscopeImportError("IMPORT_UNSUPPORTED_FORMAT", f"not a SillyTavern user folder: {hint}",
                               file=str(path))


def _read_json_file(path: Path, expected: str) -> Any:
    name, raw = read_bytes(path)
    return parse_json_document(decode_utf8(raw, name), name, expected)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return default
    return default


def _wi_settings(wis: dict[str, Any]) -> dict[str, Any]:
    """``world_info_settings`` → :class:`WorldInfoSettings` fields (``setWorldInfoSettings``)."""
    out: dict[str, Any] = {}
    numbers = {"world_info_depth": "scan_depth", "world_info_budget": "budget_percent",
               "world_info_budget_cap": "budget_cap", "world_info_min_activations": "min_activations",
               "world_info_min_activations_depth_max": "min_activations_depth_max",
               "world_info_max_recursion_steps": "max_recursion_steps"}
    flags = {"world_info_include_names": "include_names", "world_info_recursive": "recursive",
             "world_info_case_sensitive": "case_sensitive",
             "world_info_match_whole_words": "match_whole_words",
             "world_info_use_group_scoring": "use_group_scoring"}
    for src, dst in numbers.items():
        if wis.get(src) is not None:
            v = wis[src]
            out[dst] = float(v) if dst == "budget_percent" else _int(v, 0)
    for src, dst in flags.items():
        if wis.get(src) is not None:
            out[dst] = bool(wis[src])
    strategy = _int(wis.get("world_info_character_strategy"), 1)
    out["character_strategy"] = CHARACTER_STRATEGIES.get(strategy, "evenly")
    out["rules"] = "sillytavern"
    return out


def _prompts_and_order(oai: dict[str, Any]) -> tuple[list[PromptDefinition], list[PromptOrderItem]]:
    """The Prompt Manager's prompts and active order, as ``PromptManager.sanitizeServiceSettings`` leaves them.

    Missing default prompts are added (``checkForMissingPrompts``); the order is the global dummy character's (id
    100001), or SillyTavern's default order when there is none; order entries naming no prompt are removed.
    """
    raw_prompts = oai.get("prompts")
    if isinstance(raw_prompts, list) and raw_prompts:
        prompts = [PromptDefinition.model_validate(p) for p in raw_prompts
                   if isinstance(p, dict) and isinstance(p.get("identifier"), str)]
        have = {p.identifier for p in prompts}
        prompts += [p for p in default_prompts() if p.identifier not in have]
    else:
        prompts = default_prompts()
    order: list[PromptOrderItem] | None = None
    for entry in oai.get("prompt_order") or []:
        if isinstance(entry, dict) and str(entry.get("character_id")) == str(GLOBAL_PROMPT_ORDER_ID):
            raw = entry.get("order")
            if isinstance(raw, list) and raw:
                order = [PromptOrderItem.model_validate(o) for o in raw
                         if isinstance(o, dict) and isinstance(o.get("identifier"), str)]
    if order is None:
        order = default_prompt_order()
    known = {p.identifier for p in prompts}
    order = [o for o in order if o.identifier in known]
    return prompts, order


def _persona_for(settings: dict[str, Any], chat_metadata: dict[str, Any]) -> str:
    """The avatar file of the persona a chat uses (``personas.js``).

    The chat's locked persona, else the default persona, else the current ``user_avatar``.
    """
    pu = _obj(settings.get("power_user"))
    personas = _obj(pu.get("personas"))
    locked = chat_metadata.get("persona")
    if isinstance(locked, str) and locked in personas:
        return locked
    default = pu.get("default_persona")
    if isinstance(default, str) and default in personas:
        return default
    return str(settings.get("user_avatar") or "user-default.png")


def _persona_item(settings: dict[str, Any], avatar: str) -> FolderItem:
    """The persona of ``avatar`` (``selectCurrentPersona``): its name and description.

    When the avatar is not a saved persona: the settings' ``username`` and ``persona_description``.
    """
    pu = _obj(settings.get("power_user"))
    personas = _obj(pu.get("personas"))
    descs = _obj(pu.get("persona_descriptions"))
    if avatar in personas:
        d = _obj(descs.get(avatar))
        name = str(personas[avatar])
        desc = str(d.get("description") or "")
        position, depth, role = (_int(d.get("position"), 0), _int(d.get("depth"), 2), _int(d.get("role"), 0))
    else:
        name = str(settings.get("username") or "User")
        desc = str(pu.get("persona_description") or "")
        position = _int(pu.get("persona_description_position"), 0)
        depth = _int(pu.get("persona_description_depth"), 2)
        role = _int(pu.get("persona_description_role"), 0)
    if position == 1:  # AFTER_CHAR is deprecated: setPersonaDescription maps it to IN_PROMPT
        position = 0
    persona = Persona(name=name, description=desc, avatar=avatar, st_position=position, st_depth=depth,
                      st_role=role)
    key = f"User Avatars/{avatar}"
    return FolderItem("persona", key, name, persona, digest=_digest(persona))


def _setup_for(settings: dict[str, Any], persona: Persona, chat: Chat, prompts: list[PromptDefinition],
               order: list[PromptOrderItem], source: dict[str, Any]) -> SillyTavernSetup:
    oai = _obj(settings.get("oai_settings"))
    pu = _obj(settings.get("power_user"))
    note = _obj(_obj(settings.get("extension_settings")).get("note"))
    meta = chat.metadata or {}

    def meta_or(key: str, default_key: str, default: Any) -> Any:
        v = meta.get(key)
        if v is None:
            v = note.get(default_key)
        return default if v is None else v

    an = AuthorNote(
        prompt=str(meta_or("note_prompt", "default", "")),
        interval=_int(meta_or("note_interval", "defaultInterval", 1), 1),
        depth=_int(meta_or("note_depth", "defaultDepth", 4), 4),
        position=_int(meta_or("note_position", "defaultPosition", 1), 1),
        role=_int(meta_or("note_role", "defaultRole", 0), 0),
        allow_wi_scan=bool(note.get("allowWIScan", False)),
    )
    values: dict[str, Any] = {}
    for key in ("new_chat_prompt", "new_group_chat_prompt", "new_example_chat_prompt", "wi_format",
                "scenario_format", "personality_format", "group_nudge_prompt", "impersonation_prompt",
                "send_if_empty"):
        if isinstance(oai.get(key), str):
            values[key] = oai[key]
    for key in ("wrap_in_quotes", "squash_system_messages"):
        if oai.get(key) is not None:
            values[key] = bool(oai[key])
    if oai.get("names_behavior") is not None:
        values["names_behavior"] = _int(oai["names_behavior"], 0)
    if oai.get("names_in_completion") is True:
        values["names_behavior"] = 1
    for key in ("pin_examples", "strip_examples", "prefer_character_prompt", "prefer_character_jailbreak",
                "collapse_newlines"):
        if pu.get(key) is not None:
            values[key] = bool(pu[key])
    extra = persona.model_extra or {}
    return SillyTavernSetup(
        user_name=persona.name, persona_position=int(extra.get("st_position", 0)),
        persona_depth=int(extra.get("st_depth", 2)), persona_role=int(extra.get("st_role", 0)),
        prompts=prompts, prompt_order=order, author_note=an, source=source, **values)


def _context_settings(settings: dict[str, Any]) -> ContextSettings:
    oai = _obj(settings.get("oai_settings"))
    source = str(oai.get("chat_completion_source") or "openai")
    model = oai.get(MODEL_KEYS.get(source, "openai_model")) or oai.get("openai_model") or "gpt-4-turbo"
    context = _int(oai.get("openai_max_context"), 4095)
    reply = _int(oai.get("openai_max_tokens"), 300)
    wi = _wi_settings(_obj(settings.get("world_info_settings")))
    # Loomscope counts exactly with the model's tokenizer; a margin would change what fits
    return ContextSettings(model=str(model), context_limit=max(1, context), reply_reserve=max(0, reply),
                           world_info=wi, safety_margin_percent=0)  # type: ignore[arg-type]


def _within(path: Path, boundary: Path) -> bool:
    return path == boundary or boundary in path.parents


@dataclass
class _Walk:
    """Listing a user folder without leaving ``boundary`` (the real path of the folder given to the import)."""

    folder: Path
    boundary: Path
    plan: FolderPlan
    warn: Callable[[str, str], object]
    _listed: dict[tuple[str, str | None, bool], list[Path]] = field(default_factory=dict)

    def blocked(self, path: Path, rel: str) -> bool:
        """Whether ``path`` may not be followed (a link out, or to ``secrets.json``); such a path is listed as skipped."""
        target = link_target(path)
        if target is None:
            return False
        if target.name.lower() == SECRETS_FILE:
            self.plan.skipped.append(SkippedFile(rel, "IMPORT_FORBIDDEN_FILE",
                                                 f"a link to {target}; {SECRETS_FILE} is never opened"))
            return True
        if not _within(target, self.boundary):
            self.plan.skipped.append(SkippedFile(rel, "IMPORT_OUTSIDE_FOLDER",
                                                 f"a link to {target}, outside {self.boundary}; not followed"))
            return True
        return False

    def entries(self, rel_dir: str, *, suffix: str | None = None, dirs: bool = False) -> list[Path]:
        """The files ending in ``suffix`` (or the folders) of ``rel_dir``, by name; ``[]`` when it is absent.

        A folder that exists but cannot be listed is a warning and goes to ``plan.unreadable``. Each folder is
        listed once (a second call returns the first listing).
        """
        key = (rel_dir, suffix, dirs)
        if key not in self._listed:
            self._listed[key] = self._list(rel_dir, suffix, dirs)
        return self._listed[key]

    def count_files(self) -> int:
        """How many worlds, cards and chat files the folder lists (the total of a progress display)."""
        chats = sum(len(self.entries(f"chats/{d.name}", suffix=".jsonl")) for d in self.entries("chats", dirs=True))
        return len(self.entries("worlds", suffix=".json")) + len(self.entries("characters", suffix=".png")) + chats

    def _list(self, rel_dir: str, suffix: str | None, dirs: bool) -> list[Path]:
        d = self.folder / rel_dir
        if not os.path.lexists(d) or self.blocked(d, rel_dir):
            return []
        try:
            with os.scandir(d) as it:
                found = sorted(((e.name, e) for e in it), key=lambda ne: ne[0])
        except OSError as exc:
            why = ("not a folder" if isinstance(exc, NotADirectoryError) else
                   "a link to nothing" if isinstance(exc, FileNotFoundError) else
                   f"cannot be listed ({exc.strerror or type(exc).__name__})")
            self.plan.unreadable.append((rel_dir, why))
            self.warn(rel_dir, f"{why}; nothing in it was imported")
            return []
        # no link on the way to ``d``: only an entry that is itself a link can lead elsewhere, so the others
        # need no realpath (a 10,000-chat folder spent most of its listing there)
        direct = os.path.realpath(d) == os.path.abspath(d)
        out = []
        for name, entry in found:
            if suffix is not None and not name.endswith(suffix):
                continue
            p = d / name
            if (not direct or entry.is_symlink()) and self.blocked(p, f"{rel_dir}/{name}"):
                continue
            try:
                kept = entry.is_dir() if dirs else entry.is_file()  # links followed, as Path.is_dir / is_file
            except OSError:
                kept = False
            if kept:
                out.append(p)
        return out


def checked_user_folder(path: str | Path, st_user: str | None = None) -> tuple[Path, str, Path]:
    """The user folder of ``path`` (:func:`resolve_user_folder`), its user name, and the folder no read may leave.

    The boundary is the real path of ``path`` as given (nothing is opened to find it).

    Raises
    ------
    LoomscopeImportError
        As :func:`resolve_user_folder`; ``IMPORT_OUTSIDE_FOLDER`` when the user folder is a link out of ``path``.
    """
    boundary = Path(os.path.realpath(path))
    folder, user = resolve_user_folder(path, st_user)
    real = Path(os.path.realpath(folder))
    if not _within(real, boundary):
        raise LoomscopeImportError("IMPORT_OUTSIDE_FOLDER", f"the user folder is a link to {real}, outside {boundary}; "
                                   "not followed", file=str(folder))
    return folder, user, boundary


def st_folder_files(folder: Path, boundary: Path) -> tuple[dict[str, Path], list[tuple[str, str]]]:
    """The files :func:`read_st_folder` would read, listed as it lists them, and the sub-folders it could not list.

    Parameters
    ----------
    folder, boundary:
        As :func:`checked_user_folder` returns them.

    Returns
    -------
    (files, unreadable)
        ``files``: path relative to ``folder`` (``settings.json``, ``worlds/*.json``, ``characters/*.png``,
        ``chats/<card>/*.jsonl``, ``groups/*.json``, ``group chats/*.jsonl``, and the Text Completion presets ``instruct/``, ``context/``, ``sysprompt/``
        ``*.json``) → path; links out of ``boundary``, ``secrets.json`` (named so, or a link to
        it) and the open library's files are left out (nothing is opened: ``scandir``, ``realpath`` and ``stat`` only).
        ``unreadable``: ``(folder, why)`` per sub-folder that exists but could not be listed.
    """
    plan = FolderPlan(folder=folder, user="")
    walk = _Walk(folder, boundary, plan, lambda _file, _msg: None)
    out: dict[str, Path] = {}
    settings = folder / "settings.json"
    if os.path.lexists(settings) and not walk.blocked(settings, "settings.json") and settings.is_file():
        out["settings.json"] = settings
    presets = [(kind, ".json") for kind in PRESET_KINDS if os.path.isdir(folder / kind)]
    for top, suffix in (("worlds", ".json"), ("characters", ".png"), *presets):
        out.update((f"{top}/{p.name}", p) for p in walk.entries(top, suffix=suffix))
    for d in walk.entries("chats", dirs=True):
        out.update((f"chats/{d.name}/{p.name}", p) for p in walk.entries(f"chats/{d.name}", suffix=".jsonl"))
    for top, suffix in (("groups", ".json"), ("group chats", ".jsonl")):  # issue 27 item 7
        out.update((f"{top}/{p.name}", p) for p in walk.entries(top, suffix=suffix))

    return ({rel: p for rel, p in out.items() if p.name.lower() != SECRETS_FILE and not library_files.is_library_file(p)},
            plan.unreadable)


def read_st_folder(path: str | Path, *, st_user: str | None = None, skip_bad: bool = False,
                   on_warning: Callable[[str, str], object] | None = None,
                   only: Collection[str] | None = None,
                   on_progress: Callable[[int, int], object] | None = None) -> FolderPlan:
    """Read a SillyTavern user folder (or the ``data/`` folder holding it) into a :class:`FolderPlan`.

    Parameters
    ----------
    path:
        ``data/<user>/`` or the ``data/`` root (then ``st_user`` or ``default-user`` is taken).
    st_user:
        The user folder's name under a ``data/`` root.
    skip_bad:
        Skip unreadable cards, worlds and chats (listed in ``plan.skipped``) instead of failing.
    on_warning:
        ``fn(file, message)`` for each warning (importer warnings, links to missing worlds).
    only:
        Paths (relative to the user folder) of the worlds, cards and chats to read, for a re-import
        of what changed (:mod:`engine.st_sync`); the other worlds are listed for links, not read,
        and only the cards of the chats read are read. ``None``: everything.
    on_progress:
        ``fn(files done, files in all)`` after each world, card and chat file (worlds, cards and chats are
        listed first; a file left unread because of ``only`` counts as done).

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_UNSUPPORTED_FORMAT`` for a folder that is not a SillyTavern folder; any
        ``IMPORT_*`` error of a bad file (naming it, with the place) unless ``skip_bad``; a bad
        ``settings.json`` always.
    """
    folder, user, boundary = checked_user_folder(path, st_user)
    plan = FolderPlan(folder=folder, user=user)
    walk = _Walk(folder, boundary, plan, lambda file, msg: on_warning(file, msg) if on_warning is not None else None)
    reader = _FolderReader(plan, skip_bad, on_warning, _read_folder_settings(folder, walk), walk,
                           None if only is None else frozenset(only))
    for file, message in reader.settings.warnings:
        reader.warn(file, message)
    if on_progress is not None:
        reader.progress = (on_progress, walk.count_files())
    worlds = reader.read_worlds()
    cards = reader.read_cards()
    personas = reader.read_chats(worlds, cards)
    reader.read_group_chats(worlds, cards, personas)
    # personas go before the chats that use them
    plan = reader.plan
    chats_and_rest = [i for i in plan.items if i.kind == "chat"]
    plan.items = [i for i in plan.items if i.kind != "chat"] + list(personas.values()) + chats_and_rest
    return plan


@dataclass
class _FolderSettings:
    """What ``settings.json`` says that the items of a folder need."""

    file: Path
    raw: dict[str, Any]
    global_select: list[str]  # world names active for every chat
    char_lore: dict[str, list[str]]  # card file name -> extra world names
    prompts: list[PromptDefinition]
    order: list[PromptOrderItem]
    context: ContextSettings
    # Text Completion (issue 26, engine.importers.st_presets); warnings reported by read_st_folder
    text_completion: TextCompletionSetup | None = None
    warnings: list[tuple[str, str]] = field(default_factory=list)


def _read_folder_settings(folder: Path, walk: _Walk | None = None) -> _FolderSettings:
    """``settings.json`` of ``folder``, read and checked (a bad one always raises).

    A ``settings.json`` that is a link out of the folder (``walk``) is not read: SillyTavern's defaults apply.
    """
    settings_file = folder / "settings.json"
    settings: Any
    if walk is not None and walk.blocked(settings_file, "settings.json"):
        walk.warn("settings.json", "not read (a link out of the folder); SillyTavern's defaults are used")
        settings = {}
    else:
        settings = guarded(settings_file, lambda: _read_json_file(settings_file, "settings"))
    if not isinstance(settings, dict):
        raise LoomscopeImportError("IMPORT_WRONG_TYPE", "settings.json is not a JSON object",
                                   file=str(settings_file), place="$")
    oai = _obj(settings.get("oai_settings"))
    wis = _obj(settings.get("world_info_settings"))
    wi_obj = _obj(wis.get("world_info"))
    global_select = [str(x) for x in wi_obj.get("globalSelect") or [] if isinstance(x, str)]
    char_lore = {str(e.get("name")): [str(b) for b in e.get("extraBooks") or []]
                 for e in wi_obj.get("charLore") or [] if isinstance(e, dict)}
    prompts, order = guarded(settings_file, lambda: _prompts_and_order(oai))
    context = guarded(settings_file, lambda: _context_settings(settings))
    found = _FolderSettings(settings_file, settings, global_select, char_lore, prompts, order, context)
    listing = None if walk is None else (lambda kind: walk.entries(kind, suffix=".json"))
    tc = read_text_completion(folder, settings, lambda f, m: found.warnings.append((f, m)), listing)
    if tc is not None:
        # the Text Completion window: max_context, amount_gen (getMaxContextSize)
        found.context = context.model_copy(update={"context_limit": max(1, tc.max_context),
                                                   "reply_reserve": max(0, tc.amount_gen)})
        found.text_completion = tc
    return found


@dataclass
class _ChatLinks:
    """The world links of one chat, collected in link order, with the warnings they raise."""

    rel: str
    worlds: dict[str, str]  # world name -> key
    warn: Callable[[str, str], None]
    links: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def note(self, msg: str) -> None:
        """A warning on the chat (kept on the item and reported)."""
        self.warnings.append(msg)
        self.warn(self.rel, msg)

    def link(self, name: str, scope: str) -> None:
        """Link world ``name`` with ``scope`` unless it is linked already; a missing world is a warning."""
        key = self.worlds.get(name)
        if key is None:
            self.note(f"{scope} world {name!r} does not exist in worlds/; not linked")
        elif all(k != key for k, _ in self.links):
            self.links.append((key, scope))


@dataclass
class _FolderReader:
    """One read of a user folder: the plan being filled and how failures are handled."""

    plan: FolderPlan
    skip_bad: bool
    on_warning: Callable[[str, str], object] | None
    settings: _FolderSettings
    walk: _Walk
    only: frozenset[str] | None = None  # read_st_folder's `only`
    progress: tuple[Callable[[int, int], object], int] | None = None
    files_read: int = 0

    def skips(self, rel: str) -> bool:
        """Whether file ``rel`` is left unread (a re-import of what changed reads only those files)."""
        return self.only is not None and rel not in self.only

    def tick(self) -> None:
        """One more file done, read or left unread (for ``on_progress``)."""
        self.files_read += 1
        if self.progress is not None:
            self.progress[0](self.files_read, self.progress[1])

    def warn(self, file: str, message: str) -> None:
        """Report one warning on ``file`` (relative to the user folder)."""
        if self.on_warning is not None:
            self.on_warning(file, message)

    def attempt(self, rel: str, fn: Callable[[], T]) -> T | None:
        """``fn()`` for file ``rel``; under ``skip_bad`` a bad file is listed as skipped (``None``)."""
        try:
            return guarded(self.plan.folder / rel, fn)
        except LoomscopeImportError as exc:
            if not self.skip_bad:
                raise
            self.plan.skipped.append(SkippedFile(rel, exc.code, exc.message, exc.place))
            return None

    def read_worlds(self) -> dict[str, str]:
        """Every ``worlds/*.json`` as a lorebook item; returns world name -> key."""
        worlds: dict[str, str] = {}
        for p in self.walk.entries("worlds", suffix=".json"):
            rel = f"worlds/{p.name}"
            if self.skips(rel):
                worlds[p.stem] = rel  # unchanged: still linked by name
                self.tick()
                continue
            got = self.attempt(rel, partial(load_lorebook_with_info, p))
            self.tick()
            if got is None:
                continue
            book, _spec, warnings = got
            book = with_entry_hashes(book.model_copy(update={"name": p.stem}), p, warnings.append)  # issue 27
            for w in warnings:
                self.warn(rel, w)
            worlds[p.stem] = rel
            self.plan.items.append(FolderItem("lorebook", rel, p.stem, book, digest=_digest(book),
                                              warnings=warnings))
        return worlds

    def read_cards(self) -> dict[str, FolderItem]:
        """Every ``characters/*.png`` as a character item; returns avatar stem -> item."""
        cards: dict[str, FolderItem] = {}
        chat_dirs = {r.split("/")[1] for r in self.only or () if r.startswith("chats/")}
        for p in self.walk.entries("characters", suffix=".png"):
            rel = f"characters/{p.name}"
            if self.skips(rel) and p.stem not in chat_dirs:
                self.tick()
                continue
            got = self.attempt(rel, partial(load_character_with_info, p))
            self.tick()
            if got is None:
                continue
            char, _spec, warnings = got
            for w in warnings:
                self.warn(rel, w)
            item = FolderItem("character", rel, char.name or p.stem, char, digest=_digest(char),
                              warnings=warnings, avatar=p.read_bytes())
            cards[p.stem] = item
            self.plan.items.append(item)
        return cards

    def read_chats(self, worlds: dict[str, str], cards: dict[str, FolderItem]) -> dict[str, FolderItem]:
        """Every ``chats/<card>/*.jsonl`` as a chat item; returns the personas they use (avatar -> item)."""
        personas: dict[str, FolderItem] = {}
        by_name: dict[str, list[FolderItem]] = {}
        for c in cards.values():
            by_name.setdefault(c.name, []).append(c)
        chat_dirs = self.walk.entries("chats", dirs=True)
        for d in chat_dirs:
            # SillyTavern keeps a character's chats under its card's file name (getCharaFilename);
            # a folder named after the character instead (as in the shared example) falls back to
            # the one card of that name
            card = cards.get(d.name)
            fallback = None
            if card is None and len(by_name.get(d.name, [])) == 1:
                card = fallback = by_name[d.name][0]
            for p in self.walk.entries(f"chats/{d.name}", suffix=".jsonl"):
                if not self.skips(f"chats/{d.name}/{p.name}"):
                    self.read_chat(p, d.name, card, fallback, worlds, personas)
                self.tick()
        return personas

    def _load_chat(self, p: Path, rel: str) -> tuple[Chat, list[str]] | None:
        """The first chat of ``p`` and its warnings; ``None`` when skipped."""
        got = self.attempt(rel, partial(load_chats_with_info, p))
        if got is None:
            return None
        chats, shape, warnings = got
        if shape != "sillytavern_jsonl" or not chats:
            if not self.skip_bad:
                raise LoomscopeImportError("IMPORT_INVALID_CHAT", f"not a SillyTavern chat ({shape})", file=str(p))
            self.plan.skipped.append(SkippedFile(rel, "IMPORT_INVALID_CHAT", f"not a SillyTavern chat ({shape})"))
            return None
        return chats[0].model_copy(update={"title": p.stem}), warnings

    def _chat_setup(self, rel: str, chat: Chat, pitem: FolderItem, character_key: str | None) -> SillyTavernSetup:
        """A chat's SillyTavern setup: the folder's settings, its Text Completion setup and extras.

        ``character_key`` is the card's key (a group chat: its first member's); warnings from
        ``settings.json`` are reported against it.
        """
        s = self.settings
        source = {"folder": str(self.plan.folder), "user": self.plan.user, "chat_file": rel,
                  "character_file": character_key}
        setup = guarded(s.file, lambda: _setup_for(s.raw, pitem.value, chat, s.prompts, s.order, source))
        if s.text_completion is not None:
            setup = setup.model_copy(update={"text_completion": s.text_completion})
        return extend_setup(setup, s.raw, character_key, lambda w: self.warn("settings.json", w))

    def _persona(self, chat: Chat, personas: dict[str, FolderItem]) -> FolderItem:
        """The persona item the chat uses (made once per avatar)."""
        s = self.settings
        avatar = _persona_for(s.raw, chat.metadata or {})
        pitem = personas.get(avatar)
        if pitem is None:
            pitem = personas[avatar] = guarded(s.file, partial(_persona_item, s.raw, avatar))
        return pitem

    def _link_worlds(self, chat: Chat, dir_name: str, card: FolderItem | None, fallback: FolderItem | None,
                     links: _ChatLinks) -> None:
        """Global, chat and character worlds of the chat, in that order (``world-info.js``'s rules)."""
        global_select = self.settings.global_select
        for name in global_select:
            links.link(name, "global")
        chat_world = (chat.metadata or {}).get("world_info")
        if isinstance(chat_world, str) and chat_world and chat_world not in global_select:
            links.link(chat_world, "chat")
        if fallback is not None:
            links.note(f"no card characters/{dir_name}.png; linked to {fallback.key} by the character name "
                       f"{dir_name!r}")
        if card is None:
            links.note(f"no character card characters/{dir_name}.png for this chat")
            return
        character: Character = card.value
        names = []
        base = character.extensions.get("world")
        if isinstance(base, str) and base:
            names.append(base)
        names += self.settings.char_lore.get(dir_name, [])
        for name in dict.fromkeys(names):
            if name in global_select or name == chat_world:
                continue
            links.link(name, "character")

    def read_chat(self, p: Path, dir_name: str, card: FolderItem | None, fallback: FolderItem | None,
                  worlds: dict[str, str], personas: dict[str, FolderItem]) -> None:
        """One chat file as a chat item with its persona, world links and setup."""
        rel = f"chats/{dir_name}/{p.name}"
        loaded = self._load_chat(p, rel)
        if loaded is None:
            return
        chat, warnings = loaded
        for w in warnings:
            self.warn(rel, w)
        pitem = self._persona(chat, personas)
        links = _ChatLinks(rel, worlds, self.warn, warnings=list(warnings))
        self._link_worlds(chat, dir_name, card, fallback, links)
        setup = self._chat_setup(rel, chat, pitem, card.key if card else None)
        item = FolderItem("chat", rel, p.stem, chat, warnings=links.warnings,
                          character_key=card.key if card else None, persona_key=pitem.key,
                          lorebook_links=links.links, setup=setup, settings=self.settings.context)
        item.digest = _digest(chat, setup.model_dump(mode="json", exclude={"source"}), self.settings.context, links.links,
                              item.character_key, item.persona_key)
        self.plan.items.append(item)

    def read_group_chats(self, worlds: dict[str, str], cards: dict[str, FolderItem],
                         personas: dict[str, FolderItem]) -> None:
        """Every ``groups/*.json`` and its ``group chats/<chat id>.jsonl`` as chat items (issue 27 item 7).

        A member whose card is missing is a warning naming it (the others are kept, as
        SillyTavern skips it); a group chat file no group lists is skipped.
        """
        # only what the walk listed is opened (issue 25): a group or chat file linked out of the folder is skipped
        files = {p.name: p for p in self.walk.entries("group chats", suffix=".jsonl")}
        listed: set[str] = set()
        for gp in self.walk.entries("groups", suffix=".json"):
            grel = f"groups/{gp.name}"
            raw = self.attempt(grel, partial(read_group_file, gp))
            if raw is None:
                continue
            ids = group_chat_ids(raw)
            listed.update(f"group chats/{i}.jsonl" for i in ids)
            chats = [i for i in ids if not (self.skips(grel) and self.skips(f"group chats/{i}.jsonl"))]
            if not chats:
                continue
            members, notes = self._group_members(raw, cards, grel)
            group = group_setup(raw, members, self.settings.raw)
            for chat_id in chats:
                rel = f"group chats/{chat_id}.jsonl"
                if f"{chat_id}.jsonl" not in files:
                    if not any(x.file == rel for x in self.plan.skipped):  # else a link the walk skipped
                        self.warn(grel, f"group {group.name!r}: chat {chat_id!r} has no file {rel}; not imported")
                    continue
                self.read_group_chat(rel, raw, group, worlds, personas, notes)
        for p in self.walk.entries("group chats"):
            rel = f"group chats/{p.name}"
            if rel not in listed:
                self.plan.skipped.append(SkippedFile(rel, "IMPORT_UNSUPPORTED_FORMAT",
                                                     "no group in groups/ lists this chat; skipped"))

    def _group_members(self, raw: dict[str, Any], cards: dict[str, FolderItem],
                       grel: str) -> tuple[list[GroupMember], list[str]]:
        """The group's members in list order and the warnings on missing cards."""
        members: list[GroupMember] = []
        notes: list[str] = []
        listed_cards = {p.name: p for p in self.walk.entries("characters", suffix=".png")}
        for avatar in dict.fromkeys(str(x) for x in raw["members"] if isinstance(x, str)):
            item = cards.get(Path(avatar).stem)
            card: Character | None = item.value if item is not None else None
            path = listed_cards.get(avatar)  # a name read from a file: only looked up among the listed cards
            if card is None and path is not None:
                got = self.attempt(f"characters/{avatar}", partial(load_character_with_info, path))
                card = got[0] if got is not None else None
            if card is None:
                notes.append(f"group {raw.get('name')!r}: member card characters/{avatar} is missing; "
                             "left out (SillyTavern skips it)")
            members.append(group_member(avatar, card, f"characters/{avatar}" if card is not None else None,
                                        self.settings.raw))
        for n in notes:
            self.warn(grel, n)
        return members, notes

    def read_group_chat(self, rel: str, raw: dict[str, Any], group: GroupSetup, worlds: dict[str, str],
                        personas: dict[str, FolderItem], notes: list[str]) -> None:
        """One group chat as a chat item: the group's metadata, every member's character worlds, the group."""
        loaded = self._load_chat(self.plan.folder / rel, rel)
        if loaded is None:
            return
        chat, loaded_warnings = loaded
        chat_id = rel.removeprefix("group chats/").removesuffix(".jsonl")
        chat = chat.model_copy(update={"metadata": chat_metadata(raw, chat_id),
                                       "title": f"{group.name or 'Group'} ({chat_id})"})
        warnings = [*notes, *(w for w in loaded_warnings if not w.startswith(NO_HEADER))]
        for w in warnings[len(notes):]:
            self.warn(rel, w)
        pitem = self._persona(chat, personas)
        links = _ChatLinks(rel, worlds, self.warn, warnings=warnings)
        global_select = self.settings.global_select
        for name in global_select:
            links.link(name, "global")
        chat_world = (chat.metadata or {}).get("world_info")
        if isinstance(chat_world, str) and chat_world and chat_world not in global_select:
            links.link(chat_world, "chat")
        for m in group.members:
            for name in m.worlds:
                if name not in global_select and name != chat_world:
                    links.link(name, "character")
        first = next((m for m in group.members if m.key is not None), None)
        setup = self._chat_setup(rel, chat, pitem, first.key if first else None)
        setup = setup.model_copy(update={"group": group})
        item = FolderItem("chat", rel, chat.title or chat_id, chat, warnings=links.warnings,
                          character_key=first.key if first else None, persona_key=pitem.key,
                          lorebook_links=links.links, setup=setup, settings=self.settings.context)
        item.digest = _digest(chat, setup.model_dump(mode="json", exclude={"source"}), self.settings.context, links.links,
                              item.character_key, item.persona_key)
        self.plan.items.append(item)


__all__ = ["DEFAULT_ST_USER", "FolderItem", "FolderPlan", "SkippedFile", "checked_user_folder", "content_digest",
           "is_st_user_folder", "read_st_folder", "resolve_user_folder", "st_folder_files"]
