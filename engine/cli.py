"""The ``loomscope`` command line (SPEC §10).

One entry point with subcommands. Each subcommand lives in ``engine/commands/<name>.py`` and
exposes ``register(subparsers) -> None``, which adds its parser with ``set_defaults(func=...)``;
``func(args) -> int`` returns the exit code. Other packages contribute subcommands with the same
contract through the ``loomscope.commands`` entry point group: the desktop app's ``gui`` comes
from :mod:`gui.cli`, so the engine never imports the GUI. A contributed module may set
``DEFAULT_COMMAND = True`` (``loomscope`` alone runs it: the app opens) and ``LEADING_FLAGS``
(flags that, first on the command line, select it: ``loomscope --screenshot out.png``).

``--db URL`` names the library before the command's name as well as after it (``loomscope --db
URL chats`` is ``loomscope chats --db URL``), for every command that opens one; ``loomscope --db
URL`` alone opens the app on it.

Exit codes: 0 success; 2 bad input or usage (one line on stderr:
``loomscope: <file or argument>: <CODE>: <message>``, no traceback); 3
``TOKEN_BUDGET_EXCEEDED``; 4 provider failure; 130 cancelled.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from typing import NoReturn, Protocol

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
    "embedding",
    "lorebook_report",
    "library",
    "listing",
    "generate",
    "serve",
)
#: Commands after which the console script ends the process at once (:func:`console_main`): each only
#: reads files (``preview --chat-id`` and ``lorebook-report --chat-id`` read the library inside a
#: ``with`` block that has closed it before they return) and writes nothing but stdout and stderr.
FAST_EXIT_COMMANDS: frozenset[str] = frozenset({"preview", "inspect", "lint-lorebook", "lorebook-report"})
#: Commands the console script runs with the cyclic garbage collector off (:func:`console_main`): what a
#: preview allocates is not cyclic garbage (the pipeline pauses the collector itself for that reason).
NO_GC_COMMANDS: frozenset[str] = frozenset({"preview"})
#: Each engine subcommand → its module in :data:`COMMAND_MODULES` (a test checks they agree): running one
#: builds only that module's parser (``--help`` and unknown commands build them all).
ENGINE_COMMANDS: dict[str, str] = {
    "preview": "preview", "inspect": "inspect", "import": "importing", "export": "exporting",
    "lint-lorebook": "lint", "lorebook-report": "lorebook_report", "chats": "library", "delete-chat": "library",
    "audit": "library", "generate": "generate", "serve": "serve",
    "characters": "listing", "lorebooks": "listing", "personas": "listing",
    "download-embedding-model": "embedding",
}
#: The entry point group through which other packages contribute subcommands (name → module).
COMMAND_ENTRY_POINT_GROUP = "loomscope.commands"
#: Options taken before the command's name (each with one value): ``--db URL`` for any command
#: that opens the library (the commands' own ``--db``, after their name, keeps working).
GLOBAL_OPTIONS: tuple[str, ...] = ("--db",)


class CommandModule(Protocol):
    """What a subcommand module provides: ``register(subparsers)`` adds its parser."""

    def register(self, sub: argparse._SubParsersAction) -> None:
        """Add the subcommand's parser to ``sub`` with ``set_defaults(func=...)``."""


