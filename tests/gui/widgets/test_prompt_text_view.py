"""The Prompt text view (issue 26 item 4): the exact string, blocks shaded, tokens on demand (pytest-qt, offscreen)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from engine.pipeline import preview as run_preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.schema.sillytavern import InstructTemplate, SillyTavernSetup, TextCompletionSetup
from engine.tokenizers import default_tokenizer_registry
from gui.prompt_text import (
    CHAT_NOTE,
    _flatten,
    chat_completion_layout,
    header_text,
    layout_of,
    owner_at,
    profile_token_spans,
    shade_runs,
)
from gui.widgets.prompt_text_view import PromptTextView
from tests.tc_preview import as_text_completion


def _request(n: int = 8, text: str = "The lantern flickers over the quay; Wren counts the crates. ",
             instruct: str | None = "Llama 3 Instruct") -> PreviewRequest:
    msgs = [ChatMessage(role="system", content="You are Marisol, a night archivist.")]
    for i in range(n):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"Message {i}: " + text * 3))
    tc = TextCompletionSetup(instruct=InstructTemplate(enabled=instruct is not None, preset=instruct or "Alpaca"))
    return PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(model="gpt-4o", reply_reserve=256),
                          sillytavern=SillyTavernSetup(text_completion=tc))


def _tc(n: int = 8, **kw):
    request = _request(n, **kw)
    return request, as_text_completion(run_preview(request.model_copy(update={"sillytavern": None})))


@pytest.fixture
def view(qtbot):
    widget = PromptTextView()
    qtbot.addWidget(widget)
    widget.resize(700, 500)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def test_flatten_nested_spans_innermost_wins() -> None:
    assert _flatten([(0, 10, 0), (3, 5, 1), (12, 14, 2)]) == [(0, 3, 0), (3, 5, 1), (5, 10, 0), (12, 14, 2)]
    assert _flatten([(0, 4, 0), (4, 8, 1)]) == [(0, 4, 0), (4, 8, 1)]
    assert _flatten([(5, 5, 0)]) == []


def test_layout_shades_exactly_each_block_span() -> None:
    _, pv = _tc()
    layout = layout_of(pv)
    assert layout.text == pv.prompt
    spans = [(b.span, i) for i, b in enumerate(pv.blocks) if b.span is not None]
    assert [(r, o) for r, o in zip(layout.ranges, layout.owners)] == spans
    for (s, e), o in zip(layout.ranges, layout.owners):
        assert layout.text[s:e] == pv.blocks[o].text
    assert layout.shade == [i % 2 for i in range(len(spans))]  # neighbours alternate
    # template text between blocks ("### Instruction:\n") belongs to no block
    gap = layout.text.index("### Instruction:")
    assert owner_at(layout, gap) == -1
    first = layout.ranges[0]
    assert owner_at(layout, first[0]) == 0 and owner_at(layout, first[1]) != 0


def test_shade_runs_cut_blocks_and_tokens() -> None:
    _, pv = _tc(2)
    layout = layout_of(pv)
    tokens = default_tokenizer_registry().get("o200k_base").token_spans(layout.text)
    runs = shade_runs(layout, 0, len(layout.text), tokens)
    # every character a block owns is in exactly one run with that owner
    owned = sum(e - s for s, e in layout.ranges)
    assert sum(r.end - r.start for r in runs if r.owner >= 0) == owned
    assert all(layout.ranges[r.owner][0] <= r.start and r.end <= layout.ranges[r.owner][1] for r in runs if r.owner >= 0)
    assert {r.token for r in runs} >= set(range(len(tokens))) - {t for t, (s, e) in enumerate(tokens) if s == e}
    assert len(shade_runs(layout, 0, len(layout.text))) == len(layout.ranges)  # boundaries off: one run a block


def test_header_names_mode_preset_and_tokenizer() -> None:
    request, pv = _tc()
    assert header_text(pv, request) == "Text Completion · Llama 3 Instruct · o200k_base exact"
    assert header_text(pv, request, "llama3 exact") == "Text Completion · Llama 3 Instruct · llama3 exact"
    off, pv_off = _tc(instruct=None)
    assert header_text(pv_off, off) == "Text Completion · instruct off · Default · o200k_base exact"
    cc = run_preview(request.model_copy(update={"sillytavern": None}))
    assert header_text(cc) == "Chat Completion · gpt-4o · o200k_base exact"


def test_view_shows_the_string_shaded_in_kind_colours(view) -> None:
    request, pv = _tc()
    view.set_preview(pv, request, profile_token_spans(pv, default_tokenizer_registry()))
    assert view.edit.toPlainText() == pv.prompt == view.text()
    assert view.header.text() == "Text Completion · Llama 3 Instruct · o200k_base exact"
    assert view.note.isHidden()
    assert "stop: " in view.facts.text() and "reply ≤ 256 tokens" in view.facts.text()
    assert 0 in view.shaded_paragraphs()
    # paragraph 0 starts with the system block: shaded over exactly its text
    runs = view.paragraph_runs(0)
    system = pv.blocks[0]
    assert runs[0][0] == 0 and runs[0][1] == len(system.text.split("\n")[0])
    colours = {c.name() for _, _, c in runs}
    assert all(c != "#000000" for c in colours)
    # neighbouring message blocks differ in shade
    doc = view.edit.document()
    a, b = pv.blocks[1], pv.blocks[2]
    pa = doc.findBlock(a.span[0]).blockNumber()
    pb = doc.findBlock(b.span[0]).blockNumber()
    ca = next(c for s, _, c in view.paragraph_runs(pa))
    cb = next(c for s, _, c in view.paragraph_runs(pb))
    assert ca != cb


def test_click_selects_and_table_selection_outlines(view, qtbot) -> None:
    request, pv = _tc()
    view.set_preview(pv, request)
    target = 3
    start, end = pv.blocks[target].span
    with qtbot.waitSignal(view.block_clicked) as sig:
        assert view.click_at(start + 2) == target
    assert sig.args == [target] and view.selected_block() == target
    assert view.selected_ranges() == [(start, end)]
    assert _colour_at(view, start) != _colour_at(view, pv.blocks[target - 2].span[0])  # the strong shade
    strong = _colour_at(view, start)
    # template text is no block: a click there selects nothing
    assert view.click_at(pv.prompt.index("### Response:")) is None
    view.select_block(5)
    assert view.selected_ranges() == [pv.blocks[5].span]
    assert _colour_at(view, pv.blocks[5].span[0]) == strong and _colour_at(view, start) != strong
    assert "Message" in view.describe_block(5) and "tokens" in view.describe_block(5)
    view.select_block(None)
    assert view.selected_ranges() == [] and _colour_at(view, pv.blocks[5].span[0]) != strong


def _colour_at(view, pos: int) -> str:
    """The background of code point ``pos`` as shaded (ASCII text: Qt positions are code points)."""
    block = view.edit.document().findBlock(pos)
    at = pos - block.position()
    for start, length, colour in view.paragraph_runs(block.blockNumber()):
        if start <= at < start + length:
            return colour.name()
    return ""


def test_real_mouse_click_emits_the_block(view, qtbot) -> None:
    request, pv = _tc()
    view.set_preview(pv, request)
    rect = view.edit.cursorRect(_cursor_at(view, pv.blocks[0].span[0] + 3))
    with qtbot.waitSignal(view.block_clicked) as sig:
        qtbot.mouseClick(view.edit.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert sig.args == [0]


def _cursor_at(view, pos):
    from PySide6.QtGui import QTextCursor

    c = QTextCursor(view.edit.document())
    c.setPosition(pos)
    return c


def test_token_boundaries_on_demand(view) -> None:
    request, pv = _tc(2)
    spans_of = profile_token_spans(pv, default_tokenizer_registry())
    view.set_preview(pv, request, spans_of)
    before = len(view.paragraph_runs(0))
    assert view.token_spans() is None
    view.tokens_box.setChecked(True)
    tokens = view.token_spans()
    assert tokens == spans_of(pv.prompt)
    assert len(view.paragraph_runs(0)) > before  # one range per token piece now
    assert f"{len(tokens):,} tokens shown" in view.facts.text()
    colours = [c.name() for *_, c in view.paragraph_runs(0)]
    assert len(set(colours[:4])) == 2  # odd tokens a shade darker
    # the selected block keeps its token shades (two strong shades)
    view.select_block(0)
    assert len({c.name() for *_, c in view.paragraph_runs(0)}) == 2
    view.select_block(None)
    view.tokens_box.setChecked(False)
    assert len(view.paragraph_runs(0)) == before


def test_tokenizer_failure_is_a_note_not_a_crash(view) -> None:
    request, pv = _tc(2)

    def broken(_text):
        raise RuntimeError("vocabulary missing")

    view.set_preview(pv, request, broken)
    view.tokens_box.setChecked(True)
    assert view.token_spans() is None and "unavailable (RuntimeError)" in view.facts.text()


def test_chat_completion_preview_is_a_message_list(view) -> None:
    request, _ = _tc(4)
    cc = run_preview(request.model_copy(update={"sillytavern": None}))
    view.set_preview(cc, None)
    assert view.header.text() == "Chat Completion · gpt-4o · o200k_base exact"
    assert not view.note.isHidden() and view.note.text() == CHAT_NOTE
    layout = chat_completion_layout(cc)
    assert view.text() == layout.text and "── system ──" in layout.text and "── user ──" in layout.text
    assert len(layout.ranges) == len(cc.messages)
    assert view.block_at(layout.ranges[0][0]) is None  # messages are not blocks: nothing to select
    assert "5 messages shaded" in view.facts.text()


def test_big_prompt_shades_only_what_is_visible(view) -> None:
    request, pv = _tc(2000, text="Fog over the harbour.\n")
    assert len(pv.prompt) > 150_000
    view.set_preview(pv, request)
    shaded = view.shaded_paragraphs()
    paragraphs = view.edit.document().blockCount()
    assert paragraphs > 5000 and 0 < len(shaded) < 200
    view.edit.verticalScrollBar().setValue(view.edit.verticalScrollBar().maximum())
    assert paragraphs - 1 in view.shaded_paragraphs()
    # selecting a block far down scrolls to it and shades around it
    last = max(i for i, b in enumerate(pv.blocks) if b.span is not None)
    view.edit.verticalScrollBar().setValue(0)
    view.select_block(last)
    para = view.edit.document().findBlock(pv.blocks[last].span[0]).blockNumber()
    assert para in view.shaded_paragraphs()


def test_same_string_keeps_document_and_scroll(view, qtbot) -> None:
    request, pv = _tc(200)
    view.set_preview(pv, request)
    bar = view.edit.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    qtbot.wait(20)
    value = bar.value()
    doc = view.edit.document()
    revision = doc.revision()
    view.set_preview(pv.model_copy(update={"prompt_tokens": pv.prompt_tokens + 1}), request)
    qtbot.wait(20)
    assert doc.revision() == revision and bar.value() == value > 0


def test_hidden_view_lays_out_when_shown(qtbot) -> None:
    widget = PromptTextView()
    qtbot.addWidget(widget)
    request, pv = _tc()
    widget.set_preview(pv, request)
    assert widget.edit.toPlainText() == ""  # nothing laid out while hidden
    widget.show()
    qtbot.waitExposed(widget)
    assert widget.edit.toPlainText() == pv.prompt


def test_a_refresh_with_the_same_string_does_not_tokenize_again(view) -> None:
    request, pv = _tc(4)

    class Tok:
        calls = 0

        def spans(self, text):
            Tok.calls += 1
            return default_tokenizer_registry().get("o200k_base").token_spans(text)

    tok = Tok()
    view.set_preview(pv, request, tok.spans)
    view.tokens_box.setChecked(True)
    view.set_preview(pv.model_copy(update={"prompt_tokens": 5}), request, tok.spans)  # a new bound method, same tokenizer
    assert Tok.calls == 1 and view.token_spans()
    other = as_text_completion(pv, stop=[])
    view.set_preview(other.model_copy(update={"prompt": other.prompt + "x"}), request, tok.spans)
    assert Tok.calls == 2  # a new string is cut again


def test_a_long_prompt_is_cut_into_tokens_on_a_worker(view, qtbot) -> None:
    from gui.widgets.prompt_text_view import SYNC_TOKENIZE_CHARS

    request, pv = _tc(1200, text="Fog over the harbour.\n")
    assert len(pv.prompt) > SYNC_TOKENIZE_CHARS
    spans_of = default_tokenizer_registry().get("o200k_base").token_spans
    view.set_preview(pv, request, spans_of)
    view.tokens_box.setChecked(True)
    assert view.token_spans() is None and "cutting tokens…" in view.facts.text()  # the window stays responsive
    # a newer string arrives before the cut is done: the old cut is dropped, the new one shown
    newer = pv.model_copy(update={"prompt": pv.prompt + "Marisol:"})
    view.set_preview(newer, request, spans_of)
    assert view.wait_for_tokens()
    assert view.token_spans() == sorted(spans_of(newer.prompt))
    assert "tokens shown" in view.facts.text()
    first = view.shaded_paragraphs()
    assert first and len(view.paragraph_runs(min(first))) > 1


def test_copy_puts_the_exact_string_on_the_clipboard(view) -> None:
    from PySide6.QtWidgets import QApplication

    request, pv = _tc(3)
    view.set_preview(pv, request)
    view.copy_button.click()
    assert QApplication.clipboard().text() == pv.prompt


def test_reselecting_the_same_block_keeps_the_scroll(view, qtbot) -> None:
    request, pv = _tc(200)
    view.set_preview(pv, request)
    view.select_block(3)
    bar = view.edit.verticalScrollBar()
    bar.setValue(bar.maximum())
    qtbot.wait(20)
    value = bar.value()
    view.select_block(3)  # what a preview refresh does
    qtbot.wait(20)
    assert bar.value() == value > 0 and view.selected_block() == 3


def test_token_spans_come_from_the_tokenizer_the_preview_counted_with() -> None:
    from engine.tokenizers.sillytavern_text import sillytavern_text_tokenizer
    from gui.prompt_text import token_spans_for

    registry = default_tokenizer_registry()
    request, pv = _tc(2)
    # a hand-built preview counted with o200k_base: the registry profile
    assert token_spans_for(pv, request, registry) == registry.get("o200k_base").token_spans
    # a preview counted with SillyTavern's Llama 3 tokenizer: its spans (control tokens whole)
    tok = sillytavern_text_tokenizer(12, "textgenerationwebui")
    counted = pv.model_copy(update={"tokenizer": pv.tokenizer.model_copy(update={"profile": tok.key}),
                                    "strategy_info": {"api": "text_completion", "st_tokenizer_id": 12}})
    tc = request.sillytavern.text_completion.model_copy(update={"main_api": "textgenerationwebui"})
    req = request.model_copy(update={"sillytavern": request.sillytavern.model_copy(update={"text_completion": tc})})
    spans = token_spans_for(counted, req, registry)
    assert spans == tok.spans
    text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    assert (0, len("<|start_header_id|>")) in spans(text)
    # a Chat Completion preview: the profile
    cc = run_preview(request.model_copy(update={"sillytavern": None}))
    assert token_spans_for(cc, None, registry) == registry.get("o200k_base").token_spans
