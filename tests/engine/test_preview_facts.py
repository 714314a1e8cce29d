"""Facts the GUI shows about a preview, answered by the engine (issue 10 item 1)."""

from __future__ import annotations

from engine.compaction import CompactionOptions, thresholds
from engine.preview_facts import (
    compaction_marks,
    compaction_stopped,
    compaction_summary_row,
    message_blocks,
    oldest_fitting_index,
    strategy_compaction_marks,
)
from engine.schema import ContextPreview, PreviewBlock, TokenizerInfo


def _block(i: int, status: str = "kept", reason: str = "FITS_BUDGET", *, message_index: int | None = None,
           source: str | None = None) -> PreviewBlock:
    return PreviewBlock(id=f"b{i}", kind="message" if message_index is not None else "summary", role="user",
                        source=source or f"message:{message_index}", position=i, tokens=10, status=status,
                        reason=reason, protected=False, pinned=reason == "PINNED", message_index=message_index)


def _preview(blocks: list[PreviewBlock], **extra) -> ContextPreview:
    return ContextPreview(model="gpt-4o", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False), context_limit=1000,
                          reply_reserve=100, budget=900, safety_margin=0, headroom=500, prompt_tokens=400,
                          strategy="truncate", blocks=blocks, **extra)


def test_marker_skips_user_exclusions_and_stops_at_budget_cuts() -> None:
    fates = [("kept", "PINNED"), ("excluded", "HISTORY_OLDEST_FIRST"), ("excluded", "HISTORY_OLDEST_FIRST"),
             ("kept", "FITS_BUDGET"), ("excluded", "MANUAL_EXCLUDED"), ("kept", "FITS_BUDGET")]
    pv = _preview([_block(i, s, r, message_index=i) for i, (s, r) in enumerate(fates)])
    assert oldest_fitting_index(pv, 6) == 3
    assert oldest_fitting_index(message_blocks(pv), 6) == 3  # the same from the by-index mapping
    everything = _preview([_block(i, message_index=i) for i in range(4)])
    assert oldest_fitting_index(everything, 4) is None  # everything fits
    hidden = _preview([_block(0, "excluded", "HIDDEN", message_index=0), _block(1, message_index=1)])
    assert oldest_fitting_index(hidden, 2) is None  # the writer's exclusions are not budget cuts
    truncated = _preview([_block(0, "truncated", "SUMMARIZED", message_index=0), _block(1, message_index=1)])
    assert oldest_fitting_index(truncated, 2) == 1
    assert oldest_fitting_index(pv, 3) is None  # rows past the chat shown are ignored: 0 kept, 1, 2 cut → None


def test_compaction_summary_row_and_stop() -> None:
    summary = _block(9, source="summary:compaction")
    pv = _preview([_block(0, "truncated", "SUMMARIZED", message_index=0), summary,
                   _block(1, message_index=1), _block(2, message_index=2)],
                  strategy_info={"reason": "disabled"})
    assert compaction_summary_row(pv, 3) == (1, summary)
    assert compaction_stopped(pv)
    at_end = _preview([_block(0, message_index=0), summary])
    assert compaction_summary_row(at_end, 2) == (1, summary)  # sent last: shown on the last message
    assert compaction_summary_row(_preview([_block(0, message_index=0)]), 1) is None
    assert not compaction_stopped(at_end)


def test_compaction_marks_follow_spec_and_the_budget() -> None:
    m = compaction_marks(128_000)
    assert (m.trigger, m.target) == (94_208, 83_200) == thresholds(128_000)
    assert not m.moved("trigger") and not m.moved("target")
    assert round(m.window_trigger_share, 3) == 0.736 and m.window_target_share == 0.65
    # a 64,000 reserve: both marks move inside the 64,000-token prompt budget, target below trigger
    m = compaction_marks(128_000, 64_000)
    assert (m.trigger, m.target) == (51_200, 41_600) and m.moved("trigger") and m.moved("target")
    assert (m.spec_trigger, m.spec_target) == (94_208, 83_200)
    # the chat's own options are honoured
    m = compaction_marks(1_000, options=CompactionOptions(threshold_percent=50, target_percent=40))
    assert (m.trigger, m.target) == (460, 400)


def test_strategy_compaction_marks_are_the_strategys_own() -> None:
    from engine.schema import ContextPreview, TokenizerInfo

    def preview(strategy: str, info: dict, reserve: int = 100) -> ContextPreview:
        return ContextPreview(model="gpt-4o", tokenizer=TokenizerInfo(profile="o200k_base", approximate=False),
                              context_limit=1_000, reply_reserve=reserve, budget=1_000 - reserve, safety_margin=0,
                              headroom=0, prompt_tokens=0, strategy=strategy, blocks=[], strategy_info=info)

    # the chat's threshold_percent=70: compaction fires at 64.4 % of the window, not SPEC's 73.6 %
    opts = CompactionOptions.from_options({"threshold_percent": 70})
    m = strategy_compaction_marks(preview("manual", {}), opts)
    assert (m.trigger, m.target) == thresholds(1_000, opts) == (644, 650)
    assert m.trigger_share == 0.7
    # under compact, the strategy's own figures (its strategy_info) are drawn
    m = strategy_compaction_marks(preview("compact", {"trigger": 600, "target": 500}), opts)
    assert (m.trigger, m.target) == (600, 500)
    # a mark past the prompt budget is where the strategy compares it, never moved
    m = strategy_compaction_marks(preview("manual", {}, reserve=500))
    assert (m.trigger, m.target) == (736, 650) and not m.moved("trigger") and not m.moved("target")
