"""User settings: context budget, strategy, World Info globals. ``extra="forbid"``."""

from __future__ import annotations

import re
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

#: Default prompt template: the order of assembly stages (see ``engine.assembly``). It follows
#: SillyTavern's default chat-completion prompt order: main prompt, World Info (before), persona
#: description, character description/personality/scenario, World Info (after), example
#: dialogue, chat history; then post-history instructions and the current user input.
DEFAULT_TEMPLATE: tuple[str, ...] = (
    "system",
    "tools",
    "lorebook_before_char",
    "persona",
    "character",
    "lorebook_after_char",
    "examples",
    "memory",
    "history",
    "post_history",
    "input",
)

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _allows_bool(annotation: Any) -> bool:
    """Whether a field annotation admits ``bool`` (``bool``, ``bool | None``, ``Any``)."""
    if annotation is bool or annotation is Any:
        return True
    return any(_allows_bool(a) for a in typing.get_args(annotation))


def _only_bool(annotation: Any) -> bool:
    """Whether a field is a plain flag (``bool`` or ``bool | None``)."""
    if annotation is bool:
        return True
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return bool(args) and all(a is bool for a in args)


def refuse_bools_as_numbers(model: type[BaseModel], name: str | None, value: Any) -> Any:
    """Before-validator body for field ``name``: ``true``/``false`` are not numbers, and numbers are not flags.

    pydantic's lax mode reads ``reply_reserve: false`` as 0 tokens and ``recursive: 1`` as
    ``True``; settings come from people and HTTP clients, so both are refused (issue 15), the
    error's ``loc`` naming the field.
    """
    field = model.model_fields.get(name or "")
    if field is None:
        return value
    if isinstance(value, bool) and not _allows_bool(field.annotation):
        raise ValueError(f"a boolean ({str(value).lower()}) is not a valid value here")
    if _only_bool(field.annotation) and value is not None and not isinstance(value, bool):
        raise ValueError(f"expected true or false, not {value!r}")
    return value


class WorldInfoSettings(BaseModel):
    """Global World Info settings (SillyTavern names and fresh-install defaults, FORMATS.md b2).

    ``budget_percent`` is a percentage of the context limit (SillyTavern:
    ``world_info_budget``); ``budget_cap`` an absolute cap in tokens (0 = none).
    ``seed`` makes probability rolls and weighted group choices reproducible.

    ``rules`` picks the activation rules: ``"sillytavern"`` (default) reproduces SillyTavern
    1.12.x ``checkWorldInfo`` exactly, quirks included; ``"loomscope"`` keeps Loomscope's
    documented improvements (constants never dropped, smaller entries still tried after an
    overflow, Unicode-aware whole words, invalid regex keys reported). ``character_strategy``
    is SillyTavern's ``world_info_character_strategy`` (``getSortedEntries``): how character
    books and global books are ranked for the budget; SillyTavern's numbers 0 / 1 / 2 are
    accepted for ``evenly`` / ``character_first`` / ``global_first``. ``regex_timeout_ms`` bounds
    one regex key's search of one text (milliseconds); ``regex_total_timeout_ms`` bounds all
    regex searches of one activation (milliseconds). A search that runs out does not match
    (trace code ``LOREBOOK_REGEX_TIMEOUT``).
    """

    model_config = ConfigDict(extra="forbid")

    scan_depth: int = Field(2, ge=0, le=1000)
    budget_percent: float = Field(25, ge=0, le=100)
    budget_cap: int = Field(0, ge=0)
    include_names: bool = True
    recursive: bool = True
    case_sensitive: bool = False
    match_whole_words: bool = True
    max_recursion_steps: int = Field(0, ge=0)
    min_activations: int = Field(0, ge=0)
    min_activations_depth_max: int = Field(0, ge=0)
    use_group_scoring: bool = False
    seed: int = 0
    rules: Literal["sillytavern", "loomscope"] = "sillytavern"
    character_strategy: Literal["evenly", "character_first", "global_first"] = "character_first"
    regex_timeout_ms: float = Field(50, gt=0, le=60_000)
    regex_total_timeout_ms: float = Field(500, gt=0, le=600_000)

    @field_validator("character_strategy", mode="before")
    @classmethod
    def _strategy_number(cls, value: Any) -> Any:
        """SillyTavern stores ``world_info_character_strategy`` as 0 / 1 / 2."""
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) or (isinstance(value, str) and value.strip().isascii() and value.strip().isdigit()):
            names = {0: "evenly", 1: "character_first", 2: "global_first"}
            return names.get(int(value), value)
        return value

    @field_validator("*", mode="before")
    @classmethod
    def _strict_flags_and_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        return refuse_bools_as_numbers(cls, info.field_name, value)


class ContextSettings(BaseModel):
    """How a prompt is budgeted.

    Attributes
    ----------
    model:
        Model name, looked up in the built-in model table.
    context_limit:
        Override of the model's context window in tokens (``None`` = the table's value).
    reply_reserve:
        Tokens held back for the reply: an int, or a string percentage of the context limit
        (``"15%"``).
    strategy:
        Name of a registered context strategy (``truncate``, ``manual``, ...). The default,
        ``manual``, honours the user's exclusions and then truncates oldest-first.
    tokenizer:
        Override of the tokenizer profile name (``None`` = the model table's).
    safety_margin_percent:
        Share of the budget held back under an approximate profile (SPEC §1: 5 %).
    template:
        Stage order (names from the assembly stage registry).
    """

    model_config = ConfigDict(extra="forbid")

    model: str = "gpt-4o"
    context_limit: int | None = Field(None, gt=0)
    reply_reserve: int | str = 1024
    strategy: str = "manual"
    tokenizer: str | None = None
    safety_margin_percent: float = Field(5.0, ge=0, le=50)
    template: list[str] = Field(default_factory=lambda: list(DEFAULT_TEMPLATE))
    world_info: WorldInfoSettings = Field(default_factory=WorldInfoSettings)
    strategy_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("*", mode="before")
    @classmethod
    def _strict_flags_and_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        return refuse_bools_as_numbers(cls, info.field_name, value)

    @field_validator("reply_reserve")
    @classmethod
    def _check_reserve(cls, value: int | str) -> int | str:
        if isinstance(value, int):
            if value < 0:
                raise ValueError("reply_reserve must be >= 0 tokens")
            return value
        text = str(value).strip()
        if text.isascii() and text.isdigit():
            return int(text)
        m = _PERCENT.match(text)
        if not m or float(m.group(1)) >= 100:
            raise ValueError("reply_reserve must be tokens (1024) or a percentage below 100 (\"15%\")")
        return text

    def resolve_reply_reserve(self, context_limit: int) -> int:
        """Reply reserve in tokens for ``context_limit`` (percentages round down)."""
        if isinstance(self.reply_reserve, int):
            return self.reply_reserve
        m = _PERCENT.match(self.reply_reserve)
        assert m is not None  # validated
        return int(context_limit * float(m.group(1)) / 100)
