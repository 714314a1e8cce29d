"""``summarize`` strategy: fold the oldest history into a local extractive summary (SPEC §3).

Rules (issue 31 item 7 and issue 28 item 3: an honest summary):

1. Start from ``shift_context`` (with the user's manual exclusions, as ``manual`` does). If it
   removed no history, that is the answer (nothing needs folding).
2. The history that truncation removes is folded into the summary, which takes the room
   truncation leaves free (up to its cap, option ``summary_cap_tokens``, default
   :data:`SUMMARY_CAP_TOKENS`). Every block truncation keeps stays: a summary never costs a
   newer message its place, and the newest messages go last.
3. Only when that room holds no summary are the oldest *kept* history units folded too, one at a
   time, until one does or the room reaches ``summary_min_tokens`` (default a quarter of the
   cap, at least :data:`SUMMARY_MIN_TOKENS`). The current user input and the newest message
   (with its tool group) are never folded; a folded unit the summary has no line of comes back
   verbatim when it fits (newest first), so the kept history is always the newest messages.
4. A summary never costs more tokens than the messages it has lines of (what it replaced);
   its header names exactly those messages (``[Summary of messages #0–#2, #5 (extractive)]``),
   one ``- #i speaker: …`` line each. When no summary can be that cheap, the result is plain
   truncation, with ``info["fallback"] = "truncation"``, the reason, and a diagnostic.
5. Extractive and deterministic: sentences are split with ``pysbd`` and scored by TF-IDF
   centrality (scikit-learn ``TfidfVectorizer``; cosine similarity of each sentence to the mean
   of all folded sentences). Sentences holding an artifact (``engine.shifting.artifacts``: code,
   paths, errors, identifiers, settings, URLs, ...) rank first (a bonus of 1); sentences under
   six words less, and under :data:`MIN_SENTENCE_WORDS` words never (unless they hold an
   artifact); a sentence nearly repeating a chosen one (cosine > 0.8) is skipped. The
   best-scored sentences that fit are shown in chat order; ties go to the older sentence.
6. A folded block is ``truncated`` / ``SUMMARIZED`` (with the summary id) only if a line of it is
   in the summary; otherwise it is ``excluded`` with truncation's reason (``HISTORY_OLDEST_FIRST``,
   ``TOOL_GROUP_DROPPED`` or ``TOO_LARGE_FOR_BUDGET``).
7. The summary block (id :data:`SUMMARY_ID`, kind ``summary``, role ``system``) goes where the
   folded history was: before the first kept history message (or current input) after the
   oldest folded one. ``info["summary"]`` gives ``covers`` (message indices), ``tokens`` and
   ``replaced_tokens``.

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
#: Sentences shorter than this (in words) are never a summary line unless they hold an artifact.
MIN_SENTENCE_WORDS = 4
#: Cosine similarity above which a sentence repeats one already chosen (skipped).
REDUNDANT_SIMILARITY = 0.8
TAIL_UNITS = 200
SUMMARY_ID = "s0"
SUMMARY_SOURCE = "summary:auto"
#: Artifact kinds too common in stories to lift a sentence ("4 days", "30 s").
_WEAK_KINDS = frozenset({"quantity"})
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
        strong = any(a.kind not in _WEAK_KINDS for a in find_artifacts(s))
        out.append(b * min(1.0, words / 6) + (ARTIFACT_BONUS if strong else 0.0))
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

    Parameters
    ----------
    blocks:
        Prompt blocks in prompt order (as for ``shift_context``).
    count_tokens:
        Tokens of one block; must accept blocks it has not seen (the summary block).
    budget:
        Tokens available for the prompt.
    options:
        ``summary_cap_tokens`` (default :data:`SUMMARY_CAP_TOKENS`), ``summary_min_tokens`` (room
        worth folding kept messages for; default a quarter of the cap, at least
        :data:`SUMMARY_MIN_TOKENS`), ``honor_manual`` (default ``True``).

    Returns
    -------
    ShiftResult
        ``added`` holds the summary block (when one was made) and ``total_tokens`` counts it;
        ``info["summary"]`` says what it covers and costs, or ``info["fallback"]`` why there is
        none (see the module docstring, rules 1–7).
    """
    honor_manual = bool(options.get("honor_manual", True))
    cap = max(0, int(options.get("summary_cap_tokens", SUMMARY_CAP_TOKENS)))
    plain = shift_context(blocks, count_tokens, budget, honor_manual=honor_manual)
    if plain.error or cap <= 0 or not any(e.reason in _HISTORY_REASONS for e in plain.excluded):
        return plain
    plan = _plan(blocks, count_tokens, budget, plain)
    if plan is None:
        return plain
    want = min(cap, int(options.get("summary_min_tokens", max(SUMMARY_MIN_TOKENS, cap // 4))))
    summary: Block | None = None
    lined: set[int] = set()
    folded = list(plan.removed)
    room = plan.room
    for extra in range(len(plan.kept_units) + 1):  # fold kept units (oldest first) only to make room
        room = plan.room + sum(u.tokens for u in plan.kept_units[:extra])
        last_try = room >= want or extra == len(plan.kept_units)
        if room < SUMMARY_MIN_TOKENS and not last_try:
            continue
        folded = plan.removed + plan.kept_units[:extra]
        summary, lined = _build_summary(blocks, folded, count_tokens, min(cap, room), plan.tokens)
        if summary is not None or last_try:
            break
    if summary is None:
        if room < SUMMARY_MIN_TOKENS:
            why = (f"at most {room} tokens could be made free for it, fewer than the {SUMMARY_MIN_TOKENS} "
                   "a summary needs")
        else:
            why = (f"no summary of the oldest messages fits {min(cap, room)} tokens and costs fewer tokens than "
                   "the messages it would stand for")
        return plain.model_copy(update={"info": {"summary": None, "fallback": "truncation", "reason": why},
                                        "diagnostics": [*plain.diagnostics, f"summarize: no summary ({why}); "
                                                        "the oldest history was truncated instead"]})
    return _with_summary(blocks, plain, plan, folded, summary, lined, int(count_tokens(summary)), budget)


@dataclass
class _Plan:
    """What plain truncation left: history units it removed, foldable units it kept, its headroom (tokens)."""

    tokens: list[int]
    removed: list[_Unit]
    kept_units: list[_Unit]
    room: int


def _plan(blocks: Sequence[Block], count_tokens: Callable[[Block], int], budget: int,
          plain: ShiftResult) -> _Plan | None:
    """The foldable history after ``plain`` (``None``: nothing plain removed may be folded).

    Foldable: removable history units, never the current input nor the newest message (and
    its tool group). ``kept_units`` are the foldable units plain kept, oldest first.
    """
    tokens = [int(count_tokens(b)) for b in blocks]
    pos = {b.id: i for i, b in enumerate(blocks)}
    reason = {pos[e.block_id]: e.reason for e in plain.excluded}
    gone = {i for i, r in reason.items() if r in _PRE_REMOVED}
    units = _history_units(blocks, gone, tokens)
    newest = max((i for i, b in enumerate(blocks)
                  if b.history and b.reason != "CURRENT_INPUT" and i not in gone), default=None)
    units = [u for u in units if newest not in u.members and not any(
        blocks[m].reason == "CURRENT_INPUT" for m in u.members)]
    kept_units = [u for u in units if not any(m in reason for m in u.members)]
    # only what is older than every kept history message is folded: a unit truncation dropped for
    # being too large, newer than a message it kept, stays out with its reason (rule 3: the kept
    # history is always the newest messages, and the summary stands where the folded ones were)
    kept_history = [i for i, b in enumerate(blocks) if b.history and i not in reason and i not in gone
                    and b.reason != "CURRENT_INPUT"]
    first_kept = kept_history[0] if kept_history else len(blocks)
    removed = [u for u in units if all(reason.get(m) in _HISTORY_REASONS for m in u.members)
               and max(u.members) < first_kept]
    if not removed:
        return None
    return _Plan(tokens, removed, kept_units, budget - plain.total_tokens)


def _with_summary(blocks: Sequence[Block], plain: ShiftResult, plan: _Plan, folded: list[_Unit], summary: Block,
                  lined: set[int], summary_tokens: int, budget: int) -> ShiftResult:
    """``plain`` with ``folded`` replaced by ``summary``; folded kept units it has no line of come back if they fit.

    Only the newest such units come back (the kept history stays the newest messages), while the
    budget holds.
    """
    tokens, pos = plan.tokens, {b.id: i for i, b in enumerate(blocks)}
    kept_before = set(plain.kept)
    extra = [u for u in folded if any(blocks[m].id in kept_before for m in u.members)]
    free = plan.room + sum(u.tokens for u in extra) - summary_tokens
    back: set[int] = set()
    for u in reversed(extra):  # the newest unlined folded units return while they fit
        if any(m in lined for m in u.members) or u.tokens > free:
            break
        back.update(u.members)
        free -= u.tokens
    out = {m for u in folded for m in u.members} - back
    reason_of = {e.block_id: e.reason for e in plain.excluded}
    excluded = [e for e in plain.excluded if pos[e.block_id] not in out]
    truncated: list[TruncatedBlock] = []
    for m in sorted(out):
        b = blocks[m]
        if m in lined:
            truncated.append(TruncatedBlock(block_id=b.id, reason="SUMMARIZED", original_tokens=tokens[m],
                                            remaining_tokens=0, summary_id=SUMMARY_ID))
        else:
            excluded.append(ExcludedBlock(block_id=b.id, reason=reason_of.get(b.id, "HISTORY_OLDEST_FIRST"),
                                          tokens=tokens[m]))
    excluded.sort(key=lambda e: pos[e.block_id])
    kept = [k for k in plain.kept if pos[k] not in out]
    kept_set = set(kept)
    first_folded = min(out)
    anchor = next((b.id for b in blocks[first_folded + 1:] if b.id in kept_set and b.message is not None
                   and (b.history or b.reason == "CURRENT_INPUT")), None)
    if anchor is None:
        anchor = next((b.id for b in blocks[max(out) + 1:] if b.id in kept_set), None)
    covers = sorted(idx if (idx := blocks[m].message_index) is not None else m for m in lined)
    replaced = sum(tokens[m] for m in lined)
    return plain.model_copy(update={
        "kept": kept, "excluded": excluded, "truncated": truncated, "budget": budget,
        "total_tokens": sum(tokens[pos[k]] for k in kept) + summary_tokens,
        "kept_reasons": {k: v for k, v in plain.kept_reasons.items() if k in kept_set},
        "added": [summary], "added_before": {SUMMARY_ID: anchor},
        "info": {"summary": {"id": SUMMARY_ID, "covers": covers, "messages": len(covers),
                             "tokens": summary_tokens, "replaced_tokens": replaced}},
    })


def _covers_label(blocks: Sequence[Block], positions: Sequence[int]) -> str:
    """``#0–#2, #5`` for the messages at ``positions`` (runs of consecutive message indices joined)."""
    labels: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if run:
            labels.append(f"#{run[0]}" if len(run) == 1 else f"#{run[0]}–#{run[-1]}")
            run.clear()

    for m in sorted(positions):
        idx = blocks[m].message_index
        if idx is None:
            flush()
            labels.append(blocks[m].id)
        elif run and idx == run[-1] + 1:
            run.append(idx)
        else:
            flush()
            run.append(idx)
    flush()
    return ", ".join(labels)


def _build_summary(blocks: Sequence[Block], units: list[_Unit], count_tokens: Callable[[Block], int],
                   room: int, tokens: Sequence[int]) -> tuple[Block | None, set[int]]:
    """The best summary of ``units`` within ``room`` tokens, and the block positions it has lines of.

    The summary never costs more tokens than the blocks it has lines of (``tokens`` by position):
    lines are dropped, weakest first, until it does; ``(None, set())`` when no line can.
    """
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

    def render(chosen: list[int]) -> str:
        by_block: dict[int, list[str]] = {}
        for k in sorted(chosen):
            by_block.setdefault(cands[k][0], []).append(cands[k][2])
        lines = [f"[Summary of messages {_covers_label(blocks, list(by_block))} (extractive)]"]
        for m in sorted(by_block):
            b = blocks[m]
            lines.append(f"- {_label(b)} {_speaker(b)}: " + " … ".join(by_block[m]))
        return "\n".join(lines)

    def make(chosen: list[int]) -> tuple[Block, set[int]]:
        lined = {cands[k][0] for k in chosen}
        block = Block(id=SUMMARY_ID, kind=BlockKind.SUMMARY, role="system", source=SUMMARY_SOURCE,
                      message=ChatMessage(role="system", content=render(chosen)), reason="SUMMARY",
                      trace={"folded": [blocks[m].id for m in sorted(lined)]})
        return block, lined

    def ok(block: Block, lined: set[int]) -> bool:
        cost = count_tokens(block)
        return cost <= room and cost <= sum(tokens[m] for m in lined)

    # greedy by score with a cheap size estimate, then exact checks dropping the weakest line
    chosen: list[int] = []
    estimate = 24
    for k in ranked:
        if len(cands[k][2].split()) < MIN_SENTENCE_WORDS and not find_artifacts(cands[k][2]):
            continue  # "Sure." stands for nothing
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
        block, lined = make(chosen)
        if ok(block, lined):
            return block, lined
        chosen.pop()  # the lowest-scored sentence goes first
    # nothing fits even the estimate: try the single best sentences
    for k in ranked[:5]:
        if len(cands[k][2].split()) < MIN_SENTENCE_WORDS and not find_artifacts(cands[k][2]):
            continue
        block, lined = make([k])
        if ok(block, lined):
            return block, lined
    return None, set()