def contributed_commands() -> dict[str, CommandModule]:
    """The subcommand modules of the ``loomscope.commands`` entry point group, by entry point name.

    One that fails to load is reported on stderr (one line) and left out: a broken extension
    must not take the engine's own commands down with it.
    """
    found: dict[str, CommandModule] = {}
    for ep in entry_points(group=COMMAND_ENTRY_POINT_GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:
            sys.stderr.write(f"loomscope: {visible(ep.value)}: COMMAND_LOAD_FAILED: "
                             f"{type(exc).__name__}: {visible(str(exc))}\n")
    return found


class _Parser(argparse.ArgumentParser):
    """argparse with SPEC §10's one-line usage errors (exit 2)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"loomscope: {visible(self.prog)}: USAGE: {visible(message)}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser(contributed: Mapping[str, CommandModule] | None = None) -> argparse.ArgumentParser:
    """The parser with the engine's subcommands and the ``contributed`` ones registered.

    ``contributed`` defaults to :func:`contributed_commands` (every installed one).
    """
    parser, sub = _engine_parser()
    _add_contributed(parser, sub, contributed_commands() if contributed is None else contributed)
    return parser


def _add_contributed(parser: argparse.ArgumentParser, sub: argparse._SubParsersAction,
                     contributed: Mapping[str, CommandModule]) -> None:
    """Register the contributed commands; their ``LEADING_HELP`` lines close ``loomscope --help``.

    ``LEADING_HELP`` names the flags that select a command (``loomscope --screenshot PATH``).
    """
    lines = []
    for module in contributed.values():
        module.register(sub)
        help_line = getattr(module, "LEADING_HELP", None)
        if help_line:
            lines.append(str(help_line))
    if lines:
        parser.epilog = "\n".join(lines)


def _engine_parser(modules: Sequence[str] = COMMAND_MODULES) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The parser with the engine's own subcommands (those of ``modules``), and its subparsers (to add more to)."""
    parser = _Parser(prog="loomscope", description="See exactly what an LLM will see.",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    # its own dest: a subcommand's default ``db=None`` would overwrite a shared one (argparse)
    parser.add_argument("--db", dest="global_db", default=None, metavar="URL",
                        help="the library of any command that opens one (SQLAlchemy URL or SQLite file; "
                             "env LOOMSCOPE_DB), the same as --db after the command's name")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in modules:
        importlib.import_module(f"engine.commands.{name}").register(sub)
    return parser, sub


def split_global_options(args_list: Sequence[str]) -> tuple[list[str], list[str]]:
    """``args_list`` cut into its leading :data:`GLOBAL_OPTIONS` (with their values) and the rest.

    ``["--db", "x.db", "chats", "--format", "json"]`` → ``(["--db", "x.db"], ["chats", "--format",
    "json"])``; ``--db=x.db`` is one item. A last ``--db`` without its value stays in the first
    part, where the parser reports it.
    """
    i = 0
    while i < len(args_list) and args_list[i].split("=", 1)[0] in GLOBAL_OPTIONS:
        i += 1 if "=" in args_list[i] else 2
    return list(args_list[:i]), list(args_list[i:])


def _apply_global_db(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Give the command the ``--db`` taken before its name.

    A usage error (exit 2) when the command opens no library, or when its own ``--db`` names
    another one.
    """
    value = vars(args).pop("global_db", None)
    if value is None:
        return
    if not hasattr(args, "db"):
        parser.error(f"--db: `{args.command}` opens no library")
    if args.db is not None and args.db != value:
        parser.error("--db: given before and after the command's name, with two different libraries")
    args.db = value


def _with_command(args_list: list[str], contributed: Mapping[str, CommandModule]) -> list[str]:
    """``args_list`` with the contributed command's name put first when no command is named.

    No arguments select the contributed ``DEFAULT_COMMAND``; a first argument among a contributed
    module's ``LEADING_FLAGS`` (``--flag`` or ``--flag=value``) selects that module.
    """
    for name, module in contributed.items():
        if not args_list and getattr(module, "DEFAULT_COMMAND", False):
            return [name]
        if args_list and args_list[0].split("=")[0] in getattr(module, "LEADING_FLAGS", ()):
            return [name, *args_list]
    return args_list


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
    leading, args_list = split_global_options(sys.argv[1:] if argv is None else argv)
    command = ENGINE_COMMANDS.get(args_list[0]) if args_list else None
    # an engine command needs only its own parser, and no entry point lookup
    parser, sub = _engine_parser((command,) if command else COMMAND_MODULES)
    if not (args_list and args_list[0] in sub.choices) and leading[-1:] != ["--db"]:
        contributed = contributed_commands()
        args_list = _with_command(args_list, contributed)
        _add_contributed(parser, sub, contributed)
    args = parser.parse_args([*leading, *args_list])
    _apply_global_db(parser, args)
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


def console_main() -> NoReturn:
    """The ``loomscope`` console script: :func:`main`, then the process ends with its exit code.

    After a command of :data:`FAST_EXIT_COMMANDS` it flushes stdout, stderr and the ``logging``
    handlers and ends with :func:`os._exit`, skipping the interpreter's teardown: freeing the heap
    a large preview leaves (a 10,000-message chat: a few hundred thousand objects) one object at a
    time costs 0.2-0.3 s, more than a third of ``loomscope preview``'s whole run. Nothing is lost:
    those commands hold no open database, transaction or file when :func:`main` returns, and
    everything they wrote is flushed first; when a flush fails (a closed pipe) the ordinary exit
    runs instead, with its usual handling. Every other command (``gui``, ``serve``, ``generate``,
    imports into the library, ...) exits the ordinary way.

    A command of :data:`NO_GC_COMMANDS` runs with the cyclic garbage collector off from start to
    end. The pipeline pauses it anyway while it builds a preview; turned back on afterwards, the
    collector's first pass walks the whole heap the preview left (50 ms at 10,000 messages) just
    before the process ends and drops that heap unvisited.

    Only the console script does this; :func:`main` returns its code as before, so tests and
    callers that run it in-process keep their interpreter.
    """
    args = sys.argv[1:]
    command = next(iter(split_global_options(args)[1]), None)
    if command in NO_GC_COMMANDS and command in FAST_EXIT_COMMANDS:
        gc.disable()
    code = main(args)
    if command in FAST_EXIT_COMMANDS:
        try:
            if "logging" in sys.modules:
                sys.modules["logging"].shutdown()
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except (OSError, ValueError):
            raise SystemExit(code) from None
        os._exit(code)
    raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
