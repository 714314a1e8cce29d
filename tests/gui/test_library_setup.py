"""The library panels, the per-chat prompt setup editor and the full entry editor (issue 18).

Each edit is checked the way a writer sees it: the preview changes, Ctrl+Z puts it back, Ctrl+Shift+Z
re-applies it, and a new window on the same SQLite file (a restart) still shows it. The chat is the
SillyTavern fixture folder of issue 17 (``tests/engine/importers/st_fixture.py``), imported through
the app's *Open SillyTavern folder*.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt

from engine.storage import open_store
from tests.engine.importers.st_fixture import build_st_user

UNUSED = "Unused: never linked."


def _open_window(qtbot, db: str, settings: QSettings, chat_id: str | None = None):
    from gui.app import build_context
    from gui.main_window import MainWindow

    store = open_store(db, seed=False)
    ctx = build_context(store, settings=settings)
    win = MainWindow(ctx)
    win.confirm = lambda *_a: True
    qtbot.addWidget(win)
    win.resize(1440, 900)
    win.show()
    qtbot.waitExposed(win)
    win.activateWindow()
    if chat_id is not None:
        with qtbot.waitSignal(win.preview_applied, timeout=20000):
            win.start(chat_id)
    return win


def _close(win) -> None:
    win.generation.wait(5000)
    win.ctx.preview.shutdown()
    win.close()
    win.ctx.store.close()


def rerun(qtbot, win, action):
    """Run ``action`` and wait for the preview it causes; returns the preview."""
    with qtbot.waitSignal(win.preview_applied, timeout=20000) as blocker:
        action()
    return blocker.args[0]


def ctrl_z(qtbot, win):
    """Ctrl+Z on the window (the Edit → Undo shortcut); returns the preview that follows."""
    assert win.undo_action.shortcut().toString() == "Ctrl+Z"
    return rerun(qtbot, win, lambda: _key(qtbot, win, Qt.KeyboardModifier.ControlModifier))


def ctrl_shift_z(qtbot, win):
    """Ctrl+Shift+Z (Edit → Redo)."""
    assert "Ctrl+Shift+Z" in [k.toString() for k in win.redo_action.shortcuts()]
    return rerun(qtbot, win, lambda: _key(
        qtbot, win, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier))


def _key(qtbot, win, modifiers) -> None:
    """Press Z with ``modifiers`` in the active window, so the window's shortcut map handles it."""
    from PySide6.QtWidgets import QApplication

    win.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is win, timeout=5000)
    # the prompt blocks list has focus (a text box would take Ctrl+Z for its own typing undo)
    win.blocks_panel.setFocus()
    before = win.ctx.undo_stack.index()
    qtbot.keyClick(win.blocks_panel, Qt.Key.Key_Z, modifiers)
    assert win.ctx.undo_stack.index() != before, "the shortcut did not reach the undo stack"


def text_of(preview) -> str:
    return "\n".join(str(m.get("content") or "") for m in preview.messages)


def restart(qtbot, win, settings):
    """Close ``win`` and open a new window (new AppContext, new Store) on the same SQLite file."""
    db, chat_id = win.ctx.store.url, win.ctx.document.chat_id
    _close(win)
    return _open_window(qtbot, db, settings, chat_id)


@pytest.fixture
def st_window(qtbot, tmp_path: Path, qsettings):
    """A window on the SillyTavern fixture folder, imported through File → Open SillyTavern folder."""
    user = build_st_user(tmp_path)
    db = f"sqlite:///{tmp_path / 'library.sqlite3'}"
    win = _open_window(qtbot, db, qsettings)
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        report = win.library_setup.import_folder(user)
    assert report is not None and {r.kind for r in report.added} == {"lorebook", "character", "persona", "chat"}
    assert win.ctx.document.chat_id == next(r.id for r in report.added if r.kind == "chat")
    assert win.library_setup.summary_box.text().startswith("Imported ")
    win.library_setup.summary_box.close()
    holder = {"win": win}
    yield holder
    _close(holder["win"])


