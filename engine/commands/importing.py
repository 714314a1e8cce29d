"""``loomscope import FILE...``: add cards, lorebooks and chats to the library.

All files are read first and stored in one transaction: if any file is bad, nothing is stored
(exit 2 naming the file, place and ``IMPORT_*`` code). Output: ``[{"kind", "id", "name"}]``.
"""

from __future__ import annotations

import argparse
import sys

from .library import add_db_argument, add_format_argument, open_library, output_format, print_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``import`` subcommand."""
    p = sub.add_parser("import", help="import character cards, lorebooks and chats into the library")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="card (PNG/JSON), SillyTavern world JSON, chat (SillyTavern JSONL, OpenAI messages)")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Import every file in one transaction and print what each became."""
    def warn(path: str, message: str) -> None:
        sys.stderr.write(f"loomscope: {path}: warning: {message}\n")

    sources: list[str] = []
    with open_library(args) as store:
        refs = store.import_files(args.files, on_warning=warn, sources=sources)
    if output_format(args) == "json":
        print_json([r.model_dump(mode="json") for r in refs])
        return 0
    from rich.markup import escape

    from ._tables import console as make_console
    from ._tables import is_narrow, key_column, table, text_column

    console = make_console()
    t = table(f"imported {len(refs)} item(s)", narrow=is_narrow(console))
    key_column(t, "kind")
    key_column(t, "id", min_width=32)  # ids are copied into other commands: never cut
    text_column(t, "name", ratio=1)
    text_column(t, "file", ratio=1)
    for ref, path in zip(refs, sources):
        t.add_row(ref.kind, ref.id, escape(ref.name), escape(path))
    console.print(t)
    return 0
