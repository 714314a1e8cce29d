"""``loomscope export ID... --to DIR [--merge] [--force]``: library objects out as a SillyTavern user folder.

Each ``ID`` is a chat, character or lorebook id. A chat brings everything its prompt depends on
(:func:`engine.st_export.plan_st_export`): its card, its lorebooks by scope, its persona, its
Author's Note and ``settings.json`` (Prompt Manager prompts and order, World Info settings,
model, context size). The folder imports back (``loomscope import DIR``) with the same preview
and opens in SillyTavern 1.12.6 (``DIR`` is a user folder, ``data/<user>/``).

Writing: every target is checked before anything is written, then each file is written under a
temporary name and renamed into place, so nothing is half-written. An existing file is not
replaced without ``--force`` (exit 2, ``EXPORT_TARGET_EXISTS`` naming it); an existing
``settings.json`` is merged key by key with ``--merge`` (:func:`engine.st_export.merge_settings`)
or replaced with ``--force``; an existing file of the same name that is not SillyTavern's is
never replaced (``EXPORT_TARGET_FOREIGN``); a folder that cannot be written:
``EXPORT_NOT_WRITABLE``. Persona images already there are kept. Exporting back into a SillyTavern
folder the library was imported from (to play there what was tuned here) makes the written
objects the synced state (:func:`engine.st_sync.note_export`): the next ``loomscope import DIR``
takes what SillyTavern changed since without reporting conflicts. Output:
``[{"kind", "id", "name", "file"}]`` (``kind`` ``settings`` for ``settings.json``, ``persona`` for
an avatar image); warnings (a chat without its character, ...) on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import LoomscopeError
from ..st_export import merge_settings, plan_st_export, safe_name
from ..st_sync import note_export
from ..terminal import markup_safe as escape
from ..terminal import visible
from .library import add_db_argument, add_format_argument, open_library, output_format, print_json

__all__ = ["plan_export", "register", "run", "safe_name", "write_export"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand."""
    p = sub.add_parser("export", help="write chats (with everything their prompt depends on), characters and "
                                      "lorebooks as a SillyTavern user folder")
    p.add_argument("ids", nargs="+", metavar="ID", help="chat, character or lorebook ids")
    p.add_argument("--to", required=True, metavar="DIR", help="the folder to write into (a SillyTavern user folder)")
    p.add_argument("--force", action="store_true", help="overwrite existing files (settings.json too, unless --merge)")
    p.add_argument("--merge", action="store_true", help="merge into an existing settings.json key by key")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run)


