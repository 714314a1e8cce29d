"""One size of the engine figures, in a fresh process (``run_bench.py`` starts one per size).

    python tests/benchmarks/measure_engine.py N [--toggles T] [--floor-repeats R] [--no-trim]

In this order, on the chat of ``chatgen.make_chat(N)``:

1. **floor**: tiktoken's ``encode_ordinary_batch`` (o200k_base, 2 threads, the encoder the
   engine loads) over every text the preview tokenizes; median of ``R`` runs. Also
   ``floor_loop_s``: one ``encode_ordinary`` call per text in one thread, a stricter floor
   (the batch submits one thread-pool task per text, which costs more than encoding a chat
   message; the engine counts this way).
2. **cold**: one ``preview()`` of the chat. The process is fresh, so no cache holds any of its
   texts; the encoder is loaded and the pipeline's modules imported beforehand (a preview of
   an unrelated 8-message chat), as in an app that opens a new chat.
3. **warm**: ``T`` exclude toggles, one after another (alternately a recent kept message and an
   old dropped one), each followed by ``preview()`` with the same registries; the time of each
   preview. The request for each toggle is built outside the clock. Each preview's rows are then
   read as the app reads them (``list(out.blocks)``: a plain list, so this only copies it), timed
   apart (``warm_rows_s``; ``warm_read_s`` is the sum of both per toggle: a toggle through the
   public ``preview(request)`` up to every row of the new preview in hand, issue 29's figure).
   Outside the clock, ``rows_changed``: how many rows each toggle's preview has that are not the
   previous preview's row objects (:func:`engine.preview_changes`): an exclusion moves the fit
   window of every older message, so a toggle builds that many new rows. ``tidy_s``: the app's
   collector tidy after each toggle (``host_gc.tidy``, run once the row would be on screen).
4. **trim**: LangChain's ``trim_messages`` (strategy ``last``, ``include_system``,
   ``start_on="human"``) over the same messages, with the engine's own per-message count
   (OpenAI accounting, o200k_base) behind a per-text cache, and the preview's own budget
   (``budget − overhead_tokens``). Warmed once on the whole chat, then timed after each of the
   same ``T`` toggles (the excluded messages left out of its input, as an app would).

Prints one JSON object on the last line of stdout (times in seconds).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import host_gc  # noqa: E402
from chatgen import make_chat, settings, toggle_indices  # noqa: E402
from tiktoken_process import provider_texts  # noqa: E402

from engine.pipeline import default_registries, preview  # noqa: E402
from engine.schema import Chat, ChatMessage, PreviewRequest, preview_changes  # noqa: E402
from engine.tokenizers import get_encoding  # noqa: E402


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def _toggled(messages: list[ChatMessage], index: int) -> list[ChatMessage]:
    m = messages[index]
    flipped = m.model_copy(update={"meta": m.meta.model_copy(update={"manualExcluded": not m.meta.manualExcluded})})
    return [*messages[:index], flipped, *messages[index + 1:]]


def measure_floor(texts: list[str], repeats: int) -> dict[str, Any]:
    """Median and minimum seconds of ``encode_ordinary_batch`` over ``texts``."""
    enc = get_encoding("o200k_base")
    enc.encode_ordinary_batch(texts[:16], num_threads=2)  # the encoder and its threads, outside the clock
    runs = [_timed(enc.encode_ordinary_batch, texts, num_threads=2)[0] for _ in range(repeats)]

    def loop() -> list[int]:  # one encode_ordinary call per text, in this thread (what the engine does now)
        encode = enc.encode_ordinary
        return [len(encode(t)) for t in texts]

    loops = [_timed(loop)[0] for _ in range(repeats)]
    return {"floor_s": statistics.median(runs), "floor_min_s": min(runs), "floor_runs_s": runs,
            "floor_loop_s": statistics.median(loops), "floor_loop_runs_s": loops,
            "texts": len(texts), "characters": sum(map(len, texts))}


def measure_preview(chat: Chat, toggles: list[int]) -> tuple[dict[str, Any], Any]:
    """Cold preview, then one preview after each toggle; returns the figures and the cold preview."""
    regs = default_registries()
    preview(PreviewRequest(chat=make_chat(8, seed=99), settings=settings()), registries=regs)
    request = PreviewRequest(chat=chat, settings=settings())
    host_gc.hold()  # as the app does from a chat's load to its first preview (host_gc.py)
    cold, pv = _timed(preview, request, registries=regs)
    host_gc.settle()
    messages = list(chat.messages)
    warm: list[float] = []
    rows: list[float] = []
    moved: list[int] = []
    tidied: list[float] = []
    before = pv
    for index in toggles:
        messages = _toggled(messages, index)
        req = request.model_copy(update={"chat": chat.model_copy(update={"messages": messages})})
        seconds, out = _timed(preview, req, registries=regs)
        warm.append(seconds)
        rows.append(_timed(list, out.blocks)[0])  # every row (a plain list: a copy)
        changes = preview_changes(before, out)  # outside the clock: which rows the toggle changed
        moved.append(len(changes.rows) if changes is not None else len(out.blocks))
        before = out
        tidied.append(host_gc.tidy())  # the app's collector policy after the row is shown (host_gc.py)
    kept = sum(b.status == "kept" for b in pv.blocks)
    read = [w + r for w, r in zip(warm, rows)]
    return {"cold_s": cold, "warm_runs_s": warm, "warm_s": statistics.median(warm), "kept_blocks": kept,
            "warm_rows_runs_s": rows, "warm_rows_s": statistics.median(rows) if rows else 0.0,
            "warm_read_runs_s": read, "warm_read_s": statistics.median(read) if read else 0.0,
            "rows_changed_runs": moved, "rows_changed": statistics.median(moved) if moved else 0,
            "tidy_runs_s": tidied, "tidy_s": statistics.median(tidied) if tidied else 0.0,
            "blocks": len(pv.blocks), "prompt_tokens": pv.prompt_tokens, "budget": pv.budget,
            "last_prompt_tokens": out.prompt_tokens if toggles else pv.prompt_tokens}, pv


def exact_counter() -> Any:
    """The engine's per-message count (OpenAI accounting, o200k_base) of a LangChain message, cached per text."""
    from langchain_core.messages import BaseMessage, convert_to_openai_messages

    from engine.tokenizers.accounting import count_messages_tokens
    from engine.tokenizers.defaults import default_tokenizer_registry

    profile = default_tokenizer_registry().get("o200k_base")
    cache: dict[Any, int] = {}

    def count(message: BaseMessage) -> int:
        # the key is the text: the content, plus the ids a tool call or result also spends tokens on
        kind = message.type
        if kind == "tool":
            key: Any = (message.content, message.tool_call_id)  # type: ignore[attr-defined]
        elif kind == "ai" and message.tool_calls:  # type: ignore[attr-defined]
            key = (message.content, *(c["id"] for c in message.tool_calls))  # type: ignore[attr-defined]
        else:
            key = message.content
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = count_messages_tokens(profile, [convert_to_openai_messages(message)])[0]
        return hit

    # trim_messages sums a per-message counter when its first parameter is annotated BaseMessage
    count.__annotations__ = {"message": BaseMessage, "return": int}
    return count


