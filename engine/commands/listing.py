"""``loomscope characters`` / ``lorebooks`` / ``personas``: what the library holds, with ids and where each is used.

So that ``export`` and ``preview --chat-id`` can be driven without the app. Every command takes
``--db URL`` and ``--format table|json``. JSON: a list of :class:`LibraryEntry` (``kind``, ``id``,
``name``, ``source`` (the SillyTavern file it was imported from, relative to its user folder, or
``null``), ``entries`` (lorebooks: entry count), ``character_id`` (a lorebook embedded in a card),
``used_by`` (:class:`~engine.storage.Usage` per chat: ``chat_id``, ``title``, ``how``)).
"""

from __future__ import annotations

import argparse
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..storage import Usage
from ..terminal import markup_safe
from ._tables import console as make_console
from ._tables import is_narrow, key_column, table, text_column
from .library import add_db_argument, add_format_argument, open_library, output_format, print_json

Kind = Literal["character", "lorebook", "persona"]
#: Subcommand → library kind.
COMMANDS: dict[str, Kind] = {"characters": "character", "lorebooks": "lorebook", "personas": "persona"}


class LibraryEntry(BaseModel):
    """One character, lorebook or persona of the library, and the chats that use it."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    id: str
    name: str
    source: str | None = None
    entries: int | None = None
    character_id: str | None = None
    used_by: list[Usage] = Field(default_factory=list)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``characters``, ``lorebooks`` and ``personas``."""
    for command, kind in COMMANDS.items():
        p = sub.add_parser(command, help=f"list the {command} in the library, with ids and the chats using each")
        add_db_argument(p)
        add_format_argument(p)
        p.set_defaults(func=run, kind=kind)


def list_entries(store: Any, kind: Kind) -> list[LibraryEntry]:
    """Every object of ``kind`` in ``store``, by name, with its import source and the chats using it."""
    if kind == "character":
        found: list[dict[str, Any]] = [{"id": c.id, "name": c.name} for c in store.characters.summaries()]
    elif kind == "persona":
        found = [{"id": p.id, "name": p.name} for p in store.personas.summaries()]
    else:
        found = [{"id": b.id, "name": b.name, "entries": b.entries, "character_id": b.character_id}
                 for b in store.lorebooks.summaries()]
    return [LibraryEntry(kind=kind, **f, source=store.sync.source_key(kind, f["id"]),
                         used_by=store.chats.where_used(kind, f["id"])) for f in found]


def run(args: argparse.Namespace) -> int:
    """Print the list (table or JSON)."""
    with open_library(args) as store:
        entries = list_entries(store, args.kind)
    if output_format(args) == "json":
        print_json([e.model_dump(mode="json") for e in entries])
        return 0

    console = make_console()
    t = table(f"{len(entries)} {args.command}", narrow=is_narrow(console))
    key_column(t, "id", min_width=32)  # ids are copied into other commands: never cut
    text_column(t, "name", ratio=1)
    if args.kind == "lorebook":
        key_column(t, "entries", justify="right")
    text_column(t, "used by", ratio=2)
    text_column(t, "source", ratio=1)
    for e in entries:
        used = "\n".join(f"{u.title} ({u.how})" for u in e.used_by) or "—"
        row = [e.id, markup_safe(e.name)]
        if args.kind == "lorebook":
            row.append(str(e.entries or 0) + (" (card)" if e.character_id else ""))
        t.add_row(*row, markup_safe(used), markup_safe(e.source or ""))
    console.print(t)
    return 0
