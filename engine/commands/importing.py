"""``loomscope import FILE...`` / ``loomscope import DIR``: add data to the library.

Files: all files are read first and stored in one transaction: if any file is bad, nothing is
stored (exit 2 naming the file, place and ``IMPORT_*`` code). No silent duplicates: a file
imported before (same path) is updated in place, one whose card / book / chat is in the library
already (same name and content) is not stored again; ``--as-new`` keeps both. Output:
``[{"kind", "id", "name", "status"}]`` (``status``: ``added``, ``changed`` or ``unchanged``).

A SillyTavern user folder (``data/<user>/``, or the ``data/`` root: ``default-user`` or
``--st-user NAME``): every card, world, persona and chat with its SillyTavern setup, in one
transaction; re-importing updates in place (identity: the file's path relative to the user
folder). ``--skip-bad`` imports the rest when a file is bad and lists what it skipped. Importing
the folder again brings in only what changed (:func:`engine.st_sync.sync_st_folder`: by path and
content hash; an unchanged folder answers at once); an object changed in the folder that was also
edited in Loomscope is a conflict, never overwritten silently (``--on-conflict ask|keep-local|
use-folder``). Output: ``{"folder", "user", "added", "changed", "unchanged", "skipped",
"warnings", "conflicts", "files_changed", "unreadable", "partial"}`` (each of the first three a
list of ``{"kind", "id", "name", "key"}``; ``conflicts`` ``{"kind", "id", "name", "key",
"resolution"}``). A folder that is not a SillyTavern folder: ``IMPORT_UNSUPPORTED_FORMAT`` naming
it (exit 2).

Folder imports never leave the folder: links out of it, and links to ``secrets.json``, are listed as
skipped with their targets. A sub-folder that exists but cannot be listed is a warning, the report says
``"partial": true`` (with ``"unreadable"``) and the exit code is 5 (:data:`EXIT_PARTIAL`): everything
else was imported. On a terminal a progress bar follows the reading and the storing; each warning
message is printed once, with the number of files it concerns (``10,000 chats: …``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import SettingsError
from ..importers.warning_groups import group_warnings
from ..st_sync import sync_st_folder
from ..terminal import markup_safe, visible
from ._tables import console as make_console
from ._tables import is_narrow, key_column, table, text_column
from .library import add_db_argument, add_format_argument, open_library, output_format, print_json

#: Exit code of a folder import that imported what it could read but found a sub-folder it could not list.
EXIT_PARTIAL = 5


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``import`` subcommand."""
    p = sub.add_parser("import", help="import character cards, lorebooks and chats, or a SillyTavern folder, "
                                      "into the library")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="card (PNG/JSON), SillyTavern world JSON, chat (SillyTavern JSONL, OpenAI messages), or "
                        "one SillyTavern user folder (data/<user>/ or the data/ folder)")
    p.add_argument("--st-user", metavar="NAME", default=None,
                   help="the SillyTavern user folder to take under a data/ folder (default default-user)")
    p.add_argument("--skip-bad", action="store_true",
                   help="folder import: skip unreadable files (listed) instead of importing nothing")
    p.add_argument("--as-new", action="store_true",
                   help="files: import as new objects even when the same file or content is in the library already "
                        "(default: update it in place, or leave it when unchanged)")
    p.add_argument("--on-conflict", choices=("ask", "keep-local", "use-folder"), default="ask",
                   help="folder import again: what to do with an object changed both in the folder and in Loomscope "
                        "(default ask: keep Loomscope's, list the conflict)")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run)


#: ``on_progress(stage, file, done, total)`` of :meth:`engine.storage.Store.imports.files`.
ProgressCallback = Callable[[str, str, int, int], None]


def terminal_progress() -> tuple[ProgressCallback | None, AbstractContextManager[Any]]:
    """Progress for people: a rich display on a terminal, otherwise nothing.

    On a terminal (stderr is a TTY): a spinner while files are read and a bar of stored messages per chat; otherwise
    ``(None, nullcontext())``.

    The callback has :meth:`engine.storage.Store.imports.files`' ``on_progress`` shape
    ``(stage, file, done, total)``.
    """
    if not sys.stderr.isatty():
        return None, contextlib.nullcontext()
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=Console(stderr=True), transient=False)
    tasks: dict[object, TaskID] = {}

    def on_progress(stage: str, file: str, done: int, total: int) -> None:
        name = markup_safe(Path(file).name)
        if stage == "read":
            if "read" not in tasks:
                tasks["read"] = progress.add_task("reading", total=total)
            what = f"read {total} file(s)" if done >= total else f"reading {name}"
            progress.update(tasks["read"], completed=done, description=what)
        else:
            key = ("store", file)
            if key not in tasks:
                tasks[key] = progress.add_task(f"storing {total:,} messages of {name}", total=total)
            # drawn at once: a batch can take less than the bar's refresh interval, and each one is shown
            progress.update(tasks[key], completed=done, refresh=True)

    return on_progress, progress


