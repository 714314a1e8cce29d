"""``loomscope chats``, ``loomscope delete-chat CHAT_ID``, ``loomscope audit CHAT_ID``: the library.

Every command takes ``--db URL`` (default ``$LOOMSCOPE_DB`` or the embedded SQLite library) and,
where it prints data, ``--format table|json`` (default: table on a terminal, JSON when piped).
JSON output is the pydantic model itself (``ChatSummary`` list, ``PromptContextAudit``).
Exit 2 with ``CHAT_NOT_FOUND`` / ``AUDIT_NOT_FOUND`` when there is nothing to show.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..terminal import markup_safe, visible
from ._tables import console as make_console
from ._tables import is_narrow, key_column, table, text_column

if TYPE_CHECKING:
    from ..storage import Store


def add_db_argument(p: argparse.ArgumentParser) -> None:
    """``--db URL`` (env ``LOOMSCOPE_DB``; default the embedded SQLite library)."""
    p.add_argument("--db", default=None, metavar="URL",
                   help="SQLAlchemy URL or SQLite file of the library (env LOOMSCOPE_DB; "
                        "default: the embedded library in the user data folder)")


def add_format_argument(p: argparse.ArgumentParser) -> None:
    """``--format table|json`` (default: table on a terminal, json when piped)."""
    p.add_argument("--format", choices=("table", "json"), default=None,
                   help="output format (default: table on a terminal, json when piped)")


def output_format(args: argparse.Namespace) -> str:
    """The chosen format, defaulting by whether stdout is a terminal."""
    return args.format or ("table" if sys.stdout.isatty() else "json")


def open_library(args: argparse.Namespace) -> Store:
    """Open the library named by ``args.db`` (``None`` → env or embedded default).

    The one place the command line loads :mod:`engine.storage` (SQLAlchemy and Alembic, about a third of
    a second): ``loomscope preview --chat FILE`` and the other file commands never pay for it
    (tests/test_import_graph.py lists this import in ``LAZY_FOR_START_UP``).
    """
    from ..storage import open_store

    return open_store(args.db)


def print_json(doc: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``chats``, ``delete-chat`` and ``audit``."""
    p = sub.add_parser("chats", help="list the chats in the library")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run_chats)

    p = sub.add_parser("delete-chat", help="delete a chat (and its audit) from the library")
    p.add_argument("chat_id", metavar="CHAT_ID")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run_delete)

    p = sub.add_parser("audit", help="show the stored audit of a chat's last generation")
    p.add_argument("chat_id", metavar="CHAT_ID")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run_audit)


def run_chats(args: argparse.Namespace) -> int:
    """Print ``[{"id", "title", "character", "messages", "has_audit", ...}]``."""
    with open_library(args) as store:
        chats = store.chats.summaries()
    if output_format(args) == "json":
        print_json([c.model_dump(mode="json") for c in chats])
        return 0

    console = make_console()
    narrow = is_narrow(console)
    t = table(f"{len(chats)} chats", narrow=narrow)
    key_column(t, "id", min_width=32)  # ids are copied into other commands: never cut
    text_column(t, "title", ratio=3)
    text_column(t, "character", ratio=1)
    key_column(t, "msgs" if narrow else "messages", justify="right")
    key_column(t, "audit")
    if not narrow:  # under 100 columns the title gets the room (chats are listed newest first)
        key_column(t, "updated (UTC)")
    for c in chats:
        # user text is shown as written: markup_safe() keeps "[sigh]" and "[/b]" from being read as markup
        row = [c.id, markup_safe(c.title), markup_safe(c.character or ""), str(c.messages), "yes" if c.has_audit else ""]
        if not narrow:
            row.append(c.updated_at.strftime("%Y-%m-%d %H:%M"))
        t.add_row(*row)
    console.print(t)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    """Delete the chat; prints ``{"deleted": CHAT_ID}``."""
    with open_library(args) as store:
        store.chats.delete(args.chat_id)
    if output_format(args) == "json":
        print_json({"deleted": args.chat_id})
    else:
        sys.stdout.write(f"deleted chat {visible(args.chat_id)} and its audit\n")
    return 0


def run_audit(args: argparse.Namespace) -> int:
    """Print the stored ``PromptContextAudit`` (exit 2 ``CHAT_NOT_FOUND``/``AUDIT_NOT_FOUND``)."""
    with open_library(args) as store:
        audit = store.audits.get(args.chat_id)
    if audit is None:
        raise NotFoundError("AUDIT_NOT_FOUND", "the chat has no stored audit (no generation yet)",
                            file=args.chat_id)
    if output_format(args) == "json":
        print_json(audit.model_dump(mode="json"))
        return 0
    render_audit(audit)
    return 0


def render_audit(audit) -> None:
    """Print an audit for people: header, blocks table, budget line, diagnostics."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    colors = {"completed": "green", "failed": "red", "cancelled": "yellow", "pending": "cyan"}
    console.print(f"generation [bold]{audit.generation_id}[/] · chat {audit.chat_id}")
    console.print(f"{markup_safe(audit.provider)} · model {markup_safe(audit.model)} · "
                  f"[{colors.get(audit.status, 'white')}]{audit.status}[/]"
                  + (f" · [red]{audit.error_code}[/]: {markup_safe(audit.error_message or '')}" if audit.error_code else ""))
    console.print(f"created {audit.created_at.isoformat()} · finished "
                  f"{audit.finished_at.isoformat() if audit.finished_at else '-'}")
    table = Table(show_lines=False)
    for col in ("#", "kind", "role", "source", "tokens", "status", "reason", ""):
        table.add_column(col, justify="right" if col in ("#", "tokens") else "left")
    status_colors = {"kept": "green", "excluded": "red", "truncated": "yellow"}
    for b in audit.blocks:
        marks = ("🔒" if b.protected else "") + ("📌" if b.pinned else "") + (f"⛓{b.group}" if b.group else "")
        table.add_row(str(b.position), b.kind, b.role, markup_safe(b.source), str(b.tokens),
                      f"[{status_colors.get(b.status, 'white')}]{b.status}[/]", b.reason, markup_safe(marks))
    console.print(table)
    console.print(
        f"prompt [bold]{audit.prompt_tokens}[/] tokens · context {audit.context_limit} − reply reserve "
        f"{audit.reply_reserve} = budget {audit.budget} · safety margin {audit.safety_margin} · headroom "
        f"{audit.headroom} · strategy {markup_safe(audit.strategy)} · tokenizer {markup_safe(audit.tokenizer.profile)}"
        f"{' (approximate)' if audit.tokenizer.approximate else ' (exact)'}")
    console.print(f"{len(audit.provider_messages)} provider messages, {len(audit.tools)} tools sent")
    for d in audit.interceptor_diagnostics:
        console.print(f"[cyan]interceptor:[/] {markup_safe(d)}")
    for w in audit.warnings:
        console.print(f"[yellow]warning:[/] {markup_safe(w)}")
