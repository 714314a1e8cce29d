"""One row diff per applied preview (gui.models.preview_delta), shared by the table, the chat
list, the budget bar and the tokens chart: each view updated from it must show exactly what a
view built from scratch on the new preview shows. Real engine previews of a chat whose history
does not fit, toggled as a writer would."""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QBrush, QFont

from engine.pipeline import preview as engine_preview
from engine.schema import Chat, ChatMessage, ContextSettings, Explanation, PreviewRequest, preview_changes
from gui.models.blocks_model import (
    MAX_CHANGED_RUNS,
    BlockColumn,
    BlocksFilterProxy,
    BlocksTableModel,
    changed_runs,
)
from gui.models.chat_model import ChatMessagesModel
from gui.models.preview_delta import diff_previews
from gui.roles import FATE_ROLE, GREYED_ROLE, MARKER_ROLE
from gui.widgets.budget_bar import BudgetBar
from gui.widgets.tokens_chart import TokensChart
from tests.gui.helpers import make_block, make_preview

N = 240
#: A chart narrower than the chat's bars (one pixel column holds a few messages).
BUCKET_PX = 97
ROLES = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.CheckStateRole, Qt.ItemDataRole.ForegroundRole,
         Qt.ItemDataRole.BackgroundRole, Qt.ItemDataRole.FontRole, Qt.ItemDataRole.ToolTipRole)


def _request(excluded: frozenset[int] = frozenset(), pinned: frozenset[int] = frozenset()) -> PreviewRequest:
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant",
                        content=f"Message {i}: the courier counts lanterns on the quay. " * (1 + i % 3),
                        meta={"manualExcluded": i in excluded, "pinned": i in pinned})
            for i in range(N)]
    return PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=4096, reply_reserve=300, strategy="manual"))


def _toggles():
    """A series of previews as a writer clicks: recent and old messages excluded, one pinned, undone."""
    states = [(frozenset(), frozenset()), (frozenset({N - 5}), frozenset()), (frozenset({N - 5, 40}), frozenset()),
              (frozenset({N - 5, 40}), frozenset({10})), (frozenset({40}), frozenset({10})),
              (frozenset(), frozenset())]
    return [engine_preview(_request(ex, pin)) for ex, pin in states]


def _shown(value: object) -> object:
    if isinstance(value, QBrush):
        return value.color().name()
    if isinstance(value, QFont):
        return value.bold()
    return value


def _cells(model: BlocksTableModel) -> list[list[object]]:
    out = []
    for row in range(model.rowCount()):
        for col in range(model.columnCount()):
            index = model.index(row, col)
            out.append([_shown(index.data(role)) for role in ROLES])
    return out


def _fresh_table(preview) -> BlocksTableModel:
    model = BlocksTableModel()
    model.set_preview(preview)
    return model


def test_the_table_updated_in_place_shows_what_a_fresh_table_shows_and_signals_ranges(qtbot) -> None:
    previews = _toggles()
    model = BlocksTableModel()
    model.set_preview(previews[0])
    for old, new in itertools.pairwise(previews):
        signals: list[tuple[int, int]] = []
        resets: list[int] = []
        model.dataChanged.connect(lambda a, b, *_: signals.append((a.row(), b.row())))
        model.modelReset.connect(lambda: resets.append(1))
        changed = model.set_preview(new)
        model.dataChanged.disconnect()
        model.modelReset.disconnect()
        assert changed is not None and not resets  # the same rows: in place
        delta = model.last_delta
        assert delta is not None and delta.new is new and changed == delta.rows
        signalled = {r for a, b in signals for r in range(a, b + 1)}
        assert set(changed) <= signalled  # every changed row is signalled, as ranges of rows
        assert len(signals) == len(changed_runs(changed)) <= MAX_CHANGED_RUNS
        changes = preview_changes(old, new)
        assert changes is not None and set(changed) <= set(changes.rows)  # only rows the engine names
        assert len(changed) < len(new.blocks)
        # every cell, every role: what a table built from scratch on this preview shows
        fresh = _fresh_table(new)
        assert _cells(model) == _cells(fresh)
        assert model.kept_count() == sum(1 for b in new.blocks if b.status == "kept")


def test_rows_that_show_differently_are_named(qtbot) -> None:
    first, second = _toggles()[:2]
    model = BlocksTableModel()
    model.set_preview(first)
    changed = model.set_preview(second)
    assert changed is not None
    toggled = model.row_of_message(N - 5)
    assert toggled in changed and toggled in model.last_delta.key_rows
    before, after = _fresh_table(first), _fresh_table(second)
    for column in (BlockColumn.STATUS, BlockColumn.REASON, BlockColumn.EXCLUDE):
        shown = {r for r in range(len(second.blocks))
                 if before.index(r, column).data() != after.index(r, column).data()}
        assert shown <= set(changed), column
    status = {r for r in range(len(second.blocks)) if first.blocks[r].status != second.blocks[r].status}
    assert status <= set(model.last_delta.key_rows)
    # most fit windows moved (the preview's column), yet most rows are not signalled
    assert sum(a != b for a, b in zip(first.fit_windows, second.fit_windows, strict=True)) > len(changed)


