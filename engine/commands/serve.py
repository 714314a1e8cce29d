"""``loomscope serve``: run the local HTTP API (SPEC §7) over a library.

``loomscope serve [--db URL] [--host 127.0.0.1] [--port 8765] [--allow-remote] [--max-body-mib 16]``

Listens on loopback by default. A non-loopback ``--host`` (``0.0.0.0``, a LAN address, a host
name) is refused with ``REMOTE_HOST_REFUSED`` (exit 2) unless ``--allow-remote`` is given: the
API has no authentication. ``--port 0`` picks a free port. The address actually served is
printed on stderr (``loomscope: serving http://127.0.0.1:8765/api/v2 ...``), and the URL of the
interactive API docs (``loomscope: interactive API docs: http://127.0.0.1:8765/api/v2/docs``). Ctrl+C stops it
gracefully with exit 0 (SIGTERM also shuts down gracefully, then ends the process by that signal).
A port in use → ``ADDRESS_UNAVAILABLE`` (exit 2).
"""

from __future__ import annotations

import argparse
import math
import sys

from .library import add_db_argument, open_library

# Same values as engine.api.server (not imported here: building the CLI parser must not load
# FastAPI and uvicorn for every other command).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def _mib(text: str) -> float:
    """``--max-body-mib``: a finite number of MiB above 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of MiB: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of MiB above 0, not {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` subcommand."""
    p = sub.add_parser("serve", help="run the local HTTP API (context previews and audits)")
    add_db_argument(p)
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}; non-loopback needs --allow-remote)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT}; 0 = any free port)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (the API has NO authentication)")
    p.add_argument("--max-body-mib", type=_mib, default=16.0, metavar="MIB",
                   help="largest request body in MiB (default 16); larger bodies get 413")
    p.add_argument("--log-level", default="warning",
                   choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn log level (default warning)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns 0 (errors are raised as ``LoomscopeError``)."""
    # the API (FastAPI, uvicorn) loads only when the server runs: building the CLI parser (`loomscope
    # --help`, and `loomscope` launching the app) imports every command module (LAZY_FOR_START_UP)
    from ..api.app import API_PREFIX
    from ..api.docs import DOCS_PATH
    from ..api.server import check_host, is_loopback, make_server

    check_host(args.host, allow_remote=args.allow_remote)  # before touching the library
    with open_library(args) as store:
        server = make_server(store, host=args.host, port=args.port, allow_remote=args.allow_remote,
                             log_level=args.log_level, max_body_bytes=int(args.max_body_mib * 1024 * 1024))
        if not is_loopback(args.host):
            sys.stderr.write("loomscope: warning: serving on a non-loopback address; the API has no "
                             "authentication and exposes every chat and audit\n")
        sys.stderr.write(f"loomscope: serving {server.url}{API_PREFIX} (library {store.url}); "
                         "Ctrl+C stops\n")
        sys.stderr.write(f"loomscope: interactive API docs: {server.url}{API_PREFIX}{DOCS_PATH}\n")
        sys.stderr.flush()
        try:
            server.run()
        except KeyboardInterrupt:  # uvicorn re-raises Ctrl+C after its graceful shutdown
            sys.stderr.write("loomscope: server stopped\n")
    return 0
