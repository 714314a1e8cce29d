"""What a SillyTavern user folder holds beyond cards, worlds and chats, read for issue 27.

* World entry hashes (:func:`with_entry_hashes`): SillyTavern keys the stored timed effects by
  a hash of each entry's raw JSON (``getSortedEntries``), recorded at import so that timers
  stored by SillyTavern keep working (:mod:`engine.lorebook.st_hash`).
* A chat's setup (:func:`extend_setup`): the card's file name and tag ids (``tag_map`` /
  ``tags``), Start Reply With (``power_user.user_prompt_bias``), the Regex extension's global
  scripts and switches, the card's own Author's Note (``extension_settings.note.chara``) and the
  global variables.

Each reader takes what :func:`engine.importers.st_folder.read_st_folder` already holds; none of
them reads outside the folder or fails an import: a part that cannot be read is left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import LoomscopeImportError
from ..lorebook.st_hash import HASHES_FIELD, NO_POSITION_FIELD, entry_basis, record_hashes
from ..schema.lorebook import Lorebook
from ..schema.sillytavern import CharacterNote, RegexScript, SillyTavernSetup
from ._io import decode_utf8, parse_json, read_bytes

__all__ = ["extend_setup", "with_entry_hashes"]


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def extend_setup(setup: SillyTavernSetup, settings: dict[str, Any], card_file: str | None,
                 warn: Any = None) -> SillyTavernSetup:
    """``setup`` with what issue 27 reads from ``settings.json`` for the chat's card ``card_file``.

    ``card_file`` is the card's path in the folder (``characters/hero.png``) or ``None``.
    ``warn(message)`` receives one warning per regex script that cannot be read (it is left out).
    """
    avatar = Path(card_file).name if card_file else ""
    tag_map = _obj(settings.get("tag_map"))
    tags = tag_map.get(avatar) if avatar else None
    names = {str(t.get("id")): str(t.get("name", "")) for t in settings.get("tags") or []
             if isinstance(t, dict) and t.get("id") is not None}
    pu = _obj(settings.get("power_user"))
    ext = _obj(settings.get("extension_settings"))
    scripts: list[RegexScript] = []
    for i, raw in enumerate(ext.get("regex") or []):
        try:
            scripts.append(RegexScript.model_validate(raw))
        except ValidationError as exc:
            if warn is not None:
                name = raw.get("scriptName") if isinstance(raw, dict) else None
                warn(f"regex script {name or i!r} (extension_settings.regex[{i}]) cannot be read: "
                     f"{exc.errors()[0].get('msg', 'invalid')}; left out")
    note = None
    for c in _obj(ext.get("note")).get("chara") or []:
        if isinstance(c, dict) and avatar and c.get("name") == Path(avatar).stem:
            note = CharacterNote(prompt=str(c.get("prompt") or ""), use_chara=bool(c.get("useChara")),
                                 position=int(c["position"]) if isinstance(c.get("position"), int) else 0)
            break
    disabled = ext.get("disabledExtensions")
    allowed = ext.get("character_allowed_regex")
    gvars = _obj(_obj(ext.get("variables")).get("global"))
    return setup.model_copy(update={
        "character_avatar": avatar,
        "character_tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "tag_names": names,
        "start_reply_with": str(pu.get("user_prompt_bias") or ""),
        "regex_scripts": scripts,
        "regex_disabled": isinstance(disabled, list) and "regex" in disabled,
        "character_regex_allowed": isinstance(allowed, list) and bool(avatar) and avatar in allowed,
        "character_note": note,
        "global_variables": dict(gvars),
    })


def with_entry_hashes(book: Lorebook, path: Path, warn: Any = None) -> Lorebook:
    """``book`` (read from world file ``path``) with SillyTavern's entry hashes recorded.

    The book's ``st_entry_hashes`` maps a digest of each entry to the hash SillyTavern 1.12.6
    gives its raw JSON (``getStringHash(JSON.stringify(entry))``, world-info.js 3620–3627). Entries
    written without a ``position`` (the oldest world format) are listed in ``st_no_position``
    (digests): SillyTavern activates them but places them nowhere (world-info.js 4133–4173, the
    ``switch`` has no case for ``undefined``); ``warn(message)`` gets one warning each. The file
    was read already; if it cannot be read again the book is returned unchanged.
    """
    try:
        name, raw = read_bytes(path)
        data = parse_json(decode_utf8(raw, name), name)
    except (LoomscopeImportError, OSError):
        return book
    if not isinstance(data, dict):
        return book
    entries = data.get("entries")
    carried = data.get(HASHES_FIELD)
    if isinstance(carried, dict) and carried and all(entry_basis(e, book.name) in carried for e in book.entries):
        # a world Loomscope exported carries the hashes of the SillyTavern file it came from (and
        # the entries that file gave no position): kept, so that the exported folder gives the same prompt
        kept: dict[str, Any] = {HASHES_FIELD: carried}
        if isinstance(data.get(NO_POSITION_FIELD), list):
            kept[NO_POSITION_FIELD] = data[NO_POSITION_FIELD]
        return book.model_copy(update=kept)
    book = record_hashes(book, entries)
    raws = list(entries.values()) if isinstance(entries, dict) else entries if isinstance(entries, list) else []
    if len(raws) != len(book.entries):
        return book
    missing = [e for e, r in zip(book.entries, raws, strict=True) if isinstance(r, dict) and "position" not in r]
    if not missing:
        return book
    for e in missing:
        if warn is not None:
            title = f" ({e.comment!r})" if e.comment else ""
            warn(f"entry uid {e.uid}{title} has no position (an old world format): SillyTavern activates it "
                 "but never puts it in the prompt until its position is set")
    extra = dict(book.model_extra or {})
    extra[NO_POSITION_FIELD] = [entry_basis(e, book.name) for e in missing]
    return book.model_copy(update=extra)
