"""Facts about a :class:`~engine.schema.ContextPreview` that the GUI shows and must not re-derive.

The chat view marks "the oldest message that still fits" and the row the compaction summary is
sent before; the budget bar draws the compaction trigger and target. Each is one rule of the
engine, answered here from the frozen preview (or the settings), so every front end (GUI, API,
CLI) draws the same thing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .compaction.options import CompactionOptions, thresholds
from .compaction.strategy import SUMMARY_SOURCE
from .schema import ContextPreview, PreviewBlock

__all__ = [
    "USER_EXCLUSIONS",
    "CompactionMarks",
    "compaction_marks",
    "compaction_stopped",
    "compaction_summary_row",
    "message_blocks",
    "oldest_fitting_in",
    "oldest_fitting_index",
    "strategy_compaction_marks",
]

#: Exclusion reasons that are the writer's choice, not a budget cut: they do not end the run of
#: messages that fits (the fit marker walks past them).
USER_EXCLUSIONS = frozenset({"MANUAL_EXCLUDED", "HIDDEN"})


def message_blocks(preview: ContextPreview | Iterable[PreviewBlock]) -> dict[int, PreviewBlock]:
    """The preview's message blocks by chat message index (blocks of no message left out)."""
    blocks = preview.blocks if isinstance(preview, ContextPreview) else preview
    return {b.message_index: b for b in blocks if b.message_index is not None}


def oldest_fitting_index(preview: ContextPreview | Mapping[int, PreviewBlock], n_messages: int) -> int | None:
    """The oldest message of the newest run that fits, or ``None`` when nothing was cut for budget.

    Walking back from message ``n_messages - 1``, kept messages extend the run, the writer's
    exclusions (:data:`USER_EXCLUSIONS`: manual, hidden) are skipped, and the first message
    the strategy removed or cut for the budget ends it. A front end greys the messages above
    the returned index (unless pinned and kept).

    Parameters
    ----------
    preview:
        The preview, or its message blocks by message index (:func:`message_blocks`; a front
        end that keeps that mapping for a 10,000-message chat passes it to avoid rebuilding it).
    n_messages:
        Messages of the chat shown (blocks of later indices are ignored).

    Returns
    -------
    int | None
        A message index in ``[0, n_messages)``, or ``None`` when every message fits (or none
        was cut for the budget).
    """
    blocks = message_blocks(preview) if isinstance(preview, ContextPreview) else preview

    def fate_of(i: int) -> tuple[str, str] | None:
        block = blocks.get(i)
        return None if block is None else (block.status, block.reason)

    return oldest_fitting_in(fate_of, n_messages)


def oldest_fitting_in(fate_of: Callable[[int], tuple[str, str] | None], n_messages: int) -> int | None:
    """:func:`oldest_fitting_index` from ``fate_of(i)``, the ``(status, reason)`` of message ``i``'s block.

    ``fate_of`` gives ``None`` for a message without a block (for a front end that keeps the
    preview's status and reason columns rather than its blocks).
    """
    oldest: int | None = None
    for i in range(n_messages - 1, -1, -1):
        fate = fate_of(i)
        if fate is None:
            continue
        status, reason = fate
        if status == "kept":
            oldest = i
            continue
        if status == "excluded" and reason in USER_EXCLUSIONS:
            continue
        return oldest
    return None


def compaction_summary_row(preview: ContextPreview, n_messages: int) -> tuple[int, PreviewBlock] | None:
    """The message the kept compaction summary is sent right before, with the summary's block.

    The row is the message index of the first message block after the summary block, else
    the last message (the summary ends the prompt); ``None`` when the preview sends no
    compaction summary or the chat shows no such row.

    Parameters
    ----------
    preview:
        The preview.
    n_messages:
        Messages of the chat shown; the returned index is below it.
    """
    blocks = list(preview.blocks)
    for k, b in enumerate(blocks):
        if b.source == SUMMARY_SOURCE and b.status == "kept":
            row = next((a.message_index for a in blocks[k + 1:] if a.message_index is not None), None)
            if row is None and n_messages:
                row = n_messages - 1
            if row is not None and row < n_messages:
                return row, b
            return None
    return None


def compaction_stopped(preview: ContextPreview) -> bool:
    """``True`` when the ``compact`` strategy stopped auto-compaction (too many failures, SPEC §4)."""
    info: dict[str, Any] = preview.strategy_info or {}
    return info.get("reason") == "disabled"


