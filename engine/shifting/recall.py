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

A semantic backend (issue 28 item 4) is used when option ``embedding_model`` (or its older
name ``embedding_model_path``) names a ``model2vec`` static model: a local folder, or a model id
already in the user's model cache (``engine.shifting.embedding``; nothing is ever downloaded
during a preview). Scores are then cosine similarities of the static embeddings, and each
block's trace says ``"relevance_backend": "model2vec"`` with ``"relevance_model"``. Any problem
(no such folder, a model not downloaded, a broken folder) falls back to BM25 with a diagnostic
saying why; BM25 stays the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..schema.blocks import Block, BlockKind, ExcludedBlock, ShiftResult
from .core import shift_context
from .embedding import BACKEND as EMBEDDING_BACKEND
from .embedding import embedding_scores

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


def recent_query(blocks: Sequence[Block], gone: set[str], n: int = RECALL_MESSAGES) -> str:
    """The text of the last ``n`` history messages and the current input (not removed ones)."""
    hist = [b for b in blocks if b.id not in gone and b.message is not None
            and (b.history or b.reason == "CURRENT_INPUT")]
    return "\n".join(b.text() for b in hist[-(n + 1):] if b.text())


def vector_recall_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int], budget: int,
                           options: dict[str, Any]) -> ShiftResult:
    """Fit ``blocks`` into ``budget``: examples, then least relevant lore/memory, then old history.

    ``options``: ``recall_messages`` (int, default :data:`RECALL_MESSAGES`), ``embedding_model``
    (a model2vec model folder or cached model id, optional; ``embedding_model_path`` is the older
    name), ``honor_manual`` (default ``True``). See the module docstring.
    """
    honor_manual = bool(options.get("honor_manual", True))
    base = shift_context(blocks, count_tokens, 2**62, honor_manual=honor_manual)  # removals any budget makes
    gone = {e.block_id for e in base.excluded if e.reason in _PRE_REMOVED}
    tokens = {b.id: int(count_tokens(b)) for b in blocks}
    candidates = [b for b in blocks if b.kind in _CANDIDATE_KINDS and not (b.protected or b.pinned)
                  and not b.history and b.id not in gone]
    diagnostics: list[str] = []
    scores: list[float] = []
    backend, model = "bm25", None
    if candidates:
        query = recent_query(blocks, gone, int(options.get("recall_messages", RECALL_MESSAGES)))
        texts = [b.text() for b in candidates]
        ref = options.get("embedding_model") or options.get("embedding_model_path")
        if ref:
            try:
                scores = embedding_scores(texts, query, str(ref))
                backend, model = EMBEDDING_BACKEND, str(ref)
            except Exception as exc:  # any model problem: BM25, and say why
                diagnostics.append(f"vector-recall: embedding model {ref!r} not used ({exc}); ranked with BM25")
        if backend == "bm25":
            scores = bm25_scores(texts, query)
    score_of = {b.id: s for b, s in zip(candidates, scores)}
    pos = {b.id: i for i, b in enumerate(blocks)}
    ranked = sorted(candidates, key=lambda b: (score_of[b.id], b.priority, -pos[b.id]))
    rank_of = {b.id: len(ranked) - k for k, b in enumerate(ranked)}  # 1 = most relevant
    extra = {"relevance_model": model} if model else {}
    trace_updates = {b.id: {"relevance": round(score_of[b.id], 6), "relevance_rank": rank_of[b.id],
                            "relevance_backend": backend, **extra} for b in candidates}
    info = {"relevance": {b.id: round(score_of[b.id], 6) for b in candidates}, "relevance_backend": backend, **extra}

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
