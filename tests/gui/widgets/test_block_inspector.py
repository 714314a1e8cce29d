"""Block inspector: token shading, counts, facts, reason words (pytest-qt, offscreen)."""

from __future__ import annotations

import itertools
import time

import pytest

from engine.schema import PreviewBlock
from engine.tokenizers import default_tokenizer_registry
from gui.token_shading import utf16_offsets
from gui.widgets.block_inspector import BlockInspector
from gui.words import reason_in_words

TEXT = (
    "Elara is a wandering cartographer who maps the shifting dunes of the Ashen Waste. "
    "She distrusts the Guild and keeps a brass compass that points to lost things."
)


def _block(text: str = TEXT, **update: object) -> PreviewBlock:
    fields: dict[str, object] = dict(
        id="b3", kind="lorebook", role="system", source="lorebook:0:12", position=3, tokens=40,
        status="kept", reason="LOREBOOK_MATCHED", protected=False, pinned=True, text=text,
        trace={"code": "LOREBOOK_MATCHED", "detail": "key 'compass' in message 4", "uid": 12},
    )
    fields.update(update)
    return PreviewBlock(**fields)  # type: ignore[arg-type]


@pytest.fixture
def inspector(qtbot):
    widget = BlockInspector(None)
    qtbot.addWidget(widget)
    widget.resize(640, 480)
    return widget


@pytest.mark.parametrize("profile", ["o200k_base", "cl100k_base"])
def test_shading_count_equals_token_count_for_exact_profile(inspector, profile):
    inspector.set_block(_block(), profile)
    expected = default_tokenizer_registry().get(profile).count(TEXT)
    assert expected > 20
    assert len(inspector.token_spans()) == expected
    assert inspector.shaded_token_count() == expected


def test_shading_runs_alternate_and_cover_text(inspector):
    inspector.set_block(_block(), "o200k_base")
    block = inspector._text.document().firstBlock()
    ranges = block.layout().formats()
    assert sum(r.length for r in ranges) == len(TEXT)
    colours = [r.format.background().color().name() for r in ranges]
    assert all(a != b for a, b in itertools.pairwise(colours))


def test_shading_toggle_clears_and_restores(inspector):
    inspector.set_block(_block(), "o200k_base")
    n = inspector.shaded_token_count()
    inspector._shade_box.setChecked(False)
    assert inspector.shaded_token_count() == 0
    inspector._shade_box.setChecked(True)
    assert inspector.shaded_token_count() == n


def test_multiline_and_astral_text_maps_to_qt_positions(inspector):
    text = "Line one 🗺️ map\nsecond line 日本語\n\nend"
    inspector.set_block(_block(text), "o200k_base")
    spans = inspector.token_spans()
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    offsets = utf16_offsets(text)
    assert offsets is not None and offsets[-1] == len(text.encode("utf-16-le")) // 2
    visible = sum(1 for s, e in spans if text[s:e].strip("\n"))
    assert inspector.shaded_token_count() == visible
    # Every visible character of the document is shaded exactly once.
    doc = inspector._text.document()
    shaded = 0
    block = doc.firstBlock()
    while block.isValid():
        shaded += sum(r.length for r in block.layout().formats())
        block = block.next()
    assert shaded == len(text.replace("\n", "").encode("utf-16-le")) // 2


def test_facts_shown(inspector):
    inspector.set_block(_block(), "o200k_base")
    labels = inspector._labels
    assert labels["status"].text().count("kept") == 1
    assert reason_in_words("LOREBOOK_MATCHED") in labels["reason"].text()
    assert "LOREBOOK_MATCHED" in labels["reason"].text()
    assert f"{len(TEXT)} characters" in labels["chars"].text()
    assert "compass" in labels["trace"].text()
    assert "pinned" in inspector._badges.text()
    assert "protected" not in inspector._badges.text()
    assert inspector._text.toPlainText() == TEXT


def test_truncated_block_and_unknown_profile(inspector):
    inspector.set_block(_block(status="truncated", reason="CUT", original_tokens=90, pinned=False,
                               protected=True, trace=None), "no-such-profile")
    assert "unknown tokenizer profile" in inspector._labels["tokens"].text()
    assert "90 before cutting" in inspector._labels["tokens"].text()
    assert reason_in_words("CUT") in inspector._labels["reason"].text()
    assert "protected" in inspector._badges.text()
    assert inspector.shaded_token_count() == 0
    assert inspector._text.toPlainText() == TEXT


def test_none_block_clears(inspector):
    inspector.set_block(_block(), "o200k_base")
    inspector.set_block(None, "o200k_base")
    assert inspector._text.toPlainText() == ""
    assert inspector._title.text() == "No block selected"


