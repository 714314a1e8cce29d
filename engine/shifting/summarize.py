"""``summarize`` strategy: fold the oldest history into a local extractive summary (SPEC §3).

Rules:

1. Start from ``shift_context`` (with the user's manual exclusions, as ``manual`` does). If it
   removed no history, that is the answer (nothing needs folding).
2. Fold only as much of the *oldest* removable history as is needed: the smallest prefix of
   history units (a tool group is one unit) such that everything newer fits next to a summary of
   at least a quarter of its cap (option ``summary_min_tokens``; found by bisection; ``shift_context`` is the oracle, so
   example dialogue still goes before history and lorebook/memory blocks after it). The current
   user input and the newest message are never folded. A unit too large to ever fit verbatim
   (``TOO_LARGE_FOR_BUDGET`` under ``truncate``) can still be folded.
3. The summary takes all the room the kept blocks leave, up to its cap (option
   ``summary_cap_tokens``, default :data:`SUMMARY_CAP_TOKENS`): the final prompt uses the budget.
4. Extractive and deterministic: sentences are split with ``pysbd`` and scored by TF-IDF
   centrality (scikit-learn ``TfidfVectorizer``; cosine similarity of each sentence to the mean
   of all folded sentences). Sentences holding code, file paths, error lines or stack traces
   (``engine.shifting.artifacts``) rank first (a bonus of 1), sentences under six words less; a
   sentence nearly repeating a chosen one (cosine > 0.8) is skipped. The best-scored sentences that fit are kept
   and shown in chat order, one line per message, each line naming its source message
   (``- #12 assistant: ...``); ties go to the older sentence.
5. A folded block is ``truncated`` / ``SUMMARIZED`` (with the summary id) only if a line of it is
   in the summary; otherwise it is ``excluded`` with its real reason (``HISTORY_OLDEST_FIRST``,
   ``TOOL_GROUP_DROPPED`` or ``TOO_LARGE_FOR_BUDGET``).
6. The summary block (id :data:`SUMMARY_ID`, kind ``summary``, role ``system``) is placed
   immediately before the current user input; a chat without one gets it where the folded
   history was (before the first newer kept block).

For very long folds only the oldest :data:`HEAD_UNITS` and the newest :data:`TAIL_UNITS` folded
units are read for sentences (the summary holds a few dozen lines at most); the rest are
excluded with their reason, never reported as summarized.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..schema.blocks import Block, BlockKind, ExcludedBlock, ShiftResult, TruncatedBlock
from ..schema.messages import ChatMessage
from .artifacts import find_artifacts
from .core import shift_context
from .groups import find_tool_groups

#: Default cap of the summary block, in tokens (option ``summary_cap_tokens``).
SUMMARY_CAP_TOKENS = 400
#: Smallest room worth making for a summary (header and one line), in tokens; the room made is
#: at least a quarter of the cap (option ``summary_min_tokens`` overrides).
SUMMARY_MIN_TOKENS = 40
#: Longest sentence taken as it is, in characters (longer ones are cut with "…").
SENTENCE_CHARS = 300
#: Characters of one message read for sentences.
MESSAGE_CHARS = 6000
HEAD_UNITS = 40
#: Added to the score of a sentence holding code, a path, an error line or a trace.
ARTIFACT_BONUS = 1.0
#: Cosine similarity above which a sentence repeats one already chosen (skipped).
REDUNDANT_SIMILARITY = 0.8
TAIL_UNITS = 200
SUMMARY_ID = "s0"
SUMMARY_SOURCE = "summary:auto"
_PRE_REMOVED = ("HIDDEN", "TOOL_RESULT_ORPHANED", "MANUAL_EXCLUDED", "TOOL_PAIR_INCOMPLETE")
_HISTORY_REASONS = ("HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED", "TOO_LARGE_FOR_BUDGET")


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (``pysbd``), paragraph by paragraph, whitespace squashed.

    Fenced code blocks stay whole (one "sentence"); at most :data:`MESSAGE_CHARS` characters
    are read; a sentence longer than :data:`SENTENCE_CHARS` is cut with "…".
    """
    text = text[:MESSAGE_CHARS]
    out: list[str] = []
    pos = 0
    pieces: list[tuple[bool, str]] = []
    for art in find_artifacts(text):
        if art.kind in ("code", "trace"):
            at = text.find(art.text, pos)
            if at < 0:
                continue
            pieces.append((False, text[pos:at]))
            pieces.append((True, art.text))
            pos = at + len(art.text)
    pieces.append((False, text[pos:]))
    for whole, piece in pieces:
        if whole:
            out.append(piece if len(piece) <= SENTENCE_CHARS else piece[: SENTENCE_CHARS - 1] + "…")
            continue
        for para in piece.split("\n"):
            para = " ".join(para.split())
            if not para:
                continue
            try:
                sentences = _segmenter().segment(para)
            except Exception:  # pysbd can fail on odd input: keep the paragraph whole
                sentences = [para]
            for s in sentences:
                s = " ".join(str(s).split())
                if s:
                    out.append(s if len(s) <= SENTENCE_CHARS else s[: SENTENCE_CHARS - 1] + "…")
    return out


