"""Benchmark: warm counting speed of the exact open-weight profiles vs tiktoken (run on demand: `make bench`).

For the same texts (a real SillyTavern chat from ../shared/data when present, plus generated
English, code and CJK text), prints per profile: the cold load time (read + hash-check + build),
the warm batch-count time of its encoder (no count cache), tiktoken's ``cl100k_base`` batch time
on the same texts, and their ratio. The issue's target: within 2× of tiktoken for the BPE
families (Llama 3/4, Qwen, Tekken, DeepSeek); SentencePiece (Mistral v1/v3/v7) is reported.
Then a 2,000-message preview per profile (cold and warm), against ``o200k_base``.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.pipeline import default_registries, preview  # noqa: E402
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest  # noqa: E402
from engine.tokenizers import get_encoding  # noqa: E402
from engine.tokenizers.backends import get_encoder  # noqa: E402
from engine.tokenizers.open_profiles import OPEN_PROFILES  # noqa: E402

BPE = {"llama3", "llama4", "qwen", "qwen3", "mistral-tekken", "deepseek"}


def corpus() -> list[str]:
    """Real chat text when ../shared/data is present, plus generated prose, code and CJK."""
    texts: list[str] = []
    shared = ROOT.parent / "shared" / "data" / "chats"
    for path in sorted(shared.glob("*.jsonl")) if shared.is_dir() else []:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                mes = json.loads(line).get("mes")
            except (ValueError, AttributeError):
                continue
            if isinstance(mes, str) and mes:
                texts.append(mes)
    rng = random.Random(3)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "sword", "castle", "dragon", "whisper", "lantern", "river", "forest", "ancient", "ruin", "glimmer", "storm", "harbor", "merchant", "spell", "naïve", "café", "Straße"]
    code = "def f(x):\n    return {k: v for k, v in x.items() if v is not None}  # comment\n"
    cjk = "风起云涌，月光如水。東京の夜は静かです。한국어 문장입니다。"
    for _ in range(1500):
        texts.append(" ".join(rng.choices(words, k=rng.randint(20, 200))))
    for _ in range(200):
        texts.append(code * rng.randint(1, 20))
        texts.append(cjk * rng.randint(1, 20))
    return texts


def timed(fn, repeat: int = 5) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> int:
    texts = corpus()
    chars = sum(len(t) for t in texts)
    print(f"corpus: {len(texts)} texts, {chars:,} characters")
    enc = get_encoding("cl100k_base")
    enc.encode_ordinary_batch(texts[:10])
    base = timed(lambda: enc.encode_ordinary_batch(texts, num_threads=2))
    print(f"tiktoken cl100k_base warm batch: {base * 1000:.1f} ms")
    print(f"{'profile':<16}{'load s':>8}{'warm ms':>10}{'× tiktoken':>12}  target")
    worst = 0.0
    for name, (key, _, _) in OPEN_PROFILES.items():
        t = time.perf_counter()
        e = get_encoder(key)
        e.count_batch(["warm up"])
        load = time.perf_counter() - t
        warm = timed(lambda: e.count_batch(texts))
        ratio = warm / base
        target = "≤ 2×" if key in BPE else "(SentencePiece, reported)"
        if key in BPE:
            worst = max(worst, ratio)
        print(f"{name:<16}{load:>8.2f}{warm * 1000:>10.1f}{ratio:>12.2f}  {target}")
    print(f"worst BPE ratio: {worst:.2f}× ({'within' if worst <= 2 else 'OVER'} the 2× target)")

    rng = random.Random(5)
    msgs = [ChatMessage(role="system", content="You are a narrator.")]
    for i in range(2000):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=rng.choice(texts)))
    request = lambda prof: PreviewRequest(chat=Chat(messages=msgs),  # noqa: E731
                                          settings=ContextSettings(model="bench", tokenizer=prof,
                                                                   context_limit=10_000_000))
    print(f"{'preview (2,001 messages)':<26}{'cold s':>8}{'warm s':>8}{'prompt tokens':>15}")
    for prof in ["o200k_base", *OPEN_PROFILES]:
        regs = default_registries()
        t = time.perf_counter()
        pv = preview(request(prof), registries=regs)
        cold = time.perf_counter() - t
        warm = timed(lambda: preview(request(prof), registries=regs), repeat=3)
        print(f"{prof:<26}{cold:>8.2f}{warm:>8.2f}{pv.prompt_tokens:>15,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
