"""``loomscope export ID... --to DIR [--force]``: library objects back to a SillyTavern-shaped folder.

Each ``ID`` is a chat, character or lorebook id. Written (SillyTavern's layout, ``data/<user>/``):

- a chat → ``chats/<card file name>/<title>.jsonl`` (SillyTavern chat JSONL: header, messages with
  their original keys, lines that were not messages; :func:`engine.importers.export_chat_jsonl`);
- a character → ``characters/<card file name>.png`` (card PNG with the ``chara`` V2 chunk, and
  ``ccv3`` for V3 cards; :func:`engine.importers.card_export.export_card_png`);
- a lorebook → ``worlds/<name>.json`` (SillyTavern world JSON;
  :func:`engine.importers.export_world_json`).

When a chat has a SillyTavern setup (it came from a SillyTavern folder), ``settings.json`` is
written too, from the first such chat: its persona (``power_user.personas`` and
``persona_descriptions``), World Info settings and global worlds, and ``oai_settings`` (model,
context, reply length, the Prompt Manager's prompts and order, ...), so that the folder imports
back with the same setup; an existing ``settings.json`` is never replaced (it is the user's).
Each chat's Author's Note is written into its ``chat_metadata``.

The card file name is the one the character was imported under from a SillyTavern folder, else
its name. Unknown fields survive. Nothing is overwritten without ``--force``: when a target file
exists, nothing at all is written (exit 2, ``EXPORT_TARGET_EXISTS`` naming the file). Output:
``[{"kind", "id", "name", "file"}]`` (``kind`` ``settings`` for ``settings.json``).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..errors import LoomscopeError, NotFoundError
from ..schema.sillytavern import AuthorNote
from .library import add_db_argument, add_format_argument, open_library, output_format, print_json

_UNSAFE = re.compile(r'[\x00-\x1f<>:"/\\|?*]')


def safe_name(name: str, fallback: str) -> str:
    """A file name from ``name`` (characters Windows or POSIX reject replaced by ``_``)."""
    out = _UNSAFE.sub("_", name).strip().strip(".")
    return out or fallback


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand."""
    p = sub.add_parser("export", help="write chats, characters and lorebooks back as SillyTavern files")
    p.add_argument("ids", nargs="+", metavar="ID", help="chat, character or lorebook ids")
    p.add_argument("--to", required=True, metavar="DIR", help="the folder to write into (SillyTavern layout)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run)


def plan_export(store: Any, ids: list[str]) -> list[dict[str, Any]]:
    """What to write for ``ids``: ``[{"kind", "id", "name", "file" (relative), "data" (bytes)}]``.

    Raises ``CHAT_NOT_FOUND`` for an id that is no chat, character or lorebook.
    """
    from ..importers import export_chat_jsonl, export_world_json
    from ..importers.card_export import export_card_png

    out: list[dict[str, Any]] = []

    def card_stem(character_id: str | None, name: str) -> str:
        if character_id is not None:
            key = store.source_key("character", character_id)
            if key:
                return Path(key).stem
        return safe_name(name, "character")

    for obj_id in dict.fromkeys(ids):
        try:
            stored = store.get_chat(obj_id)
        except NotFoundError:
            stored = None
        if stored is not None:
            name = stored.character.name if stored.character else stored.chat.character_name
            folder = card_stem(stored.character_id, name or "no character")
            file = f"chats/{folder}/{safe_name(stored.title, obj_id)}.jsonl"
            chat = stored.chat
            if stored.setup is not None:
                an = stored.setup.author_note
                default = AuthorNote()
                meta = dict(chat.metadata)
                for key, attr in (("note_prompt", "prompt"), ("note_interval", "interval"),
                                  ("note_position", "position"), ("note_depth", "depth"), ("note_role", "role")):
                    # written where the chat had it or the setup differs from the default, so an
                    # unchanged chat exports as it was read
                    if key in meta or getattr(an, attr) != getattr(default, attr):
                        meta[key] = getattr(an, attr)
                chat = chat.model_copy(update={"metadata": meta})
                if not any(i["kind"] == "settings" for i in out):
                    out.append({"kind": "settings", "id": obj_id, "name": "settings.json", "file": "settings.json",
                                "data": (json.dumps(settings_json(store, stored), ensure_ascii=False, indent=4)
                                         + "\n").encode("utf-8"), "keep_existing": True})
            out.append({"kind": "chat", "id": obj_id, "name": stored.title, "file": file,
                        "data": export_chat_jsonl(chat).encode("utf-8")})
            continue
        try:
            character = store.get_character(obj_id)
        except NotFoundError:
            character = None
        if character is not None:
            file = f"characters/{card_stem(obj_id, character.name)}.png"
            out.append({"kind": "character", "id": obj_id, "name": character.name, "file": file,
                        "data": export_card_png(character, store.get_character_avatar(obj_id))})
            continue
        try:
            book = store.get_lorebook(obj_id)
        except NotFoundError:
            raise NotFoundError("CHAT_NOT_FOUND", "no chat, character or lorebook with that id in the library",
                                file=obj_id) from None
        text = json.dumps(export_world_json(book), ensure_ascii=False, indent=4) + "\n"
        out.append({"kind": "lorebook", "id": obj_id, "name": book.name,
                    "file": f"worlds/{safe_name(book.name, obj_id)}.json", "data": text.encode("utf-8")})
    return out


def settings_json(store: Any, stored: Any) -> dict[str, Any]:
    """A SillyTavern ``settings.json`` holding ``stored``'s setup (see the module docstring)."""
    setup = stored.setup
    settings = stored.settings
    limit = settings.context_limit or 4095
    wi = settings.world_info
    persona = stored.persona
    extra = (persona.model_extra or {}) if persona is not None else {}
    avatar = str(extra.get("avatar") or "user-default.png")
    globals_ = [link.name for link in store.get_chat_setup(stored.id).lorebooks if link.scope == "global"]
    order = [o.model_dump(mode="json") for o in setup.prompt_order]
    return {
        "username": setup.user_name, "user_avatar": avatar, "main_api": "openai",
        "world_info_settings": {
            "world_info": {"globalSelect": globals_},
            "world_info_depth": wi.scan_depth, "world_info_budget": wi.budget_percent,
            "world_info_budget_cap": wi.budget_cap, "world_info_include_names": wi.include_names,
            "world_info_recursive": wi.recursive, "world_info_case_sensitive": wi.case_sensitive,
            "world_info_match_whole_words": wi.match_whole_words,
            "world_info_min_activations": wi.min_activations,
            "world_info_min_activations_depth_max": wi.min_activations_depth_max,
            "world_info_max_recursion_steps": wi.max_recursion_steps,
            "world_info_use_group_scoring": wi.use_group_scoring,
            "world_info_character_strategy": {"evenly": 0, "character_first": 1, "global_first": 2}[
                wi.character_strategy],
        },
        "power_user": {
            "personas": {avatar: setup.user_name},
            "persona_descriptions": {avatar: {"description": persona.description if persona else "",
                                              "position": setup.persona_position, "depth": setup.persona_depth,
                                              "role": setup.persona_role}},
            "default_persona": None, "persona_description": persona.description if persona else "",
            "persona_description_position": setup.persona_position,
            "pin_examples": setup.pin_examples, "strip_examples": setup.strip_examples,
            "prefer_character_prompt": setup.prefer_character_prompt,
            "prefer_character_jailbreak": setup.prefer_character_jailbreak,
            "collapse_newlines": setup.collapse_newlines,
        },
        "extension_settings": {"note": {"allowWIScan": setup.author_note.allow_wi_scan}},
        "oai_settings": {
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
        },
    }


def write_export(items: list[dict[str, Any]], to: str | Path, *, force: bool = False) -> None:
    """Write ``items`` under ``to``; every target is checked first, so either all are written or none.

    Raises ``EXPORT_TARGET_EXISTS`` (a target exists and not ``force``; also two items with one
    file name), ``IMPORT_FILE_NOT_FOUND`` when ``to`` is a file.
    """
    import os
    import tempfile

    root = Path(to)
    if root.exists() and not root.is_dir():
        raise LoomscopeError("IMPORT_FILE_NOT_FOUND", "not a folder", file=str(to))
    seen: set[str] = set()
    for item in items:
        target = root / item["file"]
        if item["file"] in seen:
            raise LoomscopeError("EXPORT_TARGET_EXISTS", "two exported objects would get this file name",
                                 file=str(target))
        seen.add(item["file"])
        if target.exists() and item.get("keep_existing"):
            item["skipped"] = True  # the user's own settings.json: never replaced
            continue
        if target.exists() and not force:
            raise LoomscopeError("EXPORT_TARGET_EXISTS", "the file exists; nothing was written (use --force)",
                                 file=str(target))
    umask = os.umask(0)
    os.umask(umask)
    for item in items:
        if item.get("skipped"):
            continue
        target = root / item["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".loomscope-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(item["data"])
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; exported files are ordinary files
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def run(args: argparse.Namespace) -> int:
    """Export the ids and print ``[{"kind", "id", "name", "file"}]``."""
    with open_library(args) as store:
        items = plan_export(store, args.ids)
    write_export(items, args.to, force=args.force)
    rows = [{"kind": i["kind"], "id": i["id"], "name": i["name"], "file": str(Path(args.to) / i["file"])}
            for i in items if not i.get("skipped")]
    if output_format(args) == "json":
        print_json(rows)
        return 0
    from rich.console import Console
    from rich.table import Table

    from ..terminal import markup_safe as escape  # control characters made visible, markup escaped

    table = Table(title=f"exported {len(rows)} item(s)")
    for col in ("kind", "id", "name", "file"):
        table.add_column(col, no_wrap=col == "id")
    for r in rows:
        table.add_row(r["kind"], r["id"], escape(r["name"]), escape(r["file"]))
    Console().print(table)
    return 0