def test_large_block_is_fast(inspector):
    text = (TEXT + "\n") * 200
    text = text[:32_000]
    registry = default_tokenizer_registry()
    registry.get("o200k_base").token_spans("warm up")
    start = time.perf_counter()
    inspector.set_block(_block(text), "o200k_base")
    elapsed = time.perf_counter() - start
    assert inspector.shaded_token_count() > 5000
    assert elapsed < 2.0  # generous for CI; typically ~0.07 s


def test_reason_words():
    for code in ("HISTORY_OLDEST_FIRST", "MANUAL_EXCLUDED", "LOREBOOK_NOT_MATCHED", "LOREBOOK_PROBABILITY"):
        words = reason_in_words(code)
        assert words and words != code and words[0].isupper()
    assert reason_in_words("SOME_NEW_CODE") == "Some new code"
    assert reason_in_words(None) == ""


def test_real_pipeline_lorebook_block_trace(inspector):
    pipeline = pytest.importorskip("engine.pipeline")
    pytest.importorskip("engine.lorebook")
    from engine.schema import Chat, ChatMessage, Lorebook, LorebookEntry, PreviewRequest

    request = PreviewRequest(
        lorebooks=[Lorebook(name="World", entries=[
            LorebookEntry(uid=1, comment="Dragon", keys=["dragon"], content="Dragons hoard brass.")])],
        chat=Chat(messages=[ChatMessage(role="user", content="A dragon circles the tower.")]),
    )
    result = pipeline.preview(request)
    block = next(b for b in result.blocks if b.kind == "lorebook")
    inspector.set_block(block, result.tokenizer.profile, result)
    # issue 31: a table of entries (title · book · why · position · tokens), no raw trace dump
    table = inspector.entries
    assert not table.isHidden() and table.rowCount() == 1
    cells = inspector.entry_cells(0)
    assert cells["title"] == "Dragon" and cells["book"] == "World"
    assert cells["why"] == 'key "dragon" in message 0 (depth 0)'
    assert cells["position"] == "before the chat"  # no character in this request
    assert int(cells["tokens"]) > 0
    shown = [table.item(0, c).text() for c in range(table.columnCount())]
    assert shown[0] == "Dragon\nWorld #1" and shown[1].startswith('key "dragon"') and shown[2] == cells["tokens"]
    assert inspector._labels["trace"].text() == ""
    assert inspector.shaded_token_count() == default_tokenizer_registry().get(result.tokenizer.profile).count(
        block.text)


def test_refresh_with_same_text_keeps_scroll_position(inspector):
    text = "\n".join(f"line {i}: the brass compass points to lost things" for i in range(400))
    inspector.set_block(_block(text), "o200k_base")
    bar = inspector._text.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    position = bar.value()
    assert position > 0
    # A new preview brings an equal block with a new status: facts update, text stays put.
    inspector.set_block(_block(text, status="excluded", reason="HISTORY_OLDEST_FIRST"), "o200k_base")
    assert bar.value() == position
    assert "excluded" in inspector._labels["status"].text()

    def visible_tokens() -> int:  # tokens made only of line breaks have nothing to shade
        return sum(1 for s, e in inspector.token_spans() if text[s:e].strip("\n"))

    assert inspector.shaded_token_count() == visible_tokens()
    # Another profile re-tokenizes.
    inspector.set_block(_block(text), "cl100k_base")
    assert len(inspector.token_spans()) == default_tokenizer_registry().get("cl100k_base").count(text)
    assert inspector.shaded_token_count() == visible_tokens()


def test_describe_detail_says_where_the_loomscope_rules_differ() -> None:
    from gui.words import describe_detail

    text = describe_detail({"budget": 6, "order_of_activation": 3, "loomscope": {
        "activated": True, "code": "LOREBOOK_CONSTANT",
        "message": "SillyTavern drops this constant over the budget; the loomscope rules keep it"}})
    assert text == "budget 6, SillyTavern drops this constant over the budget; the loomscope rules keep it"


def test_trace_shows_where_a_depth_insertion_went():
    # issue 9: a depth that fell inside a tool batch is placed before the batch, and the
    # inspector says so in words
    html = BlockInspector._trace_html({"placement": {
        "depth": 1, "moved_before_tool_call": 1, "before_message": 1,
        "note": "depth 1 fell inside the tool batch of message 1; placed before its tool call"}})
    assert "placement: depth 1 fell inside the tool batch of message 1; placed before its tool call" in html
    html = BlockInspector._trace_html({"send_order": {"moved_after_tool_call": 1,
                                                      "note": "sent directly after its tool call (message 1)"}})
    assert "send order: sent directly after its tool call (message 1)" in html