def run(args: argparse.Namespace) -> int:
    """Import every file in one transaction (or one SillyTavern folder) and print what each became."""
    def warn(path: str, message: str) -> None:
        sys.stderr.write(f"loomscope: {visible(path)}: warning: {visible(message)}\n")

    dirs = [f for f in args.files if Path(f).is_dir()]
    if dirs:
        if len(args.files) != 1:
            raise SettingsError("INVALID_SETTINGS", "give one SillyTavern folder, or files only", file=dirs[0])
        if args.as_new:
            raise SettingsError("INVALID_SETTINGS", "--as-new applies to files; a folder is kept in step by path",
                                file="--as-new")
        return _run_folder(args, dirs[0])
    if args.on_conflict != "ask":
        raise SettingsError("INVALID_SETTINGS", "--on-conflict applies to a SillyTavern folder import",
                            file="--on-conflict")
    if args.skip_bad or args.st_user:
        flag = "--skip-bad" if args.skip_bad else "--st-user"
        raise SettingsError("INVALID_SETTINGS", f"{flag} applies to a SillyTavern folder import", file=flag)
    sources: list[str] = []
    on_progress, display = terminal_progress()
    with open_library(args) as store, display:
        refs = store.imports.files(args.files, on_warning=warn, sources=sources, on_progress=on_progress,
                                  as_new=args.as_new)
    if output_format(args) == "json":
        print_json([r.model_dump(mode="json", exclude={"key"}) for r in refs])
        return 0

    console = make_console()
    counts = ", ".join(f"{sum(r.status == st for r in refs)} {st}" for st in ("added", "changed", "unchanged"))
    t = table(f"imported {len(refs)} item(s): {counts}", narrow=is_narrow(console))
    key_column(t, "status")
    key_column(t, "kind")
    key_column(t, "id", min_width=32)  # ids are copied into other commands: never cut
    text_column(t, "name", ratio=1)
    text_column(t, "file", ratio=1)
    for ref, path in zip(refs, sources):
        t.add_row(ref.status or "", ref.kind, ref.id, markup_safe(ref.name), markup_safe(path))
    console.print(t)
    return 0


def folder_progress() -> tuple[Callable[[int, int], None] | None, Callable[[int, int], None] | None,
                             AbstractContextManager[Any]]:
    """``(on_read, on_store, display)`` for a folder import: rich bars on a terminal, nothing when piped.

    ``on_read(files read, files)`` has :func:`~engine.importers.st_folder.read_st_folder`'s ``on_progress`` shape,
    ``on_store(items stored, items)`` :meth:`~engine.storage.Store.imports.st_folder`'s.
    """
    if not sys.stderr.isatty():
        return None, None, contextlib.nullcontext()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=False)
    tasks: dict[str, TaskID] = {}

    def bar(name: str) -> Callable[[int, int], None]:
        def update(done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = progress.add_task(name, total=total)
            if done == total or done % 50 == 0:  # a redraw per file would cost more than the file
                progress.update(tasks[name], completed=done, total=total)
        return update

    return bar("reading files"), bar("storing"), progress


def _run_folder(args: argparse.Namespace, folder: str) -> int:
    warnings: list[tuple[str, str]] = []
    on_read, on_store, display = folder_progress()
    with display, open_library(args) as store:
        # again: only what changed is read and stored; conflicts with Loomscope edits are listed
        report = sync_st_folder(store, folder, st_user=args.st_user, skip_bad=args.skip_bad,
                                on_warning=lambda f, m: warnings.append((f, m)), on_conflict=args.on_conflict,
                                on_read=on_read, on_store=on_store)
    for group in group_warnings(warnings):
        if len(group.files) == 1:  # as a file import prints it
            sys.stderr.write(f"loomscope: {visible(group.files[0])}: warning: {visible(group.message)}\n")
        else:
            sys.stderr.write(f"loomscope: warning: {visible(group.line())}\n")
    for s in report.skipped:
        place = f" ({s['place']})" if s.get("place") else ""
        sys.stderr.write(f"loomscope: {visible(str(Path(report.folder) / s['file']))}: skipped: {s['code']}: "
                         f"{visible(s['message'])}{visible(place)}\n")
    for c in report.conflicts:
        what = {"unresolved": "kept Loomscope's version (choose with --on-conflict keep-local or use-folder)",
                "kept-local": "kept Loomscope's version", "used-folder": "replaced by the folder's version"}
        sys.stderr.write(f"loomscope: {visible(c.key)}: conflict: changed in the folder and in Loomscope; "
                         f"{what[c.resolution]}\n")
    code = EXIT_PARTIAL if report.partial else 0
    if report.partial:
        sys.stderr.write(f"loomscope: {visible(report.folder)}: partial import: "
                         f"{len(report.unreadable)} folder(s) could not be read (exit {EXIT_PARTIAL})\n")
    if output_format(args) == "json":
        print_json(report.model_dump(mode="json"))
        return code
    from rich.console import Console
    from rich.table import Table

    files = "" if report.files_changed is None else f"; {len(report.files_changed)} file(s) changed since last import"
    table = Table(title=markup_safe(f"SillyTavern folder {report.folder} (user {report.user}): "
                               f"{len(report.added)} added, {len(report.changed)} changed, "
                               f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped, "
                               f"{len(report.conflicts)} conflict(s){files}"))
    for col in ("status", "kind", "id", "name", "file"):
        table.add_column(col, no_wrap=col == "id")
    for c in report.conflicts:
        table.add_row(f"conflict ({c.resolution})", c.kind, c.id, markup_safe(c.name), markup_safe(c.key))
    for status, refs in (("added", report.added), ("changed", report.changed), ("unchanged", report.unchanged)):
        for r in refs:
            table.add_row(status, r.kind, r.id, markup_safe(r.name), markup_safe(r.key or ""))
    for s in report.skipped:
        table.add_row("skipped", "", "", markup_safe(f"{s['code']}: {s['message']}"), markup_safe(s["file"]))
    Console().print(table)
    return code
