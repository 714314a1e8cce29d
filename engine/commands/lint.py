"""``loomscope lint-lorebook FILE``: report lorebook entries that can never fire and other problems.

Output: a table (``--format table``, default on a terminal) or the :class:`LintReport` model
as JSON. Exit 0 when the file was read (whatever the findings; ``--strict`` exits 1 when
there are errors), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import SettingsError
from ..importers import load_lorebook_or_card_book
from ..lorebook.activation import compute_budget
from ..lorebook.lint import lint_lorebook
from ..lorebook.models import LintReport
from ..schema.settings import WorldInfoSettings
from ..terminal import markup_safe
from ..tokenizers import default_tokenizer_registry, lookup_model
from ._json import write_model_json
from ._tables import console as make_console
from ._tables import is_narrow, key_column, table, text_column


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``lint-lorebook`` subcommand."""
    p = sub.add_parser("lint-lorebook", help="check a lorebook for entries that can never fire and other problems")
    p.add_argument("file", metavar="FILE", help="SillyTavern world JSON, V2/V3 character_book JSON, or a "
                   "character card (PNG/JSON) with an embedded lorebook")
    p.add_argument("--format", choices=("table", "json"), default=None,
                   help="output format (default: table on a terminal, json when piped)")
    p.add_argument("--model", default="gpt-4o",
                   help="model whose context window the budget percentage applies to (default gpt-4o, "
                        "as for preview)")
    p.add_argument("--context-limit", type=int, default=None, metavar="N",
                   help="context tokens the budget percentage applies to (default: the model's context "
                        "window, the same default as preview)")
    p.add_argument("--budget-percent", type=float, default=25.0, metavar="P",
                   help="lorebook budget in percent of the context (default 25)")
    p.add_argument("--budget-cap", type=int, default=0, metavar="N", help="absolute budget cap in tokens (0 = none)")
    p.add_argument("--constant-share", type=float, default=50.0, metavar="P",
                   help="report constant entries taking more than P%% of the budget (default 50)")
    p.add_argument("--no-whole-words", action="store_true",
                   help="lint as if whole-word matching were off globally")
    p.add_argument("--tokenizer", default="o200k_base", help="tokenizer profile (default o200k_base)")
    p.add_argument("--strict", action="store_true", help="exit 1 when any error-severity finding is reported")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the lint and print the report; returns the exit code."""
    if args.context_limit is None:
        args.context_limit = lookup_model(args.model).context_limit  # preview's default too
    if args.context_limit <= 0:
        raise SettingsError("INVALID_SETTINGS", "--context-limit must be a positive number of tokens",
                            file="--context-limit")
    if not 0 <= args.budget_percent <= 100:
        raise SettingsError("INVALID_SETTINGS", "--budget-percent must be between 0 and 100",
                            file="--budget-percent")
    if args.budget_cap < 0:
        raise SettingsError("INVALID_SETTINGS", "--budget-cap must be >= 0", file="--budget-cap")
    profile = default_tokenizer_registry().get(args.tokenizer)
    book = _read_book(args.file)
    settings = WorldInfoSettings(budget_percent=args.budget_percent, budget_cap=args.budget_cap,
                                 match_whole_words=not args.no_whole_words)

    findings = lint_lorebook(book, context_limit=args.context_limit, count_tokens=profile.count,
                             settings=settings, constant_share_percent=args.constant_share)
    report = LintReport(file=args.file, book=book.name, entries=len(book.entries),
                        budget=compute_budget(settings, args.context_limit), findings=findings)
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        write_model_json(report)
    else:
        _print_table(report)
    if args.strict and report.counts()["error"]:
        return 1
    return 0


def _read_book(path: str):  # -> Lorebook
    """A lorebook file, or the book embedded in a character card (PNG or JSON)."""
    return load_lorebook_or_card_book(path)

def entry_label(finding: object) -> str:
    """How a finding names its entry: ``“Dragons” #1``, ``#1`` or ``(book)``.

    The entry's title (SillyTavern ``comment``) with its uid; the uid alone when the entry has no title; ``(book)`` for
    the whole book.
    """
    uid = getattr(finding, "uid", None)
    title = " ".join(str(getattr(finding, "comment", "") or "").split())
    if uid is None:
        return "(book)"
    if len(title) > 60:
        title = title[:59] + "…"
    return f"“{title}” #{uid}" if title else f"#{uid}"


def _print_table(report: object) -> None:
    assert isinstance(report, LintReport)
    console = make_console()
    t = table(f"{markup_safe(report.book)}: {report.entries} entries, budget {report.budget} tokens",
              narrow=is_narrow(console))
    key_column(t, "severity")
    text_column(t, "entry", ratio=1, min_width=10)
    key_column(t, "code")
    text_column(t, "message", ratio=2, min_width=16)
    styles = {"error": "bold red", "warning": "yellow", "info": "dim"}
    for f in report.findings:
        t.add_row(f"[{styles[f.severity]}]{f.severity}[/]", markup_safe(entry_label(f)), f.code, markup_safe(f.message))
    console.print(t)
    c = report.counts()
    def n(count: int, word: str) -> str:
        return f"{count} {word}{'' if count == 1 else 's'}"

    console.print(f"{n(c['error'], 'error')}, {n(c['warning'], 'warning')}, {n(c['info'], 'note')}")
