"""``vector-recall`` with a real ``model2vec`` static model (issue 28 item 4), built here, no network.

The tests make a tiny model of their own (a word-level tokenizer over a small vocabulary and
hand-set vectors where "wyrm" sits next to "dragon"), save it with model2vec's own
``save_pretrained`` and load it through the library's real loading code, from a folder and from
a Hugging Face-style model cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.cli import main
from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, PreviewRequest
from engine.shifting.embedding import embedding_scores, resolve_model_folder
from engine.shifting.recall import bm25_scores

model2vec = pytest.importorskip("model2vec")

VOCAB = ["[UNK]", "[PAD]", "dragon", "wyrm", "fire", "scales", "ship", "harbor", "sail", "tax", "grain"]
_DIM = 6


def _vectors() -> np.ndarray:
    v = np.zeros((len(VOCAB), _DIM), dtype=np.float32)
    rows = {"dragon": [1, 0, 0, 0, 0, .1], "wyrm": [.95, .05, 0, 0, 0, .1], "fire": [.7, 0, .3, 0, 0, 0],
            "scales": [.8, 0, 0, .2, 0, 0], "ship": [0, 1, 0, 0, 0, 0], "harbor": [0, .9, 0, 0, .1, 0],
            "sail": [0, .95, 0, 0, 0, .05], "tax": [0, 0, 0, 0, 1, 0], "grain": [0, 0, 0, .1, .9, 0]}
    for word, row in rows.items():
        v[VOCAB.index(word)] = row
    return v


def make_tiny_model(folder: Path) -> Path:
    """A model2vec StaticModel saved to ``folder`` with the library's own code."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.normalizers import Lowercase
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.normalizer = Lowercase()
    StaticModel(vectors=_vectors(), tokenizer=tok, normalize=True).save_pretrained(folder)
    return folder


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return make_tiny_model(tmp_path / "tiny-model")


def test_scores_come_from_the_model_loaded_from_a_folder(tiny):
    docs = ["The dragon breathed fire", "A ship in the harbor", "words it does not know"]
    scores = embedding_scores(docs, "the wyrm and its scales", str(tiny))
    assert scores[0] > 0.9 and abs(scores[1]) < 0.2 and scores[2] == 0.0
    # BM25 sees no shared word at all: the semantic backend is what ranks the dragon first
    assert bm25_scores(docs, "the wyrm and its scales") == [0.0, 0.0, 0.0]


def test_a_model_id_is_found_in_the_model_cache_and_never_downloaded(tmp_path, monkeypatch):
    import model2vec.persistence.hf as hf

    cache = tmp_path / "hub"
    make_tiny_model(cache / "models--me--tiny" / "snapshots" / "0123abc")
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(cache))
    assert resolve_model_folder("me/tiny") == cache / "models--me--tiny" / "snapshots" / "0123abc"
    with pytest.raises(FileNotFoundError, match="download-embedding-model me/absent"):
        resolve_model_folder("me/absent")


def _request(model: str | None) -> PreviewRequest:
    talk = [ChatMessage(role="user" if i % 2 else "assistant", content=f"Round {i}: the wyrm circles, scales "
                        "glinting, and the knights wait.") for i in range(6)]
    book = Lorebook(name="Realm", entries=[
        LorebookEntry(uid=1, keys=["round"], order=10, content="Dragon lore: fire and a hoard."),
        LorebookEntry(uid=2, keys=["round"], order=90, content="Harbor rules: every ship pays a sail tax."),
    ])
    opts = {"embedding_model": model} if model else {}
    settings = ContextSettings(model="gpt-4o", context_limit=185, reply_reserve=20, strategy="vector-recall",
                               strategy_options=opts, world_info={"scan_depth": 50})
    return PreviewRequest(chat=Chat(messages=talk), lorebooks=[book], settings=settings)


def test_vector_recall_keeps_the_semantically_relevant_entry_and_says_which_backend_scored(tiny):
    pv = preview(_request(str(tiny)))
    lore = {b.trace["uid"]: b for b in pv.blocks if b.kind == "lorebook"}
    assert {b.trace["relevance_backend"] for b in lore.values()} == {"model2vec"}
    assert lore[1].trace["relevance_model"] == str(tiny)
    assert lore[1].trace["relevance"] > lore[2].trace["relevance"]
    assert lore[1].status == "kept" and lore[2].status == "excluded" and lore[2].reason == "LOW_RELEVANCE"
    assert pv.strategy_info["relevance_backend"] == "model2vec"
    # BM25 (the default) sees no shared word and keeps the higher-priority harbor entry instead
    plain = {b.trace["uid"]: b for b in preview(_request(None)).blocks if b.kind == "lorebook"}
    assert {b.trace["relevance_backend"] for b in plain.values()} == {"bm25"}
    assert plain[1].status == "excluded"


def test_a_broken_or_missing_model_falls_back_to_bm25_and_says_why(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    pv = preview(_request(str(empty)))
    assert pv.strategy_info["relevance_backend"] == "bm25"
    assert any("no model2vec model there" in d and "BM25" in d for d in pv.diagnostics)


def test_cli_preview_flag_uses_the_model(tiny, tmp_path, capsys):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "the wyrm and its scales"}]), encoding="utf-8")
    code = main(["preview", "--chat", str(chat), "--strategy", "vector-recall", "--embedding-model", str(tiny),
                 "--format", "json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strategy_info"]["relevance_backend"] in ("bm25", "model2vec")  # no lore: nothing to score
    assert data["strategy_info"].get("relevance_model", str(tiny)) == str(tiny)


def test_cli_download_command_calls_the_downloader_only_when_asked(monkeypatch, tmp_path, capsys):
    import engine.shifting.embedding as emb

    calls = []

    def fake_download(ref, *, on_progress=None):
        calls.append(ref)
        if on_progress:
            on_progress(1, 2)
            on_progress(2, 2)
        return make_tiny_model(tmp_path / "dl")

    monkeypatch.setattr(emb, "download_model", fake_download)
    assert main(["download-embedding-model", "me/tiny"]) == 0
    assert calls == ["me/tiny"]
    out = capsys.readouterr()
    assert str(tmp_path / "dl") in out.out and "--embedding-model" in out.out