def _tfidf(sentences: Sequence[str]) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        return TfidfVectorizer(token_pattern=r"(?u)\b\w\w+\b", sublinear_tf=True).fit_transform(sentences)
    except ValueError:  # empty vocabulary
        return None


def score_sentences(sentences: Sequence[str], matrix: Any = None) -> list[float]:
    """TF-IDF centrality of each sentence (cosine to the mean sentence vector), in [0, 2].

    Sentences holding an artifact (``find_artifacts``) get :data:`ARTIFACT_BONUS` added (they
    rank above every plain sentence); sentences under six words
    are scaled down by their length (a bare "Hi!" is central to nothing). Deterministic;
    sentences without any word score 0. ``matrix`` is the rows of :func:`_tfidf` when the
    caller already has them.
    """
    if not sentences:
        return []
    if matrix is None:
        matrix = _tfidf(sentences)
    if matrix is None:
        base = [0.0] * len(sentences)
    else:
        centroid = matrix.mean(axis=0)
        sims = matrix @ centroid.T
        norm = float((centroid @ centroid.T)[0, 0]) ** 0.5 or 1.0
        base = [float(v) / norm for v in sims.A1]
    out = []
    for s, b in zip(sentences, base):
        words = len(s.split())
        out.append(b * min(1.0, words / 6) + (ARTIFACT_BONUS if find_artifacts(s) else 0.0))
    return out


def _speaker(block: Block) -> str:
    msg = block.message
    if msg is None:
        return block.role
    return msg.name or ("tool result" if msg.role in ("tool", "function") else msg.role)


def _message_sentences(block: Block) -> list[str]:
    msg = block.message
    if msg is None:
        return []
    out = split_sentences(msg.text())
    for call in msg.tool_calls or []:
        out.append(f"called {call.function.name}({call.function.arguments[:200]})")
    return out


def _label(block: Block) -> str:
    return f"#{block.message_index}" if block.message_index is not None else block.id


@dataclass
class _Unit:
    members: list[int]
    tokens: int


def _history_units(blocks: Sequence[Block], gone: set[int], tokens: list[int]) -> list[_Unit]:
    """Removable history units (tool groups whole) in order of their first member."""
    groups = find_tool_groups(blocks)
    units: list[_Unit] = []
    by_group: dict[str, _Unit] = {}
    blocked: set[int] = set()  # unit index that holds a protected, non-history or removed member
    for i, b in enumerate(blocks):
        gid = groups.group_of[i]
        if gid is not None and gid in by_group:
            unit = by_group[gid]
            unit.members.append(i)
            unit.tokens += tokens[i]
        else:
            unit = _Unit([i], tokens[i])
            units.append(unit)
            if gid is not None:
                by_group[gid] = unit
        if i in gone or b.protected or b.pinned or not b.history:
            blocked.add(id(unit))
    return [u for u in units if id(u) not in blocked]