def measure_trim(chat: Chat, toggles: list[int], max_tokens: int, engine_counts: list[int]) -> dict[str, Any]:
    """``trim_messages`` with a warm per-text cache after each of the same toggles."""
    from langchain_core.messages import convert_to_messages, trim_messages

    lc = convert_to_messages([m.to_provider() for m in chat.messages])
    count = exact_counter()
    agrees = [count(m) for m in lc] == engine_counts

    def trim(messages: list[Any]) -> list[Any]:
        return trim_messages(messages, max_tokens=max_tokens, token_counter=count, strategy="last",
                             include_system=True, start_on="human", allow_partial=False)

    first, kept = _timed(trim, lc)
    excluded: set[int] = set()
    runs: list[float] = []
    for index in toggles:
        excluded ^= {index}
        messages = [m for k, m in enumerate(lc) if k not in excluded]
        seconds, _ = _timed(trim, messages)
        runs.append(seconds)
    return {"trim_first_s": first, "trim_runs_s": runs, "trim_s": statistics.median(runs),
            "trim_kept": len(kept), "trim_max_tokens": max_tokens, "trim_counter_agrees": agrees}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--toggles", type=int, default=9)
    ap.add_argument("--floor-repeats", type=int, default=5)
    ap.add_argument("--no-trim", action="store_true", help="skip trim_messages (langchain-core not installed)")
    args = ap.parse_args(argv)

    chat = make_chat(args.n)
    provider = [m.to_provider() for m in chat.messages]
    out: dict[str, Any] = {"n": args.n}
    out.update(measure_floor(provider_texts(provider), args.floor_repeats))
    toggles = toggle_indices(chat, args.toggles)
    figures, pv = measure_preview(chat, toggles)
    out.update(figures)
    out["toggles"] = toggles
    if not args.no_trim:
        from engine.tokenizers.accounting import count_messages_tokens
        from engine.tokenizers.defaults import default_tokenizer_registry

        counts = count_messages_tokens(default_tokenizer_registry().get("o200k_base"), provider)
        out.update(measure_trim(chat, toggles, pv.budget - pv.overhead_tokens, counts))
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
