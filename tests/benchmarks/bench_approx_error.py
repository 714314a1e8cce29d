"""Benchmark: measured error band of the approximate profiles (run on demand: `make bench`).

For texts of four kinds (role-play prose from ../shared/data when present, generated English,
source code, CJK), prints the relative error ``estimate / reference − 1`` of each approximate
profile against the best reference available offline:

* ``llama3-approx`` against the exact ``llama3`` profile, ``mistral-approx`` against the exact
  ``mistral-tekken`` and ``mistral-v3`` profiles (kept for old settings; the model table now
  maps these families to the exact profiles);
* ``claude-approx`` against the only tokenizer Anthropic has published, the legacy Claude
  tokenizer shipped as ``tokenizer.json`` in the ``anthropic`` SDK up to 0.38 (the ``bench``
  extra installs 0.34.2). Claude 3 and later use an unpublished tokenizer, so this band is a
  measured lower bound on the uncertainty, not a guarantee;
* ``gemini-approx``: Google publishes Gemini's tokenizer only through the API (and as Gemma's
  SentencePiece model, which no package index ships); no offline reference, so only the rule is
  documented.

Per kind: median and the 5th–95th percentile of the per-text error (texts of ≥ 20 reference
tokens), and the error of the total.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.tokenizers import default_tokenizer_registry  # noqa: E402


def kinds() -> dict[str, list[str]]:
    rng = random.Random(11)
    out: dict[str, list[str]] = {"prose (shared chats)": [], "English (generated)": [], "code": [], "CJK": []}
    shared = ROOT.parent / "shared" / "data" / "chats"
    for path in sorted(shared.glob("*.jsonl")) if shared.is_dir() else []:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                mes = json.loads(line).get("mes")
            except (ValueError, AttributeError):
                continue
            if isinstance(mes, str) and len(mes) > 80:
                out["prose (shared chats)"].append(mes)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "ancient", "lanterns", "whisper", "along", "the", "river;", "merchants", "argued,", "storms", "gathered,", "and", "the", "castle's", "bells", "rang", "twice"]
    out["English (generated)"] = [" ".join(rng.choices(words, k=rng.randint(30, 300))).capitalize() + "."
                                  for _ in range(300)]
    snippets = [
        "def count(items: list[str]) -> dict[str, int]:\n    out = {}\n    for it in items:\n"
        "        out[it] = out.get(it, 0) + 1\n    return out\n",
        "for (let i = 0; i < arr.length; i++) { if (arr[i] > max) { max = arr[i]; } }\n",
        "SELECT name, COUNT(*) AS n FROM users WHERE created_at > '2024-01-01' GROUP BY name;\n",
    ]
    out["code"] = ["".join(rng.choices(snippets, k=rng.randint(2, 12))) for _ in range(300)]
    cjk = ["风起云涌，月光如水。", "我们明天去公园散步吧。", "東京の夜はとても静かです。", "彼女は本を読んでいる。",
           "한국어 문장을 여기에 씁니다。"]
    out["CJK"] = ["".join(rng.choices(cjk, k=rng.randint(3, 30))) for _ in range(300)]
    return {k: v for k, v in out.items() if v}


def legacy_claude():
    """Anthropic's published (legacy, pre-Claude-3) tokenizer, or ``None`` when not installed."""
    try:
        import importlib.resources

        from tokenizers import Tokenizer

        data = importlib.resources.files("anthropic").joinpath("tokenizer.json").read_text(encoding="utf-8")
    except (ImportError, FileNotFoundError, ModuleNotFoundError):
        return None
    tok = Tokenizer.from_str(data)
    return lambda texts: [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)]


def band(estimate: list[int], reference: list[int]) -> str:
    errs = sorted(e / r - 1 for e, r in zip(estimate, reference) if r >= 20)
    if not errs:
        return "n/a"
    q = statistics.quantiles(errs, n=20) if len(errs) >= 20 else [errs[0]] * 19
    total = sum(estimate) / sum(reference) - 1
    return (f"median {statistics.median(errs):+6.1%}  p5..p95 {q[0]:+6.1%} .. {q[-1]:+6.1%}  "
            f"total {total:+6.1%}  (n={len(errs)})")


def main() -> int:
    reg = default_tokenizer_registry()
    texts = kinds()
    claude = legacy_claude()
    pairs = [("llama3-approx", "llama3", None), ("mistral-approx", "mistral-tekken", None),
             ("mistral-approx", "mistral-v3", None)]
    if claude is not None:
        pairs.append(("claude-approx", "Anthropic legacy tokenizer.json", claude))
    else:
        print("claude-approx: install the bench extra (pip install -e '.[bench]') for the legacy Claude reference")
    for approx, ref_name, ref_fn in pairs:
        print(f"\n{approx} vs {ref_name}")
        for kind, items in texts.items():
            est = reg.get(approx).count_many(items)
            ref = ref_fn(items) if ref_fn else reg.get(ref_name).count_many(items)
            print(f"  {kind:<22} {band(est, ref)}")
    print("\ngemini-approx: no offline reference tokenizer (Gemini's is published only through the API);"
          " rule: max(ceil(chars / 4), ceil(cl100k × 0.95)) after Google's '≈ 4 characters per token'.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
