"""``loomscope gui``: open the desktop app (also what ``loomscope`` alone does).

The engine's CLI knows nothing of the GUI: this module is contributed to its command registry
through the ``loomscope.commands`` entry point group (pyproject.toml), with the same
``register(subparsers)`` contract as the engine's own subcommands. :data:`DEFAULT_COMMAND` makes
it what ``loomscope`` without arguments runs, and :data:`LEADING_FLAGS` lets ``loomscope
--screenshot out.png`` mean ``loomscope gui --screenshot out.png``. Qt is imported only when the
command runs, so ``--help`` works without it.
"""

from __future__ import annotations

import argparse
import gc

from engine.errors import SettingsError

from .tabs import TAB_NAMES

#: ``loomscope`` with no arguments runs this command.
DEFAULT_COMMAND = True
#: Flags that, first on the command line, mean ``loomscope gui ...``.
LEADING_FLAGS = ("--screenshot", "--size", "--tab", "--chat")
#: The line ``loomscope --help`` shows for the leading flags.
LEADING_HELP = ("loomscope --screenshot PATH [--chat ID] [--tab NAME] [--size WxH]: render the main window "
                "offscreen to a PNG and exit (short for `loomscope gui --screenshot ...`)")


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
                        + " (blocks, chat and prompt — the prompt text — are the centre tabs; setup, entry and "
                        "the library kinds are the library-setup views; the others the inspector's)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    size = None
    if args.size:
        parts = args.size.lower().replace("×", "x").split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) \
                or not all(200 <= int(p) <= 10000 for p in parts):
            raise SettingsError("INVALID_SETTINGS", f"expected WIDTHxHEIGHT in pixels (200-10000 each), "
                                f"such as 1440x900; got {args.size!r}", file="--size")
        size = (int(parts[0]), int(parts[1]))
    # the app's start runs without the cyclic collector (its full passes walked every object the
    # imports below build): gui.app.end_start_pause hands it to the app's policy once the window is up
    gc.disable()
    from .app import run_app  # imported lazily: `loomscope gui --help` needs no Qt

    return run_app(db=args.db, screenshot=args.screenshot, chat=args.chat, tab=args.tab, size=size)
