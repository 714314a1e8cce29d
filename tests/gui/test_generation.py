"""Generate from the window against a real HTTP server on 127.0.0.1 (tests/fake_provider.py)."""

from __future__ import annotations

import pytest

from gui.widgets.provider_dialog import ProviderSettings, save_provider_settings
from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch) -> None:
    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")


def _configure(window, server) -> None:
    save_provider_settings(window.ctx.settings, ProviderSettings(server.base_url, "fake-model", 10.0, True))


def test_generate_appends_reply_stores_audit_and_shows_progress(qtbot, window, library) -> None:
    store, chat_id, _ = library
    seen = []
    window.generation.progress.connect(seen.append)
    with FakeProviderServer("stream", reply_text="The ravens have already told her.", chunk_delay_s=0.01) as server:
        _configure(window, server)
        with qtbot.waitSignal(window.preview_applied, timeout=30000):
            with qtbot.waitSignal(window.generation.finished, timeout=30000) as blocker:
                assert window.generate()
                assert window.cancel_action.isEnabled()
    audit = blocker.args[0].audit
    assert audit.status == "completed"
    assert seen and seen[-1].state == "done"
    assert len({e.step_id for e in seen}) >= 1
    stored = store.audits.get(chat_id)
    assert stored is not None and stored.generation_id == audit.generation_id
    assert store.chats.get(chat_id).chat.messages[-1].text() == "The ravens have already told her."
    assert window.chat_view.model.message_count() == 21
    assert window.chat_view.model.progress_events() == []  # finished indicators are cleared
    assert window.audit.generation_id == audit.generation_id
    assert not window.cancel_action.isEnabled()


def test_cancel_while_running(qtbot, window, library) -> None:
    store, chat_id, _ = library
    shown: list = []
    window.error_shown.connect(shown.append)
    with FakeProviderServer("stall_stream", stall_s=20) as server:
        _configure(window, server)
        with qtbot.waitSignal(window.generation.finished, timeout=30000) as blocker:
            assert window.generate()
            qtbot.waitUntil(lambda: len(server.requests) == 1, timeout=10000)
            # one generation at a time: Generate is off everywhere while it runs
            assert not window.generate_action.isEnabled()
            assert not window.chat_view.generate_button.isEnabled()
            assert window.generate() is False
            window.cancel_action.trigger()
    assert blocker.args[0].audit.status == "cancelled"
    # the writer's own Cancel is not an error: no warning dialog, a status line instead
    assert shown == []
    assert "cancelled" in window.statusBar().currentMessage().lower()
    assert window.generate_action.isEnabled() and window.chat_view.generate_button.isEnabled()
    assert store.chats.get(chat_id).chat.messages[-1].role == "assistant"
    assert len(store.chats.get(chat_id).chat.messages) == 20  # nothing appended


def test_provider_error_is_mapped_never_the_body(qtbot, window) -> None:
    with FakeProviderServer("500") as server:
        _configure(window, server)
        with qtbot.waitSignal(window.error_shown, timeout=30000) as err:
            assert window.generate()
    assert err.args[0].code == "PROVIDER_SERVER_ERROR"
    assert UPSTREAM_MARKER not in err.args[0].text
