"""Lorebooks (World Info) in one schema for SillyTavern world JSON and V2/V3 ``character_book``.

Field meanings and defaults follow SillyTavern's ``newWorldInfoEntryDefinition`` (see
FORMATS.md b1); names are snake_case here. Importers map both SillyTavern world files and
card-embedded books onto :class:`LorebookEntry`; unknown fields are kept in ``extra`` so that
an export writes them back.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SelectiveLogic(IntEnum):
    """How secondary keys filter a primary-key match (SillyTavern ``selectiveLogic``)."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class InsertionPosition(IntEnum):
    """Where an activated entry goes (SillyTavern ``position``)."""

    BEFORE_CHAR = 0
    AFTER_CHAR = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    BEFORE_EXAMPLES = 5
    AFTER_EXAMPLES = 6
    OUTLET = 7


class LorebookEntry(BaseModel):
    """One World Info entry.

    Optional overrides (``scan_depth``, ``case_sensitive``, ``match_whole_words``,
    ``use_group_scoring``) are ``None`` when the global setting applies. Timed effects
    (``sticky``, ``cooldown``, ``delay``) are counted in messages; 0 or ``None`` is off.
    ``order`` is SillyTavern's insertion order and budget priority (higher is more important).
    ``role`` for ``AT_DEPTH``: 0 system, 1 user, 2 assistant.
    """

    model_config = ConfigDict(extra="allow")

    uid: int | str = 0
    keys: list[str] = Field(default_factory=list)
    secondary_keys: list[str] = Field(default_factory=list)
    comment: str = ""
    content: str = ""
    constant: bool = False
    selective: bool = True
    selective_logic: SelectiveLogic = SelectiveLogic.AND_ANY
    order: float = 100
    position: InsertionPosition = InsertionPosition.BEFORE_CHAR
    disable: bool = False
    depth: int = 4
    role: int | None = 0
    probability: float = 100
    use_probability: bool = True
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    use_group_scoring: bool | None = None
    group: str = ""
    group_override: bool = False
    group_weight: float = 100
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: int = 0
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    ignore_budget: bool = False
    vectorized: bool = False
    extensions: dict[str, Any] = Field(default_factory=dict)


class Lorebook(BaseModel):
    """A lorebook: a name and its entries (in book order), plus book-level settings.

    ``scan_depth``, ``token_budget`` and ``recursive_scanning`` come from V2
    ``character_book`` and are ``None`` when not given (global settings apply).
    """

    model_config = ConfigDict(extra="allow")

    name: str = ""
    description: str = ""
    entries: list[LorebookEntry] = Field(default_factory=list)
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)
