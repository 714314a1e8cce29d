"""Characters: cards with their embedded books and the PNG they were imported from."""

from __future__ import annotations

from sqlalchemy import delete, select

from ...schema import Character
from .. import _orm as orm
from .. import _queries as q
from ..models import CharacterSummary
from ..unit import Repository


class CharacterRepository(Repository):
    """The library's characters (``store.characters``)."""

    def add(self, character: Character) -> str:
        """Store a character (its embedded book becomes a lorebook row).

        Returns
        -------
        str
            The new character id.
        """
        with self._db.unit() as session:
            return q.insert_character(session, character)

    def summaries(self) -> list[CharacterSummary]:
        """Every character, by name, with the id of its embedded book (if any)."""
        with self._db.unit(write=False) as session:
            books = dict(session.execute(
                select(orm.LorebookRow.character_id, orm.LorebookRow.id)
                .where(orm.LorebookRow.character_id.is_not(None))).all())
            rows = session.scalars(select(orm.CharacterRow).order_by(orm.CharacterRow.name)).all()
            return [CharacterSummary(id=r.id, name=r.name, lorebook_id=books.get(r.id)) for r in rows]

    def get(self, character_id: str) -> Character:
        """The character with its embedded book. Raises ``CHARACTER_NOT_FOUND``."""
        with self._db.unit(write=False) as session:
            return q.load_character(session, character_id)

    def avatar(self, character_id: str) -> bytes | None:
        """The card PNG as imported from a SillyTavern folder (image and chunks), or ``None``.

        Raises ``CHARACTER_NOT_FOUND``.
        """
        with self._db.unit(write=False) as session:
            return q.character_row(session, character_id).avatar

    def rename(self, character_id: str, name: str) -> None:
        """Set the character's name (the card's ``name`` too). Raises ``CHARACTER_NOT_FOUND``."""
        with self._db.unit() as session:
            row = q.character_row(session, character_id)
            row.name = name
            row.data = {**(row.data or {}), "name": name}

    def delete(self, character_id: str) -> None:
        """Delete a character and its embedded book.

        Chats that used it keep their messages and are left without a character. Its SillyTavern import identity is
        forgotten (a re-import adds it again). Raises ``CHARACTER_NOT_FOUND``.
        """
        with self._db.unit() as session:
            q.character_row(session, character_id)
            for row in session.scalars(select(orm.ChatRow).where(orm.ChatRow.character_id == character_id)):
                row.character_id = None
            book_ids = list(session.scalars(select(orm.LorebookRow.id)
                                            .where(orm.LorebookRow.character_id == character_id)))
            for book_id in book_ids:
                q.delete_book_rows(session, book_id)
            q.forget_source(session, "character", character_id)
            session.execute(delete(orm.CharacterRow).where(orm.CharacterRow.id == character_id))
