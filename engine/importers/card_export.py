"""Character cards written back as PNG (SillyTavern's ``charaWrite``; FORMATS.md b4).

:func:`export_card_png` returns PNG bytes holding the card as base64 UTF-8 JSON in a ``chara``
``tEXt`` chunk (V2), plus a ``ccv3`` chunk (the same card with ``spec: chara_card_v3``,
``spec_version: 3.0``) when the card is V3 — so a V2 card reads back as V2 and a V3 card as V3.
Existing ``chara``/``ccv3`` chunks are replaced (keywords compared case-insensitively); other
text chunks and the image are kept. When the card PNG it came from is known (a SillyTavern
folder import keeps it) and the character is unchanged, those bytes are returned as they are;
when it changed, the original card JSON is updated field by field, so unknown fields survive.
"""

from __future__ import annotations

import base64
import copy
import io
import json
from typing import Any

from ..schema import Character, Lorebook
from .cards import PNG_SIGNATURE, V1_FIELDS, V2_STRING_FIELDS, card_json_from_png, parse_card_data
from .lorebooks import export_world_entry

#: Size of the plain image written for a card that has none (SillyTavern's avatar aspect).
DEFAULT_IMAGE_SIZE = (400, 600)


def _book_to_v2(book: Lorebook) -> dict[str, Any]:
    """A :class:`Lorebook` as a V2 ``character_book`` (``convertWorldInfoToCharacterBook``)."""
    entries = []
    for e in book.entries:
        w = export_world_entry(e)
        ext = dict(e.model_extra.get("extensions") or {}) if e.model_extra else {}
        ext.update({"position": w.get("position"), "depth": w.get("depth"), "probability": w.get("probability"),
                    "useProbability": w.get("useProbability"), "role": w.get("role"), "group": w.get("group"),
                    "exclude_recursion": w.get("excludeRecursion"), "prevent_recursion": w.get("preventRecursion"),
                    "delay_until_recursion": w.get("delayUntilRecursion"), "selectiveLogic": w.get("selectiveLogic")})
        entries.append({"id": e.uid, "keys": list(e.keys), "secondary_keys": list(e.secondary_keys),
                        "comment": e.comment, "content": e.content, "constant": e.constant,
                        "selective": e.selective, "insertion_order": w.get("order", 100),
                        "enabled": not e.disable,
                        "position": "before_char" if int(e.position) == 0 else "after_char",
                        "use_regex": True, "extensions": ext})
    out: dict[str, Any] = {"entries": entries, "name": book.name}
    if book.description:
        out["description"] = book.description
    for key in ("scan_depth", "token_budget", "recursive_scanning"):
        if getattr(book, key, None) is not None:
            out[key] = getattr(book, key)
    out["extensions"] = dict(book.extensions or {})
    return out


def card_json(character: Character, original: dict[str, Any] | None = None) -> dict[str, Any]:
    """The card as V2/V3 JSON: ``original`` updated from the character, or a fresh V2 card.

    ``original`` is the card JSON it was read from; every field that differs from the character is written over it.

    Unknown fields (``data`` extras, top-level fields, ``extensions``) are kept.
    """
    c = character
    data_fields: dict[str, Any] = {k: getattr(c, k) for k in V1_FIELDS + V2_STRING_FIELDS}
    data_fields.update(alternate_greetings=list(c.alternate_greetings), tags=list(c.tags),
                       extensions=copy.deepcopy(c.extensions))
    if c.nickname is not None:
        data_fields["nickname"] = c.nickname
    if original is not None and isinstance(original.get("data"), dict):
        out = copy.deepcopy(original)
        before, _ = parse_card_data(original, None)
        data = out["data"]
        for k, v in data_fields.items():
            if getattr(before, k, None) != getattr(c, k, None):
                data[k] = v
                if k in V1_FIELDS and k in out:
                    out[k] = v  # SillyTavern mirrors the V1 fields at the top level
        if before.character_book != c.character_book:
            if c.character_book is None:
                data.pop("character_book", None)
            else:
                data["character_book"] = _book_to_v2(c.character_book)
        return out
    extras = dict(c.model_extra or {})
    root = dict(extras.pop("root_fields", None) or {})
    data = dict(data_fields)
    for k, v in extras.items():
        if k.startswith(("v1_", "pyg_")):
            continue
        data[k[5:] if k.startswith("data_") else k] = v
    if c.character_book is not None:
        data["character_book"] = _book_to_v2(c.character_book)
    spec = c.spec if c.spec in ("chara_card_v2", "chara_card_v3") else "chara_card_v2"
    return {**root, "spec": spec, "spec_version": "3.0" if spec == "chara_card_v3" else "2.0", "data": data}


def _b64(doc: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(doc, ensure_ascii=False).encode("utf-8")).decode("ascii")


def export_card_png(character: Character, original_png: bytes | None = None) -> bytes:
    """The character as card PNG bytes (see the module docstring).

    Parameters
    ----------
    character:
        The card to write.
    original_png:
        The card PNG it was imported from (image and chunks), if known.

    Raises
    ------
    LoomscopeImportError
        The errors of reading ``original_png`` (``IMPORT_INVALID_PNG``, ...).
    """
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    original: dict[str, Any] | None = None
    if original_png is not None and original_png.startswith(PNG_SIGNATURE):
        doc, _kw = card_json_from_png(original_png, "card")
        if isinstance(doc, dict):
            before, _ = parse_card_data(doc, None)
            if before.model_dump(mode="json") == character.model_dump(mode="json"):
                return original_png
            original = doc
    doc = card_json(character, original)
    v2 = {**doc, "spec": "chara_card_v2", "spec_version": "2.0"}
    info = PngInfo()
    image: Image.Image
    if original_png is not None and original_png.startswith(PNG_SIGNATURE):
        image = Image.open(io.BytesIO(original_png))
        image.load()
        for k, v in (getattr(image, "text", None) or {}).items():
            if k.lower() not in ("chara", "ccv3"):
                info.add_text(k, v)
    else:
        image = Image.new("RGB", DEFAULT_IMAGE_SIZE, (64, 64, 72))
    info.add_text("chara", _b64(v2))
    if doc.get("spec") == "chara_card_v3":
        info.add_text("ccv3", _b64({**doc, "spec": "chara_card_v3", "spec_version": "3.0"}))
    buf = io.BytesIO()
    image.save(buf, "PNG", pnginfo=info)
    return buf.getvalue()


__all__ = ["card_json", "export_card_png"]
