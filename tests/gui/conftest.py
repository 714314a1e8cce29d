"""GUI fixtures: a temp QSettings, a real SQLite library, and a main window on it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from engine.schema import Character, Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, Persona


@pytest.fixture(autouse=True)
def _collector_as_found():
    """Each GUI test leaves the garbage collector as it found it.

    A window whose chat was opened keeps automatic collection off and its objects frozen while the
    chat is open (``gui.gc_policy``); a test that does not close it would hand that state to the
    next test (an engine test that counts on cyclic garbage being collected, say).
    """
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    yield
    if gc.get_freeze_count() > frozen:
        gc.unfreeze()
    if enabled and not gc.isenabled():
        gc.enable()


@pytest.fixture
def qsettings(tmp_path: Path) -> QSettings:
    """Settings in a temp INI file, never the user's."""
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def _chat(n: int) -> Chat:
    msgs = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append(ChatMessage(role=role, content=f"Message {i}: the courier walks along the quay, "
                                                   f"counting lanterns and thinking about the parcel. " * 2))
    return Chat(title="Test chat", messages=msgs, user_name="Wren", character_name="Marisol")


@pytest.fixture
def library(tmp_path: Path):
    """A real SQLite library with one chat (20 messages), a character, a persona and a lorebook.

    Yields ``(store, chat_id, lorebook_id)``.
    """
    from engine.storage import open_store

    store = open_store(f"sqlite:///{tmp_path / 'library.sqlite3'}", seed=False)
    char_id = store.characters.add(Character(name="Marisol", description="A night archivist."))
    persona_id = store.personas.add(Persona(name="Wren", description="A courier."))
    book = Lorebook(name="City", entries=[
        LorebookEntry(uid=1, keys=["dragon"], content="Dragons nest above the bell tower of the city.",
                      comment="Dragons"),
    ])
    book_id = store.lorebooks.add(book)
    chat_id = store.chats.add(_chat(20), title="Test chat", character_id=char_id, persona_id=persona_id,
                             lorebook_ids=[book_id], settings=ContextSettings(model="gpt-4o", reply_reserve=256))
    yield store, chat_id, book_id
    store.close()


@pytest.fixture
def window(qtbot, library, qsettings):
    """A main window on :func:`library`'s chat, with the first preview applied."""
    from gui.app import build_context
    from gui.main_window import MainWindow

    store, chat_id, _ = library
    ctx = build_context(store, settings=qsettings)
    win = MainWindow(ctx)
    qtbot.addWidget(win)
    win.resize(1280, 800)
    with qtbot.waitSignal(win.preview_applied, timeout=20000):
        win.start(chat_id)
    yield win
    win.generation.wait(5000)
    ctx.preview.shutdown()
