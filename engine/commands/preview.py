"""``loomscope preview``: assemble and budget a prompt from files or from a library chat.

From files no database is needed; a library chat comes with its stored setup (``--chat-id ID [--db URL]``; flags still
override).

Output: a table for people (``--format table``, the default on a terminal) or the
``ContextPreview`` model as JSON (``--format json``). Exit 0, 3 on
``TOKEN_BUDGET_EXCEEDED``, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydantic import ValidationError

from ..assembly.st_group import with_speaker
from ..assembly.textcompletion import text_completion_title
from ..errors import SettingsError
from ..importers import load_character, load_chat, load_lorebook_or_card_book
from ..lorebook_facts import block_source_label
from ..pipeline import preview
from ..schema import Character, Chat, ContextPreview, ContextSettings, Lorebook, Persona, PreviewRequest
from ..schema.preview import Explanation, PreviewBlock
from ..terminal import markup_safe, visible
from ._json import write_model_json
from ._tables import console as make_console
from ._tables import fits, is_narrow, key_column, shrink_to_fit, table, text_column
from .library import open_library

#: Settings fields → the flag that sets them, for error messages.
_FLAG_OF_FIELD = {"budget_percent": "--lorebook-budget", "scan_depth": "--scan-depth"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``preview`` subcommand."""
    p = sub.add_parser("preview", help="show the prompt a model would see for a chat file")
    p.add_argument("--chat", metavar="FILE", help="SillyTavern chat JSONL, or OpenAI messages (JSON array or "
                   "chat-completions request body)")
    p.add_argument("--chat-id", metavar="ID", default=None,
                   help="a library chat: preview it with its stored setup (character, persona, lorebooks, "
                        "settings; a chat imported from a SillyTavern folder is assembled as SillyTavern does); "
                        "the flags below override its settings")
    p.add_argument("--speaker", default=None, metavar="NAME",
                   help="with --chat-id of a group chat: the member whose next reply to preview (default: the one "
                        "SillyTavern's activation strategy picks, else the first in list order, with a warning)")
    p.add_argument("--db", default=None, metavar="URL",
                   help="library for --chat-id (SQLAlchemy URL or SQLite file; env LOOMSCOPE_DB; default: the "
                        "embedded library)")
    p.add_argument("--transcript", type=int, default=0, metavar="K",
                   help="which transcript of a file holding several (tau-bench, ToolBench), 0-based")
    p.add_argument("--card", metavar="FILE", help="character card (JSON or PNG)")
    p.add_argument("--lorebook", metavar="FILE", action="append", default=[],
                   help="SillyTavern world JSON (repeatable)")
    p.add_argument("--system", metavar="TEXT", default=None, help="main system prompt")
    p.add_argument("--persona", metavar="TEXT", default=None, help="user persona description")
    p.add_argument("--model", default=None, help="model name (default gpt-4o)")
    p.add_argument("--context-limit", type=int, default=None, metavar="N", help="context window in tokens")
    p.add_argument("--reply-reserve", default=None, metavar="N|P%",
                   help="tokens (or percent) kept for the reply (default 1024)")
    p.add_argument("--strategy", default=None, help="context strategy (default manual)")
    p.add_argument("--tokenizer", default=None, help="override the tokenizer profile")
    p.add_argument("--scan-depth", type=int, default=None, help="World Info scan depth (messages)")
    p.add_argument("--lorebook-budget", type=float, default=None, metavar="PERCENT",
                   help="World Info budget, percent of the context")
    p.add_argument("--embedding-model", default=None, metavar="FOLDER|ID",
                   help="vector-recall: rank with this model2vec model (a folder, or an id already downloaded "
                        "with download-embedding-model; never downloads)")
    p.add_argument("--format", choices=("table", "json"), default=None,
                   help="output format (default: table on a terminal, json when piped)")
    p.set_defaults(func=run)


