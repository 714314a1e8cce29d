"""``loomscope gui``: open the desktop app (also what ``loomscope`` alone does)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``gui`` subcommand."""
    p = sub.add_parser("gui", help="open the desktop app")
    p.add_argument("--db", default=None, help="SQLAlchemy URL of the library (env LOOMSCOPE_DB)")
    p.add_argument("--screenshot", metavar="PATH", default=None,
                   help="render the main window offscreen to a PNG and exit")
    p.add_argument("--chat", default=None, help="chat id to open (with --screenshot)")
    p.add_argument("--tab", default=None, help="inspector tab to show (with --screenshot)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from gui.app import run_app  # imported lazily: the engine never imports Qt at module load

    return run_app(db=args.db, screenshot=args.screenshot, chat=args.chat, tab=args.tab)
