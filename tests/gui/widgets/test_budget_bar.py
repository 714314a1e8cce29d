"""Budget bar segments, compaction marks and tooltips; the tokens chart's items."""

from __future__ import annotations

from gui.widgets.budget_bar import BudgetBar, budget_segments, compaction_mark_tooltip, compaction_marks
from gui.widgets.tokens_chart import TokensChart
from tests.gui.helpers import make_block, make_preview


def _preview():
    return make_preview([
        make_block(0, kind="system", tokens=50, protected=True, reason="SYSTEM_PROMPT"),
        make_block(1, kind="character", tokens=100, protected=True, reason="CHARACTER"),
        make_block(2, kind="persona", tokens=20, protected=True, reason="PERSONA"),
        make_block(3, kind="lorebook", tokens=40, reason="LOREBOOK_MATCHED"),
        make_block(4, kind="message", tokens=300, status="excluded", reason="HISTORY_OLDEST_FIRST", message_index=0),
        make_block(5, kind="message", tokens=200, message_index=1),
        make_block(6, kind="summary", tokens=30, status="truncated", reason="SUMMARIZED", original_tokens=90),
    ], limit=1000, reserve=100)


def test_segments_by_kind_reserve_free_and_cut() -> None:
    p = _preview()
    segs = {s.key: s.tokens for s in budget_segments(p)}
    assert segs["system"] == 50 and segs["character"] == 100 and segs["persona"] == 20
    assert segs["lorebook"] == 40 and segs["history"] == 200 and segs["summary"] == 30
    assert segs["memory"] == 0
    assert segs["reserve"] == 100
    assert segs["cut"] == 300 + 60  # excluded + what truncation removed
    # everything but the cut adds up to the context limit
    assert sum(v for k, v in segs.items() if k != "cut") == p.context_limit


def test_compaction_marks_follow_spec() -> None:
    assert compaction_marks(128_000) == {"trigger": 94_208, "target": 83_200}


def test_bar_draws_the_marks_the_compact_strategy_uses(qtbot) -> None:
    from engine.compaction.options import CompactionOptions

    bar = BudgetBar()
    qtbot.addWidget(bar)
    bar.resize(800, 50)
    opts = CompactionOptions.from_options({"threshold_percent": 70})
    bar.set_preview(_preview(), opts)
    assert (bar.marks().trigger, bar.marks().target) == (644, 650)  # 64.4 %, where compaction fires
    compact = _preview().model_copy(update={"strategy": "compact", "strategy_info": {"trigger": 600, "target": 500}})
    bar.set_preview(compact, opts)
    assert (bar.marks().trigger, bar.marks().target) == (600, 500)
    bar.show()
    bar.repaint()
    assert bar.mark_at(1.0 + 600 * (bar._layout() and bar._scale)) == "trigger"
    # a large reserve: the trigger stays where the strategy compares it, and its tooltip says so
    big = make_preview([make_block(0, tokens=100, message_index=0)], limit=128_000, reserve=64_000)
    bar.set_preview(big)
    assert (bar.marks().trigger, bar.marks().target) == (94_208, 83_200)
    assert "beyond the 64,000-token prompt budget" in compaction_mark_tooltip("trigger", big)


def test_tooltip_and_hit_testing(qtbot) -> None:
    bar = BudgetBar()
    qtbot.addWidget(bar)
    bar.resize(800, 50)
    bar.set_preview(_preview())
    bar.show()
    bar.repaint()
    history = next(s for s in bar.segments() if s.key == "history")
    assert bar.tooltip_for(history) == "History: 200 tokens (20.0 % of the 1,000-token limit)"
    keys = {bar.segment_at(x).key for x in range(0, 800, 4) if bar.segment_at(x) is not None}
    assert {"system", "character", "history", "reserve", "free", "cut"} <= keys


def test_tokens_chart_items(qtbot) -> None:
    chart = TokensChart()
    qtbot.addWidget(chart)
    chart.set_preview(_preview())
    assert chart.items() == [(0, 300, "excluded"), (1, 200, "kept")]
    chart.resize(300, 40)
    chart.show()
    chart.repaint()
    with qtbot.waitSignal(chart.message_clicked, timeout=1000) as blocker:
        qtbot.mouseClick(chart, __import__("PySide6.QtCore", fromlist=["Qt"]).Qt.MouseButton.LeftButton,
                         pos=chart.rect().center().__class__(20, 20))
    assert blocker.args == [1]


def test_caption_names_the_context_window_and_cut_label_fits(qtbot) -> None:
    bar = BudgetBar()
    qtbot.addWidget(bar)
    assert bar.caption() == "" and bar.cut_label(500) == ""
    bar.set_preview(_preview())
    assert bar.caption() == "context window 1,000 tokens"
    assert bar.cut_label(1000) == "Cut (excluded / truncated) 360"
    assert bar.cut_label(120) == "not sent 360"  # too narrow for the long form
    assert bar.cut_label(56) in ("Cut 360", "360")
    assert bar.cut_label(2) == ""
    bar.resize(400, 50)
    bar.show()
    bar.repaint()  # paints the label on its backdrop without error


def test_tokens_chart_caption_is_a_legend(qtbot) -> None:
    chart = TokensChart()
    qtbot.addWidget(chart)
    assert "oldest → newest" in chart.caption() and "red = not sent" in chart.caption()
    chart.set_preview(_preview())
    assert chart.caption().endswith("tallest 300 tokens")
    chart.resize(300, 60)
    chart.show()
    chart.repaint()
