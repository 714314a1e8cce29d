"""Acceptance tests for the main window on a real SQLite library and the real pipeline."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QTextBrowser, QTextEdit

from engine.schema import ContextSettings
from engine.schema.audit import PromptContextAudit
from gui.models.blocks_model import BlockColumn


def block_of(preview, message_index: int):
    return next(b for b in preview.blocks if b.message_index == message_index)


def rerun(qtbot, win, action):
    """Run ``action`` and wait for the debounced preview it causes."""
    with qtbot.waitSignal(win.preview_applied, timeout=20000) as blocker:
        action()
    return blocker.args[0]


def test_window_opens_on_the_chat(window) -> None:
    assert window.ctx.document.chat_id is not None
    assert window.preview is not None and window.preview.error is None
    assert window.blocks_panel.model.rowCount() == len(window.preview.blocks)
    assert window.chat_view.model.message_count() == 20
    assert window.budget_bar.segments()


def test_exclude_toggle_reruns_preview_and_undo_restores(qtbot, window, library) -> None:
    store, chat_id, _ = library
    model = window.blocks_panel.model
    row = model.row_of_message(5)
    assert block_of(window.preview, 5).status == "kept"
    idx = model.index(row, BlockColumn.EXCLUDE)
    preview = rerun(qtbot, window, lambda: model.setData(idx, Qt.CheckState.Checked, Qt.ItemDataRole.CheckStateRole))
    b = block_of(preview, 5)
    assert (b.status, b.reason, b.manual_excluded) == ("excluded", "MANUAL_EXCLUDED", True)
    assert store.chats.get(chat_id).chat.messages[5].meta.manualExcluded is True
    # the blocks table and the chat view show it
    assert model.block(model.row_of_message(5)).status == "excluded"
    assert window.chat_view.model.is_greyed(5)

    preview = rerun(qtbot, window, window.ctx.undo_stack.undo)
    b = block_of(preview, 5)
    assert (b.status, b.manual_excluded) == ("kept", False)
    assert store.chats.get(chat_id).chat.messages[5].meta.manualExcluded is False

    preview = rerun(qtbot, window, window.ctx.undo_stack.redo)
    assert block_of(preview, 5).reason == "MANUAL_EXCLUDED"


def test_exclude_under_truncate_switches_to_manual_in_one_undo_step(qtbot, window, library) -> None:
    store, chat_id, _ = library
    doc = window.ctx.document
    truncate = doc.request.settings.model_copy(update={"strategy": "truncate"})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(truncate))
    assert preview.strategy == "truncate"
    preview = rerun(qtbot, window, lambda: window.chat_view.exclude_toggled.emit(4, True))
    assert preview.strategy == "manual"
    assert block_of(preview, 4).reason == "MANUAL_EXCLUDED"
    assert window.settings_panel.strategy_box.currentData() == "manual"
    preview = rerun(qtbot, window, window.ctx.undo_stack.undo)  # one step undoes both
    assert preview.strategy == "truncate"
    assert block_of(preview, 4).status == "kept"
    assert store.chats.get(chat_id).settings.strategy == "truncate"
    assert window.settings_panel.strategy_box.currentData() == "truncate"


def test_exclude_under_summarize_with_honor_manual_off_switches_to_manual(qtbot, window, library) -> None:
    # engine.resolve.honours_exclusions: the honor_manual option switches the registry flag off
    store, chat_id, _ = library
    doc = window.ctx.document
    chosen = doc.request.settings.model_copy(update={"strategy": "summarize",
                                                     "strategy_options": {"honor_manual": False}})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(chosen))
    assert preview.strategy == "summarize"
    preview = rerun(qtbot, window, lambda: window.chat_view.exclude_toggled.emit(4, True))
    assert preview.strategy == "manual"
    assert block_of(preview, 4).reason == "MANUAL_EXCLUDED"
    preview = rerun(qtbot, window, window.ctx.undo_stack.undo)  # one step undoes both
    assert preview.strategy == "summarize"
    assert store.chats.get(chat_id).settings.strategy == "summarize"


@pytest.mark.parametrize("strategy", ["summarize", "vector-recall"])
def test_exclude_under_a_strategy_that_honours_it_keeps_the_strategy(qtbot, window, library, strategy) -> None:
    # engine.shifting.registry: StrategyInfo.honors_manual is True for these; no switch to manual
    doc = window.ctx.document
    chosen = doc.request.settings.model_copy(update={"strategy": strategy})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(chosen))
    assert preview.strategy == strategy
    preview = rerun(qtbot, window, lambda: window.chat_view.exclude_toggled.emit(4, True))
    assert preview.strategy == strategy
    assert (block_of(preview, 4).status, block_of(preview, 4).reason) == ("excluded", "MANUAL_EXCLUDED")
    assert window.settings_panel.strategy_box.currentData() == strategy
    preview = rerun(qtbot, window, window.ctx.undo_stack.undo)
    assert block_of(preview, 4).status == "kept" and preview.strategy == strategy


def test_pinning_protects_under_a_tight_budget(qtbot, window, library) -> None:
    store, chat_id, _ = library
    doc = window.ctx.document
    tight = doc.request.settings.model_copy(update={"context_limit": 900, "reply_reserve": 100})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(tight))
    assert preview.context_limit == 900
    assert block_of(preview, 1).status == "excluded"  # old history is cut
    assert window.chat_view.model.marker_index() is not None
    assert window.chat_view.model.is_greyed(1)

    preview = rerun(qtbot, window, lambda: window.chat_view.pin_toggled.emit(1, True))
    b = block_of(preview, 1)
    assert (b.status, b.reason, b.pinned) == ("kept", "PINNED", True)
    assert preview.prompt_tokens <= preview.budget
    assert store.chats.get(chat_id).chat.messages[1].meta.pinned is True
    assert store.chats.get(chat_id).settings.context_limit == 900

    preview = rerun(qtbot, window, window.ctx.undo_stack.undo)
    assert block_of(preview, 1).status == "excluded"


def test_editing_a_lorebook_key_changes_activation(qtbot, window, library) -> None:
    store, _chat_id, book_id = library

    def lore_blocks(preview):
        return [b for b in preview.blocks if b.kind == "lorebook" and b.status == "kept"]

    assert lore_blocks(window.preview) == []
    old = store.lorebooks.get(book_id).entries[0]
    new = old.model_copy(update={"keys": ["courier"]})
    preview = rerun(qtbot, window, lambda: window.lorebook_tab.entry_edited.emit(book_id, old, new))
    fired = lore_blocks(preview)
    assert len(fired) == 1 and "Dragons nest" in fired[0].text
    assert store.lorebooks.get(book_id).entries[0].keys == ["courier"]

    preview = rerun(qtbot, window, window.ctx.undo_stack.undo)
    assert lore_blocks(preview) == []
    assert store.lorebooks.get(book_id).entries[0].keys == ["dragon"]


def _texts(widget) -> str:
    parts = []
    for cls in (QLabel,):
        parts += [w.text() for w in widget.findChildren(cls)]
    for cls in (QPlainTextEdit,):
        parts += [w.toPlainText() for w in widget.findChildren(cls)]
    for cls in (QTextEdit, QTextBrowser):
        parts += [w.toPlainText() for w in widget.findChildren(cls)]
    from PySide6.QtWidgets import QAbstractItemView

    for view in widget.findChildren(QAbstractItemView):
        m = view.model()
        if m is None:
            continue
        for r in range(min(m.rowCount(), 50)):
            for c in range(m.columnCount()):
                v = m.index(r, c).data()
                if v is not None:
                    parts.append(str(v))
    return "\n".join(parts)


def test_audit_tab_shows_the_stored_audit(qtbot, window, library) -> None:
    store, chat_id, _ = library
    p = window.preview
    audit = PromptContextAudit(
        generation_id="feedc0ffee1234567890", chat_id=chat_id, provider="http://127.0.0.1:9/v1",
        model="gpt-4o", status="completed", created_at=datetime.now(UTC),
        finished_at=datetime.now(UTC), context_limit=p.context_limit, reply_reserve=p.reply_reserve,
        budget=p.budget, prompt_tokens=p.prompt_tokens, strategy=p.strategy, tokenizer=p.tokenizer,
        blocks=list(p.blocks), provider_messages=list(p.messages))
    store.audits.put(audit)
    # reopen the chat: the window reads the stored audit
    window.open_chat(None)
    rerun(qtbot, window, lambda: window.open_chat(chat_id))
    assert window.audit is not None and window.audit.generation_id == audit.generation_id
    assert window.select_tab("audit")
    assert "feedc0ffee" in _texts(window.audit_tab)


def test_malformed_import_shows_error_and_leaves_library_unchanged(qtbot, window, library, tmp_path) -> None:
    store, _, _ = library
    chats_before = [c.id for c in store.chats.summaries()]
    books_before = [b.id for b in store.lorebooks.summaries()]
    bad = tmp_path / "broken_world.json"
    bad.write_text('{"entries": {"0": {"key": ["x"], "content": "y"}', encoding="utf-8")  # truncated JSON
    good = tmp_path / "good_world.json"
    good.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["k"], "content": "c"}}}), encoding="utf-8")
    with qtbot.waitSignal(window.error_shown, timeout=5000) as blocker:
        refs = window.import_files([str(good), str(bad)])
    err = blocker.args[0]
    assert refs == []
    assert err.code.startswith("IMPORT_")
    assert "broken_world.json" in err.text
    assert "Nothing was imported" in err.text
    assert [c.id for c in store.chats.summaries()] == chats_before
    assert [b.id for b in store.lorebooks.summaries()] == books_before


def test_import_good_file_opens_chat(qtbot, window, library, tmp_path) -> None:
    store, _, _ = library
    path = tmp_path / "quay.jsonl"
    lines = [{"user_name": "Wren", "character_name": "Marisol", "chat_metadata": {}},
             {"name": "Wren", "is_user": True, "mes": "Hello there"},
             {"name": "Marisol", "is_user": False, "mes": "Good evening."}]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    refs = rerun(qtbot, window, lambda: window.import_files([str(path)]))
    assert window.ctx.document.chat_id in [c.id for c in store.chats.summaries()]
    assert window.chat_view.model.message_count() == 2
    assert refs is not None


def test_delete_chat_asks_first(qtbot, window, library) -> None:
    store, chat_id, _ = library
    window.confirm = lambda title, text: False
    assert not window.delete_chat(chat_id)
    assert chat_id in [c.id for c in store.chats.summaries()]
    window.confirm = lambda title, text: True
    assert window.delete_chat(chat_id)
    assert chat_id not in [c.id for c in store.chats.summaries()]
    assert window.ctx.document.chat_id is None


def test_branch_from_here(qtbot, window, library) -> None:
    store, chat_id, _ = library
    rerun(qtbot, window, lambda: window.chat_view.branch_requested.emit(7))
    new_id = window.ctx.document.chat_id
    assert new_id != chat_id
    assert store.chats.get(new_id).parent_id == chat_id
    assert window.chat_view.model.message_count() == 8


def test_composer_appends_user_message(qtbot, window, library) -> None:
    store, chat_id, _ = library
    window.chat_view.composer.setPlainText("Where is the parcel?")
    preview = rerun(qtbot, window, window.chat_view.send_button.click)
    assert store.chats.get(chat_id).chat.messages[-1].text() == "Where is the parcel?"
    last = block_of(preview, 20)
    assert last.reason == "CURRENT_INPUT"


def test_settings_strategy_list_follows_the_registry(qtbot, window) -> None:
    from engine.shifting.registry import truncate_strategy

    names = [window.settings_panel.strategy_box.itemData(i) for i in range(window.settings_panel.strategy_box.count())]
    assert names == window.ctx.registries.strategies.names()
    cleanup = window.ctx.registries.strategies.register("my-plugin", truncate_strategy, "a plugin strategy")
    try:
        window.settings_panel.refresh_registries()
        box = window.settings_panel.strategy_box
        assert "my-plugin" in [box.itemData(i) for i in range(box.count())]
        box.setCurrentIndex(box.findData("my-plugin"))
        preview = rerun(qtbot, window, lambda: None)
        assert preview.strategy == "my-plugin"
    finally:
        cleanup()


def test_budget_exceeded_points_at_protected_blocks(qtbot, window) -> None:
    doc = window.ctx.document
    tiny = doc.request.settings.model_copy(update={"context_limit": 40, "reply_reserve": 5})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(tiny))
    assert preview.error is not None and preview.error.code == "TOKEN_BUDGET_EXCEEDED"
    assert window.banner.isVisibleTo(window)
    text = window.banner.text()
    assert "Protected blocks" in text and "character:description" in text
    with qtbot.waitSignal(window.error_shown, timeout=3000) as blocker:
        assert window.generate() is False  # nothing is sent over budget
    assert blocker.args[0].code == "TOKEN_BUDGET_EXCEEDED"


def test_budget_banner_shows_the_engines_figures_with_the_safety_margin(qtbot, window) -> None:
    # an approximate profile holds back a safety margin: the banner must say what the engine says
    doc = window.ctx.document
    tiny = doc.request.settings.model_copy(update={"context_limit": 60, "reply_reserve": 5,
                                                   "tokenizer": "generic-approx", "safety_margin_percent": 20})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(tiny))
    assert preview.error is not None and preview.error.code == "TOKEN_BUDGET_EXCEEDED"
    assert preview.safety_margin > 0
    details = preview.error.details
    text = window.banner.text()
    assert f"{details['protected_tokens']} tokens but the budget is {details['budget']}" in text
    assert f"safety margin {preview.safety_margin}" in text
    assert f"budget of {preview.budget:,}" not in text
    sources = {b.source for b in preview.blocks if b.id in details["protected_blocks"]}
    assert any(source in text for source in sources)


def test_layout_and_last_chat_persist(qtbot, window, library, qsettings) -> None:
    from gui.app import build_context
    from gui.main_window import MainWindow

    store, chat_id, _ = library
    window.splitter.setSizes([300, 600, 380])
    window.select_tab("lorebook")
    sizes = window.splitter.sizes()
    window.save_state()
    ctx = build_context(store, settings=qsettings)
    other = MainWindow(ctx)
    qtbot.addWidget(other)
    other.resize(window.size())
    other.restore_state()
    assert other.inspector_tabs.currentIndex() == 1
    assert other.splitter.sizes() == sizes
    with qtbot.waitSignal(other.preview_applied, timeout=20000):
        other.start()
    assert other.ctx.document.chat_id == chat_id
    ctx.preview.shutdown()


def test_invalid_settings_input_is_refused(qtbot, window) -> None:
    panel = window.settings_panel
    emitted = []
    panel.settings_edited.connect(emitted.append)
    panel.reserve_edit.setText("lots")
    panel.reserve_edit.editingFinished.emit()
    assert emitted == []
    assert panel.error_label.text().startswith("Not applied")
    assert isinstance(window.ctx.document.request.settings, ContextSettings)


def test_approximate_profile_shows_badges_and_safety_margin(qtbot, window) -> None:
    doc = window.ctx.document
    claude = doc.request.settings.model_copy(update={"model": "claude-3-5-sonnet"})
    preview = rerun(qtbot, window, lambda: window.settings_panel.settings_edited.emit(claude))
    assert preview.tokenizer.approximate and preview.safety_margin > 0
    assert window.approx_badge.isVisibleTo(window)
    assert not window.settings_panel.badge.isHidden()
    safety = next(s for s in window.budget_bar.segments() if s.key == "safety")
    assert safety.tokens == preview.safety_margin


def test_failed_preview_shows_a_banner_and_keeps_the_lorebook_editable(qtbot, window) -> None:
    from engine.errors import SettingsError

    def broken(request):
        raise SettingsError("UNKNOWN_STRATEGY", "internal words")

    window.ctx.preview.set_compute(broken)
    with qtbot.waitSignal(window.preview_applied, timeout=10000) as blocker:
        window.ctx.preview.flush()
    assert blocker.args == [None]
    assert window.banner.isVisibleTo(window)
    assert "UNKNOWN_STRATEGY" in window.banner.text() and "internal words" not in window.banner.text()
    assert window.preview is not None  # same chat: the last good preview stays on screen


def test_chat_view_names_are_the_pipelines(window) -> None:
    # issue 10 item 1: the chat view names speakers as the preview substitutes {{user}}/{{char}}
    from engine.resolve import speaker_names

    req = window.ctx.document.request
    names = speaker_names(req)
    model = window.chat_view.model
    user_msg = next(m for m in req.chat.messages if m.role == "user" and not m.name)
    assert model.speaker(user_msg) == names.user
    card = req.character.model_copy(update={"nickname": "Mari"}) if req.character is not None else None
    if card is not None:
        window.ctx.document.request = req.model_copy(update={"character": card})
        window.presenter.messages_changed()
        bot_msg = next((m for m in req.chat.messages if m.role == "assistant" and not m.name), None)
        if bot_msg is not None:
            assert model.speaker(bot_msg) == speaker_names(window.ctx.document.request).char == "Mari"
