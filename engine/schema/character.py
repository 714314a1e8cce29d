"""Character cards and personas.

Field names follow the Character Card V2/V3 spec (SillyTavern's ``chara_card_v2``/``v3``),
which is also what SillyTavern uses internally. Unknown fields are kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .lorebook import Lorebook


class DepthPrompt(BaseModel):
    """SillyTavern's "Character's Note" (``extensions.depth_prompt``): text inserted at a depth.

    ``depth`` counts messages from the end of the chat (0 = after the last message).
    """

    model_config = ConfigDict(extra="allow")

    prompt: str = ""
    depth: int = 4
    role: str = "system"


class Character(BaseModel):
    """A character card (V1/V2/V3 fields; ``creator_notes`` is never sent to the model)."""

    model_config = ConfigDict(extra="allow")

    name: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: list[str] = Field(default_factory=list)
    creator_notes: str = ""
    tags: list[str] = Field(default_factory=list)
    creator: str = ""
    character_version: str = ""
    nickname: str | None = None
    extensions: dict[str, Any] = Field(default_factory=dict)
    character_book: Lorebook | None = None
    spec: str | None = None
    spec_version: str | None = None

    def depth_prompt(self) -> DepthPrompt | None:
        """The card's ``extensions.depth_prompt`` if it has non-empty text, else ``None``."""
        raw = self.extensions.get("depth_prompt")
        if isinstance(raw, dict) and str(raw.get("prompt") or "").strip():
            try:
                return DepthPrompt.model_validate(
                    {**raw, "depth": raw.get("depth", 4) if raw.get("depth") is not None else 4,
                     "role": raw.get("role") or "system"}
                )
            except Exception:  # malformed depth value: fall back to defaults, keep the text
                return DepthPrompt(prompt=str(raw.get("prompt")))
        return None


class Persona(BaseModel):
    """The user's persona (SillyTavern "User Persona"): a name and a description."""

    model_config = ConfigDict(extra="allow")

    name: str = "User"
    description: str = ""