def test_the_delta_finds_reason_cells_and_other_rows() -> None:
    def with_reason(data, n: int = 6):
        out = [make_block(i, message_index=i) for i in range(n)]
        out[2] = out[2].model_copy(update={"status": "excluded", "reason": "HISTORY_OLDEST_FIRST"})
        details: list[Explanation | None] = [None] * n
        details[2] = Explanation("out for room", data)
        return make_preview(out, details=details)

    a = with_reason({"blocked_by_tokens": 50, "blocked_by_message": 5, "free": 3})
    b = with_reason({"blocked_by_tokens": 50, "blocked_by_message": 5, "free": 9})
    c = with_reason({"free": 9})
    d_ab = diff_previews(a, b)
    assert d_ab is not None and d_ab.rows == [] and d_ab.key_rows == []  # only unseen data moved
    d_bc = diff_previews(b, c, d_ab)
    assert d_bc is not None and d_bc.rows == [2] and d_bc.key_rows == []
    assert d_bc.reason_cells == {2: "oldest history first"}
    assert diff_previews(c, c, d_bc).rows == []  # the very same blocks
    assert diff_previews(c, with_reason({"free": 9}, n=7)) is None  # a row more
    swapped = make_preview([make_block(i, message_index=5 - i) for i in range(6)])
    assert diff_previews(make_preview([make_block(i, message_index=i) for i in range(6)]), swapped) is None


def test_a_delta_never_keeps_the_preview_it_started_from_alive() -> None:
    """Item 2 of issue 29's GUI part: the table keeps its last delta (the next comparison patches its
    fit windows), and that delta held the previous preview and every row key of both previews."""
    import gc
    import weakref

    first, second, third = _toggles()[:3]
    model = BlocksTableModel()
    model.set_preview(first)
    model.set_preview(second)
    delta = model.last_delta
    assert delta is not None and delta.old is first and delta.follows(first) and not delta.follows(second)
    gone = weakref.ref(first)
    del first
    model.set_preview(third)
    gc.collect()
    assert gone() is None  # nothing the table keeps holds the preview before the one shown
    assert model.last_delta is not None and model.last_delta.old is second
    assert delta.old is None and not delta.follows(None)


def _assert_like_fresh_views(qtbot, new, chat: ChatMessagesModel, bar: BudgetBar, chart: TokensChart) -> None:
    """The chat list, bar and chart updated in place show what ones built from scratch on ``new`` show."""
    fresh_chat, fresh_bar, fresh_chart = ChatMessagesModel(), BudgetBar(), TokensChart()
    qtbot.addWidget(fresh_bar)
    qtbot.addWidget(fresh_chart)
    fresh_chat.set_messages(list(_request().chat.messages))
    fresh_chat.set_preview(new)
    fresh_bar.set_preview(new)
    fresh_chart.set_preview(new)
    for role in (FATE_ROLE, GREYED_ROLE, MARKER_ROLE):
        assert [chat.index(i).data(role) for i in range(N)] == [fresh_chat.index(i).data(role) for i in range(N)]
    assert bar.segments() == fresh_bar.segments()
    assert chart.items() == fresh_chart.items()
    assert chart.fit_windows() == fresh_chart.fit_windows()
    assert chart.fit_marks() == fresh_chart.fit_marks()
    # the per-pixel buckets (patched where bars changed, when the chart had them) read the same
    assert chart._pixel_buckets(BUCKET_PX) == fresh_chart._pixel_buckets(BUCKET_PX)


def test_chat_list_bar_and_chart_updated_from_the_delta_match_a_fresh_build(qtbot) -> None:
    previews = _toggles()
    table, chat, bar, chart = BlocksTableModel(), ChatMessagesModel(), BudgetBar(), TokensChart()
    qtbot.addWidget(bar)
    qtbot.addWidget(chart)
    chat.set_messages(list(_request().chat.messages))
    for new in previews:
        table.set_preview(new)
        delta = table.last_delta
        chat.set_preview(new, delta)
        bar.set_preview(new, None, delta)
        if len(chart.items()) > BUCKET_PX:  # painted before: its buckets are patched, not dropped
            chart._pixel_buckets(BUCKET_PX)
        chart.set_preview(new, delta)
        _assert_like_fresh_views(qtbot, new, chat, bar, chart)


def test_a_delta_for_another_preview_is_not_used(qtbot) -> None:
    first, second, third = _toggles()[:3]
    bar = BudgetBar()
    qtbot.addWidget(bar)
    bar.set_preview(first)
    stray = diff_previews(second, third)  # not from the preview the bar shows
    bar.set_preview(third, None, stray)
    fresh = BudgetBar()
    qtbot.addWidget(fresh)
    fresh.set_preview(third)
    assert bar.segments() == fresh.segments()


