"""The ``loomscope`` command line (SPEC §10).

One entry point with subcommands. Each subcommand lives in ``engine/commands/<name>.py`` and
exposes ``register(subparsers) -> None``, which adds its parser with ``set_defaults(func=...)``;
``func(args) -> int`` returns the exit code. ``loomscope`` alone (or ``loomscope gui``) opens the
app.

Exit codes: 0 success; 2 bad input or usage (one line on stderr:
``loomscope: <file or argument>: <CODE>: <message>``, no traceback); 3
``TOKEN_BUDGET_EXCEEDED``; 4 provider failure; 130 cancelled.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .errors import LoomscopeError
from .terminal import visible

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_BUDGET = 3
EXIT_PROVIDER = 4
EXIT_CANCELLED = 130

#: Subcommand modules under ``engine.commands`` (each has ``register(subparsers)``).
COMMAND_MODULES: tuple[str, ...] = (
    "preview",
    "inspect",
    "importing",
    "exporting",
    "lint",
    "lorebook_report",
    "library",
    "generate",
    "serve",
    "gui",
)


#: Flags that, first on the command line, mean ``loomscope gui ...``.
_GUI_FIRST_FLAGS = ("--screenshot", "--size", "--tab", "--chat")


class _Parser(argparse.ArgumentParser):
    """argparse with SPEC §10's one-line usage errors (exit 2)."""

    def error(self, message: str) -> None:
        sys.stderr.write(f"loomscope: {visible(self.prog)}: USAGE: {visible(message)}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every available subcommand registered."""
    parser = _Parser(prog="loomscope", description="See exactly what an LLM will see.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"engine.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"engine.commands.{name}":
                continue  # that command is not part of this build yet
            raise
        module.register(sub)
    return parser


def report_error(exc: LoomscopeError, fallback: str = "loomscope") -> None:
    """Print ``loomscope: <file or argument>: <CODE>: <message>`` on stderr, on ONE line.

    File names, places (JSON keys) and messages come from user files: control and escape
    characters in them are written as visible escapes (:func:`engine.terminal.visible`).
    """
    where = exc.file or fallback
    place = f" ({visible(exc.place)})" if exc.place else ""
    sys.stderr.write(f"loomscope: {visible(where)}: {exc.code}: {visible(exc.message)}{place}\n")


def exit_code_for(exc: LoomscopeError) -> int:
    """Map an error code to SPEC §10's exit codes."""
    if exc.code == "TOKEN_BUDGET_EXCEEDED":
        return EXIT_BUDGET
    if exc.code == "CANCELLED":
        return EXIT_CANCELLED
    if exc.code.startswith("PROVIDER_") or exc.code == "NO_API_KEY":
        return EXIT_PROVIDER
    return EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns (and, as a console script, exits with) the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0].split("=")[0] in _GUI_FIRST_FLAGS:
        args_list = ["gui", *args_list]
    parser = build_parser()
    args = parser.parse_args(args_list)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return int(args.func(args) or 0)
    except LoomscopeError as exc:
        report_error(exc, fallback=str(getattr(args, "command", None) or "loomscope"))
        return exit_code_for(exc)
    except KeyboardInterrupt:
        sys.stderr.write("loomscope: cancelled\n")
        return EXIT_CANCELLED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
