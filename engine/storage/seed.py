"""Seeding the embedded library with the sample character, persona, lorebook and chat.

The files live in ``resources/sample/`` (written for Loomscope; Loomscope's own schema, read with
pydantic). Seeding happens once per library: ``library_meta.seeded`` records it, so deleting the
sample chat does not bring it back.
"""

from __future__ import annotations

import json
from importlib import resources as importlib_resources
from typing import Any

from ..schema import Character, Chat, ContextSettings, Lorebook, Persona
from . import _orm as orm
from . import _queries as q
from .unit import Database

SEEDED_KEY = "seeded"


def _read_json(name: str) -> Any:
    base = importlib_resources.files("resources") / "sample" / name
    return json.loads(base.read_text(encoding="utf-8"))


def load_sample() -> dict[str, Any]:
    """The sample library as models: ``character``, ``persona``, ``lorebook``, ``chat``, ``settings``, ``title``."""
    chat_doc = _read_json("chat.json")
    return {
        "character": Character.model_validate(_read_json("character.json")),
        "persona": Persona.model_validate(_read_json("persona.json")),
        "lorebook": Lorebook.model_validate(_read_json("lorebook.json")),
        "chat": Chat.model_validate(chat_doc["chat"]),
        "settings": ContextSettings.model_validate(chat_doc.get("settings") or {}),
        "title": str(chat_doc.get("title") or "Sample chat"),
    }


def seed_sample(db: Database, *, force: bool = False) -> str | None:
    """Store the sample library unless this library was seeded before (or ``force``).

    One transaction: the sample is stored completely or not at all.

    Returns
    -------
    str or None
        The sample chat's id; ``None`` when the library was seeded before.
    """
    sample = load_sample()
    with db.unit() as session:
        if not force and session.get(orm.LibraryMetaRow, SEEDED_KEY) is not None:
            return None
        char_id = q.insert_character(session, sample["character"])
        persona_id = q.insert_persona(session, sample["persona"])
        book_id = q.insert_lorebook(session, sample["lorebook"])
        session.flush()
        chat_id = q.insert_chat(
            session, sample["chat"], title=sample["title"], character_id=char_id,
            persona_id=persona_id, lorebook_ids=[book_id], settings=sample["settings"],
        )
        session.merge(orm.LibraryMetaRow(key=SEEDED_KEY, value="1"))
        return chat_id
