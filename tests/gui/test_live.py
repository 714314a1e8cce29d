"""Issue 12 item 3 on the real window: optimistic pin / exclude, in-place table updates, chats
opened on a worker. Behaviour only: the timings are measured by tests/benchmarks/gui_timing.py."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, QTimer

from engine.schema import Chat, ChatMessage, ContextSettings
from engine.schema.sillytavern import SillyTavernSetup
from gui.models.blocks_model import BlockColumn
from gui.models.chat_model import FLAGS_ROLE

CHECK = Qt.ItemDataRole.CheckStateRole


def _wait_preview(qtbot, win, action):
    with qtbot.waitSignal(win.preview_applied, timeout=30000) as blocker:
        action()
    return blocker.args[0]


def _exclude_cell(win, message_index: int):
    model, proxy = win.blocks_panel.model, win.blocks_panel.proxy
    return proxy.mapFromSource(model.index(model.row_of_message(message_index), BlockColumn.EXCLUDE))


def test_an_exclude_click_ticks_before_the_preview_runs(qtbot, window) -> None:
    model = window.blocks_panel.model
    resets: list = []
    model.modelReset.connect(lambda: resets.append(1))
    cell = _exclude_cell(window, 4)
    assert cell.data(CHECK) == Qt.CheckState.Unchecked
    started = window.ctx.preview.generation
    # the click, as the table's delegate makes it: no event is processed afterwards
    window.blocks_panel.proxy.setData(cell, Qt.CheckState.Checked, CHECK)
    assert cell.data(CHECK) == Qt.CheckState.Checked
    assert window.chat_view.model.index(4).data(FLAGS_ROLE) == (False, True)
    assert window.ctx.preview.generation == started  # nothing computed yet: the tick did not wait
    assert window.ctx.undo_stack.count() == 1
    preview = _wait_preview(qtbot, window, lambda: None)
    assert next(b for b in preview.blocks if b.message_index == 4).manual_excluded
    assert _exclude_cell(window, 4).data(CHECK) == Qt.CheckState.Checked
    assert resets == []  # same rows: updated in place
    assert window.rollback_note == ""
    # undo goes through the same path and unticks at once
    window.undo_action.trigger()
    assert _exclude_cell(window, 4).data(CHECK) == Qt.CheckState.Unchecked
    _wait_preview(qtbot, window, lambda: None)
    assert _exclude_cell(window, 4).data(CHECK) == Qt.CheckState.Unchecked


def test_a_click_is_previewed_without_the_typing_debounce(qtbot, window) -> None:
    window.ctx.preview.set_debounce(60_000)  # an edit's preview would not come within the test
    started = window.ctx.preview.generation
    preview = _wait_preview(qtbot, window, lambda: window.blocks_panel.proxy.setData(
        _exclude_cell(window, 3), Qt.CheckState.Checked, CHECK))
    assert next(b for b in preview.blocks if b.message_index == 3).manual_excluded
    assert window.ctx.preview.generation == started + 1  # one preview for the click
    assert not window.ctx.preview.is_busy()
    # a settings edit (typing in a spin box) still waits for the debounce
    settings = window.ctx.document.request.settings
    window.ctx.document.set_settings(settings.model_copy(update={"reply_reserve": 777}))
    QCoreApplication.processEvents()
    assert window.ctx.preview.is_busy() and window.ctx.preview.generation == started + 1
    window.ctx.preview.shutdown()


def test_in_place_update_keeps_the_selection_and_the_scroll(qtbot, library, qsettings) -> None:
    from gui.app import build_context
    from gui.main_window import MainWindow

    store, _, _ = library
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"line {i} about the harbour")
            for i in range(300)]
    chat_id = store.chats.add(Chat(title="Long", messages=msgs), title="Long",
                             settings=ContextSettings(model="gpt-4o", strategy="manual"))
    win = MainWindow(build_context(store, settings=qsettings))
    qtbot.addWidget(win)
    win.resize(1280, 800)
    win.show()
    _wait_preview(qtbot, win, lambda: win.start(chat_id))
    panel = win.blocks_panel
    panel.select_message(150)
    table = panel.table
    table.verticalScrollBar().setValue(table.verticalScrollBar().maximum() // 3)
    QCoreApplication.processEvents()
    scroll = table.verticalScrollBar().value()
    resets: list = []
    panel.model.modelReset.connect(lambda: resets.append(1))
    _wait_preview(qtbot, win, lambda: win.set_excluded(120, True))
    assert resets == []
    assert panel.current_block().message_index == 150
    assert table.verticalScrollBar().value() == scroll
    win.ctx.preview.shutdown()
    win.close()


def test_a_pin_sillytavern_cannot_apply_is_refused_with_the_reason(qtbot, window, library) -> None:
    """Issue 31 item 3 (was: the pin was stored, then rolled back with a note): SillyTavern keeps no
    pins, so on a SillyTavern chat the Pin box is off and a pin is refused with the reason."""
    from gui.main_window import ST_NO_PINNING

    store, chat_id, _ = library
    store.chats.save_setup(chat_id, SillyTavernSetup())
    _wait_preview(qtbot, window, window.ctx.document.reload)
    model = window.blocks_panel.model
    row = model.row_of_message(5)
    pin = window.blocks_panel.proxy.mapFromSource(model.index(row, BlockColumn.PIN))
    assert not (pin.flags() & Qt.ItemFlag.ItemIsEnabled)
    window.blocks_panel.proxy.setData(pin, Qt.CheckState.Checked, CHECK)
    assert pin.data(CHECK) == Qt.CheckState.Unchecked
    assert not window.ctx.document.messages()[5].meta.pinned  # nothing stored
    assert window.statusBar().currentMessage() == ST_NO_PINNING
    assert window.chat_view.model.index(5).data(FLAGS_ROLE) == (False, False)


def test_opening_a_chat_reads_it_on_a_worker(qtbot, window, library) -> None:
    store, _first, _ = library
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message {i}") for i in range(2000)]
    big = store.chats.add(Chat(title="Big", messages=msgs), title="Big")
    window.refresh_library()
    beats: list[int] = []
    heart = QTimer()
    heart.setInterval(1)
    heart.timeout.connect(lambda: beats.append(window.ctx.document.chat_id is None))
    heart.start()
    window.open_chat(big)
    # open_chat returned before the chat was read: the old chat is closed, the new title shows
    assert window.is_loading()
    assert window.ctx.document.chat_id is None and window.title_label.text() == "Big"
    assert window.blocks_panel.model.rowCount() == 0
    qtbot.waitUntil(lambda: window.ctx.document.chat_id == big, timeout=30000)
    heart.stop()
    assert any(beats)  # the event loop ran while the chat was being read
    qtbot.waitUntil(lambda: window.preview is not None and window.presenter.preview_chat == big, timeout=30000)
    assert window.chat_view.model.message_count() == 2000
    assert window.library.current_chat_id() == big


def test_clicking_through_the_library_opens_the_last_chat_clicked(qtbot, window, library) -> None:
    store, _first, _ = library
    a = store.chats.add(Chat(title="A", messages=[ChatMessage(role="user", content="a")]), title="A")
    b = store.chats.add(Chat(title="B", messages=[ChatMessage(role="user", content="b")]), title="B")
    window.refresh_library()
    opened: list[str] = []
    window.ctx.document.chat_loaded.connect(opened.append)
    window.open_chat(a)
    window.open_chat(b)
    qtbot.waitUntil(lambda: window.ctx.document.chat_id == b and not window.is_loading(), timeout=30000)
    assert a not in opened


def test_a_chat_that_cannot_be_read_shows_the_error(qtbot, window, library) -> None:
    errors: list = []
    window.error_shown.connect(errors.append)
    window.open_chat("no-such-chat")
    qtbot.waitUntil(lambda: bool(errors), timeout=30000)
    assert errors[0].code == "CHAT_NOT_FOUND"
    assert not window.is_loading()


def test_a_hidden_chat_list_lays_out_when_it_is_shown(qtbot, window) -> None:
    window.show()
    qtbot.waitExposed(window)
    window.select_tab("blocks")
    qtbot.waitUntil(lambda: not window.chat_view.list.isVisible(), timeout=3000)
    calls: list[int] = []
    delegate = window.chat_view.delegate
    original = delegate.sizeHint

    def counting(option, index):
        calls.append(index.row())
        return original(option, index)

    delegate.sizeHint = counting
    window.chat_view.list.doItemsLayout()
    window.chat_view.list.scrollToBottom()
    QCoreApplication.processEvents()
    assert calls == []  # nothing measured for a list nobody sees
    window.select_tab("chat")
    qtbot.waitUntil(lambda: window.chat_view.list.isVisible(), timeout=3000)
    qtbot.waitUntil(lambda: len(set(calls)) >= window.chat_view.model.message_count(), timeout=5000)
    bar = window.chat_view.list.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=3000)  # the bottom, as asked while hidden


def test_the_first_preview_of_a_chat_just_opened_is_applied_in_two_turns(qtbot, window, library) -> None:
    store, _first, _ = library
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message {i}") for i in range(300)]
    other = store.chats.add(Chat(title="Other", messages=msgs), title="Other")
    window.refresh_library()
    applied: list = []
    window.preview_applied.connect(applied.append)
    seen_by_chart: list[tuple[int, int]] = []  # (chart bars, table rows) when the chart took the preview
    chart_set = window.tokens_chart.set_preview

    def spy(preview, delta=None):
        chart_set(preview, delta)
        if preview is not None:
            seen_by_chart.append((len(window.tokens_chart.items()), window.blocks_panel.model.rowCount()))

    window.tokens_chart.set_preview = spy
    window.open_chat(other)
    qtbot.waitUntil(lambda: any(p is not None for p in applied), timeout=30000)
    preview = next(p for p in applied if p is not None)
    assert len(applied) == 1  # preview_applied once, when every view shows it
    assert seen_by_chart == [(300, 0)]  # the chart first, while the table was still empty
    assert window.blocks_panel.model.preview() is preview and window.preview is preview
    assert window.blocks_panel.model.rowCount() == len(preview.blocks)
    assert window.budget_bar.segments() and window.chat_view.model.fate(299) is not None
    assert window.blocks_panel.current_block().message_index == 299  # the newest message selected


def test_a_preview_applied_meanwhile_supersedes_the_second_turn(qtbot, window) -> None:
    from engine.pipeline import preview as engine_preview

    request = window.ctx.document.request
    first = engine_preview(request)
    second = engine_preview(request.model_copy(update={"settings": request.settings.model_copy(
        update={"reply_reserve": request.settings.reply_reserve + 1})}))
    applied: list = []
    window.preview_applied.connect(applied.append)
    window.presenter.apply_staged(first, 0.0)
    window.apply_preview(second)
    qtbot.wait(50)
    assert applied == [second]
    assert window.blocks_panel.model.preview() is second and window.preview is second


def test_after_a_click_the_worker_found_the_changed_rows(qtbot, window, monkeypatch) -> None:
    import threading

    import gui.models.blocks_model as blocks_model

    on_main: list[bool] = []
    original = blocks_model.diff_previews

    def spy(*args, **kwargs):
        on_main.append(threading.current_thread() is threading.main_thread())
        return original(*args, **kwargs)

    monkeypatch.setattr(blocks_model, "diff_previews", spy)
    model = window.blocks_panel.model
    cell = _exclude_cell(window, 4)
    preview = _wait_preview(qtbot, window,
                            lambda: window.blocks_panel.proxy.setData(cell, Qt.CheckState.Checked, CHECK))
    assert on_main == [False]  # compared once, on the worker
    delta = window.ctx.preview.last_outcome.derived
    assert model.last_delta is delta and delta.new is preview
    assert model.row_of_message(4) in delta.rows
    assert cell.data(CHECK) == Qt.CheckState.Checked and model.block(model.row_of_message(4)).manual_excluded
