"""``loomscope inspect FILE``: show what an importer reads from a card, lorebook or chat file.

Prints kind, spec and version, name, counts (lorebook entries, messages, tool calls, swipes,
hidden messages) and warnings. ``--format json`` prints :class:`engine.importers.InspectReport`
as JSON (one object per file; a JSON array when several files are given). A file that cannot be
read is reported as ``loomscope: <file>: <CODE>: <message> (<place>)`` with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..cli import EXIT_BAD_INPUT, report_error
from ..errors import LoomscopeError
from ..importers import inspect_file
from ..terminal import visible


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``inspect`` subcommand."""
    p = sub.add_parser("inspect", help="show what Loomscope reads from a card, lorebook or chat file")
    p.add_argument("files", nargs="+", metavar="FILE", help="PNG/JSON card, lorebook JSON, chat JSONL/JSON")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    p.set_defaults(func=_run)


_LABELS = [
    ("kind", "kind"), ("spec", "spec"), ("spec_version", "spec version"), ("name", "name"),
    ("lorebook_name", "lorebook"), ("entries", "entries"), ("enabled_entries", "enabled entries"),
    ("constant_entries", "constant entries"), ("depth_prompt", "character's note"),
    ("greetings", "greetings"), ("tags", "tags"),
    ("user_name", "user name"), ("character_name", "character name"),
    ("transcripts", "transcripts"), ("messages", "messages"), ("user_messages", "user messages"),
    ("assistant_messages", "assistant messages"), ("tool_calls", "tool calls"),
    ("tool_results", "tool results"), ("tools", "tool schemas"), ("swipes", "swipes"),
    ("hidden", "hidden messages"),
]


def format_table(report: object) -> str:
    """Plain-text ``label: value`` lines for one :class:`InspectReport` (user text made visible)."""
    data = report.model_dump()  # type: ignore[attr-defined]
    lines = [visible(data["file"])]
    width = max(len(label) for _k, label in _LABELS)
    for key, label in _LABELS:
        value = data.get(key)
        if value is None or (key == "spec_version" and not value):
            continue
        if isinstance(value, bool):
            value = "yes" if value else "no"
        elif isinstance(value, list):
            value = ", ".join(map(str, value)) or "-"
        lines.append(f"  {label:<{width}}  {visible(value)}")
    for w in data.get("warnings") or []:
        lines.append(f"  warning: {visible(w)}")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    reports = []
    status = 0
    for f in args.files:
        try:
            reports.append(inspect_file(f))
        except LoomscopeError as exc:
            if len(args.files) == 1:
                raise
            report_error(exc, f)
            status = EXIT_BAD_INPUT
    if args.format == "json":
        payload = [r.model_dump(mode="json") for r in reports]
        out = payload[0] if len(args.files) == 1 else payload
        sys.stdout.write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write("\n\n".join(format_table(r) for r in reports) + ("\n" if reports else ""))
    return status
