"""``loomscope generate CHAT_ID``: run the pipeline and ask an OpenAI-compatible provider to reply.

A Text Completion chat (a SillyTavern folder whose ``main_api`` is KoboldCpp, llama.cpp,
text-generation-webui, TabbyAPI, …) sends the preview's exact prompt string, its stop strings and
``max_tokens`` = the reply length to ``{base}/v1/completions``; an endpoint that speaks only Chat
Completion fails with ``PROVIDER_NO_TEXT_COMPLETION`` (exit 4, one line on stderr).

The reply is appended to the chat and the run's ``PromptContextAudit`` replaces the chat's
previous one. The reply reserve is sent as ``max_tokens`` (or ``max_completion_tokens`` for
models that reject it; ``--reply-limit-param`` overrides) and recorded in the audit's
``request_params``. The API key comes from ``$LOOMSCOPE_API_KEY``, ``$OPENAI_API_KEY`` or the OS keyring
(never from a flag, so it stays out of shell history). Overrides (``--model``,
``--context-limit``, ``--reply-reserve``, ``--strategy``) apply to this run only.

Exit codes (SPEC §10): 0 completed; 3 ``TOKEN_BUDGET_EXCEEDED`` (nothing was sent); 4 provider
failure (the normalized code is printed); 130 cancelled (Ctrl+C); 143 terminated (SIGTERM: handled
like Ctrl+C, the typed message is kept and the audit closes ``cancelled``); 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ..cli import EXIT_BAD_INPUT, EXIT_BUDGET, EXIT_CANCELLED, EXIT_OK, EXIT_PROVIDER
from ..errors import ProviderError, SettingsError
from ..schema import ContextSettings
from ..terminal import visible, visible_text
from .library import add_db_argument, add_format_argument, open_library, output_format, print_json

if TYPE_CHECKING:
    from ..generation import GenerationResult
    from ..schema import ProgressEvent
    from ..schema.audit import PromptContextAudit

BASE_URL_ENV_VARS = ("LOOMSCOPE_BASE_URL", "OPENAI_BASE_URL")
#: Exit status after SIGTERM (128 + 15, as a shell reports a process ended by that signal).
EXIT_TERMINATED = 128 + signal.SIGTERM


def _seconds(text: str) -> float:
    """``--timeout``: a finite number of seconds above 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, not {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``generate`` subcommand."""
    p = sub.add_parser("generate", help="generate the next reply of a library chat through a provider")
    p.add_argument("chat_id", metavar="CHAT_ID")
    p.add_argument("--message", metavar="TEXT", default=None,
                   help="append this user message first")
    p.add_argument("--base-url", metavar="URL", default=None,
                   help="OpenAI-compatible endpoint (env LOOMSCOPE_BASE_URL or OPENAI_BASE_URL; default: a "
                        "Text Completion chat's server URL from its SillyTavern settings, else "
                        "https://api.openai.com/v1)")
    p.add_argument("--model", metavar="NAME", default=None, help="model (default: the chat's settings)")
    p.add_argument("--context-limit", type=int, metavar="N", default=None, help="context window in tokens")
    p.add_argument("--reply-reserve", metavar="N|P%", default=None, help="tokens (or percent) kept for the reply")
    p.add_argument("--strategy", metavar="NAME", default=None, help="context strategy")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", default=60.0,
                   help="longest silence tolerated from the provider (default 60)")
    p.add_argument("--no-stream", action="store_true", help="ask for one JSON answer instead of a stream")
    p.add_argument("--reply-limit-param", choices=("auto", "max_tokens", "max_completion_tokens", "both", "none"),
                   default="auto",
                   help="request field that carries the reply reserve (default auto: max_completion_tokens for "
                        "OpenAI o-series and gpt-5 models, max_tokens otherwise)")
    p.add_argument("--param", metavar="NAME=VALUE", action="append", default=[], type=_param,
                   help="a further request field, e.g. sampler settings: --param temperature=0.7 "
                        "--param top_k=40 (VALUE is read as JSON, else as text; repeatable; never replaces "
                        "model, messages, prompt, stop, stream or the reply limit)")
    add_db_argument(p)
    add_format_argument(p)
    p.set_defaults(func=run)


def _param(text: str) -> tuple[str, object]:
    """``--param NAME=VALUE``: the field name and its value (JSON when it parses, else the text)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name or not name.replace("_", "").replace("-", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE such as temperature=0.7, not {text!r}")
    try:
        value: object = json.loads(raw)
    except ValueError:
        value = raw
    return name, value


def _settings(stored, args: argparse.Namespace):
    data = stored.model_dump(mode="json")
    if args.model:
        data["model"] = args.model
    if args.context_limit is not None:
        data["context_limit"] = args.context_limit
    if args.reply_reserve is not None:
        text = str(args.reply_reserve).strip()
        data["reply_reserve"] = int(text) if text.isascii() and text.isdigit() else text
    if args.strategy:
        data["strategy"] = args.strategy
    try:
        return ContextSettings.model_validate(data)
    except Exception as exc:
        lines = str(exc).splitlines()
        raise SettingsError("INVALID_SETTINGS", "; ".join(lines[1:3]) if len(lines) > 2 else str(exc),
                            file="settings") from None


def compaction_line(record: dict) -> str:
    """One line saying what compaction did (``audit.compaction``), for people."""
    status = record.get("status")
    rng = record.get("range") or [None, None]
    tries = len(record.get("attempts") or [])
    if status in ("compacted", "compacted_then_truncated"):
        line = (f"compaction: messages #{rng[0]}–#{rng[1]} summarized in {record.get('summary_tokens')} tokens "
                f"(replaced {record.get('replaced_tokens')}; {tries} request{'s' if tries != 1 else ''})")
        if status == "compacted_then_truncated":
            line += "; still at the trigger, so old history was truncated to the target too"
        return line
    if status == "fell_back":
        return (f"compaction: fell back to truncation ({record.get('reason')}; "
                f"{record.get('error_code') or 'no error code'}; {tries} request{'s' if tries != 1 else ''})")
    if status == "disabled":
        return "compaction: stopped after 3 failures in a row; old history was truncated"
    return f"compaction: {status}; old history was truncated to the target"


def _api_key(args: argparse.Namespace, base_url: str) -> str | None:
    """The key for ``base_url``; raises ``NO_API_KEY`` for OpenAI itself without one, ``INVALID_API_KEY`` (exit 2)."""
    # the provider client (httpx) loads only when a generation runs, not when the CLI parser is built
    from ..generation import DEFAULT_BASE_URL, resolve_api_key
    from ..providers.openai_compat import check_api_key

    api_key = resolve_api_key()
    if api_key is None and urlparse(base_url).hostname == urlparse(DEFAULT_BASE_URL).hostname:
        # OpenAI itself always needs a key; local OpenAI-compatible servers often do not.
        raise ProviderError("NO_API_KEY", "no API key: set LOOMSCOPE_API_KEY or OPENAI_API_KEY, or store "
                            "one in the OS keyring (service 'loomscope'), or pass --base-url for a "
                            "local server", file=args.chat_id)
    check_api_key(api_key)  # INVALID_API_KEY (exit 2) before the library is even opened
    return api_key


def _run_cancellable(work: Callable[[threading.Event], GenerationResult]) -> tuple[GenerationResult, bool]:
    """``work(cancel)`` on a thread that Ctrl+C and SIGTERM cancel; returns its result and whether SIGTERM came.

    The work runs on a thread so that Ctrl+C (KeyboardInterrupt, main thread only) can set the
    cancel event; the worker then closes the audit as cancelled and stores it. (An Event, not
    Thread.join: a join interrupted by Ctrl+C may report the thread dead.) SIGTERM (a service
    manager, `kill`, a closing terminal multiplexer) cancels like Ctrl+C: the worker closes the
    audit as cancelled and stores it; the exit status is then 143. An exception of the work is
    raised again here.
    """
    cancel = threading.Event()
    finished = threading.Event()
    terminated = threading.Event()
    results: list[GenerationResult] = []
    errors: list[BaseException] = []

    def run_work() -> None:
        try:
            results.append(work(cancel))
        except BaseException as exc:  # re-raised on the main thread
            errors.append(exc)
        finally:
            finished.set()

    def on_sigterm(_signum: int, _frame: object) -> None:
        terminated.set()
        cancel.set()

    old_handler = None
    if threading.current_thread() is threading.main_thread():
        old_handler = signal.signal(signal.SIGTERM, on_sigterm)
    worker = threading.Thread(target=run_work, name="loomscope-generate", daemon=True)
    worker.start()
    try:
        while not finished.is_set():
            try:
                finished.wait(0.1)
            except KeyboardInterrupt:
                cancel.set()
    finally:
        if old_handler is not None:
            signal.signal(signal.SIGTERM, old_handler)
    if errors:
        raise errors[0]
    return results[0], terminated.is_set()


def run(args: argparse.Namespace) -> int:
    """Generate, store, print the reply (or the failure) and return the exit code."""
    from ..generation import DEFAULT_BASE_URL, ProviderConfig, generate_and_store  # see _api_key

    fmt = output_format(args)
    live = fmt == "table" and sys.stdout.isatty()
    base_url = args.base_url or next((os.environ[v] for v in BASE_URL_ENV_VARS if os.environ.get(v)), None)
    if base_url is None:
        with open_library(args) as store:
            base_url = _setup_server_url(store, args.chat_id) or DEFAULT_BASE_URL
    api_key = _api_key(args, base_url)
    shown = [0]

    def on_progress(event: ProgressEvent) -> None:
        if live and event.state == "running" and event.text:
            sys.stdout.write(visible_text(event.text[shown[0]:]))
            sys.stdout.flush()
            shown[0] = len(event.text)

    with open_library(args) as store:
        settings = _settings(store.chats.get(args.chat_id).settings, args)
        provider = ProviderConfig(base_url=base_url, model=settings.model, api_key=api_key,
                                  timeout_s=args.timeout, stream=not args.no_stream,
                                  extra_body=dict(args.param) or None,
                                  reply_limit_param=None if args.reply_limit_param == "auto"
                                  else args.reply_limit_param)
        result, terminated = _run_cancellable(lambda cancel: generate_and_store(
            store, args.chat_id, provider, message=args.message, settings=settings, on_progress=on_progress,
            cancel=cancel))
    if live and shown[0]:
        sys.stdout.write("\n")
    _print_result(result, fmt, live)
    return _exit_code(result.audit, terminated)


def _setup_server_url(store, chat_id: str) -> str | None:
    """The server URL of a Text Completion chat's SillyTavern setup, or ``None``.

    SillyTavern's ``server_urls[type]`` (KoboldCpp, llama.cpp, TabbyAPI, … serve
    ``/v1/completions`` there), used when no ``--base-url`` or environment variable names one;
    ``None`` for other chats and for Kobold Horde (not an OpenAI-compatible server). Raises
    ``CHAT_NOT_FOUND``.
    """
    st = store.chats.get_setup(chat_id).sillytavern
    tc = st.text_completion if st is not None else None
    return tc.server_url.strip() or None if tc is not None and tc.main_api != "koboldhorde" else None


def _print_result(result: GenerationResult, fmt: str, live: bool) -> None:
    """The outcome: JSON, or the reply (unless it was streamed) and a status line on stderr."""
    audit = result.audit
    if fmt != "json" and audit.compaction and audit.compaction.get("status") not in (None, "not_needed", "not_run"):
        sys.stderr.write(f"loomscope: {audit.chat_id}: {compaction_line(audit.compaction)}\n")
    if fmt == "json":
        print_json({
            "chat_id": audit.chat_id,
            "generation_id": audit.generation_id,
            "status": audit.status,
            "error_code": audit.error_code,
            "api": audit.api,
            "prompt_tokens": audit.prompt_tokens,
            "request_params": audit.request_params,
            "reply_index": result.reply_index,
            "reply": result.reply.model_dump(mode="json", exclude_none=True) if result.reply else None,
            "compaction": audit.compaction,
        })
    elif audit.status == "completed":
        if not live:
            reply = result.reply
            text = reply.text() if reply is not None else ""
            if reply is not None and reply.tool_calls:
                text = text or "\n".join(f"[tool call] {c.function.name}({c.function.arguments})"
                                         for c in reply.tool_calls)
            sys.stdout.write((visible_text(text) if sys.stdout.isatty() else text) + "\n")
        sys.stderr.write(f"loomscope: {audit.chat_id}: completed: message {result.reply_index} "
                         f"({audit.prompt_tokens} prompt tokens, audit {audit.generation_id})\n")


def _exit_code(audit: PromptContextAudit, terminated: bool) -> int:
    """The exit status of a closed audit (module docstring); a failure is described on stderr."""
    if audit.status == "completed":
        return EXIT_OK
    sys.stderr.write(f"loomscope: {visible(audit.chat_id)}: {audit.error_code}: {visible(audit.error_message)}\n")
    if audit.status == "cancelled":
        return EXIT_TERMINATED if terminated else EXIT_CANCELLED
    if audit.error_code == "TOKEN_BUDGET_EXCEEDED":
        return EXIT_BUDGET
    if audit.error_code == "EMPTY_PROMPT":
        return EXIT_BAD_INPUT
    return EXIT_PROVIDER
