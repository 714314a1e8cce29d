"""Staying in step with a SillyTavern user folder: import it again and bring in only what changed.

:func:`sync_st_folder` is what ``loomscope import DIR`` and the app's *File → Reload SillyTavern
folder* run. The library remembers, per folder, the files it read last time (path, size,
modification time and SHA-256 of the content) and the objects they became
(:meth:`engine.storage.Store.sync.folder_state`). Importing the folder again:

1. lists the files SillyTavern's folder holds for Loomscope (``settings.json``,
   ``characters/*.png``, ``worlds/*.json``, ``chats/<card>/*.jsonl``, ``groups/*.json``,
   ``group chats/*.jsonl``, the Text Completion presets) exactly as the import lists them
   (:func:`engine.importers.st_folder.st_folder_files`: no link out of the folder is followed,
   ``secrets.json`` and the open library are never opened, issue 25) and hashes those whose size or
   time changed (a file touched but not changed is not a change);
2. when nothing changed and every object is still in the library, answers at once: everything
   ``unchanged`` (an unchanged 1,000-chat folder: well under 2 s);
3. otherwise reads the folder (:func:`engine.importers.st_folder.read_st_folder`) and stores it
   (:meth:`engine.storage.Store.imports.st_folder`): when only chats and worlds changed (the usual
   case: a writer chatted or edited a lorebook in SillyTavern), only those files (and the cards of
   those chats) are read; only objects whose content changed are updated; an object also edited in
   Loomscope since the last import is a conflict, listed and never overwritten unless the writer
   chose ``use-folder``. A folder with a sub-folder that cannot be listed is always read in full, so
   its report stays ``partial`` (issue 25).

``report.files_changed`` says which files changed (``+`` added, ``-`` removed, else changed).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .importers.st_folder import PRESET_KINDS, checked_user_folder, read_st_folder, st_folder_files
from .storage import FolderImportReport

#: ``on_conflict`` values (``loomscope import DIR --on-conflict``).
CONFLICT_CHOICES = ("ask", "keep-local", "use-folder")


def _stat_files(files: dict[str, Path]) -> dict[str, tuple[int, int]]:
    """``rel path → (size, mtime_ns)`` of the files listed (a file gone or unreadable since is left out)."""
    out: dict[str, tuple[int, int]] = {}
    for rel, p in files.items():
        try:
            st = p.stat()  # a link here stays inside the folder (st_folder_files)
        except OSError:
            continue
        out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def _sha256(path: Path) -> str:
    """The SHA-256 of the file's content; ``""`` when it cannot be read (then it counts as changed and is read)."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return ""
    return h.hexdigest()


def folder_changes(folder: Path, previous: dict[str, list[Any]],
                   files: dict[str, Path] | None = None) -> tuple[dict[str, list[Any]], list[str]]:
    """The folder's files now (``rel → [size, mtime_ns, sha256]``) and what changed since ``previous``.

    ``files`` is the listing of :func:`engine.importers.st_folder.st_folder_files` (taken when not
    given): the files :func:`read_st_folder` reads, never a link out of the folder. A file whose size
    and time are as before keeps its recorded hash; any other is hashed, and is a change only when its
    content differs. Returns the new state and the changed paths, sorted: ``+rel`` added, ``-rel``
    removed, ``rel`` changed.
    """
    if files is None:
        files = st_folder_files(folder, folder.resolve())[0]
    now: dict[str, list[Any]] = {}
    changed: list[str] = []
    for rel, (size, mtime) in _stat_files(files).items():
        old = previous.get(rel)
        if old is not None and old[0] == size and old[1] == mtime and old[2]:
            now[rel] = list(old)
            continue
        digest = _sha256(files[rel])
        now[rel] = [size, mtime, digest]
        if old is None:
            changed.append(f"+{rel}")
        elif old[2] != digest or not digest:
            changed.append(rel)
    changed += [f"-{rel}" for rel in previous if rel not in now]
    return now, sorted(changed, key=lambda c: c.lstrip("+-"))


def note_export(store: Any, to: str | Path, items: list[dict[str, Any]]) -> list[str]:
    """After an export into a SillyTavern folder the library keeps in step with: what was written is the synced state.

    The objects written back to the files they were imported from count as in step (their
    Loomscope edits are in the folder now), and those files are read again on the next import, so
    what SillyTavern changes afterwards comes in without a conflict. Nothing happens for a folder
    never imported. Returns the keys marked.
    """
    folder = Path(to).resolve()
    state = store.sync.folder_state(str(folder))
    if state is None:
        return []
    written = [(i["kind"], i["id"], i["file"]) for i in items if i["kind"] in ("chat", "character", "lorebook")]
    if any(i["kind"] == "settings" for i in items if not i.get("skipped")):
        written += [("persona", pid, key) for kind, key, _n in state.get("items") or [] if kind == "persona"
                    for pid in [_persona_id(store, key)] if pid]
    marked = store.sync.mark_exported(written)
    files = dict(state.get("files") or {})
    for i in items:
        if not i.get("skipped"):
            files.pop(i["file"], None)  # read again next time
    store.sync.put_folder_state(str(folder), {**state, "files": files})
    return marked


def _persona_id(store: Any, key: str) -> str | None:
    refs = store.sync.imported_refs([("persona", key, "")])
    return refs[0].id if refs else None


def last_synced_folder(store: Any) -> str | None:
    """The SillyTavern user folder imported most recently into ``store`` (*File → Reload*), or ``None``."""
    states = store.sync.folder_states()
    best = max(states, key=lambda st: float(st.get("synced_at") or 0), default=None)
    return str(best["folder"]) if best and best.get("folder") else None