@dataclass(frozen=True)
class CompactionMarks:
    """Where a front end draws the compaction trigger and target, in prompt tokens.

    Attributes
    ----------
    trigger, target:
        The marks to draw. SPEC §4's thresholds, except that a mark the prompt can never reach
        (at or past the prompt budget) is placed at the same share of the budget instead.
    spec_trigger, spec_target:
        SPEC §4's thresholds on the context window (:func:`engine.compaction.thresholds`).
    trigger_share, target_share:
        The shares (0–1) the moved marks use: the threshold and target percentages.
    window_trigger_share, window_target_share:
        The SPEC thresholds as shares of the context window (trigger: ``(1 − buffer) ×
        threshold``).
    """

    trigger: int
    target: int
    spec_trigger: int
    spec_target: int
    trigger_share: float
    target_share: float
    window_trigger_share: float
    window_target_share: float

    def moved(self, key: str) -> bool:
        """``True`` when mark ``key`` (``"trigger"`` or ``"target"``) is drawn off SPEC's place."""
        return (self.trigger != self.spec_trigger) if key == "trigger" else (self.target != self.spec_target)


def compaction_marks(context_limit: int, budget: int | None = None,
                     options: CompactionOptions | None = None) -> CompactionMarks:
    """The compaction trigger and target to draw for a window of ``context_limit`` tokens.

    SPEC §4: 128,000 → trigger 94,208, target 83,200. With ``budget`` (the prompt budget:
    context window − reply reserve), a mark at or past the budget (e.g. a 64,000 reserve on
    128,000) is placed at the same share of the budget instead (trigger 80 %, target 65 %), so
    both sit inside the window that applies and the target stays below the trigger.

    Parameters
    ----------
    context_limit:
        The model's context window, tokens.
    budget:
        The prompt budget, tokens (``None``: no adjustment).
    options:
        The ``compact`` strategy's options (``None``: SPEC §4's defaults).
    """
    o = options or CompactionOptions()
    spec_trigger, spec_target = thresholds(context_limit, o)
    trigger_share = Fraction(str(o.threshold_percent)) / 100
    target_share = Fraction(str(o.target_percent)) / 100
    trigger, target = spec_trigger, spec_target
    if budget is not None and budget > 0:
        if trigger >= budget:
            trigger = int(budget * trigger_share)
        if target >= trigger:
            target = int(budget * target_share)
    window_trigger = (1 - Fraction(str(o.response_buffer_percent)) / 100) * trigger_share
    return CompactionMarks(trigger, target, spec_trigger, spec_target, float(trigger_share), float(target_share),
                           float(window_trigger), float(target_share))


def strategy_compaction_marks(preview: ContextPreview, options: CompactionOptions | None = None) -> CompactionMarks:
    """The compaction trigger and target the ``compact`` strategy itself uses for ``preview``.

    The strategy compares the chat's prompt *before* fitting (every live message, the stored
    summary and the reply priming) with :func:`engine.compaction.thresholds` on the context
    window (``engine.compaction.strategy.compact_strategy``), never with marks moved inside the
    prompt budget; so neither mark here is moved (``moved(key)`` is ``False``), and a mark past
    the prompt budget stays there. Under ``compact``, the figures come from the preview's own
    ``strategy_info`` (``trigger``/``target``, tokens); under any other strategy (or a preview
    without them), from ``thresholds(preview.context_limit, options)``: where compaction would
    fire if the chat switched to ``compact``.

    Parameters
    ----------
    preview:
        The frozen preview.
    options:
        The chat's compaction options, ``CompactionOptions.from_options(settings.strategy_options)``
        (``None``: SPEC §4's defaults). Its percentages give the shares.
    """
    o = options or CompactionOptions()
    marks = compaction_marks(preview.context_limit, None, o)
    info = preview.strategy_info or {}
    trigger, target = marks.trigger, marks.target
    if preview.strategy == "compact" and isinstance(info.get("trigger"), int) and isinstance(info.get("target"), int):
        trigger, target = int(info["trigger"]), int(info["target"])
    return CompactionMarks(trigger, target, trigger, target, marks.trigger_share, marks.target_share,
                           marks.window_trigger_share, marks.window_target_share)
