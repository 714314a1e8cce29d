"""``loomscope gui``: open the desktop app (also what ``loomscope`` alone does)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``gui`` subcommand."""
    p = sub.add_parser("gui", help="open the desktop app")
    p.add_argument("--db", default=None, help="SQLAlchemy URL of the library (env LOOMSCOPE_DB)")
    p.add_argument("--screenshot", metavar="PATH", default=None,
                   help="render the main window offscreen to a PNG and exit (works without a display)")
    p.add_argument("--size", metavar="WxH", default=None,
                   help="window size in pixels, e.g. 1280x800 (default 1440x900)")
    p.add_argument("--chat", default=None, help="chat id to open (default: the last one opened)")
    p.add_argument("--tab", default=None, metavar="NAME", choices=TAB_NAMES,
                   help="tab to show: " + ", ".join(TAB_NAMES)
                        + " (blocks and chat are the centre tabs; setup, entry and the library kinds are the "
                        "library-setup views; the others the inspector's)")
    p.set_defaults(func=_run)


#: ``--tab`` names (kept here so ``--help`` works without importing Qt; gui.main_window.TAB_NAMES
#: is the same tuple, checked by a test).
TAB_NAMES = ("blocks", "chat", "block", "lorebook", "audit", "settings", "setup", "entry", "chats", "characters",
             "lorebooks", "personas")


def _run(args: argparse.Namespace) -> int:
    size = None
    if args.size:
        from ..errors import SettingsError

        parts = args.size.lower().replace("×", "x").split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) \
                or not all(200 <= int(p) <= 10000 for p in parts):
            raise SettingsError("INVALID_SETTINGS", f"expected WIDTHxHEIGHT in pixels (200-10000 each), "
                                f"such as 1440x900; got {args.size!r}", file="--size")
        size = (int(parts[0]), int(parts[1]))
    from gui.app import run_app  # imported lazily: the engine never imports Qt at module load

    return run_app(db=args.db, screenshot=args.screenshot, chat=args.chat, tab=args.tab, size=size)
