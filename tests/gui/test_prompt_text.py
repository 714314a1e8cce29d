"""The window's Prompt text tab and Text Completion Generate (issue 26 items 4 and 5; pytest-qt, offscreen).

The Text Completion preview is the pipeline's own laid out as one string by ``tests/tc_preview.py``
(at the pipeline's ``prepare``, so the preview worker and Generate both see it).
"""

from __future__ import annotations

import pytest

import engine.pipeline as pipeline
from engine.errors import LoomscopeError
from gui.widgets.provider_dialog import ProviderSettings, save_provider_settings
from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer
from tests.tc_preview import STOP, as_text_completion, prepared_as_text_completion


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch) -> None:
    monkeypatch.delenv("LOOMSCOPE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("LOOMSCOPE_NO_KEYRING", "1")


@pytest.fixture
def tc_pipeline(monkeypatch):
    """Every prepared prompt from here on is a Text Completion one."""
    real = pipeline.prepare
    monkeypatch.setattr(pipeline, "prepare", lambda request, **kw: prepared_as_text_completion(real(request, **kw)))


def test_prompt_tab_follows_the_blocks_table_both_ways(window) -> None:
    tc = as_text_completion(window.preview)
    window.apply_preview(tc)
    assert window.select_tab("prompt")
    view = window.prompt_text_view
    assert window.centre_tabs.currentWidget() is view
    assert view.text() == tc.prompt and view.header.text().startswith("Text Completion")
    # a click on a message's text selects its row
    target = next(i for i, b in enumerate(tc.blocks) if b.kind == "message" and b.span is not None and i > 3)
    assert view.click_at(tc.blocks[target].span[0] + 1) == target
    assert window.blocks_panel.current_block().position == target
    # a row chosen in the table is outlined in the text
    window.blocks_panel.select_message(tc.blocks[target + 2].message_index)
    assert view.selected_block() == target + 2
    assert view.selected_ranges() == [tc.blocks[target + 2].span]


def test_chat_completion_chat_says_it_is_a_message_list(window) -> None:
    window.select_tab("prompt")
    view = window.prompt_text_view
    assert view.header.text() == "Chat Completion · gpt-4o · o200k_base exact"
    assert not view.note.isHidden() and "list of messages" in view.note.text()
    assert "── user ──" in view.text()


def _configure(window, server, extra: dict | None = None) -> None:
    save_provider_settings(window.ctx.settings, ProviderSettings(server.base_url, "fake-model", 10.0, True,
                                                                 extra or {}))


def test_generate_sends_the_prompt_string(qtbot, window, library, tc_pipeline) -> None:
    store, chat_id, _ = library
    expected = pipeline.prepare(window.ctx.document.snapshot()).preview
    with FakeProviderServer("stream", reply_text="The ravens have already told her.", chunk_delay_s=0.01) as server:
        _configure(window, server, {"temperature": 0.8, "min_p": 0.05})
        with qtbot.waitSignal(window.generation.finished, timeout=30000) as blocker:
            assert window.generate()
    audit = blocker.args[0].audit
    assert audit.status == "completed", audit.error_message
    [req] = server.requests
    assert req["path"] == "/v1/completions"
    assert (req["body"]["temperature"], req["body"]["min_p"]) == (0.8, 0.05)  # the provider settings' samplers
    assert req["body"]["prompt"] == expected.prompt and req["body"]["stop"] == STOP
    assert req["body"]["max_tokens"] == expected.reply_reserve
    stored = store.audits.get(chat_id)
    assert stored is not None and (stored.api, stored.prompt) == ("text_completion", expected.prompt)
    assert store.chats.get(chat_id).chat.messages[-1].text() == "The ravens have already told her."


def test_chat_only_endpoint_is_one_clear_message(qtbot, window, tc_pipeline) -> None:
    with FakeProviderServer("answer") as server:
        server.text_route = "404"
        _configure(window, server)
        with qtbot.waitSignal(window.error_shown, timeout=30000) as err:
            assert window.generate()
    assert err.args[0].code == "PROVIDER_NO_TEXT_COMPLETION"
    assert "only speaks Chat Completion" in err.args[0].text and UPSTREAM_MARKER not in err.args[0].text
    assert window.audit is not None and window.audit.error_code == "PROVIDER_NO_TEXT_COMPLETION"


def test_imported_text_completion_folder_shows_the_engine_string(qtbot, tmp_path, qsettings, shared_data) -> None:
    from engine import text_completion_title
    from engine.tokenizers.sillytavern_text import sillytavern_text_tokenizer
    from tests.gui.test_library_setup import _close, _open_window

    win = _open_window(qtbot, f"sqlite:///{tmp_path / 'library.sqlite3'}", qsettings)
    try:
        with qtbot.waitSignal(win.preview_applied, timeout=60000):
            win.library_setup.import_folder(shared_data / "st-user" / "default-user")
        win.library_setup.summary_box.close()
        pv = win.preview
        assert pv.api == "text_completion"
        win.select_tab("prompt")
        view = win.prompt_text_view
        assert view.text() == pv.prompt
        assert view.header.text() == text_completion_title(pv)  # the engine's words
        assert view.header.text().startswith("Text Completion · instruct off · ")
        shaded = [i for i, b in enumerate(pv.blocks) if b.span is not None and b.span[1] > b.span[0]]
        assert {view.block_at(pv.blocks[i].span[0]) for i in shaded} == set(shaded)
        view.tokens_box.setChecked(True)
        # the boundaries of the tokenizer the preview counted with: SillyTavern's (26tok), else its profile
        tc = win.ctx.document.request.sillytavern.text_completion
        tok = sillytavern_text_tokenizer(pv.strategy_info["st_tokenizer_id"], tc.main_api, tc.model or pv.model)
        if tok.key == pv.tokenizer.profile:
            expected = tok.spans(pv.prompt)
        else:
            try:
                expected = win.ctx.registries.tokenizers.get(pv.tokenizer.profile).token_spans(pv.prompt)
            except LoomscopeError:
                expected = tok.spans(pv.prompt)
        assert view.token_spans() == sorted(expected) and len(expected) > 100
        # the blocks table and the text follow each other on the real preview
        lore = next(i for i in shaded if pv.blocks[i].kind == "lorebook")
        view.click_at(pv.blocks[lore].span[0])
        assert win.blocks_panel.current_block().position == lore
        # the Block inspector shades the block under the same tokenizer (not "unknown tokenizer profile")
        tokens_label = win.block_inspector._labels["tokens"].text()
        assert "unknown tokenizer profile" not in tokens_label and win.block_inspector.token_spans()
    finally:
        _close(win)


def test_provider_dialog_offers_the_text_completion_server_url(window, library, qsettings) -> None:
    from engine.schema.sillytavern import SillyTavernSetup, TextCompletionSetup
    from gui.widgets.provider_dialog import DEFAULT_BASE_URL, ProviderDialog

    store, chat_id, _ = library
    assert window._setup_server_url() is None  # a Chat Completion chat: the usual default
    tc = TextCompletionSetup(main_api="textgenerationwebui", textgen_type="koboldcpp",
                             server_url="http://127.0.0.1:5001")
    store.chats.save_setup(chat_id, SillyTavernSetup(text_completion=tc))
    window.ctx.document.reload()
    assert window._setup_server_url() == "http://127.0.0.1:5001"
    dialog = ProviderDialog(window.ctx.settings, "m", window, default_base_url=window._setup_server_url())
    assert dialog.base_url.text() == "http://127.0.0.1:5001"
    dialog.deleteLater()
    # a URL the writer saved wins
    window.ctx.settings.setValue("provider/base_url", DEFAULT_BASE_URL)
    dialog = ProviderDialog(window.ctx.settings, "m", window, default_base_url=window._setup_server_url())
    assert dialog.base_url.text() == DEFAULT_BASE_URL
    dialog.deleteLater()
