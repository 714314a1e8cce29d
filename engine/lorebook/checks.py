"""Per-entry checks shared by both activation rule sets.

Internal to :mod:`engine.lorebook`: the checks that do not depend on the scan (disabled
entries and character filters, the first checks of SillyTavern 1.12.6 ``checkWorldInfo``'s
entry loop, world-info.js 3796–3829; generation triggers, from later SillyTavern versions)
and the ``Name:`` prefix of a scanned chat message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..schema.character import Character
from ..schema.messages import ChatMessage
from .prepare import _Entry


def _message_name(m: ChatMessage, user_name: str, char_name: str) -> str:
    """The speaker name a scanned message is prefixed with (``include_names``)."""
    if m.name:
        return m.name
    if m.role == "user":
        return user_name
    if m.role == "assistant":
        return char_name
    return ""


def _file_stem(avatar: str) -> str:
    r"""``fileName.replace(/\.[^/.]+$/, '')`` (``getCharaFilename``, utils.js 924–931)."""
    return re.sub(r"\.[^/.]+$", "", avatar)


def _static_reason(x: _Entry, char_name: str, character: Character | None, generation_type: str,
                   *, avatar: str | None = None, tag_ids: Sequence[str] | None = None
                   ) -> tuple[str, dict[str, Any]] | None:
    """Why ``x`` cannot activate in this call whatever the scan finds, or ``None``.

    ``LOREBOOK_DISABLED``, ``LOREBOOK_FILTERED_CHARACTER`` (``characterFilter`` names or
    tags, with ``isExclude``), ``LOREBOOK_FILTERED_TRIGGER`` (``triggers`` without the
    generation type).

    With ``avatar`` (the card's file name, ``characters[chid].avatar``) names compare with its
    stem (``getCharaFilename``, world-info.js 3802) and tags compare ``tag_ids`` (the card's
    ``tag_map`` entry) with the filter's tag ids (3812–3827), as SillyTavern does; without one
    (a card Loomscope did not import from a SillyTavern folder) with the character's name and
    tags.
    """
    e = x.entry
    if e.disable:
        return "LOREBOOK_DISABLED", {}
    cf = x.char_filter
    if cf:
        names = [str(n) for n in cf.get("names") or []]
        exclude = bool(cf.get("isExclude"))
        if names:
            if avatar is not None:
                stem = _file_stem(avatar)
                candidates = {stem} if stem else set()
            else:
                candidates = {char_name} | ({character.name} if character else set())
            included = any(n in candidates for n in names)
            if included == exclude:
                return "LOREBOOK_FILTERED_CHARACTER", {"names": names, "exclude": exclude,
                                                       "compared": sorted(candidates)}
        tags = [str(t) for t in cf.get("tags") or []]
        if tags and character is not None:
            have = list(tag_ids) if tag_ids is not None and avatar else list(character.tags)
            has = any(t in tags for t in have)
            if has == exclude:
                return "LOREBOOK_FILTERED_CHARACTER", {"tags": tags, "exclude": exclude, "character_tags": have}
    if x.triggers and generation_type not in x.triggers:
        return "LOREBOOK_FILTERED_TRIGGER", {"triggers": x.triggers, "generation_type": generation_type}
    return None
