"""Schemathesis against the served schema, long run (issue 15): prints requests and 5xx counts.

    .venv/bin/python tests/benchmarks/bench_api_fuzz.py [--max-examples 500] [--max-time 600] [--seed 15]

Starts the real API server (uvicorn on 127.0.0.1, free port) over a seeded temporary SQLite
library, wraps its ASGI app with a counter (every request the server answered, by status
class), and runs the schemathesis CLI (``st run``: examples, coverage and fuzzing phases, all
checks except the schema-conformance ones that judge our documentation rather than crashes)
against ``/api/v2/openapi.json``. Prints ``requests N · 2xx · 4xx · 5xx`` as the server saw them and
schemathesis' own summary line. Exit status 1 when any answer was a 5xx.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


class CountingApp:
    """ASGI wrapper counting answered HTTP requests by status."""

    def __init__(self, app) -> None:
        self.app = app
        self.statuses: Counter[int] = Counter()
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def counting_send(message):
            if message["type"] == "http.response.start":
                with self.lock:
                    self.statuses[int(message["status"])] += 1
            await send(message)

        return await self.app(scope, receive, counting_send)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-examples", type=int, default=500)
    ap.add_argument("--max-time", type=int, default=300, help="seconds for the whole schemathesis run")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--workers", default="2")
    args = ap.parse_args(argv)

    from engine.api import API_PREFIX, make_server
    from engine.api.app import create_app
    from engine.storage import open_store
    from tests.engine.api.conftest import start_server, stop_server

    st = shutil.which("st", path=str(Path(sys.executable).parent)) or shutil.which("st")
    if st is None:
        print("schemathesis is not installed (pip install -e '.[test]')")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'library.sqlite3'}", seed=True)
        server = make_server(store, port=0, log_level="critical")
        counter = CountingApp(create_app(store))
        server.server.config.app = counter
        server.server.config.loaded = False
        thread = start_server(server)
        try:
            cmd = [st, "run", f"{server.url}{API_PREFIX}/openapi.json", "--checks", "all",
                   "--exclude-checks", "status_code_conformance,response_schema_conformance,"
                   "content_type_conformance,response_headers_conformance,positive_data_acceptance,"
                   "negative_data_rejection,missing_required_header,unsupported_method,"
                   "allow_header_conformance,ignored_auth",
                   "--max-examples", str(args.max_examples), "--max-time", str(args.max_time),
                   "--seed", str(args.seed), "--workers", args.workers, "--phases", "examples,coverage,fuzzing",
                   "--request-timeout", "60", "--continue-on-failure"]
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  env={"PATH": str(Path(sys.executable).parent), "NO_COLOR": "1",
                                       "HOME": tmp, "SCHEMATHESIS_HOOKS": ""})
        finally:
            stop_server(server, thread)
            store.close()
    s = counter.statuses
    total = sum(s.values())
    by_class = {k: sum(n for code, n in s.items() if code // 100 == k) for k in (2, 3, 4, 5)}
    tail = [ln for ln in proc.stdout.splitlines() if ln.strip()][-12:]
    print("\n".join(tail))
    print(f"schemathesis exit {proc.returncode}; server answered: requests {total} · 2xx {by_class[2]} · "
          f"4xx {by_class[4]} · 5xx {by_class[5]}; statuses {dict(sorted(s.items()))}")
    if proc.returncode not in (0, 1) and proc.stderr:
        print(proc.stderr[-2000:])
    return 1 if by_class[5] else 0


if __name__ == "__main__":
    raise SystemExit(main())
