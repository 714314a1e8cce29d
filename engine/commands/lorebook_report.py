"""``loomscope lorebook-report``: replay World Info over a chat's history, turn by turn.

For every entry: the turns it fired (first, last), its tokens each time and in total, how often
the budget dropped it, which key matched where, and why an entry never fired; for every book,
its share of the lorebook budget over time. Output: a table (default on a terminal), JSON (the
:class:`engine.lorebook.report.LorebookReport` model) or CSV (one row per entry). Exit 0, 2 on
bad input.
"""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from ..errors import SettingsError
from ..importers import load_character, load_chat, load_lorebook_or_card_book
from ..lorebook.report import NEVER_FIRED_REASONS, report_csv
from ..lorebook_facts import entry_title
from ..lorebook_report import report_for_request
from ..schema import ContextSettings, PreviewRequest
from ..terminal import markup_safe as escape
from ._json import write_model_json
from ._tables import console as make_console
from ._tables import fits, is_narrow, key_column, shrink_to_fit, table, text_column
from .library import open_library

_SPARK = " ▁▂▃▄▅▆▇█"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``lorebook-report`` subcommand."""
    p = sub.add_parser("lorebook-report", help="replay World Info over a chat: what fired, when, what it cost")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--chat", metavar="FILE", help="chat file (SillyTavern JSONL, OpenAI messages, tau-bench, ...)")
    src.add_argument("--chat-id", metavar="ID", help="a chat of the library (its card, persona, books and settings)")
    p.add_argument("--transcript", type=int, default=0, metavar="K",
                   help="which transcript of a file holding several, 0-based")
    p.add_argument("--card", metavar="FILE", help="character card (its embedded book is character lore)")
    p.add_argument("--lorebook", metavar="FILE", action="append", default=[],
                   help="SillyTavern world JSON or a card with a book (repeatable; added to a library chat's)")
    p.add_argument("--db", default=None, metavar="URL", help="library database for --chat-id (env LOOMSCOPE_DB)")
    p.add_argument("--model", default=None, help="model name (default gpt-4o, or the library chat's)")
    p.add_argument("--context-limit", type=int, default=None, metavar="N", help="context window in tokens")
    p.add_argument("--reply-reserve", default=None, metavar="N|P%", help="tokens (or percent) kept for the reply")
    p.add_argument("--scan-depth", type=int, default=None, help="World Info scan depth (messages)")
    p.add_argument("--lorebook-budget", type=float, default=None, metavar="PERCENT",
                   help="World Info budget, percent of the context")
    p.add_argument("--rules", choices=("sillytavern", "loomscope"), default=None,
                   help="World Info rules (default sillytavern)")
    p.add_argument("--character-strategy", choices=("evenly", "character_first", "global_first"), default=None,
                   help="how character and global books are ranked (SillyTavern; default character_first)")
    p.add_argument("--format", choices=("table", "json", "csv"), default=None,
                   help="output format (default: table on a terminal, json when piped)")
    p.set_defaults(func=run)


def build_request(args: argparse.Namespace):  # -> PreviewRequest
    """The request whose books and chat are replayed (files or a library chat, plus overrides).

    Raises
    ------
    LoomscopeError
        ``IMPORT_*`` naming an unreadable file, ``CHAT_NOT_FOUND``, ``INVALID_SETTINGS`` naming
        the flag.
    """
    extra_books = [load_lorebook_or_card_book(path) for path in args.lorebook]
    card = load_character(args.card) if args.card else None
    if args.chat_id:
        with open_library(args) as store:
            request = store.chats.build_request(args.chat_id)
        update: dict[str, object] = {"lorebooks": [*request.lorebooks, *extra_books]}
        if card is not None:
            update["character"] = card
        request = request.model_copy(update=update)
    else:
        request = PreviewRequest(chat=load_chat(args.chat, index=args.transcript), character=card,
                                 lorebooks=extra_books)
    settings = request.settings.model_dump()
    wi = settings["world_info"]
    for field, value in (("scan_depth", args.scan_depth), ("budget_percent", args.lorebook_budget),
                         ("rules", args.rules), ("character_strategy", args.character_strategy)):
        if value is not None:
            wi[field] = value
    for field, value in (("model", args.model), ("context_limit", args.context_limit),
                         ("reply_reserve", args.reply_reserve)):
        if value is not None:
            settings[field] = int(value) if field == "reply_reserve" and str(value).strip().isascii() and str(value).strip().isdigit() else value
    try:
        return request.model_copy(update={"settings": ContextSettings.model_validate(settings)})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][-1]) if err.get("loc") else "settings"
        flag = {"budget_percent": "--lorebook-budget"}.get(field, f"--{field.replace('_', '-')}")
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise SettingsError("INVALID_SETTINGS", f"{message} (got {err.get('input')!r})", file=flag) from None


def sparkline(values: list[int], width: int = 60) -> str:
    """Tokens per turn as block characters (averaged into ``width`` buckets)."""
    if not values:
        return ""
    step = max(1, -(-len(values) // width))
    buckets = [sum(values[i:i + step]) / len(values[i:i + step]) for i in range(0, len(values), step)]
    top = max(buckets) or 1
    return "".join(_SPARK[min(8, round(8 * v / top))] for v in buckets)


def _entries_table(report, narrow: bool):  # (LorebookReport, bool) -> rich Table
    """The entries table; ``narrow`` puts first–last turn and the key or never-fired reason in one column each."""
    n = len(report.turns)
    t = table(escape(f"lorebook report · {report.messages} messages · {n} turns · budget "
                     f"{report.budget} tokens · rules {report.rules}"), narrow=narrow)
    text_column(t, "entry", min_width=8)
    text_column(t, "book", min_width=6)
    key_column(t, "uid", justify="right")
    # under 100 columns: first and last turn in one column, the key or the never-fired reason in one
    numbers = ("fired", "turns", "total", "drop") if narrow else (
        "fired", "first", "last", "tokens", "total", "dropped")
    for col in numbers:
        key_column(t, col, justify="right")
    for col in (("key, or why never",) if narrow else ("matched key", "never fired because")):
        text_column(t, col, min_width=10)
    for s in sorted(report.entries, key=lambda s: (-s.total_tokens, -s.turns_fired, s.book_index, str(s.uid))):
        keys = escape(", ".join(f"{k}×{c}" for k, c in list(s.keys.items())[:2]))
        never = escape(NEVER_FIRED_REASONS.get(s.never_fired, s.never_fired)) if s.never_fired else ""
        first, last = str(s.first_turn or ""), str(s.last_turn or "")
        mean = f"{s.mean_tokens:.0f}" if s.turns_fired else ""
        figures = ([f"{first}–{last}" if first else "", str(s.total_tokens), str(s.budget_dropped or "")] if narrow
                   else [first, last, mean, str(s.total_tokens), str(s.budget_dropped or "")])
        why = [keys or never] if narrow else [keys, never]
        t.add_row(escape(entry_title(s.comment, s.uid)), escape(s.book), escape(str(s.uid)), f"{s.turns_fired}/{n}",
                  *figures, *why)
    return t


def render_table(report) -> None:  # report: LorebookReport
    """Print the report as rich tables that fit the terminal: entries (by total tokens), books, a sparkline.

    Entries are named by title (:func:`engine.lorebook_facts.entry_title`), the uid a detail.
    Numbers never wrap; the title, book, keys and the never-fired reason wrap inside their
    cells at any width from 80 columns up (:func:`._tables.shrink_to_fit`).
    """
    console = make_console()
    n = len(report.turns)
    t = _entries_table(report, is_narrow(console))
    if not fits(console, t):
        t = _entries_table(report, True)
    shrink_to_fit(console, t)
    console.print(t)
    for b in report.books:
        console.print(f"[bold]{escape(b.book)}[/]: {b.entries_fired}/{b.entries} entries fired · {b.total_tokens} "
                      f"tokens over {n} turns · budget share mean {100 * b.mean_share:.1f} % · max "
                      f"{100 * b.max_share:.1f} %")
    console.print("tokens per turn: " + sparkline([t.tokens for t in report.turns], max(10, console.width - 20)))
    for d in report.diagnostics[:20]:
        console.print(f"[cyan]diagnostic:[/] {escape(d)}")


def run(args: argparse.Namespace) -> int:
    """Run ``loomscope lorebook-report``; returns the exit code."""
    request = build_request(args)
    report = report_for_request(request)
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        write_model_json(report)
    elif fmt == "csv":
        sys.stdout.write(report_csv(report))
    else:
        render_table(report)
    return 0
