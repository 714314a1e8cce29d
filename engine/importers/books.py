"""``--lorebook FILE``: a lorebook file, or the book embedded in a character card.

Apart from format detection (:mod:`.detect`, with its report models), which a preview never needs.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import LoomscopeImportError
from ..schema import Lorebook
from .cards import load_character
from .lorebooks import load_lorebook

__all__ = ["load_lorebook_or_card_book"]


def load_lorebook_or_card_book(path: str | Path) -> Lorebook:
    """A lorebook file, or the book embedded in a character card (PNG or JSON).

    What ``--lorebook`` and ``lint-lorebook`` accept: SillyTavern world JSON, V2/V3 lorebooks,
    NovelAI lorebooks, or a card whose ``character_book`` is used (named after the card when
    the book has no name).

    Raises
    ------
    LoomscopeImportError
        The lorebook loader's error; ``IMPORT_INVALID_LOREBOOK`` for a card without an embedded
        book; ``IMPORT_UNSUPPORTED_FORMAT`` when the file is neither.
    """
    try:
        return load_lorebook(path)
    except LoomscopeImportError as exc:
        if exc.code != "IMPORT_UNSUPPORTED_FORMAT":
            raise
        try:
            card = load_character(path)
        except LoomscopeImportError:
            raise exc from None
    if card.character_book is None or not card.character_book.entries:
        raise LoomscopeImportError("IMPORT_INVALID_LOREBOOK", "the character card has no embedded lorebook",
                                   file=str(path)) from None
    book = card.character_book
    return book if book.name else book.model_copy(update={"name": f"{card.name or 'card'} (card)"})