def _book_id(win, name: str) -> str:
    return next(b.id for b in win.ctx.store.lorebooks.summaries() if b.name == name)


def test_import_folder_summary_and_library_panels(st_window) -> None:
    win = st_window["win"]
    setup = win.library_setup
    text = setup.report_text(setup.last_report)
    assert text.startswith("Imported ") and "7 added, 0 changed, 0 unchanged" in text
    assert "Library → Chats, Characters, Lorebooks, Personas" in text
    panels = setup.tabs.panels
    assert len(panels["character"].ids()) == 1 and len(panels["persona"].ids()) == 1
    assert len(panels["lorebook"].ids()) == 5  # 4 worlds and the card's embedded book
    # where used: the global world Realm is linked to the chat with scope "global"
    panels["lorebook"].select(_book_id(win, "Realm"))
    assert "“voyage” (global)" in panels["lorebook"].usage.text()
    panels["lorebook"].select(_book_id(win, "Unused"))
    assert panels["lorebook"].usage.text() == "Used by no chat."
    # search filters the list
    panels["lorebook"].search.setText("voy")
    assert panels["lorebook"].proxy.rowCount() == 1
    # re-import: everything unchanged, nothing duplicated
    report = setup.import_folder(Path(setup.last_report.folder))
    assert len(report.unchanged) == 7 and not report.added
    assert len(win.ctx.store.lorebooks.summaries()) == 5


def test_rename_delete_and_new_chat(qtbot, st_window) -> None:
    win = st_window["win"]
    setup = win.library_setup
    store = win.ctx.store
    char_id = setup.tabs.panels["character"].ids()[0]
    assert setup.rename("character", char_id, "Kael the Wanderer")
    assert store.characters.get(char_id).name == "Kael the Wanderer"
    setup.ask_text = lambda *_a: "Old Alex"
    setup.tabs.panels["persona"].select(setup.tabs.panels["persona"].ids()[0])
    setup.tabs.panels["persona"].rename_button.click()
    assert [p.name for p in store.personas.summaries()] == ["Old Alex"]
    # new chat with this character opens on its first message
    before = len(store.chats.summaries())
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        setup.tabs.panels["character"].select(char_id)
        setup.tabs.panels["character"].action_button.click()
    assert len(store.chats.summaries()) == before + 1
    assert win.ctx.document.request.chat.messages[0].role == "assistant"
    assert "shakes rain" in win.ctx.document.request.chat.messages[0].content
    # delete asks first; refusing keeps it
    unused = _book_id(win, "Unused")
    win.confirm = lambda *_a: False
    assert not setup.delete("lorebook", unused)
    win.confirm = lambda *_a: True
    assert setup.delete("lorebook", unused)
    assert unused not in setup.tabs.panels["lorebook"].ids()


def test_import_of_a_world_says_where_it_went(qtbot, st_window, tmp_path: Path) -> None:
    win = st_window["win"]
    world = tmp_path / "Extra.json"
    world.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": ["x"], "content": "extra"}}}), encoding="utf-8")
    refs = win.import_files([str(world)])
    assert [r.kind for r in refs] == ["lorebook"]
    setup = win.library_setup
    assert setup.tabs.currentWidget() is setup.tabs.panels["lorebook"]
    assert setup.tabs.panels["lorebook"].current_id() == refs[0].id
    assert "Library → Lorebooks" in win.statusBar().currentMessage()


