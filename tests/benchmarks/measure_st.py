"""A SillyTavern folder's preview at N messages, Chat Completion or Text Completion, in a fresh process.

    python tests/benchmarks/measure_st.py N --api chat_completion|text_completion [--repeats R]

The folder is ``tests/engine/assembly/tc_cases``' ChatML case (a card with example dialogue and a
Character's Note, a world with entries before / after / at depth / in the Author's Note, a persona)
with a chat of N messages, written with ``main_api`` ``openai`` (SillyTavern's Chat Completion path,
``engine.assembly.sillytavern``) or ``textgenerationwebui`` (its Text Completion path,
``engine.assembly.textcompletion``), the same 8,192-token window (reply 300) either way. It is
imported into a temporary SQLite library and the request built (not timed); the pipeline's modules
and the tokenizer are loaded by a preview of the 12-turn case first. Then:

* **cold**: one ``preview()`` of the N-message chat (no count cached for its texts);
* **repeat**: the median of ``R`` more previews of the same request (counts cached).

Prints one JSON object on the last line of stdout (times in seconds).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import host_gc  # noqa: E402

from engine.importers.st_folder import read_st_folder  # noqa: E402
from engine.pipeline import preview  # noqa: E402
from engine.schema import PreviewRequest  # noqa: E402
from engine.storage import open_store  # noqa: E402
from tests.engine.assembly import tc_cases  # noqa: E402

MAIN_API = {"chat_completion": "openai", "text_completion": "textgenerationwebui"}


def _request(root: Path, turns: int, api: str) -> PreviewRequest:
    folder = tc_cases.write_case(root / f"st-{turns}", "chatml", "full", turns=turns, main_api=MAIN_API[api])
    store = open_store(f"sqlite:///{root / f'lib-{turns}.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    return store.chats.build_request(next(r.id for r in report.added if r.kind == "chat"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("--api", choices=sorted(MAIN_API), required=True)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        preview(_request(root, 12, args.api))  # modules and tokenizer loaded
        request = _request(root, max(2, args.n - 1), args.api)
    host_gc.hold()  # as the app does from a chat's load to its first preview (host_gc.py)
    t0 = time.perf_counter()
    pv = preview(request)
    cold = time.perf_counter() - t0
    host_gc.settle()
    runs = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        preview(request)
        runs.append(time.perf_counter() - t0)
        host_gc.tidy()  # the app's collector policy once a preview is applied (host_gc.py)
    assert pv.api == args.api
    print(json.dumps({"n": args.n, "api": args.api, "cold_s": cold, "repeat_s": statistics.median(runs),
                      "repeat_runs_s": runs, "prompt_tokens": pv.prompt_tokens,
                      "kept": sum(b.status == "kept" for b in pv.blocks), "tokenizer": pv.tokenizer.profile,
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