def sync_st_folder(store: Any, path: str | Path, *, st_user: str | None = None, skip_bad: bool = False,
                   on_warning: Callable[[str, str], object] | None = None,
                   on_conflict: str = "ask", on_read: Callable[[int, int], object] | None = None,
                   on_store: Callable[[int, int], object] | None = None) -> FolderImportReport:
    """Import a SillyTavern user folder, or bring in what changed since it was last imported.

    Parameters
    ----------
    store:
        The :class:`~engine.storage.Store`.
    path, st_user, skip_bad, on_warning:
        As :func:`engine.importers.st_folder.read_st_folder` takes them (warnings of an unchanged
        folder are reported again from the last import).
    on_conflict:
        ``ask`` (default: conflicts are listed, Loomscope's version kept, asked again next time),
        ``keep-local`` or ``use-folder`` (see :meth:`engine.storage.Store.imports.st_folder`).
    on_read, on_store:
        Progress callbacks handed to ``read_st_folder`` / ``import_st_folder`` as their
        ``on_progress`` (issue 25), when given.

    Returns
    -------
    FolderImportReport
        ``added`` / ``changed`` / ``unchanged`` / ``conflicts``, and ``files_changed`` (``None``
        on the folder's first import).

    Raises
    ------
    LoomscopeImportError
        As :func:`read_st_folder` (nothing stored then).
    """
    folder, user, boundary = checked_user_folder(path, st_user)
    key = str(folder.resolve())
    state = store.sync.folder_state(key)
    previous = state.get("files") if state is not None and isinstance(state.get("files"), dict) else {}
    listed, unreadable = st_folder_files(folder, boundary)
    files, changed = folder_changes(folder, previous, listed)
    # a sub-folder that cannot be listed: read all that can be, so the report says the import is partial
    if state is not None and not changed and not unreadable and skip_bad == bool(state.get("skip_bad")):
        refs = store.sync.imported_refs([tuple(i) for i in state.get("items") or []])
        if refs is not None:
            for w in state.get("warnings") or []:
                if on_warning is not None:
                    on_warning(w["file"], w["message"])
            return FolderImportReport(folder=str(folder), user=user, unchanged=refs, skipped=state.get("skipped") or [],
                                      warnings=state.get("warnings") or [], files_changed=[])
    only, rest = (None, []) if unreadable else _partial(store, folder, state, changed, skip_bad)
    read_progress = {} if on_read is None else {"on_progress": on_read}
    store_progress = {} if on_store is None else {"on_progress": on_store}
    plan = read_st_folder(folder, st_user=st_user, skip_bad=skip_bad, on_warning=on_warning, only=only,
                          **read_progress)
    report = store.imports.st_folder(plan, on_conflict=on_conflict, **store_progress)
    open_conflicts = {c.key for c in report.conflicts if c.resolution == "unresolved"}
    for c in open_conflicts:
        # not recorded as seen: the folder's version is offered again next time
        files.pop("settings.json" if c.startswith("User Avatars/") else c, None)
    read = {i.key for i in plan.items}
    kept = [r for r in rest if r.key not in read]
    items = [[i.kind, i.key, i.name] for i in plan.items] + [[r.kind, r.key, r.name] for r in kept]
    warnings, skipped = report.warnings, report.skipped
    if only is not None:  # the warnings and skips of the files not read again still hold
        warnings = [w for w in (state or {}).get("warnings") or [] if w.get("file") not in read] + warnings
        seen = {(x.get("file"), x.get("code")) for x in skipped}
        skipped = [x for x in (state or {}).get("skipped") or []
                   if x.get("file") not in only and (x.get("file"), x.get("code")) not in seen] + skipped
    store.sync.put_folder_state(key, {
        "folder": key, "user": user, "synced_at": time.time(), "files": files, "items": items,
        "skip_bad": skip_bad, "skipped": skipped, "warnings": warnings})
    return report.model_copy(update={"files_changed": changed if state is not None else None,
                                     "unchanged": [*report.unchanged, *kept], "warnings": warnings,
                                     "skipped": skipped})


def _partial(store: Any, folder: Path, state: dict[str, Any] | None, changed: list[str],
             skip_bad: bool) -> tuple[set[str] | None, list[Any]]:
    """The files to read when only chats and worlds changed, and the other objects (unchanged); else ``(None, [])``.

    Reading only those is exact when ``settings.json`` (with its Text Completion presets), the cards and
    the set of worlds are as before: a chat's links and setup come from those, and a world is linked by its name.
    """
    if state is None or not changed or skip_bad != bool(state.get("skip_bad")):
        return None, []
    for c in changed:
        rel = c.lstrip("+-")
        if (rel == "settings.json" or rel.split("/")[0] in ("characters", *PRESET_KINDS)
                or (rel.startswith("worlds/") and c[0] in "+-")):
            return None, []
        if rel.startswith(("groups/", "group chats/")):  # a group's chats depend on every member: read it all
            return None, []
        if rel.startswith("chats/"):
            if c[0] == "-":
                return None, []
            # the chat's card by its file name (a folder named otherwise is matched by name: read it all)
            if not (folder / "characters" / f"{rel.split('/')[1]}.png").is_file():
                return None, []
    only = {c.lstrip("+-") for c in changed}
    others = [tuple(i) for i in state.get("items") or [] if i[1] not in only]
    rest = store.sync.imported_refs(others)
    return (only, rest) if rest is not None else (None, [])


__all__ = ["CONFLICT_CHOICES", "folder_changes", "last_synced_folder", "note_export", "sync_st_folder"]