def test_attach_standalone_lorebook_undo_and_restart(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    assert UNUSED not in text_of(win.preview)
    unused = _book_id(win, "Unused")
    panel = win.library_setup.setup_panel
    assert panel.book_picker.findData(unused) >= 0
    preview = rerun(qtbot, win, lambda: panel.attach(unused, "chat"))
    assert text_of(preview).count(UNUSED) == 1
    assert ("Unused" in [panel.books_table.item(r, 0).text() for r in range(panel.books_table.rowCount())])
    preview = ctrl_z(qtbot, win)
    assert UNUSED not in text_of(preview)
    preview = ctrl_shift_z(qtbot, win)
    assert text_of(preview).count(UNUSED) == 1
    win = st_window["win"] = restart(qtbot, win, qsettings)
    assert text_of(win.preview).count(UNUSED) == 1


def test_moving_a_lorebook_from_chat_to_global_scope_keeps_it_once(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    panel = win.library_setup.setup_panel
    unused = _book_id(win, "Unused")
    rerun(qtbot, win, lambda: panel.attach(unused, "chat"))
    row = [b for b, _ in panel.state.links].index(unused)
    combo = panel.books_table.cellWidget(row, 1)
    assert combo.currentData() == "chat"
    preview = rerun(qtbot, win, lambda: combo.setCurrentIndex(combo.findData("global")))
    assert dict(panel.state.links)[unused] == "global"
    assert text_of(preview).count(UNUSED) == 1
    # the scope decides the order (getSortedEntries): global lore now comes with Realm, after chat lore
    trace_books = [r.book for r in preview.lorebook_trace if r.activated]
    assert trace_books, preview.lorebook_trace[:2]
    ctrl_z(qtbot, win)
    assert dict(panel.state.links)[unused] == "chat"
    ctrl_shift_z(qtbot, win)
    win = st_window["win"] = restart(qtbot, win, qsettings)
    assert dict(win.library_setup.setup_panel.state.links)[unused] == "global"
    assert text_of(win.preview).count(UNUSED) == 1


def test_persona_and_authors_note_edits(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    panel = win.library_setup.setup_panel
    old_desc = "Alex is a young cartographer from Kael's past."
    assert old_desc in text_of(win.preview)
    panel.persona_description.setPlainText("{{user}} is a retired lighthouse keeper.")
    preview = rerun(qtbot, win, panel.apply_persona)
    assert "Alex is a retired lighthouse keeper." in text_of(preview) and old_desc not in text_of(preview)
    panel.note_text.setPlainText("[Mention the lighthouse.]")
    panel.note_depth.setValue(1)
    preview = rerun(qtbot, win, panel.apply_note)
    assert "[Mention the lighthouse.]" in text_of(preview) and "[Keep the tone" not in text_of(preview)
    # the note now sits one message from the end (SillyTavern depth 1)
    contents = [str(m.get("content")) for m in preview.messages]
    at = next(i for i, c in enumerate(contents) if "[Mention the lighthouse.]" in c)
    assert at == len(contents) - 3  # ... note, last message, post-history instructions
    preview = ctrl_z(qtbot, win)
    assert "[Keep the tone tense.]" in text_of(preview) and "lighthouse.]" not in text_of(preview)
    preview = ctrl_z(qtbot, win)
    assert old_desc in text_of(preview)
    ctrl_shift_z(qtbot, win)
    preview = ctrl_shift_z(qtbot, win)
    assert "[Mention the lighthouse.]" in text_of(preview)
    win = st_window["win"] = restart(qtbot, win, qsettings)
    text = text_of(win.preview)
    assert "Alex is a retired lighthouse keeper." in text and "[Mention the lighthouse.]" in text
    assert win.library_setup.setup_panel.note_depth.value() == 1


def test_prompt_order_reorder_and_toggle(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    panel = win.library_setup.setup_panel

    def sources(preview):
        return [b.source for b in preview.blocks]

    before = sources(win.preview)
    assert before.index("prompt:personaDescription") < before.index("prompt:charDescription")
    ids = [panel.order_list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(panel.order_list.count())]
    row = ids.index("charDescription")
    panel.order_list.setCurrentRow(row)
    preview = rerun(qtbot, win, panel.order_up.click)
    after = sources(preview)
    assert after.index("prompt:charDescription") < after.index("prompt:personaDescription")
    assert preview.messages[2]["content"].startswith("Kael is a wandering swordsman")
    # toggling a prompt off removes it, as the Prompt Manager's switch does
    jb = ids.index("jailbreak")
    preview = rerun(qtbot, win, lambda: panel.order_list.item(jb).setCheckState(Qt.CheckState.Unchecked))
    assert "prompt:jailbreak" not in sources(preview)
    ctrl_z(qtbot, win)
    preview = ctrl_z(qtbot, win)
    assert sources(preview) == before
    ctrl_shift_z(qtbot, win)
    win = st_window["win"] = restart(qtbot, win, qsettings)
    after = sources(win.preview)
    assert after.index("prompt:charDescription") < after.index("prompt:personaDescription")
    assert "prompt:jailbreak" in after


def _activated(preview) -> int:
    return sum(1 for r in preview.lorebook_trace if r.activated)


def test_create_and_delete_entry_change_activation(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    setup = win.library_setup
    editor = setup.entry_editor
    realm = _book_id(win, "Realm")
    base = _activated(win.preview)
    # New entry in Realm, then give it a key the chat mentions
    editor.book_picker.setCurrentIndex(editor.book_picker.findData(realm))
    rerun(qtbot, win, editor.new_button.click)
    new_uid = max(int(e.uid) for e in win.ctx.store.lorebooks.get(realm).entries)
    assert editor.entry is not None and int(editor.entry.uid) == new_uid
    editor.keys.setText("harbor")  # the last message mentions the harbor (scan depth 2)
    editor.content.setPlainText("Realm: cloaks here are oiled against the rain.")
    editor.group.setText("weather")
    editor.sticky.setValue(2)
    preview = rerun(qtbot, win, editor.apply_button.click)
    assert _activated(preview) == base + 1 and "cloaks here are oiled" in text_of(preview)
    stored = next(e for e in win.ctx.store.lorebooks.get(realm).entries if int(e.uid) == new_uid)
    assert stored.group == "weather" and stored.sticky == 2
    # delete it: activation goes back
    editor_uid = editor.entry.uid
    assert int(editor_uid) == new_uid
    preview = rerun(qtbot, win, editor.delete_button.click)
    assert _activated(preview) == base and "cloaks here are oiled" not in text_of(preview)
    preview = ctrl_z(qtbot, win)  # the delete undone
    assert _activated(preview) == base + 1
    preview = ctrl_z(qtbot, win)  # the field edit undone
    assert "cloaks here are oiled" not in text_of(preview)
    preview = ctrl_z(qtbot, win)  # the creation undone
    assert all(int(e.uid) != new_uid for e in win.ctx.store.lorebooks.get(realm).entries)
    ctrl_shift_z(qtbot, win)
    preview = ctrl_shift_z(qtbot, win)
    assert _activated(preview) == base + 1
    # duplicate an active entry: one more activation
    win.lorebook_tab.select_entry([*win.ctx.document.lorebook_ids].index(realm), 0)
    assert editor.entry is not None and int(editor.entry.uid) == 0
    preview = rerun(qtbot, win, editor.duplicate_button.click)
    assert _activated(preview) == base + 2
    win = st_window["win"] = restart(qtbot, win, qsettings)
    assert _activated(win.preview) == base + 2
    assert "cloaks here are oiled" in text_of(win.preview)


def test_world_info_and_model_settings_undoable(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    panel = win.library_setup.setup_panel
    panel.reply_reserve.setValue(1000)
    panel.context_limit.setValue(3000)
    preview = rerun(qtbot, win, panel.apply_model)
    assert preview.context_limit == 3000 and preview.reply_reserve == 1000
    panel.wi_depth.setValue(0)
    panel.wi_strategy.setCurrentIndex(panel.wi_strategy.findData("global_first"))
    preview = rerun(qtbot, win, panel.apply_world_info)
    assert win.ctx.document.request.settings.world_info.character_strategy == "global_first"
    ctrl_z(qtbot, win)
    assert win.ctx.document.request.settings.world_info.scan_depth != 0
    win = st_window["win"] = restart(qtbot, win, qsettings)
    assert win.preview.context_limit == 3000


def test_stage_template_chat_gets_sillytavern_setup(qtbot, window) -> None:
    """A chat made in the app (no SillyTavern setup): the prompt sections wait for the switch."""
    window.show()
    qtbot.waitExposed(window)
    panel = window.library_setup.setup_panel
    assert panel.state is not None and panel.state.sillytavern is None
    assert not panel.order_box.isEnabled() and not panel.st_button.isHidden()
    preview = rerun(qtbot, window, panel.st_button.click)
    assert panel.state.sillytavern is not None and panel.order_box.isEnabled()
    assert any(b.source == "prompt:main" for b in preview.blocks)
    preview = ctrl_z(qtbot, window)
    assert panel.state.sillytavern is None
    assert not any(b.source == "prompt:main" for b in preview.blocks)


def test_app_preview_equals_cli_preview_for_every_shared_chat(qtbot, shared_data: Path, tmp_path: Path,
                                                              qsettings, capsys) -> None:
    """The app's preview of every chat of the imported pristine SillyTavern folder is exactly what
    ``loomscope preview --chat-id ID --db URL --format json`` prints (the whole ContextPreview)."""
    from engine.cli import main

    folder = shared_data / "st-user" / "default-user"
    if not folder.is_dir():
        pytest.skip("no st-user/default-user in the shared data")
    db = f"sqlite:///{tmp_path / 'library.sqlite3'}"
    win = _open_window(qtbot, db, qsettings)
    try:
        report = win.library_setup.import_folder(folder)
        assert report is not None
        chats = win.ctx.store.chats.summaries()
        assert chats and {c.id for c in chats} == {r.id for r in report.added if r.kind == "chat"}
        for chat in chats:
            if win.ctx.document.chat_id != chat.id:
                with qtbot.waitSignal(win.preview_applied, timeout=20000):
                    win.open_chat(chat.id)
            qtbot.waitUntil(lambda: win.preview is not None and win.presenter.preview_chat == chat.id,
                            timeout=20000)
            app_view = win.preview.model_dump(mode="json")
            capsys.readouterr()
            code = main(["preview", "--chat-id", chat.id, "--db", db, "--format", "json"])
            out = capsys.readouterr().out
            assert code == 0
            cli_view = json.loads(out)
            assert app_view == cli_view, chat.title
            # the pristine folder says koboldhorde: one Text Completion prompt string (issue 26)
            assert app_view["strategy"] == "sillytavern" and (app_view["messages"] or app_view["prompt"])
    finally:
        _close(win)


def test_export_character_lorebook_and_chat(qtbot, st_window, tmp_path: Path) -> None:
    win = st_window["win"]
    setup = win.library_setup
    out = tmp_path / "export"
    setup.ask_directory = lambda *_a: str(out)
    char_id = setup.tabs.panels["character"].ids()[0]
    setup.tabs.panels["character"].select(char_id)
    setup.tabs.panels["character"].export_button.click()
    setup.tabs.panels["lorebook"].select(_book_id(win, "Realm"))
    setup.tabs.panels["lorebook"].export_button.click()
    win.library_setup.export_action.trigger()  # File → Export chat…
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert "characters/hero.png" in names and "worlds/Realm.json" in names
    assert any(n.startswith("chats/") and n.endswith(".jsonl") for n in names)
    # a second export asks before overwriting; refusing writes nothing
    before = (out / "worlds" / "Realm.json").stat().st_mtime_ns
    win.confirm = lambda *_a: False
    assert setup.export([_book_id(win, "Realm")], str(out)) == []
    assert (out / "worlds" / "Realm.json").stat().st_mtime_ns == before


def test_dropping_a_folder_imports_it(qtbot, st_window) -> None:
    win = st_window["win"]
    folder = Path(win.library_setup.last_report.folder)
    win.library_setup.import_dropped([str(folder)])
    assert len(win.library_setup.last_report.unchanged) == 7
    win.library_setup.summary_box.close()


def test_reorder_and_detach_lorebooks(qtbot, st_window, qsettings) -> None:
    win = st_window["win"]
    panel = win.library_setup.setup_panel
    names = [panel.books_table.item(r, 0).text() for r in range(panel.books_table.rowCount())]
    assert names == ["Realm", "Voyage", "HeroLore"]
    panel.books_table.selectRow(0)
    rerun(qtbot, win, panel.book_down.click)
    assert [panel.books_table.item(r, 0).text() for r in range(3)] == ["Voyage", "Realm", "HeroLore"]
    panel.books_table.selectRow(1)
    preview = rerun(qtbot, win, panel.detach_button.click)
    assert "Realm:" not in text_of(preview)
    preview = ctrl_z(qtbot, win)
    assert "Realm: the harbor city" in text_of(preview)
    ctrl_z(qtbot, win)
    assert [panel.books_table.item(r, 0).text() for r in range(3)] == ["Realm", "Voyage", "HeroLore"]


def test_entry_editor_saves_every_field(qtbot, st_window) -> None:
    from engine.schema.lorebook import InsertionPosition

    win = st_window["win"]
    editor = win.library_setup.entry_editor
    realm = _book_id(win, "Realm")
    win.lorebook_tab.select_entry([*win.ctx.document.lorebook_ids].index(realm), 1)
    assert editor.entry is not None and int(editor.entry.uid) == 1
    editor.secondary.setText("rain, wind")
    editor.logic.setCurrentIndex(editor.logic.findData(3))
    editor.position.setCurrentIndex(editor.position.findData(int(InsertionPosition.AT_DEPTH)))
    editor.depth_spin.setValue(3)
    editor.role.setCurrentIndex(editor.role.findData(1))
    editor.probability.setValue(40)
    editor.scan_depth.setValue(5)
    editor.case_sensitive.setCurrentIndex(editor.case_sensitive.findData(True))
    editor.whole_words.setCurrentIndex(editor.whole_words.findData(False))
    editor.group.setText("weather")
    editor.group_weight.setValue(250)
    editor.group_override.setChecked(True)
    editor.group_scoring.setCurrentIndex(editor.group_scoring.findData(True))
    editor.sticky.setValue(3)
    editor.cooldown.setValue(4)
    editor.delay.setValue(5)
    editor.exclude_recursion.setChecked(True)
    editor.prevent_recursion.setChecked(False)
    editor.delay_until_recursion.setValue(2)
    editor.ignore_budget.setChecked(True)
    # SillyTavern's filter holds card file names (getCharaFilename): Kael's card is characters/hero.png
    editor.filter_names.setText("hero, Sam")
    editor.filter_exclude.setChecked(True)
    rerun(qtbot, win, editor.apply_button.click)
    e = next(x for x in win.ctx.store.lorebooks.get(realm).entries if int(x.uid) == 1)
    assert e.secondary_keys == ["rain", "wind"] and int(e.selective_logic) == 3
    assert e.position == InsertionPosition.AT_DEPTH and e.depth == 3 and e.role == 1
    assert e.probability == 40 and e.scan_depth == 5
    assert e.case_sensitive is True and e.match_whole_words is False
    assert e.group == "weather" and e.group_weight == 250 and e.group_override and e.use_group_scoring is True
    assert (e.sticky, e.cooldown, e.delay) == (3, 4, 5)
    assert e.exclude_recursion and not e.prevent_recursion and e.delay_until_recursion == 2 and e.ignore_budget
    assert e.model_extra["characterFilter"]["names"] == ["hero", "Sam"]
    assert e.model_extra["characterFilter"]["isExclude"] is True
    # the character filter decides alone once the other conditions hold again (SillyTavern
    # checkWorldInfo: characterFilter names, isExclude)
    def fired(preview) -> bool:
        return any(r.book == "Realm" and str(r.uid) == "1" and r.activated
                   for r in preview.lorebook_trace)

    editor.secondary.setText("")
    editor.probability.setValue(100)
    editor.sticky.setValue(0)
    editor.cooldown.setValue(0)
    editor.delay.setValue(0)
    editor.delay_until_recursion.setValue(0)
    editor.scan_depth.setValue(-1)
    editor.case_sensitive.setCurrentIndex(editor.case_sensitive.findData(None))
    editor.whole_words.setCurrentIndex(editor.whole_words.findData(None))
    preview = rerun(qtbot, win, editor.apply_button.click)
    assert not fired(preview)  # excluded for hero.png (Kael)
    editor.filter_exclude.setChecked(False)
    preview = rerun(qtbot, win, editor.apply_button.click)
    assert fired(preview)  # only for hero and Sam: hero.png is the chat's card
    editor.filter_names.setText("Kael")
    preview = rerun(qtbot, win, editor.apply_button.click)
    assert not fired(preview)  # the character's name is not its file name: SillyTavern filters it out


def test_pick_persona_none_and_back(qtbot, st_window) -> None:
    win = st_window["win"]
    panel = win.library_setup.setup_panel
    desc = "Alex is a young cartographer from Kael's past."
    alex = panel.state.persona_id
    assert alex and desc in text_of(win.preview)
    preview = rerun(qtbot, win, lambda: panel.pick_persona(None))
    assert desc not in text_of(preview) and win.ctx.store.chats.get(win.ctx.document.chat_id).persona_id is None
    preview = ctrl_z(qtbot, win)
    assert desc in text_of(preview) and panel.state.persona_id == alex
    # the Personas panel's "Use in chat" does the same through the panel
    personas = win.library_setup.tabs.panels["persona"]
    personas.select(alex)
    assert "“voyage” (persona)" in personas.usage.text()


def test_excluding_a_message_of_a_sillytavern_chat_sticks(qtbot, st_window) -> None:
    # SillyTavern's assembly leaves an excluded message out (coreChat) and says so on the block
    # (manual_excluded), so the optimistic click is confirmed and no strategy switch is needed
    win = st_window["win"]
    truncate = win.ctx.document.request.settings.model_copy(update={"strategy": "truncate"})
    pv = rerun(qtbot, win, lambda: win.settings_panel.settings_edited.emit(truncate))
    strategy = win.ctx.document.request.settings.strategy
    assert strategy == "truncate" and pv.strategy == "sillytavern"
    target = next(b for b in pv.blocks if b.status == "kept" and b.kind == "message" and b.message_index)
    pv = rerun(qtbot, win, lambda: win.chat_view.exclude_toggled.emit(target.message_index, True))
    block = next(b for b in pv.blocks if b.message_index == target.message_index and b.kind == "message")
    assert (block.status, block.reason, block.manual_excluded) == ("excluded", "MANUAL_EXCLUDED", True)
    assert win.ctx.document.request.settings.strategy == strategy
    assert "does not show it" not in win.statusBar().currentMessage()


def test_entry_editor_says_when_an_entry_has_a_running_timer(qtbot, st_window) -> None:
    """Issue 27: editing an entry with a stored sticky / cooldown orphans it in SillyTavern; the editor says so."""
    win = st_window["win"]
    editor = win.library_setup.entry_editor
    doc = win.ctx.document
    realm = _book_id(win, "Realm")
    tw = {"sticky": {"Realm.1": {"hash": 1, "start": 3, "end": 13, "protected": False}}, "cooldown": {}}
    doc.request = doc.request.model_copy(update={"chat": doc.request.chat.model_copy(
        update={"metadata": {**doc.request.chat.metadata, "timedWorldInfo": tw}})})
    win.lorebook_tab.select_entry([*doc.lorebook_ids].index(realm), 1)
    assert editor.entry is not None and int(editor.entry.uid) == 1
    assert editor.timer_note.isVisibleTo(editor)
    assert "sticky until message 13" in editor.timer_note.text() and "orphans" in editor.timer_note.text()
    shots = Path("/work/notes/shots")
    if shots.is_dir():
        body = editor.widget()
        body.resize(440, body.sizeHint().height())
        body.grab().save(str(shots / "issue27-entry-timer-note.png"))
    win.lorebook_tab.select_entry([*doc.lorebook_ids].index(realm), 0)
    assert not editor.timer_note.isVisibleTo(editor)
