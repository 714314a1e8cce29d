"""``summarize`` strategy: like ``truncate``, but removed history is folded into a local summary.

SPEC §3: the removed history is folded into an extractive summary block placed immediately
before the current user input (when the chat has none: right after the folded history, before
the first newer kept block); the folded blocks are ``truncated`` (reason ``SUMMARIZED``,
with their original tokens and the summary id), not excluded; the summary has its own token
cap and fits the budget.

The summary is extractive and local (no LLM): for each folded message, in chat order, the
speaker and the first sentence of its text (sentences split with ``pysbd``), trimmed to
``SUMMARY_LINE_CHARS``. If the summary exceeds its cap, the oldest lines go first. Blocks the
budget never allowed (too large to ever fit) stay excluded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from ..schema.blocks import Block, BlockKind, ShiftResult, TruncatedBlock
from ..schema.messages import ChatMessage
from .core import shift_context, unsendable_positions

#: Default cap of the summary block, in tokens (option ``summary_cap_tokens``).
SUMMARY_CAP_TOKENS = 400
#: Longest line taken from one folded message, in characters.
SUMMARY_LINE_CHARS = 240
SUMMARY_ID = "s0"
SUMMARY_SOURCE = "summary:auto"
_FOLDABLE = ("HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED")


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    import pysbd

    return pysbd.Segmenter(language="en", clean=False)


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return ""
    head = text[: SUMMARY_LINE_CHARS * 2]
    try:
        sentences = _segmenter().segment(head)
    except Exception:  # pysbd can fail on odd input; fall back to the raw head
        sentences = [head]
    first = (sentences[0] if sentences else head).strip()
    return first if len(first) <= SUMMARY_LINE_CHARS else first[: SUMMARY_LINE_CHARS - 1] + "…"


def _line(block: Block) -> str:
    msg = block.message
    if msg is None:
        return ""
    who = msg.name or msg.role
    if msg.tool_calls:
        names = ", ".join(c.function.name for c in msg.tool_calls)
        return f"- {who} called {names}"
    if msg.role in ("tool", "function"):
        return f"- tool result: {_first_sentence(msg.text())}"
    sentence = _first_sentence(msg.text())
    return f"- {who}: {sentence}" if sentence else ""


def summarize_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int], budget: int,
                       options: dict[str, Any]) -> ShiftResult:
    """Fit ``blocks`` into ``budget`` tokens, folding removed history into one summary block.

    ``options``: ``summary_cap_tokens`` (default :data:`SUMMARY_CAP_TOKENS`).
    ``count_tokens`` must accept blocks it has not seen (the summary block).
    """
    honor_manual = bool(options.get("honor_manual", True))
    plain = shift_context(blocks, count_tokens, budget, honor_manual=honor_manual)
    if plain.error or not any(e.reason in _FOLDABLE for e in plain.excluded):
        return plain
    cap = int(options.get("summary_cap_tokens", SUMMARY_CAP_TOKENS))
    by_id = {b.id: b for b in blocks}
    # Make room for the summary: shift against a smaller budget, then fold what left.
    reserve = min(cap, max(budget - plain.protected_tokens, 0) // 2)
    result = shift_context(blocks, count_tokens, budget - reserve, honor_manual=honor_manual) if reserve else plain
    # A member of a tool group that left because the writer hid or excluded one of its
    # messages is not folded either: its text must not reach the model another way.
    never = {blocks[i].id for i in unsendable_positions(blocks, honor_manual=honor_manual)}
    folded = [e for e in result.excluded if e.reason in _FOLDABLE and e.block_id not in never]
    if result.error or not folded or reserve <= 0:
        return plain
    lines = [ln for ln in (_line(by_id[e.block_id]) for e in folded) if ln]
    header = f"[Summary of {len(folded)} earlier messages]"
    room = budget - result.total_tokens
    summary: Block | None = None
    while lines:
        text = "\n".join([header, *lines])
        candidate = Block(id=SUMMARY_ID, kind=BlockKind.SUMMARY, role="system", source=SUMMARY_SOURCE,
                          message=ChatMessage(role="system", content=text), reason="SUMMARY",
                          trace={"folded": [e.block_id for e in folded]})
        if count_tokens(candidate) <= min(room, cap):
            summary = candidate
            break
        lines.pop(0)  # the oldest line goes first
    if summary is None:
        return plain
    kept_ids = set(result.kept)
    current = next((b.id for b in blocks if b.reason == "CURRENT_INPUT" and b.id in kept_ids), None)
    if current is None:
        # No current user input (the chat ends on another role): the summary takes the place of
        # the history it folds, before the first kept block that follows it, never after newer
        # messages (``None`` = the end, when nothing kept follows the folded history).
        folded_ids = {e.block_id for e in folded}
        last = max(i for i, b in enumerate(blocks) if b.id in folded_ids)
        current = next((b.id for b in blocks[last + 1:] if b.id in kept_ids), None)
    truncated = [TruncatedBlock(block_id=e.block_id, reason="SUMMARIZED", original_tokens=e.tokens,
                                remaining_tokens=0, summary_id=SUMMARY_ID) for e in folded]
    folded_ids = {e.block_id for e in folded}
    return result.model_copy(update={
        "excluded": [e for e in result.excluded if e.block_id not in folded_ids],
        "truncated": truncated,
        "total_tokens": result.total_tokens + count_tokens(summary),
        "budget": budget,
        "added": [summary],
        "added_before": {SUMMARY_ID: current},
    })