def summarize_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int], budget: int,
                       options: dict[str, Any]) -> ShiftResult:
    """Fit ``blocks`` into ``budget`` tokens, folding the oldest history into one summary block.

    ``options``: ``summary_cap_tokens`` (default :data:`SUMMARY_CAP_TOKENS`), ``summary_min_tokens``
    (room made for the summary at least; default a quarter of the cap, at least
    :data:`SUMMARY_MIN_TOKENS`), ``honor_manual`` (default ``True``). ``count_tokens`` must accept blocks it has not seen (the summary block).
    Returns a :class:`ShiftResult` whose ``added`` holds the summary block (when one was made)
    and whose ``total_tokens`` counts it.
    """
    honor_manual = bool(options.get("honor_manual", True))
    cap = max(0, int(options.get("summary_cap_tokens", SUMMARY_CAP_TOKENS)))
    plain = shift_context(blocks, count_tokens, budget, honor_manual=honor_manual)
    if plain.error or cap <= 0 or not any(e.reason in _HISTORY_REASONS for e in plain.excluded):
        return plain
    tokens = [int(count_tokens(b)) for b in blocks]
    pos = {b.id: i for i, b in enumerate(blocks)}
    plain_reason = {e.block_id: e.reason for e in plain.excluded}
    gone = {pos[e.block_id] for e in plain.excluded if e.reason in _PRE_REMOVED}
    units = _history_units(blocks, gone, tokens)
    # never fold the current input or the newest message (nor its tool group)
    newest = max((i for i, b in enumerate(blocks)
                  if b.history and b.reason != "CURRENT_INPUT" and i not in gone), default=None)
    units = [u for u in units if newest not in u.members and not any(
        blocks[m].reason == "CURRENT_INPUT" for m in u.members)]
    if not units:
        return plain
    min_room = min(cap, int(options.get("summary_min_tokens", max(SUMMARY_MIN_TOKENS, cap // 4))))

    def rest_after(k: int) -> tuple[list[Block], ShiftResult]:
        folded = {m for u in units[:k] for m in u.members}
        rest = [b for i, b in enumerate(blocks) if i not in folded]
        return rest, shift_context(rest, count_tokens, budget - min_room, honor_manual=honor_manual)

    def fits(k: int) -> bool:
        _, res = rest_after(k)
        if res.error:
            return False
        folded_later = {m for u in units[k:] for m in u.members}
        return not any(pos[e.block_id] in folded_later for e in res.excluded)

    if not fits(len(units)):
        return plain
    lo, hi = 1, len(units)
    while lo < hi:  # smallest k that fits (fits is monotone in k)
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    folded_units = units[:lo]
    _rest, rest_result = rest_after(lo)
    room = min(cap, budget - rest_result.total_tokens)
    summary, lined = _build_summary(blocks, folded_units, count_tokens, room)
    folded = [m for u in folded_units for m in u.members]
    if summary is None:
        lined = set()
    excluded = list(rest_result.excluded)
    truncated: list[TruncatedBlock] = []
    for m in folded:
        b = blocks[m]
        if m in lined:
            truncated.append(TruncatedBlock(block_id=b.id, reason="SUMMARIZED", original_tokens=tokens[m],
                                            remaining_tokens=0, summary_id=SUMMARY_ID))
        else:
            reason = plain_reason.get(b.id, "HISTORY_OLDEST_FIRST")
            if reason not in _HISTORY_REASONS:
                reason = "HISTORY_OLDEST_FIRST"
            excluded.append(ExcludedBlock(block_id=b.id, reason=reason, tokens=tokens[m]))
    excluded.sort(key=lambda e: pos[e.block_id])
    kept_ids = set(rest_result.kept)
    if summary is None:
        return rest_result.model_copy(update={"excluded": excluded, "budget": budget})
    anchor = next((b.id for b in blocks if b.reason == "CURRENT_INPUT" and b.id in kept_ids), None)
    if anchor is None:
        last = max(folded)
        anchor = next((b.id for b in blocks[last + 1:] if b.id in kept_ids), None)
    summary_tokens = count_tokens(summary)
    return rest_result.model_copy(update={
        "excluded": excluded,
        "truncated": truncated,
        "total_tokens": rest_result.total_tokens + summary_tokens,
        "budget": budget,
        "added": [summary],
        "added_before": {SUMMARY_ID: anchor},
    })


def _build_summary(blocks: Sequence[Block], units: list[_Unit], count_tokens: Callable[[Block], int],
                   room: int) -> tuple[Block | None, set[int]]:
    """The best summary of ``units`` within ``room`` tokens, and the block positions it has lines of."""
    if room <= 0:
        return None, set()
    read = units if len(units) <= HEAD_UNITS + TAIL_UNITS else units[:HEAD_UNITS] + units[-TAIL_UNITS:]
    cands: list[tuple[int, int, str]] = []  # (block position, order, sentence)
    for u in read:
        for m in u.members:
            for s in _message_sentences(blocks[m]):
                cands.append((m, len(cands), s))
    if not cands:
        return None, set()
    texts = [c[2] for c in cands]
    matrix = _tfidf(texts)
    scores = score_sentences(texts, matrix)
    ranked = sorted(range(len(cands)), key=lambda k: (-scores[k], k))
    first = blocks[units[0].members[0]]
    last = blocks[units[-1].members[-1]]
    n_messages = sum(len(u.members) for u in units)
    header = (f"[Summary of {n_messages} earlier messages, {_label(first)}–{_label(last)} "
              f"(extractive, best sentences)]")

    def render(chosen: list[int]) -> str:
        lines: list[str] = [header]
        by_block: dict[int, list[str]] = {}
        for k in sorted(chosen):
            by_block.setdefault(cands[k][0], []).append(cands[k][2])
        for m in sorted(by_block):
            b = blocks[m]
            lines.append(f"- {_label(b)} {_speaker(b)}: " + " … ".join(by_block[m]))
        return "\n".join(lines)

    def make(text: str) -> Block:
        return Block(id=SUMMARY_ID, kind=BlockKind.SUMMARY, role="system", source=SUMMARY_SOURCE,
                     message=ChatMessage(role="system", content=text), reason="SUMMARY",
                     trace={"folded": [blocks[m].id for u in units for m in u.members]})

    # greedy by score with a cheap size estimate, then exact checks dropping the weakest line
    chosen: list[int] = []
    estimate = len(header) // 3 + 8
    for k in ranked:
        cost = (len(cands[k][2]) + 24) // 3 + 1
        if estimate + cost > room * 1.15:
            continue
        if matrix is not None and chosen:  # skip near-repeats of a chosen sentence
            sims = (matrix[chosen] @ matrix[k].T).toarray().ravel()
            if float(sims.max()) > REDUNDANT_SIMILARITY:
                continue
        chosen.append(k)
        estimate += cost
    while chosen:
        block = make(render(chosen))
        if count_tokens(block) <= room:
            return block, {cands[k][0] for k in chosen}
        chosen.pop()  # the lowest-scored sentence goes first
    # nothing fits even the estimate: try the single best sentence
    for k in ranked[:5]:
        block = make(render([k]))
        if count_tokens(block) <= room:
            return block, {cands[k][0]}
    return None, set()
