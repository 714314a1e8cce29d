"""The app bootstrap: ``--screenshot`` writes a PNG of at least 1280×800 and exits 0."""

from __future__ import annotations

from PySide6.QtGui import QImage

from gui.app import run_app


def test_screenshot_writes_png_of_the_chat(tmp_path, library) -> None:
    store, chat_id, _ = library
    url = str(store.url) if not callable(store.url) else store.url()
    out = tmp_path / "shots" / "window.png"
    assert run_app(db=url, screenshot=str(out), chat=chat_id, tab="chat") == 0
    image = QImage(str(out))
    assert not image.isNull()
    assert image.width() >= 1280 and image.height() >= 800


def test_screenshot_unknown_tab_is_a_usage_error(tmp_path, library, capsys) -> None:
    store, chat_id, _ = library
    url = str(store.url) if not callable(store.url) else store.url()
    assert run_app(db=url, screenshot=str(tmp_path / "x.png"), chat=chat_id, tab="nope") == 2
    assert "unknown tab" in capsys.readouterr().err


def test_screenshot_of_an_unknown_chat_exits_2(tmp_path, capsys):
    from engine.cli import main

    code = main(["--screenshot", str(tmp_path / "s.png"), "--db", f"sqlite:///{tmp_path / 'lib.db'}",
                 "--chat", "no-such-chat"])
    assert code == 2
    assert "CHAT_NOT_FOUND" in capsys.readouterr().err
    assert not (tmp_path / "s.png").exists()
