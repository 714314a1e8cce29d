"""The ``compact`` strategy: reuse a stored LLM summary, plan the next compaction, truncate (SPEC §4).

A strategy never calls a provider: at generation ``engine.compaction.run`` writes the summary
(when this strategy's plan says to fire) and stores it with the chat; previews and the next
generations reuse it. Steps, for blocks in prompt order:

1. **Stored summary.** If the chat has one and every message it covers is unchanged
   (fingerprints), the covered history blocks become ``truncated`` / ``SUMMARIZED`` and one
   summary block (kind ``summary``, role ``system``, source ``summary:compaction``) takes their
   place, before the first kept block after them. A tool group is folded only when all its
   members are covered. A stale summary is not used (warning).
2. **Plan.** ``prompt = kept tokens + summary + reply priming``. Compaction fires when
   ``prompt ≥ trigger`` and there is history older than the newest ``keep_recent`` messages
   that the summary does not yet cover (a tool group reaching into the window stays in it),
   unless auto-compaction stopped after ``MAX_FAILURES`` failures in a row, or the last
   compaction stalled (did not get below the trigger) and summarizing the new candidates could
   not get below it either (no re-firing without progress).
3. **Fit.** The summary is used only if it costs none of the newest ``keep_recent`` messages
   its place (else it is left out with a warning, and those messages are sent). Below the trigger, the blocks are fitted to the budget as ``manual`` does (right
   after a compaction, to the target). At or above it (compaction pending, failed, stopped or without progress), the prompt is truncated
   until the *target* holds (keeping tool groups whole; the summary block is kept like a
   protected block when it fits), so the next turn does not start at the trigger again; when
   the target cannot hold (protected blocks above it) the budget is used.

``ShiftResult.info`` reports: ``trigger``, ``target`` (prompt tokens), ``prompt_tokens`` (with
the stored summary, before fitting), ``fire``, ``reason`` (``below_trigger``, ``pending``,
``disabled``, ``no_candidates``, ``no_progress``), ``candidates`` (message indices to
summarize), ``candidate_tokens``, ``summary`` (the one in use), ``truncated_to_target`` and
``warnings``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..schema.blocks import Block, BlockKind, ExcludedBlock, ShiftResult, TruncatedBlock
from ..schema.messages import ChatMessage
from ..shifting.core import shift_context
from ..shifting.groups import find_tool_groups
from ..shifting.registry import ContextStrategyRegistry
from .options import HOST_KEY, MAX_FAILURES, CompactionOptions, thresholds
from .state import CompactionState, CompactionSummary, covers_label, message_fingerprint

SUMMARY_BLOCK_ID = "sc0"
#: Option the generation sets on the prepares right after a compaction: fit to the target even
#: below the trigger (compaction ends at ≤ target_percent of the limit). Never stored.
JUST_COMPACTED = "_just_compacted"
SUMMARY_SOURCE = "summary:compaction"
_PRE_REMOVED = ("HIDDEN", "TOOL_RESULT_ORPHANED", "MANUAL_EXCLUDED")


def summary_block(summary: CompactionSummary) -> Block:
    """The prompt block for a stored summary: a header naming exactly the messages it covers, then its text.

    The header lists the covered indices as runs (``messages #0–#4, #6–#9``): a pinned message
    inside the range, or one the summarizer never saw, is not claimed.
    """
    header = f"[Summary of the earlier conversation, messages {covers_label(summary.covered)}]"
    return Block(id=SUMMARY_BLOCK_ID, kind=BlockKind.SUMMARY, role="system", source=SUMMARY_SOURCE,
                 message=ChatMessage(role="system", content=f"{header}\n{summary.text}"), reason="SUMMARY",
                 trace={"summary_id": summary.id, "covers": [summary.first, summary.last],
                        "messages": len(summary.covered), "model": summary.model})


def _units(blocks: Sequence[Block]) -> list[list[int]]:
    """Positions grouped into units (a tool group is one unit), in order of first member."""
    groups = find_tool_groups(blocks)
    out: list[list[int]] = []
    by_group: dict[str, list[int]] = {}
    for i in range(len(blocks)):
        g = groups.group_of[i]
        if g is not None and g in by_group:
            by_group[g].append(i)
        else:
            unit = [i]
            out.append(unit)
            if g is not None:
                by_group[g] = unit
    return out


def _is_message(block: Block) -> bool:
    return block.message is not None and (block.history or block.reason == "CURRENT_INPUT")


def compact_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int], budget: int,
                     options: dict[str, Any]) -> ShiftResult:
    """Apply the stored summary, plan the next compaction, and fit (see the module docstring).

    ``options``: the compaction settings (``CompactionOptions``) and the host's ``_host``
    values (``context_limit``, ``prompt_overhead``, ``compaction`` state). Without a context
    limit (a caller outside the pipeline) the budget stands in for it.

    Raises ``SettingsError(INVALID_SETTINGS)`` for bad compaction options.
    """
    opts = CompactionOptions.from_options(options)
    host = options.get(HOST_KEY) or {}
    limit = int(host.get("context_limit") or budget)
    overhead = int(host.get("prompt_overhead") or 0)
    state = CompactionState.from_raw(host.get("compaction"))
    trigger, target = thresholds(limit, opts)
    cap = opts.cap_for(limit)
    warnings: list[str] = []

    base = shift_context(blocks, count_tokens, 2**62, honor_manual=True)  # what any budget removes
    gone = {e.block_id for e in base.excluded if e.reason in _PRE_REMOVED}
    tokens = {b.id: int(count_tokens(b)) for b in blocks}
    units = _units(blocks)

    # 1. the stored summary
    summary, folded = _stored_summary(state.summary, blocks, units, gone, warnings)
    sblock = summary_block(summary) if summary is not None else None
    sblock_tokens = int(count_tokens(sblock)) if sblock is not None else 0

    # 2. plan
    live = [i for i, b in enumerate(blocks) if b.id not in gone and i not in folded]
    prompt = sum(tokens[blocks[i].id] for i in live) + sblock_tokens + overhead
    candidates = _candidates(blocks, units, live, folded, gone, opts.keep_recent)
    candidate_tokens = sum(tokens[blocks[i].id] for i in candidates)
    reason = _plan_reason(prompt, trigger, state, candidate_tokens if candidates else None, cap, warnings)
    fire = reason == "pending"

    # 3. fit
    to_target = prompt >= trigger or bool(options.get(JUST_COMPACTED))  # compaction ends at the target (SPEC §4)
    result, truncated_to_target = _fit(blocks, folded, sblock, count_tokens, budget,
                                       target - overhead if to_target else None)
    if sblock is not None and not result.error and _costs_recent(blocks, result, live, gone, opts.keep_recent):
        # the summary never costs one of the newest messages its place (issue 28 item 3)
        plain, plain_to_target = _fit(blocks, set(), None, count_tokens, budget,
                                      target - overhead if to_target else None)
        if not plain.error and not _costs_recent(blocks, plain, live, gone, opts.keep_recent):
            warnings.append("the compaction summary would push out one of the newest messages; not used")
            sblock, folded, summary, sblock_tokens = None, set(), None, 0
            result, truncated_to_target = plain, plain_to_target
    if result.error and sblock is not None:  # the summary itself does not fit: send history instead
        warnings.append("the compaction summary does not fit the budget next to the protected blocks; not used")
        sblock, folded, summary, sblock_tokens = None, set(), None, 0
        result = shift_context(blocks, count_tokens, budget, honor_manual=True)

    info: dict[str, Any] = {
        "trigger": trigger, "target": target, "context_limit": limit, "prompt_tokens": prompt,
        "fire": fire, "reason": reason, "candidates": [blocks[i].message_index for i in candidates],
        "candidate_block_ids": [blocks[i].id for i in candidates], "candidate_tokens": candidate_tokens,
        "keep_recent": opts.keep_recent, "summary_cap_tokens": cap, "failures": state.failures,
        "truncated_to_target": truncated_to_target and any(
            e.reason not in _PRE_REMOVED for e in result.excluded),
        "summary": None, "warnings": warnings,
    }
    if sblock is None or summary is None:
        return result.model_copy(update={"budget": budget, "info": info})
    info["summary"] = {"id": summary.id, "block_id": SUMMARY_BLOCK_ID, "covers": [summary.first, summary.last],
                       "messages": len(summary.covered), "tokens": sblock_tokens,
                       "replaced_tokens": sum(tokens[blocks[i].id] for i in folded)}
    return _with_summary_block(result, blocks, folded, sblock, sblock_tokens, tokens, budget, info)


def _stored_summary(summary: CompactionSummary | None, blocks: Sequence[Block], units: list[list[int]],
                    gone: set[str], warnings: list[str]) -> tuple[CompactionSummary | None, set[int]]:
    """The stored summary if it still applies, and the positions it folds (whole units of unchanged history).

    A summary over messages that changed or are gone is not used (a warning says so); one that
    folds nothing is not used either.
    """
    if summary is None:
        return None, set()
    messages_by_index = {b.message_index: b.message for b in blocks if b.message_index is not None and b.message}
    stale = [i for i in summary.covered if i not in messages_by_index
             or message_fingerprint(messages_by_index[i]) != summary.fingerprints.get(str(i))]
    if stale:
        warnings.append(f"the stored compaction summary covers messages that changed or are gone "
                        f"({', '.join(f'#{i}' for i in stale[:5])}{'…' if len(stale) > 5 else ''}); "
                        "it is not used")
        return None, set()
    covered = set(summary.covered)
    folded: set[int] = set()
    for unit in units:
        members = [blocks[m] for m in unit]
        if all(b.history and b.message_index in covered and not (b.protected or b.pinned)
               and b.id not in gone for b in members):
            folded.update(unit)
    return (summary, folded) if folded else (None, folded)


def _candidates(blocks: Sequence[Block], units: list[list[int]], live: list[int], folded: set[int],
                gone: set[str], keep_recent: int) -> list[int]:
    """Positions the next summary may replace: whole units of old, unprotected history outside the recent window."""
    message_pos = [i for i in live if _is_message(blocks[i])]
    window_start = message_pos[-keep_recent] if 0 < keep_recent <= len(message_pos) else (
        0 if keep_recent > 0 else len(blocks))
    candidates: list[int] = []
    for unit in units:
        if any(m in folded or blocks[m].id in gone for m in unit):
            continue
        if max(unit) >= window_start:
            continue  # reaches into the newest messages: stays verbatim
        members = [blocks[m] for m in unit]
        if all(b.history and b.message_index is not None and not (b.protected or b.pinned) for b in members):
            candidates.extend(unit)
    candidates.sort()
    return candidates


def _plan_reason(prompt: int, trigger: int, state: CompactionState, candidate_tokens: int | None, cap: int,
                 warnings: list[str]) -> str:
    """Why compaction does or does not run (``pending`` when it fires); ``candidate_tokens`` ``None``: no candidates."""
    if prompt < trigger:
        return "below_trigger"
    if state.disabled:
        warnings.append(f"auto-compaction stopped after {MAX_FAILURES} failed compactions in a row; "
                        "old history is truncated instead (remove the summary or reset compaction to retry)")
        return "disabled"
    if candidate_tokens is None:
        return "no_candidates"
    if state.stall is not None and prompt - candidate_tokens + min(cap, candidate_tokens) >= trigger:
        return "no_progress"
    warnings.append(f"the prompt ({prompt} tokens) is at or above the compaction trigger ({trigger}): "
                    f"compaction runs at generation; until then this shows what truncation would keep")
    return "pending"


def _costs_recent(blocks: Sequence[Block], result: ShiftResult, live: list[int], gone: set[str],
                  keep_recent: int) -> bool:
    """``True`` when ``result`` leaves out one of the ``keep_recent`` newest messages (for budget, not by hand)."""
    if keep_recent <= 0:
        return False
    recent = {blocks[i].id for i in [i for i in live if _is_message(blocks[i])][-keep_recent:]}
    return any(e.block_id in recent and e.block_id not in gone for e in result.excluded)


def _fit(blocks: Sequence[Block], folded: set[int], sblock: Block | None, count_tokens: Callable[[Block], int],
         budget: int, target_room: int | None) -> tuple[ShiftResult, bool]:
    """Shift the blocks with the summary in place of what it folds; to the target room first when given.

    Returns the result and whether it was fitted to the target (``False`` when the target
    could not hold the protected blocks and the whole budget was used).
    """
    work = [b for i, b in enumerate(blocks) if i not in folded]
    if sblock is not None:
        anchor_pos = next((i for i in range(max(folded) + 1, len(blocks)) if i not in folded), None)
        at = len(work) if anchor_pos is None else work.index(blocks[anchor_pos])
        work.insert(at, sblock.model_copy(update={"protected": True}))
    room = budget if target_room is None else min(budget, target_room)
    result = shift_context(work, count_tokens, room, honor_manual=True)
    if result.error and room < budget:  # the target cannot hold: use the whole budget
        return shift_context(work, count_tokens, budget, honor_manual=True), False
    return result, target_room is not None


def _with_summary_block(result: ShiftResult, blocks: Sequence[Block], folded: set[int], sblock: Block,
                        sblock_tokens: int, tokens: dict[str, int], budget: int,
                        info: dict[str, Any]) -> ShiftResult:
    """``result`` with the summary as an added block and the blocks it folds marked ``SUMMARIZED``."""
    pos = {b.id: i for i, b in enumerate(blocks)}
    kept = [k for k in result.kept if k != SUMMARY_BLOCK_ID]
    anchor = next((k for k in kept if pos[k] > max(folded)), None)
    truncated = [TruncatedBlock(block_id=blocks[i].id, reason="SUMMARIZED", original_tokens=tokens[blocks[i].id],
                                remaining_tokens=0, summary_id=SUMMARY_BLOCK_ID) for i in sorted(folded)]
    excluded: list[ExcludedBlock] = [e for e in result.excluded if e.block_id != SUMMARY_BLOCK_ID]
    kept_reasons = {k: v for k, v in result.kept_reasons.items() if k != SUMMARY_BLOCK_ID}
    return result.model_copy(update={
        "kept": kept, "excluded": excluded, "truncated": truncated, "budget": budget,
        "protected_tokens": result.protected_tokens - sblock_tokens,
        "added": [sblock], "added_before": {SUMMARY_BLOCK_ID: anchor},
        "kept_reasons": kept_reasons, "info": info,
    })


def register_compact_strategy(registry: ContextStrategyRegistry) -> Callable[[], None]:
    """Register the ``compact`` strategy (after the shifting built-ins); returns its cleanup callable."""
    return registry.register("compact", compact_strategy,
                             "near the context limit, an LLM summary of old history replaces it at generation "
                             "(previews reuse a stored summary or show truncation)", honors_manual=True)
