"""The import service: files (cards, books, chats) and SillyTavern user folders written into the library.

Every import is one transaction (:meth:`engine.storage.unit.Database.unit`): all of it is stored, or
nothing is. Identities of what was imported from where live in ``import_sources`` (see
:class:`~engine.storage.repositories.sync.SyncRepository` for reading them back).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.orm import Session

from ..errors import StorageError
from ..importers import load_any
from ..importers.detect import ImportedItem
from ..importers.st_folder import FolderItem, FolderPlan, content_digest
from ..schema import Character, Chat, Lorebook, Persona
from . import _orm as orm
from . import _queries as q
from ._rows import SETUP_NOT_STORED, chunks, entry_row, message_row, now, utc
from .models import FolderImportReport, ImportRef, SyncConflict
from .unit import Database

#: ``on_progress(stage, file, done, total)`` of :meth:`ImportService.files`.
FileProgress = Callable[[str, str, int, int], None]


def _read_files(path_list: list[str | Path], on_warning: Callable[[str, str], None] | None,
                on_progress: FileProgress | None) -> list[tuple[Path, ImportedItem]]:
    """Parse every file (``load_any``), reporting warnings and read progress; the first bad file raises."""
    items = []
    for n_read, path in enumerate(path_list):
        if on_progress is not None:
            on_progress("read", str(path), n_read, len(path_list))
        item = load_any(Path(path))
        for warning in getattr(item, "warnings", None) or []:
            if on_warning is not None:
                on_warning(str(path), str(warning))
        items.append((Path(path), item))
    if on_progress is not None and path_list:
        on_progress("read", str(path_list[-1]), len(path_list), len(path_list))
    return items


# ---------------------------------------------------------------- replacing what an object holds
def _update_character(session: Session, obj_id: str, char: Character, avatar: bytes | None) -> None:
    row = session.get_one(orm.CharacterRow, obj_id)
    row.name, row.avatar = char.name, avatar
    row.data = char.model_dump(mode="json", exclude={"character_book"})
    old_books = list(session.scalars(select(orm.LorebookRow.id).where(orm.LorebookRow.character_id == obj_id)).all())
    for book_id in old_books:
        q.delete_book_rows(session, book_id, forget=False)
    q.insert_card_book(session, char, obj_id)


def _update_lorebook(session: Session, obj_id: str, book: Lorebook) -> None:
    row = session.get_one(orm.LorebookRow, obj_id)
    row.name = book.name
    row.data = book.model_dump(mode="json", exclude={"entries"})
    session.execute(delete(orm.LorebookEntryRow).where(orm.LorebookEntryRow.lorebook_id == obj_id))
    session.flush()
    session.add_all(entry_row(obj_id, i, e) for i, e in enumerate(book.entries))


def _update_persona(session: Session, obj_id: str, persona: Persona) -> None:
    row = session.get_one(orm.PersonaRow, obj_id)
    row.name, row.data = persona.name, persona.model_dump(mode="json")


def _update_chat(session: Session, obj_id: str, chat: Chat, title: str) -> orm.ChatRow:
    """Replace the chat's title, data and messages (its other links are the caller's)."""
    row = session.get_one(orm.ChatRow, obj_id)
    row.title = title
    row.data = chat.model_dump(mode="json", exclude={"messages", "title"})
    session.execute(delete(orm.MessageRow).where(orm.MessageRow.chat_id == obj_id))
    session.flush()
    session.add_all(message_row(obj_id, i, m) for i, m in enumerate(chat.messages))
    q.touch(row)
    return row


def _replace_imported(session: Session, kind: str, obj_id: str, value: Any) -> None:
    """Replace what ``obj_id`` holds with ``value`` read from the same file again (its links are kept)."""
    if kind == "chat":
        _update_chat(session, obj_id, value, value.title)
    elif kind == "character":
        _update_character(session, obj_id, value, session.get_one(orm.CharacterRow, obj_id).avatar)
    elif kind == "lorebook":
        _update_lorebook(session, obj_id, value)
    else:
        _update_persona(session, obj_id, value)


def _locally_edited(session: Session, kind: str, obj_id: str, src: orm.ImportSourceRow) -> bool:
    """Whether the object was edited in Loomscope since it was last imported from ``src``.

    A chat: changed after the import (every chat edit stamps ``updated_at``). A character,
    lorebook or persona: what it is now no longer has the content digest it was imported with
    (:func:`engine.importers.st_folder.content_digest`).
    """
    if kind == "chat":
        row = session.get(orm.ChatRow, obj_id)
        return row is not None and utc(row.updated_at) > utc(src.updated_at)
    return bool(content_digest(q.load_value(session, kind, obj_id)) != src.digest)


class _SameFile:
    """Imports of single files without silent duplicates (issue 30).

    A file imported before (identity: its resolved path, ``file:<path>`` in ``import_sources``; a
    file of several transcripts adds ``#k``) is updated in place (``changed``), or left alone when
    its content is the same (``unchanged``); failing that, an object of the same kind, name and
    content digest already in the library is that object (``unchanged``). An object edited in
    Loomscope since its file was imported is never overwritten: the file comes in as a new copy,
    with a warning. ``as_new`` keeps both always (a new object; later imports of the path update it).
    """

    def __init__(self, session: Session, as_new: bool, on_warning: Callable[[str, str], None] | None) -> None:
        self.session, self.as_new, self.on_warning = session, as_new, on_warning

    def _find(self, kind: str, key: str, name: str, digest: str, value: Any, path: Path) -> tuple[str | None, str]:
        session = self.session
        src = session.get(orm.ImportSourceRow, (kind, key))
        row_cls = q.ROW_CLASSES[kind]
        if src is not None and session.get(row_cls, src.object_id) is not None:
            if src.digest == digest:
                return src.object_id, "unchanged"
            if _locally_edited(session, kind, src.object_id, src):
                if self.on_warning is not None:
                    self.on_warning(str(path), f"the {kind} imported from this file before was edited in Loomscope "
                                               "since; kept, and the file imported as a new copy")
                return None, "added"
            _replace_imported(session, kind, src.object_id, value)
            return src.object_id, "changed"
        name_col = row_cls.title if kind == "chat" else row_cls.name
        for cand in session.scalars(select(row_cls.id).where(name_col == name)).all():
            found = q.load_value(session, kind, cand)
            if kind == "chat":
                found = found.model_copy(update={"title": name})
            if content_digest(found) == digest:
                return str(cand), "unchanged"
        return None, "added"

    def store(self, kind: str, path: Path, name: str, value: Any, insert_new: Callable[[], str],
              part: str = "") -> ImportRef:
        """Insert ``value`` (``insert_new()``), or find / update the object it already is; record the file's identity."""
        key = f"file:{path.resolve()}{part}"
        digest = content_digest(value)
        obj_id, status = (None, "added") if self.as_new else self._find(kind, key, name, digest, value, path)
        if obj_id is None:
            obj_id = insert_new()
        if status != "unchanged":
            src = self.session.get(orm.ImportSourceRow, (kind, key))
            if src is None:
                self.session.add(orm.ImportSourceRow(kind=kind, key=key, object_id=obj_id, digest=digest,
                                                     updated_at=now()))
            else:
                src.object_id, src.digest, src.updated_at = obj_id, digest, now()
            self.session.flush()
        return ImportRef(kind=kind, id=obj_id, name=name, status=status)  # type: ignore[arg-type]


def _imported_chats(session: Session, path: Path, item: ImportedItem, by_name: dict[str, str],
                    on_progress: FileProgress | None, same: _SameFile) -> list[ImportRef]:
    """Every transcript of one imported chat file, linked to its character by name (this call's, else the newest)."""
    # a file may hold several transcripts (tau-bench, ToolBench): store them all
    transcripts = list(getattr(item, "chats", None) or [item.value])
    titles = [c.title or path.stem for c in transcripts]
    numbered = len(set(titles)) < len(titles)  # only when the titles repeat
    chat_refs: list[ImportRef] = []
    for k, chat in enumerate(transcripts):
        character_id = by_name.get(chat.character_name) if chat.character_name else None
        if character_id is None and chat.character_name:
            character_id = session.scalars(
                select(orm.CharacterRow.id).where(orm.CharacterRow.name == chat.character_name)
                .order_by(orm.CharacterRow.created_at.desc()).limit(1)).first()
        title = f"{titles[k]} #{k + 1}" if numbered else titles[k]
        progress = None if on_progress is None else (
            lambda done, total, _f=str(path): on_progress("store", _f, done, total))
        insert_new = partial(q.insert_chat, session, chat, title=title, character_id=character_id,
                             on_progress=progress)
        part = f"#{k}" if len(transcripts) > 1 else ""
        chat_refs.append(same.store("chat", path, title, chat.model_copy(update={"title": title}), insert_new,
                                    part=part))
    return chat_refs


# ---------------------------------------------------------------- SillyTavern folders
def _st_known(session: Session, items: Sequence[FolderItem], row_cls: Mapping[str, Any],
              ) -> tuple[dict[tuple[str, str], orm.ImportSourceRow], dict[str, set[str]]]:
    """The import identities of ``items`` (by ``(kind, key)``) and which of their objects still exist (by kind).

    Only the plan's own keys are looked up (chunks of 500): a re-import of the one chat that changed
    does not load the whole library's identities (issue 30), a first import of 10,000 chats asks a
    few dozen queries (issue 25).
    """
    keys: dict[str, set[str]] = {}
    for item in items:
        keys.setdefault(item.kind, set()).add(item.key)
    src = orm.ImportSourceRow
    sources: dict[tuple[str, str], orm.ImportSourceRow] = {}
    for kind, wanted in keys.items():
        for chunk in chunks(sorted(wanted), 500):
            sources.update(((r.kind, r.key), r) for r in session.scalars(
                select(src).where(src.kind == kind, src.key.in_(chunk))))
    existing: dict[str, set[str]] = {kind: set() for kind in row_cls}
    for kind, cls in row_cls.items():
        ids = sorted({r.object_id for (k, _), r in sources.items() if k == kind})
        col = cls.__table__.c.id
        for chunk in chunks(ids, 500):
            existing[kind].update(session.scalars(select(col).where(col.in_(chunk))))
    return sources, existing


def _st_chat_refs(item: FolderItem, ids: dict[str, str]) -> tuple[str | None, str | None, list[str], list[str]]:
    links = [(ids[k], sc) for k, sc in item.lorebook_links if k in ids]
    return (ids.get(item.character_key) if item.character_key else None,
            ids.get(item.persona_key) if item.persona_key else None,
            [b for b, _ in links], [sc for _, sc in links])


def _st_insert(session: Session, item: FolderItem, ids: dict[str, str]) -> str:
    if item.kind == "character":
        return q.insert_character(session, item.value, avatar=item.avatar)
    if item.kind == "lorebook":
        return q.insert_lorebook(session, item.value)
    if item.kind == "persona":
        return q.insert_persona(session, item.value)
    character_id, persona_id, books, scopes = _st_chat_refs(item, ids)
    return q.insert_chat(session, item.value, title=item.name, character_id=character_id,
                         persona_id=persona_id, lorebook_ids=books, scopes=scopes,
                         settings=item.settings, setup=item.setup)


def _st_update(session: Session, item: FolderItem, obj_id: str, ids: dict[str, str]) -> None:
    # the rows exist: ImportService.st_folder looked them up by their import identity just before
    if item.kind == "character":
        _update_character(session, obj_id, item.value, item.avatar)
    elif item.kind == "lorebook":
        _update_lorebook(session, obj_id, item.value)
    elif item.kind == "persona":
        _update_persona(session, obj_id, item.value)
    else:
        character_id, persona_id, books, scopes = _st_chat_refs(item, ids)
        session.execute(delete(orm.ChatLorebookRow).where(orm.ChatLorebookRow.chat_id == obj_id))
        row = _update_chat(session, obj_id, item.value, item.name)
        row.character_id, row.persona_id = character_id, persona_id
        row.settings = item.settings.model_dump(mode="json") if item.settings is not None else {}
        row.setup = item.setup.model_dump(mode="json", exclude=SETUP_NOT_STORED) if item.setup is not None else None
        session.add_all(orm.ChatLorebookRow(chat_id=obj_id, lorebook_id=b, position=i, scope=sc)
                        for i, (b, sc) in enumerate(zip(books, scopes)))


def _st_conflict(session: Session, item: FolderItem, obj_id: str, src: orm.ImportSourceRow, on_conflict: str,
                 conflicts: list[SyncConflict]) -> bool:
    """Record a conflict when ``obj_id`` was edited locally; True when the folder's version must not be stored."""
    if not _locally_edited(session, item.kind, obj_id, src):
        return False
    resolution = {"keep-local": "kept-local", "use-folder": "used-folder"}.get(on_conflict, "unresolved")
    conflicts.append(SyncConflict(kind=item.kind, id=obj_id, name=item.name, key=item.key,
                                  resolution=resolution))  # type: ignore[arg-type]
    if resolution == "kept-local":
        # the folder's version counts as seen; a later change in the folder is a conflict again
        src.digest, src.updated_at = item.digest, now()
    return resolution != "used-folder"


class _FolderRun:
    """One SillyTavern folder import inside one unit of work: what was added, changed, left alone, in conflict."""

    def __init__(self, session: Session, plan: FolderPlan, on_conflict: str) -> None:
        self.session, self.on_conflict = session, on_conflict
        self.added: list[ImportRef] = []
        self.changed: list[ImportRef] = []
        self.unchanged: list[ImportRef] = []
        self.conflicts: list[SyncConflict] = []
        self.ids: dict[str, str] = {}
        # the identities and the objects that exist looked up in a few queries, not two per item, and
        # the new identities in one INSERT: a 10,000-chat folder spent most of its import in those
        # lookups and flushes (issue 25 item 4)
        self.sources, self.existing = _st_known(session, plan.items, q.ROW_CLASSES)
        self.new_sources: dict[tuple[str, str], dict[str, Any]] = {}

    def store(self, item: FolderItem) -> None:
        """Insert, update or leave alone one item of the plan (by its identity ``(kind, key)``)."""
        src = self.sources.get((item.kind, item.key))
        known = ({"object_id": src.object_id, "digest": src.digest} if src is not None
                 else self.new_sources.get((item.kind, item.key)))
        obj_id = known["object_id"] if known is not None else None
        if obj_id is not None and obj_id not in self.existing[item.kind]:
            obj_id = None  # deleted from the library since: import it again
        ref = partial(ImportRef, kind=item.kind, name=item.name, key=item.key)
        if obj_id is not None and known is not None and known["digest"] == item.digest:
            self.ids[item.key] = obj_id
            self.unchanged.append(ref(id=obj_id))
            return
        if obj_id is None:
            obj_id = _st_insert(self.session, item, self.ids)
            self.added.append(ref(id=obj_id))
        elif src is not None and _st_conflict(self.session, item, obj_id, src, self.on_conflict, self.conflicts):
            self.ids[item.key] = obj_id
            return
        else:
            _st_update(self.session, item, obj_id, self.ids)
            self.changed.append(ref(id=obj_id))
        self.ids[item.key] = obj_id
        self.existing[item.kind].add(obj_id)
        if src is None:
            self.new_sources[item.kind, item.key] = {"kind": item.kind, "key": item.key, "object_id": obj_id,
                                                     "digest": item.digest, "updated_at": now()}
        else:
            src.object_id, src.digest, src.updated_at = obj_id, item.digest, now()

    def finish(self) -> None:
        """Insert the new import identities (one statement)."""
        if self.new_sources:
            self.session.connection().execute(insert(cast(Table, orm.ImportSourceRow.__table__)),
                                              list(self.new_sources.values()))


class ImportService:
    """Writes imported files and SillyTavern folders into the library (``store.imports``).

    Parameters
    ----------
    db:
        The library database, shared with the repositories.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def files(
        self,
        paths: Iterable[str | Path],
        *,
        on_warning: Callable[[str, str], None] | None = None,
        sources: list[str] | None = None,
        on_progress: FileProgress | None = None,
        as_new: bool = False,
    ) -> list[ImportRef]:
        """Parse every file, then store them all in ONE transaction.

        A file imported before (the same path) is updated in place, and a file whose object is
        already in the library (same kind, name and content) is not stored twice: ``status`` says
        ``added``, ``changed`` or ``unchanged`` (see :class:`_SameFile`); ``as_new`` keeps both.
        A character card's embedded book becomes a lorebook linked to it. A chat is linked to
        the character of the same name (imported earlier or in the same call), if any.

        Parameters
        ----------
        paths:
            Files in any format :func:`engine.importers.load_any` reads.
        on_warning:
            Called with ``(file, warning)`` for each importer warning.
        sources:
            If given, receives the file path of each returned ref, in the same order (a file
            holding several transcripts gives several refs).
        on_progress:
            Called with ``(stage, file, done, total)``: ``("read", file, i, n)`` before file
            ``i`` of ``n`` is read, ``("read", file, n, n)`` once all are read, and
            ``("store", file, stored, messages)`` as a chat's messages are stored (in batches).

        Returns
        -------
        list[ImportRef]
            In file order: ``kind``, ``id``, ``name``, ``status``; one per file, except that a file
            holding several chat transcripts gives one chat per transcript (numbered ``… #k`` when
            their titles would repeat).

        Raises
        ------
        LoomscopeImportError
            ``IMPORT_*`` for the first bad file (naming it); nothing is stored then.
        """
        items = _read_files(list(paths), on_warning, on_progress)
        with self._db.unit() as session:
            refs = self._store_items(session, items, as_new, on_warning, on_progress)
        out: list[ImportRef] = []
        for i, (path, _) in enumerate(items):
            out.extend(refs[i])
            if sources is not None:
                sources.extend(str(path) for _ in refs[i])
        return out

    @staticmethod
    def _store_items(session: Session, items: list[tuple[Path, ImportedItem]], as_new: bool,
                     on_warning: Callable[[str, str], None] | None,
                     on_progress: FileProgress | None) -> dict[int, list[ImportRef]]:
        refs: dict[int, list[ImportRef]] = {}
        by_name: dict[str, str] = {}
        same = _SameFile(session, as_new, on_warning)
        # cards and books first, so a chat links to a card imported in the same call
        for i in sorted(range(len(items)), key=lambda i: items[i][1].kind == "chat"):
            path, item = items[i]
            value = item.value
            if item.kind == "character" and isinstance(value, Character):
                char_ref = same.store("character", path, value.name or path.stem, value,
                                      partial(q.insert_character, session, value))
                by_name[value.name] = char_ref.id
                refs[i] = [char_ref]
            elif item.kind == "lorebook" and isinstance(value, Lorebook):
                book = value if value.name else value.model_copy(update={"name": path.stem})
                refs[i] = [same.store("lorebook", path, book.name, book, partial(q.insert_lorebook, session, book))]
            elif item.kind == "chat":
                refs[i] = _imported_chats(session, path, item, by_name, on_progress, same)
            else:  # pragma: no cover - load_any only returns the three kinds, each with its value type
                raise StorageError("STORAGE_ERROR", f"cannot store an item of kind {item.kind!r}", file=str(path))
        return refs

    def st_folder(self, plan: FolderPlan, *, on_conflict: str = "ask",
                  on_progress: Callable[[int, int], object] | None = None) -> FolderImportReport:
        """Store a SillyTavern folder read by :func:`engine.importers.st_folder.read_st_folder`.

        One transaction: every character (with its card PNG and embedded book), world, persona
        and chat of ``plan``, in that order. Identity is the file's path relative to the user
        folder (``import_sources``): an object imported before is updated in place (``changed``)
        when what it becomes differs, else left alone (``unchanged``); never duplicated. Chats
        are linked to their character, persona and worlds (with scopes) and keep their
        :class:`~engine.schema.sillytavern.SillyTavernSetup` and context settings.

        An object that changed in the folder but was also edited in Loomscope since it was
        imported (:func:`_locally_edited`) is a conflict (``report.conflicts``), handled by
        ``on_conflict``: ``ask`` keeps Loomscope's version and leaves the conflict open (reported
        again next time), ``keep-local`` keeps Loomscope's version and takes the folder's as seen,
        ``use-folder`` replaces Loomscope's version with the folder's.

        ``on_progress(items done, items in all)`` follows along (issue 25).

        Raises
        ------
        StorageError
            ``STORAGE_ERROR``; nothing is stored then.
        """
        with self._db.unit() as session:
            run = _FolderRun(session, plan, on_conflict)
            for done, item in enumerate(plan.items, start=1):
                if on_progress is not None:
                    on_progress(done, len(plan.items))
                run.store(item)
            run.finish()
        warnings = [{"file": i.key, "message": w} for i in plan.items for w in i.warnings]
        unreadable = getattr(plan, "unreadable", ())
        return FolderImportReport(folder=str(plan.folder), user=plan.user, added=run.added, changed=run.changed,
                                  unchanged=run.unchanged, skipped=[x.as_dict() for x in plan.skipped],
                                  warnings=warnings, conflicts=run.conflicts, partial=bool(unreadable),
                                  unreadable=[{"folder": f, "message": m} for f, m in unreadable])