def plan_export(store: Any, ids: list[str], warnings: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """What to write for ``ids``: ``[{"kind", "id", "name", "file" (relative), "data" (bytes)}]``.

    ``warnings``, when given, receives ``{"id", "message"}`` per warning. Raises ``CHAT_NOT_FOUND``
    for an id that is no chat, character or lorebook.
    """
    plan = plan_st_export(store, ids)
    if warnings is not None:
        warnings.extend(plan.warnings)
    return plan.items


def _is_sillytavern_file(path: Path, rel: str) -> bool:
    """Whether the existing ``path`` is a file SillyTavern wrote there (a card, world, chat, settings or image)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    if rel.endswith(".png"):
        return head.startswith(b"\x89PNG\r\n\x1a\n")
    if rel.endswith(".jsonl"):
        first = head.split(b"\n", 1)[0]
        try:
            return isinstance(json.loads(first), dict)
        except ValueError:
            return False
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, OSError):
        return False
    return isinstance(doc, dict) and (rel == "settings.json" or isinstance(doc.get("entries"), (dict, list)))


def _check_targets(items: list[dict[str, Any]], root: Path, force: bool, merge: bool) -> None:
    """Decide for each item whether it is written, merged or kept; raise before anything is written."""
    seen: set[str] = set()
    for item in items:
        target = root / item["file"]
        if item["file"] in seen:
            raise LoomscopeError("EXPORT_TARGET_EXISTS", "two exported objects would get this file name",
                                 file=str(target))
        seen.add(item["file"])
        if not target.exists() and not target.is_symlink():
            continue
        if item.get("keep_existing"):
            item["skipped"] = True  # a persona image of the user's: kept
            continue
        if not _is_sillytavern_file(target, item["file"]):
            raise LoomscopeError("EXPORT_TARGET_FOREIGN", "a file of this name is there and it is not SillyTavern's; "
                                 "nothing was written (move it away)", file=str(target))
        if item["kind"] == "settings" and merge:
            existing = json.loads(target.read_bytes())
            ours = json.loads(item["data"])
            item["data"] = (json.dumps(merge_settings(existing, ours), ensure_ascii=False, indent=4)
                            + "\n").encode("utf-8")
            item["merged"] = True
            continue
        if not force:
            hint = "use --merge to merge into it, or --force to replace it" if item["kind"] == "settings" \
                else "use --force to replace it"
            raise LoomscopeError("EXPORT_TARGET_EXISTS", f"the file exists; nothing was written ({hint})",
                                 file=str(target))


def _prepare_folders(items: list[dict[str, Any]], root: Path) -> list[Path]:
    """Create the folders the items go into; returns those created (parents first).

    ``EXPORT_NOT_WRITABLE`` naming the folder that cannot be created or written; the folders
    created before it are removed again.
    """
    created: list[Path] = []
    try:
        for folder in dict.fromkeys((root / i["file"]).parent for i in items if not i.get("skipped")):
            missing = [d for d in (folder, *folder.parents) if not d.exists()][::-1]
            for d in missing:
                try:
                    d.mkdir()
                except OSError as exc:
                    raise LoomscopeError("EXPORT_NOT_WRITABLE", f"the folder cannot be created "
                                         f"({exc.strerror or exc}); nothing was written", file=str(d)) from None
                created.append(d)
            if not os.access(folder, os.W_OK | os.X_OK):
                raise LoomscopeError("EXPORT_NOT_WRITABLE", "the folder is not writable; nothing was written",
                                     file=str(folder))
    except LoomscopeError:
        _remove_folders(created)
        raise
    return created


def _remove_folders(created: list[Path]) -> None:
    """Remove the (empty) folders an export created, deepest first."""
    for d in reversed(created):
        with contextlib.suppress(OSError):  # not empty, or gone: left as it is
            d.rmdir()


def write_export(items: list[dict[str, Any]], to: str | Path, *, force: bool = False, merge: bool = False) -> None:
    """Write ``items`` under ``to``: all of them or none (each to a temporary name, then renamed).

    Raises
    ------
    LoomscopeError
        ``EXPORT_TARGET_EXISTS`` (a target exists and neither ``force`` nor, for ``settings.json``,
        ``merge``; also two items with one file name), ``EXPORT_TARGET_FOREIGN`` (a target of the
        same name is not SillyTavern's), ``EXPORT_NOT_WRITABLE`` (a folder cannot be created or
        written), ``IMPORT_FILE_NOT_FOUND`` when ``to`` is a file.
    """
    root = Path(to)
    if root.exists() and not root.is_dir():
        raise LoomscopeError("IMPORT_FILE_NOT_FOUND", "not a folder", file=str(to))
    _check_targets(items, root, force, merge)
    created = _prepare_folders(items, root)
    umask = os.umask(0)
    os.umask(umask)
    temps: list[tuple[str, Path]] = []
    try:
        for item in items:
            if item.get("skipped"):
                continue
            target = root / item["file"]
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".loomscope-", suffix=".tmp")
            temps.append((tmp, target))
            with os.fdopen(fd, "wb") as f:
                f.write(item["data"])
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; exported files are ordinary files
        for tmp, target in temps:
            os.replace(tmp, target)
    except OSError as exc:
        for tmp, _target in temps:
            Path(tmp).unlink(missing_ok=True)
        _remove_folders(created)
        raise LoomscopeError("EXPORT_NOT_WRITABLE", f"writing failed ({exc.strerror or exc}); nothing was "
                             "replaced", file=str(getattr(exc, "filename", None) or root)) from None
    finally:
        for tmp, _target in temps:
            Path(tmp).unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    """Export the ids and print ``[{"kind", "id", "name", "file"}]``."""
    warnings: list[dict[str, str]] = []
    with open_library(args) as store:
        items = plan_export(store, args.ids, warnings)
        write_export(items, args.to, force=args.force, merge=args.merge)
        note_export(store, args.to, items)  # written back into a folder kept in step: no false conflicts
    for w in warnings:
        sys.stderr.write(f"loomscope: {visible(w['id'])}: warning: {visible(w['message'])}\n")
    rows = [{"kind": i["kind"], "id": i["id"], "name": i["name"], "file": str(Path(args.to) / i["file"])}
            for i in items if not i.get("skipped")]
    if output_format(args) == "json":
        print_json(rows)
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"exported {len(rows)} item(s)")
    for col in ("kind", "id", "name", "file"):
        table.add_column(col, no_wrap=col == "id")
    for r in rows:
        table.add_row(r["kind"], r["id"], escape(r["name"]), escape(r["file"]))
    Console().print(table)
    return 0
