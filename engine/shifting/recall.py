"""``vector-recall`` strategy: lorebook and memory blocks ranked by relevance (SPEC §3).

Order of removal while the prompt is over budget (the user's manual exclusions, hidden messages
and orphaned tool results go first, as in ``manual``):

1. unpinned example dialogue (``EXAMPLES_PUSHED_OUT``), as in every strategy (SPEC §1);
2. removable lorebook, memory and summary blocks, least relevant first (``LOW_RELEVANCE``);
   ties: lower priority first, then the later prompt position;
3. then old history, oldest unit first, tool groups whole (``shift_context``).

Relevance is the BM25 score (``bm25s``, Okapi BM25 with its defaults k1=1.5, b=0.75; English
stop words removed) of each block's text against a query made of the recent conversation: the
last ``recall_messages`` history messages (option, default :data:`RECALL_MESSAGES`) and the
current user input. Every candidate's score is recorded: ``ShiftResult.trace_updates[id]``
``{"relevance": score, "relevance_rank": r, "relevance_backend": "bm25"}`` (the preview and the
audit show it in the block's trace) and ``ShiftResult.info["relevance"]``.

An embedding backend is used only when ``embedding_model_path`` names a local
sentence-transformers model folder and the ``sentence-transformers`` package is installed; it
is loaded with the Hugging Face hub offline (nothing downloads) and scores are cosine
similarities. Any problem (no such folder, package missing, load error) falls back to BM25 with
a diagnostic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..schema.blocks import Block, BlockKind, ExcludedBlock, ShiftResult
from .core import shift_context

#: History messages (plus the current input) that form the relevance query.
RECALL_MESSAGES = 6
_CANDIDATE_KINDS = (BlockKind.LOREBOOK, BlockKind.MEMORY, BlockKind.SUMMARY)
_PRE_REMOVED = ("HIDDEN", "TOOL_RESULT_ORPHANED", "MANUAL_EXCLUDED")


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return [list(t) for t in bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)]


def bm25_scores(documents: Sequence[str], query: str) -> list[float]:
    """Okapi BM25 score of each document against ``query`` (``bm25s``); 0 for no shared term."""
    if not documents:
        return []
    import bm25s

    corpus = _tokenize(list(documents))
    if not any(corpus):
        return [0.0] * len(documents)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    vocab = {w for doc in corpus for w in doc}
    q = [w for w in _tokenize([query])[0] if w in vocab]
    if not q:
        return [0.0] * len(documents)
    return [float(s) for s in retriever.get_scores(q)]


def embedding_scores(documents: Sequence[str], query: str, model_path: str) -> list[float]:
    """Cosine similarity of each document to ``query`` with a *local* sentence-transformers model.

    Raises
    ------
    FileNotFoundError
        ``model_path`` is not a folder.
    ImportError
        ``sentence-transformers`` is not installed.
    """
    if not os.path.isdir(model_path):
        raise FileNotFoundError(f"no model folder at {model_path}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer  # optional dependency

    model = SentenceTransformer(model_path, local_files_only=True)
    vectors = model.encode([query, *documents], normalize_embeddings=True)
    q = vectors[0]
    return [float(v @ q) for v in vectors[1:]]


def recent_query(blocks: Sequence[Block], gone: set[str], n: int = RECALL_MESSAGES) -> str:
    """The text of the last ``n`` history messages and the current input (not removed ones)."""
    hist = [b for b in blocks if b.id not in gone and b.message is not None
            and (b.history or b.reason == "CURRENT_INPUT")]
    return "\n".join(b.text() for b in hist[-(n + 1):] if b.text())


def vector_recall_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int], budget: int,
                           options: dict[str, Any]) -> ShiftResult:
    """Fit ``blocks`` into ``budget``: examples, then least relevant lore/memory, then old history.

    ``options``: ``recall_messages`` (int, default :data:`RECALL_MESSAGES`), ``embedding_model_path``
    (str, optional), ``honor_manual`` (default ``True``). See the module docstring.
    """
    honor_manual = bool(options.get("honor_manual", True))
    base = shift_context(blocks, count_tokens, 2**62, honor_manual=honor_manual)  # removals any budget makes
    gone = {e.block_id for e in base.excluded if e.reason in _PRE_REMOVED}
    tokens = {b.id: int(count_tokens(b)) for b in blocks}
    candidates = [b for b in blocks if b.kind in _CANDIDATE_KINDS and not (b.protected or b.pinned)
                  and not b.history and b.id not in gone]
    diagnostics: list[str] = []
    scores: list[float] = []
    backend = "bm25"
    if candidates:
        query = recent_query(blocks, gone, int(options.get("recall_messages", RECALL_MESSAGES)))
        texts = [b.text() for b in candidates]
        path = options.get("embedding_model_path")
        if path:
            try:
                scores = embedding_scores(texts, query, str(path))
                backend = "embedding"
            except Exception as exc:
                diagnostics.append(f"vector-recall: embedding model {path!r} not used "
                                   f"({type(exc).__name__}: {exc}); ranked with BM25")
        if backend == "bm25":
            scores = bm25_scores(texts, query)
    score_of = {b.id: s for b, s in zip(candidates, scores)}
    pos = {b.id: i for i, b in enumerate(blocks)}
    ranked = sorted(candidates, key=lambda b: (score_of[b.id], b.priority, -pos[b.id]))
    rank_of = {b.id: len(ranked) - k for k, b in enumerate(ranked)}  # 1 = most relevant
    trace_updates = {b.id: {"relevance": round(score_of[b.id], 6), "relevance_rank": rank_of[b.id],
                            "relevance_backend": backend} for b in candidates}
    info = {"relevance": {b.id: round(score_of[b.id], 6) for b in candidates}, "relevance_backend": backend}

    plain = shift_context(blocks, count_tokens, budget, honor_manual=honor_manual)
    if plain.error or base.total_tokens <= budget:
        return plain.model_copy(update={"trace_updates": trace_updates, "info": info,
                                        "diagnostics": [*plain.diagnostics, *diagnostics]})
    total = base.total_tokens
    dropped: list[ExcludedBlock] = []
    examples = [b for b in blocks if b.kind == BlockKind.EXAMPLE and not (b.protected or b.pinned)
                and b.id not in gone]
    for b in examples:
        if total <= budget:
            break
        dropped.append(ExcludedBlock(block_id=b.id, reason="EXAMPLES_PUSHED_OUT", tokens=tokens[b.id]))
        total -= tokens[b.id]
    for b in ranked:
        if total <= budget:
            break
        dropped.append(ExcludedBlock(block_id=b.id, reason="LOW_RELEVANCE", tokens=tokens[b.id]))
        total -= tokens[b.id]
    dropped_ids = {e.block_id for e in dropped}
    rest = [b for b in blocks if b.id not in dropped_ids]
    result = shift_context(rest, count_tokens, budget, honor_manual=honor_manual)
    excluded = sorted([*result.excluded, *dropped], key=lambda e: pos[e.block_id])
    return result.model_copy(update={
        "excluded": excluded, "trace_updates": trace_updates, "info": info,
        "diagnostics": [*result.diagnostics, *diagnostics],
    })