def build_request(args: argparse.Namespace) -> PreviewRequest:
    """Read the files named by ``args`` into a :class:`PreviewRequest`.

    Raises
    ------
    LoomscopeError
        ``IMPORT_*`` for unreadable or unsupported files (naming the file),
        ``INVALID_SETTINGS`` for bad numbers.
    """
    if getattr(args, "chat_id", None):
        return _library_request(args)
    if getattr(args, "speaker", None) is not None:
        raise SettingsError("INVALID_SETTINGS", "--speaker needs --chat-id of a group chat", file="--speaker")
    chat = load_chat(args.chat, index=args.transcript) if args.chat else Chat()
    card: Character | None = load_character(args.card) if args.card else None
    books: list[Lorebook] = []
    if args.lorebook:
        books = [load_lorebook_or_card_book(p) for p in args.lorebook]
    settings = _settings_with_flags(ContextSettings(), args)
    persona = Persona(name=chat.user_name or "User", description=args.persona) if args.persona else None
    return PreviewRequest(chat=chat, character=card, persona=persona, lorebooks=books,
                          system_prompt=args.system, settings=settings)


def _settings_with_flags(base: ContextSettings, args: argparse.Namespace) -> ContextSettings:
    """``base`` with every settings flag that was given applied over it.

    Raises ``INVALID_SETTINGS`` naming the flag.
    """
    values = base.model_dump()
    for flag_field in ("model", "context_limit", "strategy", "tokenizer"):
        value = getattr(args, flag_field, None)
        if value is not None:
            values[flag_field] = value
    if getattr(args, "reply_reserve", None) is not None:
        reserve: int | str = args.reply_reserve
        if isinstance(reserve, str) and reserve.strip().isascii() and reserve.strip().isdigit():
            reserve = int(reserve)
        values["reply_reserve"] = reserve
    wi = dict(values.get("world_info") or {})
    if getattr(args, "scan_depth", None) is not None:
        wi["scan_depth"] = args.scan_depth
    if getattr(args, "lorebook_budget", None) is not None:
        wi["budget_percent"] = args.lorebook_budget
    values["world_info"] = wi
    if getattr(args, "embedding_model", None):
        values["strategy_options"] = {**(values.get("strategy_options") or {}), "embedding_model": args.embedding_model}
    try:
        return ContextSettings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][-1]) if err.get("loc") else "settings"
        flag = _FLAG_OF_FIELD.get(field, f"--{field.replace('_', '-')}")
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise SettingsError("INVALID_SETTINGS", f"{message} (got {err.get('input')!r})", file=flag) from None


def _library_request(args: argparse.Namespace) -> PreviewRequest:
    """The stored request of library chat ``--chat-id`` with the given flags applied over it.

    ``--card``, ``--lorebook``, ``--system`` and ``--persona`` replace or add to the stored
    setup; ``--chat`` cannot be combined with ``--chat-id``. Raises ``CHAT_NOT_FOUND`` (exit 2),
    ``INVALID_SETTINGS``, ``STORAGE_ERROR``.
    """
    if args.chat:
        raise SettingsError("INVALID_SETTINGS", "give --chat FILE or --chat-id ID, not both", file="--chat-id")
    with open_library(args) as store:
        request = store.chats.build_request(args.chat_id)
    update: dict[str, object] = {"settings": _settings_with_flags(request.settings, args)}
    if args.card:
        update["character"] = load_character(args.card)
    if args.lorebook:
        books = [load_lorebook_or_card_book(p) for p in args.lorebook]
        update["lorebooks"] = [*request.lorebooks, *books]
        if request.sillytavern is not None:
            scopes = list(request.sillytavern.lorebook_scopes) + ["chat"] * len(books)
            update["sillytavern"] = request.sillytavern.model_copy(update={"lorebook_scopes": scopes})
    if args.system is not None:
        update["system_prompt"] = args.system
    if args.persona is not None:
        name = request.persona.name if request.persona else (request.chat.user_name or "User")
        update["persona"] = Persona(name=name, description=args.persona)
    return with_speaker(request.model_copy(update=update), getattr(args, "speaker", None), where="--speaker")


def short_detail(data: dict | None) -> str:
    """The figures of a block's specific reason in a few words.

    They come from a row's ``reason_data`` (:attr:`ContextPreview.reason_details`, see
    :func:`engine.shifting.explain.explain_blocks`); the full sentence is ``reason_detail``.
    """
    if not data:
        return ""
    if data.get("blocked_by_tokens") is not None:  # history is kept contiguous behind this one
        who = f"msg {data['blocked_by_message']}" if data.get("blocked_by_message") is not None \
            else str(data.get("blocked_by"))
        return f"{who}: {data['blocked_by_tokens']:,} > {data['free']:,} free"
    if data.get("held_by") is not None:
        who = f"msg {data['held_by_message']}" if data.get("held_by_message") is not None else str(data["held_by"])
        return f"tool group held by {data['held_because']} {who}"
    if {"budget", "used", "tokens"} <= set(data) and "room" not in data:
        return f"WI budget {data['budget']:,}, used {data['used']:,}, costs {data['tokens']:,}"
    if data.get("room") is not None:
        return f"needs {data['tokens']:,}, room {data['room']:,}"
    if data.get("free") is not None:
        return f"needs {data['tokens']:,} > {data['free']:,} free"
    return ""


