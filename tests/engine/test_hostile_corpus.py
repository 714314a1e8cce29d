"""Issue 15: a bounded run of the hostile corpus (``tests/benchmarks/hostile_corpus.py``).

Every generated file (truncated, byte-flipped, wrong types, control characters and newlines in
keys and values, lone surrogates, NaN/Infinity, deep nesting, damaged PNG chunks, bad encodings,
garbage) is either accepted through inspect → import → preview/lint, or refused with a stable
code on one clean line; nothing fails otherwise. The full corpus (450 files) runs on demand.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _corpus_module():
    spec = importlib.util.spec_from_file_location("hostile_corpus", ROOT / "tests" / "benchmarks" / "hostile_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hostile_corpus_has_no_failures(tmp_path: Path, capsys) -> None:
    corpus = _corpus_module()
    code = corpus.main(["--seed", "7", "--per-kind", "12", "--out", str(tmp_path / "corpus")])
    out = capsys.readouterr().out
    assert code == 0, out
    tried = int(out.split("tried ")[1].split()[0])
    assert tried >= 100 and " failed 0" in out
    assert len(list((tmp_path / "corpus").iterdir())) == tried
