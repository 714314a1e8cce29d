"""Benchmark: lorebook activation over large books and long scan windows.

Run: ``.venv/bin/python tests/benchmarks/bench_lorebook.py``. Prints, for 1,000 and 5,000
entries × scan depth 10 and 100, without and with regex keys (2 % of the entries), the first
(cold: books prepared, matcher compiled) and the best and median warm activation times in
milliseconds. Each entry has 2-3 keys, every 7th secondary keys, every 13th probability 50,
every 11th an inclusion group, every 200th is constant; chat messages have 40-90 words with
two entry names each. Recursion is on. Tokens are counted with the exact o200k_base profile.
"""

from __future__ import annotations

import random
import statistics
import string
import time

from engine.lorebook import activate, clear_cache
from engine.schema import ChatMessage, Lorebook, LorebookEntry, WorldInfoSettings
from engine.tokenizers import default_tokenizer_registry

WORDS = [
    "the", "a", "and", "of", "to", "in", "is", "was", "he", "she", "they", "said", "walked", "into",
    "room", "castle", "forest", "river", "sword", "shield", "magic", "dragon", "king", "queen",
    "night", "morning", "looked", "at", "with", "from", "her", "his", "their", "old", "new",
]


def make_book(n: int, rng: random.Random, regex_every: int = 50) -> Lorebook:
    entries = []
    for uid in range(n):
        name = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 10)))
        keys = [name, f"{name} {rng.choice(WORDS)}"]
        if regex_every and uid % regex_every == 0:
            keys.append(f"/{name[:3]}[a-z]+/i")
        entries.append(LorebookEntry(
            uid=uid, keys=keys, content=f"{name.title()} is a place. " * rng.randint(2, 12),
            order=rng.randint(0, 200), secondary_keys=[rng.choice(WORDS)] if uid % 7 == 0 else [],
            constant=uid % 200 == 0, group=f"g{uid % 30}" if uid % 11 == 0 else "",
            probability=50 if uid % 13 == 0 else 100,
        ))
    return Lorebook(name=f"bench{n}", entries=entries)


def make_chat(n_messages: int, book: Lorebook, rng: random.Random) -> list[ChatMessage]:
    names = [e.keys[0] for e in book.entries]
    out = []
    for i in range(n_messages):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 90))]
        for _ in range(2):  # a couple of lorebook names per message
            words.insert(rng.randrange(len(words)), rng.choice(names).title())
        out.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=" ".join(words) + "."))
    return out


def bench(n_entries: int, depth: int, regex_every: int,
          repeats: int = 30) -> tuple[float, float, float, float, float, int, int]:
    rng = random.Random(n_entries * 1000 + depth)
    book = make_book(n_entries, rng, regex_every)
    chat = make_chat(max(depth, 10) + 20, book, rng)
    settings = WorldInfoSettings(scan_depth=depth, budget_percent=25, recursive=True)
    count = default_tokenizer_registry().get("o200k_base").count
    count("warm up the tokenizer")
    clear_cache()
    t0 = time.perf_counter()
    result = activate([book], chat, settings, count_tokens=count, context_limit=128_000,
                      user_name="User", char_name="Bot")
    cold = (time.perf_counter() - t0) * 1000
    times = []
    cpu = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        result = activate([book], chat, settings, count_tokens=count, context_limit=128_000,
                          user_name="User", char_name="Bot")
        cpu.append((time.process_time() - c0) * 1000)
        times.append((time.perf_counter() - t0) * 1000)
    # an edit in the lorebook editor: one entry gets a new key (new prepared books, one shard recompiled)
    edited = book.entries[len(book.entries) // 2]
    edited.keys = [edited.keys[0] + "x", *edited.keys[1:]]
    t0 = time.process_time()
    activate([book], chat, settings, count_tokens=count, context_limit=128_000, user_name="User", char_name="Bot")
    edit = (time.process_time() - t0) * 1000
    return (cold, min(times), statistics.median(times), statistics.median(cpu), edit, len(result.activated),
            len(result.budget_dropped))


def main() -> None:
    print("wall = elapsed time; cpu = this process's CPU time (unaffected by other load on the machine)")
    print("edit = CPU ms of the first activation after one entry's key changed")
    print(f"{'entries':>8} {'depth':>6} {'regex':>6} {'cold ms':>9} {'wall min':>9} {'wall med':>9} "
          f"{'cpu med':>8} {'edit':>7} {'active':>7} {'dropped':>8}")
    for regex_every, label in ((0, "none"), (50, "2%")):
        for n in (1_000, 5_000):
            for depth in (10, 100):
                cold, best, med, cpu, edit, active, dropped = bench(n, depth, regex_every)
                print(f"{n:>8,} {depth:>6} {label:>6} {cold:>9.1f} {best:>9.2f} {med:>9.2f} {cpu:>8.2f} "
                      f"{edit:>7.0f} {active:>7} {dropped:>8}")


if __name__ == "__main__":
    main()
