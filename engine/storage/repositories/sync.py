"""Import identities and SillyTavern folder sync state (issue 30): what was imported from where."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select

from ...importers.st_folder import content_digest
from .. import _orm as orm
from .. import _queries as q
from .._rows import chunks, now
from ..models import ImportRef
from ..unit import Repository


def _sync_key(folder: str) -> str:
    return "st-sync:" + hashlib.sha256(folder.encode("utf-8")).hexdigest()[:40]


def _state(value: str) -> dict[str, Any] | None:
    """A stored sync state, or ``None`` when it is not a JSON object (the next import reads the whole folder)."""
    try:
        state = json.loads(value)
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


class SyncRepository(Repository):
    """Where library objects came from and what each imported folder looked like (``store.sync``)."""

    def source_key(self, kind: str, object_id: str) -> str | None:
        """The SillyTavern identity an object was imported under, or ``None``.

        The identity is its path relative to the user folder; ``kind`` is ``character``, ``lorebook``, ``persona`` or
        ``chat``.
        """
        with self._db.unit(write=False) as session:
            return session.scalars(select(orm.ImportSourceRow.key).where(
                orm.ImportSourceRow.kind == kind, orm.ImportSourceRow.object_id == object_id)).first()

    def folder_state(self, folder: str) -> dict[str, Any] | None:
        """What the last import of SillyTavern user folder ``folder`` recorded (files and items), or ``None``."""
        with self._db.unit(write=False) as session:
            row = session.get(orm.LibraryMetaRow, _sync_key(folder))
            return None if row is None else _state(row.value)

    def folder_states(self) -> list[dict[str, Any]]:
        """The recorded state of every SillyTavern folder imported into the library (see :meth:`folder_state`)."""
        with self._db.unit(write=False) as session:
            values = session.scalars(select(orm.LibraryMetaRow.value).where(
                orm.LibraryMetaRow.key.startswith("st-sync:"))).all()
        return [s for s in map(_state, values) if s is not None]

    def put_folder_state(self, folder: str, state: dict[str, Any]) -> None:
        """Record ``state`` (JSON) as what the import of ``folder`` saw."""
        with self._db.unit() as session:
            session.merge(orm.LibraryMetaRow(key=_sync_key(folder), value=json.dumps(state, ensure_ascii=False)))

    def mark_exported(self, exported: Sequence[tuple[str, str, str]]) -> list[str]:
        """Record that ``(kind, object_id, key)`` objects were written back into the folder they were imported from.

        For each whose import identity is ``(kind, key)`` and still names that object, Loomscope's
        version becomes the synced one (its edits so far are in the folder now): the next import of
        the folder updates it from the file without calling it a conflict. Returns the keys marked.
        """
        marked: list[str] = []
        with self._db.unit() as session:
            for kind, obj_id, key in exported:
                src = session.get(orm.ImportSourceRow, (kind, key))
                if src is None or src.object_id != obj_id:
                    continue
                # the baseline becomes Loomscope's version: a card, book or persona by its content digest;
                # a chat by time ("" is no digest: its file is stored again, no longer a local edit)
                src.digest = "" if kind == "chat" else content_digest(q.load_value(session, kind, obj_id))
                src.updated_at = now()
                marked.append(key)
        return marked

    def imported_refs(self, items: Sequence[tuple[str, str, str]]) -> list[ImportRef] | None:
        """``ImportRef`` per ``(kind, key, name)`` imported before, or ``None`` when any is no longer in the library."""
        with self._db.unit(write=False) as session:
            sources = {(k, key): oid for k, key, oid in session.execute(
                select(orm.ImportSourceRow.kind, orm.ImportSourceRow.key, orm.ImportSourceRow.object_id)).all()}
            ids = [sources.get((kind, key)) for kind, key, _ in items]
            if any(i is None for i in ids):
                return None
            for kind, cls in q.ROW_CLASSES.items():
                wanted = {i for (k, _, _), i in zip(items, ids) if k == kind}
                found = 0
                for chunk in chunks(sorted(str(i) for i in wanted), 500):
                    found += int(session.scalar(select(func.count()).select_from(cls).where(cls.id.in_(chunk))) or 0)
                if found != len(wanted):
                    return None
            return [ImportRef(kind=kind, id=str(i), name=name, key=key)  # type: ignore[arg-type]
                    for (kind, key, name), i in zip(items, ids)]