#: ``strategy_info["reason"]`` of ``compact`` in words.
_COMPACTION_WORDS = {
    "below_trigger": "below the trigger",
    "pending": "compaction runs at generation",
    "disabled": "auto-compaction stopped after 3 failures in a row",
    "no_candidates": "nothing older than the messages kept verbatim",
    "no_progress": "no progress possible since the last compaction",
}


def render_table(pv: ContextPreview) -> None:
    """Print the preview as a table that fits the terminal, with totals and a budget line.

    Key columns (``#``, tokens, status, reason code) are never wrapped; source, the specific
    reason (``reason_detail``) and text shrink and wrap inside their cells. Under 100 columns
    the role column is left out (the kind says it for messages) and the text is shortened.
    """
    console = make_console()
    # the wide layout (role and source columns) only where rich measures that it fits: its minimum
    # width depends on the rows (reason codes, marks), so a fixed column threshold crops the border
    t = _blocks_table(pv, is_narrow(console))
    if not fits(console, t):
        t = _blocks_table(pv, True)
    shrink_to_fit(console, t)  # rich may lay a table out wider than the console: no letter cropped
    console.print(t)
    _print_totals(console, pv)
    for w in pv.warnings:
        console.print(f"[yellow]warning:[/] {markup_safe(w)}")
    for d in pv.diagnostics:
        console.print(f"[cyan]diagnostic:[/] {markup_safe(d)}")
    if pv.error and pv.error.code != "TOKEN_BUDGET_EXCEEDED":  # that one: once, on stderr (run)
        console.print(f"[red bold]{pv.error.code}[/]: {markup_safe(pv.error.message)}")


_STATUS_COLORS = {"kept": "green", "excluded": "red", "truncated": "yellow"}


def _blocks_table(pv: ContextPreview, narrow: bool) -> Any:
    """One row per block; ``narrow`` leaves out the role and source columns and shortens the text."""
    title = text_completion_title(pv) or (f"{pv.model} · {pv.tokenizer.profile}"
                                           f"{' (approximate)' if pv.tokenizer.approximate else ''} · "
                                           f"strategy {pv.strategy}")
    t = table(markup_safe(title), narrow=narrow)
    key_column(t, "#", justify="right")
    key_column(t, "kind")
    if not narrow:
        key_column(t, "role")
        text_column(t, "source", min_width=8)
    key_column(t, "tokens", justify="right")
    key_column(t, "status")
    text_column(t, "reason", min_width=20)
    key_column(t, "")
    text_column(t, "text", min_width=8, max_width=60)
    text_chars = 24 if narrow else 80
    for b, why in zip(pv.blocks, pv.reason_details or [None] * len(pv.blocks)):
        marks = ("🔒" if b.protected else "") + ("📌" if b.pinned else "") + (f"⛓{b.group}" if b.group else "")
        text = " ".join(b.text.split())
        if len(text) > text_chars:
            text = text[: text_chars - 1] + "…"
        # text is shown as written (control characters made visible): markup_safe() keeps "[sigh]"
        # and "[/b]" from being read as markup
        kind = b.role if narrow and b.kind == "message" else b.kind
        row = [str(b.position), kind] + ([] if narrow else [b.role, markup_safe(_source_cell(b, pv))]) + [
            str(b.tokens), f"[{_STATUS_COLORS[b.status]}]{b.status}[/]", _reason_cell(b, why), markup_safe(marks),
            markup_safe(text)]
        t.add_row(*row)
    return t


def _source_cell(b: PreviewBlock, pv: ContextPreview) -> str:
    """The source, lorebook entries by title with the uid a detail (``engine.lorebook_facts``)."""
    if b.trace is None or (b.kind != "lorebook" and "parts" not in b.trace):
        return b.source

    return block_source_label(b.model_copy(update={"name": None}), pv)