def test_the_filter_proxy_refilters_on_changes_only_while_a_filter_or_sort_is_set(qtbot) -> None:
    first, second = _toggles()[:2]
    model = BlocksTableModel()
    proxy = BlocksFilterProxy()
    proxy.setSourceModel(model)
    model.set_preview(first)
    assert not proxy.dynamicSortFilter()
    proxy.set_statuses({"excluded"})
    assert proxy.dynamicSortFilter()
    assert proxy.rowCount() == sum(b.status == "excluded" for b in first.blocks)
    model.set_preview(second)  # in place: message N-5 becomes excluded and passes the filter now
    assert model.last_delta is not None
    assert proxy.rowCount() == sum(b.status == "excluded" for b in second.blocks)
    assert proxy.mapFromSource(model.index(model.row_of_message(N - 5), 0)).isValid()
    proxy.set_statuses(None)
    assert not proxy.dynamicSortFilter() and proxy.rowCount() == model.rowCount()
    proxy.sort(BlockColumn.TOKENS, Qt.SortOrder.DescendingOrder)
    assert proxy.dynamicSortFilter()
    proxy.sort(-1)
    assert not proxy.dynamicSortFilter()


class _Paints(QObject):
    def __init__(self, widget) -> None:
        super().__init__(widget)
        self.regions: list = []
        widget.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.regions.append(event.region().boundingRect())
        return False


@pytest.mark.parametrize("rows", [(150, 190), (2, 190)])
def test_the_table_repaints_only_the_changed_rows_it_shows(qtbot, rows) -> None:
    from gui.widgets.blocks_panel import BlocksPanel

    panel = BlocksPanel()
    qtbot.addWidget(panel)
    panel.resize(700, 300)
    panel.set_preview(make_preview([make_block(i, message_index=i) for i in range(200)]))
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.wait(50)
    paints = _Paints(panel.table.viewport())
    model = panel.model
    model.dataChanged.emit(model.index(rows[0], 0), model.index(rows[1], len(BlockColumn) - 1))
    qtbot.wait(50)
    viewport = panel.table.viewport().rect()
    if rows[0] > panel.table.rowAt(viewport.height() - 1):
        assert paints.regions == []  # out of view: nothing to paint
    else:
        assert paints.regions and all(r.top() >= panel.table.rowViewportPosition(rows[0]) for r in paints.regions)


def _warm_toggles(states):
    """The previews of ``states`` (excluded, pinned) computed as the app computes them after a
    click: the same message objects but the toggled one, the same registries, so each is answered
    warm (``engine.incremental``): its unchanged rows are the previous preview's objects."""
    from engine.pipeline import default_registries

    regs = default_registries()
    base = _request()
    msgs = list(base.chat.messages)
    out = []
    for excluded, pinned in states:
        for i, m in enumerate(msgs):
            want = {"manualExcluded": i in excluded, "pinned": i in pinned}
            if {"manualExcluded": m.meta.manualExcluded, "pinned": m.meta.pinned} != want:
                msgs[i] = m.model_copy(update={"meta": m.meta.model_copy(update=want)})
        req = base.model_copy(update={"chat": base.chat.model_copy(update={"messages": list(msgs)})})
        out.append(engine_preview(req, registries=regs))
    return out


def test_views_updated_from_warm_previews_match_fresh_ones_and_build_few_rows(qtbot) -> None:
    """After a click the views update only the rows the engine's change set names
    (:func:`engine.schema.preview_changes`: a warm preview shares its unchanged rows), and every view
    shows what one built from scratch on the same preview shows."""
    states = [(frozenset(), frozenset()), (frozenset({N - 5}), frozenset()), (frozenset({N - 5, 40}), frozenset()),
              (frozenset({N - 5, 40}), frozenset({10})), (frozenset({40}), frozenset({10})), (frozenset(), frozenset())]
    previews = _warm_toggles(states)
    table, chat, bar, chart = BlocksTableModel(), ChatMessagesModel(), BudgetBar(), TokensChart()
    qtbot.addWidget(bar)
    qtbot.addWidget(chart)
    chat.set_messages(list(_request().chat.messages))
    for k, new in enumerate(previews):
        table.set_preview(new, diff_previews(table._preview, new, table.last_delta) if k else None)
        delta = table.last_delta
        chat.set_preview(new, delta)
        bar.set_preview(new, None, delta)
        chart.set_preview(new, delta)
        if k:
            changes = preview_changes(previews[k - 1], new)
            assert changes is not None and delta is not None
            # a row signalled is a new row object or one whose specific reason reads differently
            assert set(delta.rows) <= set(changes.rows) | set(changes.reason_detail), k
        _assert_like_fresh_views(qtbot, new, chat, bar, chart)
        assert _cells(table) == _cells(_fresh_table(new))
