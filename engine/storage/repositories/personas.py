"""Personas: the user's name and description every chat that uses one sees."""

from __future__ import annotations

from sqlalchemy import delete, select

from ...schema import Persona
from .. import _orm as orm
from .. import _queries as q
from ..models import PersonaSummary
from ..unit import Repository


class PersonaRepository(Repository):
    """The library's personas (``store.personas``)."""

    def add(self, persona: Persona) -> str:
        """Store a persona; returns its id."""
        with self._db.unit() as session:
            return q.insert_persona(session, persona)

    def summaries(self) -> list[PersonaSummary]:
        """Every persona, by name."""
        with self._db.unit(write=False) as session:
            rows = session.scalars(select(orm.PersonaRow).order_by(orm.PersonaRow.name)).all()
            return [PersonaSummary(id=r.id, name=r.name) for r in rows]

    def get(self, persona_id: str) -> Persona:
        """The persona. Raises ``PERSONA_NOT_FOUND``."""
        with self._db.unit(write=False) as session:
            return q.load_persona(session, persona_id)

    def update(self, persona_id: str, persona: Persona) -> None:
        """Replace the persona's name and description (every chat using it sees the change).

        Raises ``PERSONA_NOT_FOUND``.
        """
        with self._db.unit() as session:
            row = q.persona_row(session, persona_id)
            row.name = persona.name
            row.data = persona.model_dump(mode="json")

    def rename(self, persona_id: str, name: str) -> None:
        """Set the persona's name (one unit of work). Raises ``PERSONA_NOT_FOUND``."""
        with self._db.unit() as session:
            row = q.persona_row(session, persona_id)
            persona = Persona.model_validate(row.data or {}).model_copy(update={"name": name})
            row.name = persona.name
            row.data = persona.model_dump(mode="json")

    def delete(self, persona_id: str) -> None:
        """Delete a persona; chats that used it are left without one. Raises ``PERSONA_NOT_FOUND``."""
        with self._db.unit() as session:
            q.persona_row(session, persona_id)
            for row in session.scalars(select(orm.ChatRow).where(orm.ChatRow.persona_id == persona_id)):
                row.persona_id = None
            q.forget_source(session, "persona", persona_id)
            session.execute(delete(orm.PersonaRow).where(orm.PersonaRow.id == persona_id))