def _reason_cell(b: PreviewBlock, explained: Explanation | None) -> str:
    """The reason code, the lorebook key that matched, the other rule set's verdict and the detail (dim)."""
    why = markup_safe(b.reason)
    if b.kind == "lorebook" and b.trace and b.trace.get("detail", {}).get("key"):
        why += markup_safe(f" (key {b.trace['detail']['key']!r})")
    other = (b.trace or {}).get("detail", {}).get("loomscope") if b.kind == "lorebook" else None
    if isinstance(other, dict) and other.get("message"):
        why += markup_safe(f" [{other['message']}]")
    detail = short_detail(explained.data if explained is not None else None)
    if detail:
        why += f"\n[dim]{markup_safe(detail)}[/]"
    return why


def _print_totals(console: Any, pv: ContextPreview) -> None:
    """Blocks and tokens kept and excluded, the chat format's tokens, the budget line and compaction's thresholds."""
    kept = sum(b.tokens for b in pv.blocks if b.status == "kept")
    excluded = sum(b.tokens for b in pv.blocks if b.status != "kept")
    pct = 100 * pv.prompt_tokens / pv.budget if pv.budget else 0
    console.print(
        f"blocks kept {sum(b.status == 'kept' for b in pv.blocks)}/{len(pv.blocks)} · "
        f"kept {kept} tokens · excluded {excluded} tokens")
    template = sum(b.template_tokens or 0 for b in pv.blocks if b.status == "kept")
    if template or pv.overhead_tokens:
        console.print(f"chat format: {template} template tokens inside the kept blocks · "
                      f"{pv.overhead_tokens} tokens outside any block (BOS, reply priming)")
    console.print(
        f"budget: prompt [bold]{pv.prompt_tokens}[/] / {pv.budget} ({pct:.1f} %) = context "
        f"{pv.context_limit} − reply reserve {pv.reply_reserve}; safety margin {pv.safety_margin}; "
        f"headroom {pv.headroom}")
    info = pv.strategy_info
    if pv.api == "text_completion":
        console.print(f"stop strings: {markup_safe(', '.join(repr(x) for x in pv.stop) or 'none')} · "
                      f"context template {markup_safe(str(info.get('context')))} · counted with "
                      f"{markup_safe(str(info.get('tokenizer')))}, padding {info.get('token_padding')}")
    if "trigger" in info:  # compact: where the prompt stands against SPEC §4's thresholds
        used = info.get("summary")
        console.print(
            f"compaction: prompt {info['prompt_tokens']} before fitting · trigger {info['trigger']} · "
            f"target {info['target']} · {_COMPACTION_WORDS.get(info['reason'], info['reason'])}"
            + (f" · summary of messages #{used['covers'][0]}–#{used['covers'][1]} in use ({used['tokens']} tokens)"
               if used else ""))


def default_reserve_hint(args: argparse.Namespace, request: PreviewRequest, pv: ContextPreview) -> str:
    """The budget error's hint when the reply reserve is one nobody chose, else ``""``.

    ``"; that is the default reply reserve of 1,024 tokens: set --reply-reserve"`` when no flag
    set it and the settings hold the default.
    """
    if getattr(args, "reply_reserve", None) is not None:
        return ""
    default = ContextSettings.model_fields["reply_reserve"].default
    if request.settings.reply_reserve != default or pv.reply_reserve != default:
        return ""
    return f"; that is the default reply reserve of {default:,} tokens: set --reply-reserve"


def run(args: argparse.Namespace) -> int:
    """Run ``loomscope preview``; returns the exit code (0, 2 or 3)."""
    request = build_request(args)
    try:
        pv = preview(request)
    except SettingsError as exc:
        flag = {"UNKNOWN_STRATEGY": "--strategy", "UNKNOWN_TOKENIZER": "--tokenizer",
                "INVALID_SETTINGS": "--reply-reserve"}.get(exc.code)
        if exc.file is None and flag:
            exc.file = flag
        raise
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        write_model_json(pv)
    else:
        render_table(pv)
    if pv.error and pv.error.code == "TOKEN_BUDGET_EXCEEDED":
        sys.stderr.write(f"loomscope: preview: TOKEN_BUDGET_EXCEEDED: {visible(pv.error.message)}"
                         f"{default_reserve_hint(args, request, pv)}\n")
        return 3
    return 0
