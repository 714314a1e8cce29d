"""SillyTavern 1.12.6 groups (``groups/*.json``) and their chats (``group chats/*.jsonl``).

A group file (``public/scripts/group-chats.js``; written by ``src/endpoints/groups.js``) holds
``id``, ``name``, ``members`` (card file names in ``characters/``), ``disabled_members``,
``activation_strategy`` (0 natural, 1 list), ``generation_mode`` (0 swap, 1 join, 2 join with
muted members), ``generation_mode_join_prefix`` / ``_suffix``, ``allow_self_responses``,
``chat_id`` (the open chat), ``chats`` (every chat id), ``chat_metadata`` (the open chat's
metadata) and ``past_metadata`` (metadata of the other chats, by chat id). A group chat file
``group chats/<chat id>.jsonl`` holds the messages only, no header line (``saveGroupChat``).

These functions read one group into a :class:`~engine.schema.sillytavern.GroupSetup`; the folder
reader (:mod:`engine.importers.st_folder`) turns each of its chats into a chat item.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import LoomscopeImportError
from ..schema import Character
from ..schema.sillytavern import CharacterNote, GroupMember, GroupSetup

#: The warning the chat loader gives a file without a header line; a group chat never has one.
NO_HEADER = "no header line"


def read_group_file(path: Path) -> dict[str, Any]:
    """``groups/<id>.json`` as a JSON object.

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_INVALID_JSON`` (file, line and column), ``IMPORT_WRONG_TYPE`` when it is not an
        object or has no ``members`` list.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LoomscopeImportError("IMPORT_INVALID_JSON", f"not valid JSON: {exc.msg}", file=str(path),
                                   place=f"line {exc.lineno}, column {exc.colno}") from exc
    if not isinstance(raw, dict):
        raise LoomscopeImportError("IMPORT_WRONG_TYPE", "a group file is not a JSON object", file=str(path),
                                   place="$")
    if not isinstance(raw.get("members"), list):
        raise LoomscopeImportError("IMPORT_WRONG_TYPE", "a group needs a members list", file=str(path),
                                   place="$.members")
    return raw


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _talkativeness(card: Character | None) -> float:
    """``character.talkativeness`` (``activateNaturalOrder``: not a number → 0.5)."""
    if card is None:
        return 0.5
    value = card.extensions.get("talkativeness")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.5
    return 0.5 if out != out else out


def group_member(avatar: str, card: Character | None, key: str | None, settings: dict[str, Any]) -> GroupMember:
    """One member: its card's name, character worlds, talkativeness, tags, regex permission and note.

    ``settings`` is ``settings.json``; the worlds are ``getCharacterLore``'s (``extensions.world``
    then the ``charLore`` extra books of the card's file name), the rest as
    :func:`engine.importers.st_extras.extend_setup` reads them for a 1-on-1 chat.
    """
    if card is None or key is None:
        return GroupMember(avatar=avatar)
    stem = Path(avatar).stem
    ext = _obj(settings.get("extension_settings"))
    wi = _obj(_obj(settings.get("world_info_settings")).get("world_info"))
    worlds: list[str] = []
    base = card.extensions.get("world")
    if isinstance(base, str) and base:
        worlds.append(base)
    for e in wi.get("charLore") or []:
        if isinstance(e, dict) and e.get("name") == stem:
            worlds += [str(b) for b in e.get("extraBooks") or []]
    tag_map = _obj(settings.get("tag_map"))
    tags = tag_map.get(avatar)
    allowed = ext.get("character_allowed_regex")
    note = None
    chara = _obj(ext.get("note")).get("chara")
    for c in chara or []:
        if isinstance(c, dict) and c.get("name") == stem:
            note = CharacterNote(prompt=str(c.get("prompt") or ""), use_chara=bool(c.get("useChara")),
                                 position=int(c["position"]) if isinstance(c.get("position"), int) else 0)
            break
    return GroupMember(avatar=avatar, key=key, name=card.name, worlds=list(dict.fromkeys(worlds)),
                       talkativeness=_talkativeness(card), tags=[str(t) for t in tags] if isinstance(tags, list) else [],
                       regex_allowed=isinstance(allowed, list) and avatar in allowed, note=note)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def group_setup(raw: dict[str, Any], members: list[GroupMember], settings: dict[str, Any]) -> GroupSetup:
    """The :class:`GroupSetup` of group file ``raw`` with its ``members`` (in list order).

    ``settings`` (``settings.json``) gives ``power_user.instruct.wrap`` (true by default).
    """
    instruct = _obj(_obj(settings.get("power_user")).get("instruct"))
    disabled = [str(x) for x in raw.get("disabled_members") or [] if isinstance(x, str)]
    return GroupSetup(
        id=str(raw.get("id") or ""), name=str(raw.get("name") or ""), members=members, disabled_members=disabled,
        activation_strategy=_int(raw.get("activation_strategy"), 0), generation_mode=_int(raw.get("generation_mode"), 0),
        join_prefix=str(raw.get("generation_mode_join_prefix") or ""),
        join_suffix=str(raw.get("generation_mode_join_suffix") or ""),
        allow_self_responses=bool(raw.get("allow_self_responses")), instruct_wrap=instruct.get("wrap") is not False)


def group_chat_ids(raw: dict[str, Any]) -> list[str]:
    """The group's chat ids: ``chats`` in order, then ``chat_id`` if not listed."""
    ids = [str(x) for x in raw.get("chats") or [] if isinstance(x, (str, int))]
    current = raw.get("chat_id")
    if isinstance(current, (str, int)) and str(current) not in ids:
        ids.append(str(current))
    return list(dict.fromkeys(ids))


def chat_metadata(raw: dict[str, Any], chat_id: str) -> dict[str, Any]:
    """A group chat's ``chat_metadata``: the group's for its open chat, else ``past_metadata[chat_id]``."""
    if str(raw.get("chat_id")) == chat_id:
        meta = raw.get("chat_metadata")
    else:
        past = raw.get("past_metadata")
        meta = past.get(chat_id) if isinstance(past, dict) else None
    return dict(meta) if isinstance(meta, dict) else {}


__all__ = ["NO_HEADER", "chat_metadata", "group_chat_ids", "group_member", "group_setup", "read_group_file"]
