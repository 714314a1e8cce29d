"""``PreviewRequest``: everything the pipeline needs to assemble one prompt."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .character import Character, Persona
from .lorebook import Lorebook
from .messages import Chat
from .settings import ContextSettings
from .sillytavern import SillyTavernSetup

#: Used when neither the user nor the card gives a system prompt (SillyTavern's default main prompt).
DEFAULT_SYSTEM_PROMPT = (
    "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
)


class MemoryItem(BaseModel):
    """A memory block (summary or note) the user keeps with a chat; removable by priority."""

    model_config = ConfigDict(extra="forbid")

    id: str
    content: str
    priority: float = 0
    kind: str = "memory"  # "memory" or "summary"


class PreviewRequest(BaseModel):
    """Input of :func:`engine.pipeline.preview` (and of ``POST /api/v2/context-preview``).

    ``system_prompt`` ``None`` means the default main prompt; a card's ``system_prompt``
    overrides it, with ``{{original}}`` inserting it (SillyTavern V2 semantics).
    ``now_seed`` makes lorebook probability rolls reproducible together with
    ``settings.world_info.seed``.
    ``sillytavern`` (a chat imported from a SillyTavern folder) selects SillyTavern's Chat
    Completion assembly (:mod:`engine.assembly.sillytavern`) instead of the stage template.
    """

    model_config = ConfigDict(extra="forbid")

    chat: Chat = Field(default_factory=Chat)
    character: Character | None = None
    persona: Persona | None = None
    lorebooks: list[Lorebook] = Field(default_factory=list)
    system_prompt: str | None = None
    author_note: str | None = None
    memory: list[MemoryItem] = Field(default_factory=list)
    settings: ContextSettings = Field(default_factory=ContextSettings)
    sillytavern: SillyTavernSetup | None = None
