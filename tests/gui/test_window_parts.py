"""The main window's chat opening (gui.window_chat.ChatOpener) and preview presentation
(gui.window_preview.PreviewPresenter) as composed parts (issue 29, GUI part item 3): each works on
what its protocol in gui.window_parts names, and the window only forwards to them."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QLabel

from engine.schema import ChatMessage
from gui.errors import UserError
from gui.models.blocks_model import BlockColumn
from gui.window_chat import LAST_CHAT_KEY, ChatOpener
from gui.window_preview import PreviewPresenter, newest_prose_message

CHECK = Qt.ItemDataRole.CheckStateRole


def _click_exclude(qtbot, window, message_index: int) -> object:
    model, proxy = window.blocks_panel.model, window.blocks_panel.proxy
    cell = proxy.mapFromSource(model.index(model.row_of_message(message_index), BlockColumn.EXCLUDE))
    want = Qt.CheckState.Unchecked if cell.data(CHECK) == Qt.CheckState.Checked else Qt.CheckState.Checked
    with qtbot.waitSignal(window.preview_applied, timeout=30000) as blocker:
        proxy.setData(cell, want, CHECK)
    return blocker.args[0]


def test_the_window_composes_the_opener_and_the_presenter(window) -> None:
    assert isinstance(window.opener, ChatOpener) and isinstance(window.presenter, PreviewPresenter)
    assert window.preview is window.presenter.preview is not None
    assert window.presenter.preview_chat == window.ctx.document.chat_id
    assert window.opener.loader is window.chat_loader
    assert window.rollback_note == window.presenter.rollback_note == ""


def test_a_click_leaves_no_earlier_preview_alive(qtbot, window) -> None:
    """Only the preview shown is kept: the blocks table's last delta holds a weak reference to the
    one before it, and nothing else in the window holds that one."""
    first = weakref.ref(window.preview)
    second = _click_exclude(qtbot, window, 4)
    qtbot.wait(20)
    gc.collect()
    assert first() is None
    delta = window.blocks_panel.model.last_delta
    assert delta is not None and delta.new is second is window.preview and delta.old is None
    third = _click_exclude(qtbot, window, 6)
    assert window.blocks_panel.model.last_delta.follows(second) and window.preview is third
    held = weakref.ref(second)
    del second, delta
    qtbot.wait(20)  # the pool lets go of the finished job (tests/gui/preview/test_controller.py)
    gc.collect()
    assert held() is None


def test_opening_another_chat_never_shows_the_old_chats_preview(qtbot, window, library) -> None:
    store, chat_id, _ = library
    assert window.preview is not None
    other = store.chats.add(store.chats.get(chat_id).chat.model_copy(update={"title": "Other"}), title="Other")
    window.refresh_library()
    window.open_chat(other)
    # the old chat is closed at once: its blocks go, the new title shows while the chat loads
    assert window.presenter.preview is None and window.blocks_panel.model.rowCount() == 0
    assert window.title_label.text() in ("Other", "(opening…)")
    with qtbot.waitSignal(window.preview_applied, timeout=30000):
        pass
    assert window.presenter.preview_chat == other == window.ctx.document.chat_id
    assert window.ctx.settings.value(LAST_CHAT_KEY) == other


def test_a_chat_that_cannot_be_read_clears_the_header_and_says_why(qtbot, window) -> None:
    window.open_chat(None)
    shown: list[UserError] = []
    window.error_shown.connect(shown.append)
    window.opener.failed("gone", UserError("CHAT_NOT_FOUND", "That chat is no longer in the library."))
    assert window.title_label.text() == "(no chat)" and window.windowTitle() == "Loomscope"
    assert window.status_label.text() == ""
    assert [e.code for e in shown] == ["CHAT_NOT_FOUND"]


def test_the_opener_needs_only_its_protocol(qtbot, tmp_path) -> None:
    """A window that is no MainWindow, only what OpenerWindow names: ``start`` opens the last chat."""
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    settings.setValue(LAST_CHAT_KEY, "b")
    loaded: list[str | None] = []
    done = SimpleNamespace(ok=True, value=[SimpleNamespace(id="a", title="A"), SimpleNamespace(id="b", title="B")])
    library = SimpleNamespace(chats=None, set_chats=lambda chats, current: setattr(library, "chats", chats),
                              chat_ids=lambda: [c.id for c in library.chats])
    document = SimpleNamespace(chat_id=None, load_chat=loaded.append)
    window = SimpleNamespace(
        ctx=SimpleNamespace(store=SimpleNamespace(chats=SimpleNamespace(summaries=None)), settings=settings,
                            document=document),
        commands=SimpleNamespace(do=lambda _what, fn, *args: done if fn is None else fn(*args)),
        library=library, title_label=QLabel(), status_label=QLabel())
    opener = ChatOpener(window, None)  # type: ignore[arg-type]  # a stand-in, not a QMainWindow
    opener.start()
    assert [c.id for c in library.chats] == ["a", "b"]
    assert loaded == ["b"]  # no loader: opened through the runner on the UI thread
    assert not opener.is_loading()


def test_a_freshly_opened_chat_selects_its_newest_prose_message() -> None:
    msgs = [ChatMessage(role="user", content="hello"), ChatMessage(role="assistant", content="hi"),
            ChatMessage(role="tool", content="{}", tool_call_id="x"), ChatMessage(role="assistant", content="")]
    assert newest_prose_message(msgs) == 1
    assert newest_prose_message([ChatMessage(role="tool", content="{}", tool_call_id="x")]) == 0
