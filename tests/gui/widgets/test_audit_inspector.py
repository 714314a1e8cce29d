"""Audit inspector tab: facts, empty state, block table roles, JSON copy, compare with preview."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from engine.schema import ContextPreview, PreviewBlock, TokenizerInfo
from engine.schema.audit import PromptContextAudit
from gui.errors import message_for
from gui.labels import MARKS
from gui.widgets.audit_inspector import EMPTY_TEXT, AuditTab
from gui.words import reason_in_words

T0 = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)


def pb(i: int, source: str, tokens: int, status: str = "kept", reason: str = "FITS_BUDGET",
       kind: str = "message", **kw) -> PreviewBlock:
    return PreviewBlock(id=f"b{i}", kind=kind, role=kw.pop("role", "user"), source=source, position=i,
                        tokens=tokens, status=status, reason=reason, protected=kw.pop("protected", False),
                        pinned=kw.pop("pinned", False), **kw)


AUDIT_BLOCKS = [
    pb(0, "system", 40, reason="SYSTEM_PROMPT", kind="system", protected=True, role="system"),
    pb(1, "lorebook:World:3", 80, reason="LOREBOOK_MATCHED", kind="lorebook", role="system"),
    pb(2, "message:0", 120, status="excluded", reason="HISTORY_OLDEST_FIRST"),
    pb(3, "message:1", 200, role="assistant", pinned=True, protected=True, reason="PINNED"),
    pb(4, "message:2", 30, reason="CURRENT_INPUT", protected=True),
]


def _audit(**update) -> PromptContextAudit:
    fields = dict(
        generation_id="3f2a9c0d1e2b4c5d", chat_id="c1", provider="http://127.0.0.1:8765/v1",
        model="claude-sonnet-4", status="failed", error_code="PROVIDER_TIMEOUT",
        error_message="no answer after 60 s", created_at=T0, finished_at=T0 + timedelta(seconds=61),
        context_limit=8192, reply_reserve=1024, budget=7168, safety_margin=358, prompt_tokens=680,
        headroom=6130, strategy="truncate", tokenizer=TokenizerInfo(profile="claude-approx", approximate=True),
        blocks=AUDIT_BLOCKS,
        provider_messages=[{"role": "system", "content": "Write Elara's next reply."},
                           {"role": "user", "content": "Wo ist der Kompass? 🧭"}],
        interceptor_diagnostics=["redact-names: replaced 2 names"],
    )
    fields.update(update)
    return PromptContextAudit(**fields)


def _preview(blocks, prompt_tokens: int = 700, profile: str = "claude-approx") -> ContextPreview:
    return ContextPreview(model="claude-sonnet-4", tokenizer=TokenizerInfo(profile=profile, approximate=True),
                          context_limit=8192, reply_reserve=1024, budget=7168, safety_margin=358, headroom=6000,
                          prompt_tokens=prompt_tokens, strategy="truncate", blocks=blocks)


@pytest.fixture
def tab(qtbot):
    widget = AuditTab(None)
    qtbot.addWidget(widget)
    widget.resize(800, 640)
    return widget


def test_empty_state(tab):
    tab.set_state(None, _preview(AUDIT_BLOCKS))
    assert tab.stack.currentIndex() == 0
    assert tab.empty_label.text() == EMPTY_TEXT == "No generation yet for this chat"
    assert tab.blocks_model.rowCount() == 0


def test_failed_audit_shows_status_code_and_facts(tab):
    tab.set_state(_audit(), None)
    f = tab.fields
    assert tab.stack.currentIndex() == 1
    assert "failed" in f["status"].text()
    assert f["generation_id"].text() == "3f2a9c0d1e2b4c5d"
    assert f["provider"].text() == "http://127.0.0.1:8765/v1"
    assert f["model"].text() == "claude-sonnet-4"
    assert "PROVIDER_TIMEOUT" in f["error_code"].text()
    assert not tab.error_banner.isHidden()
    assert message_for("PROVIDER_TIMEOUT") in tab.error_banner.text()
    assert "no answer after 60 s" in tab.error_banner.text()
    assert f["context_limit"].text() == "8,192"
    assert f["reply_reserve"].text() == "1,024"
    assert "680" in f["prompt_tokens"].text()
    assert "claude-approx" in f["tokenizer"].text() and "approximate" in f["tokenizer"].text()
    assert not tab.approx_banner.isHidden() and "358" in tab.approx_banner.text()
    assert "61.0 s" in f["finished"].text()
    assert "redact-names" in tab.diagnostics_view.toPlainText()
    assert "preview is not ready" in tab.compare_summary.text()


def test_completed_exact_audit_hides_error_and_warning(tab):
    tab.set_state(_audit(status="completed", error_code=None, error_message=None,
                         tokenizer=TokenizerInfo(profile="o200k_base", approximate=False), safety_margin=0,
                         reply_chars=412, finish_reason="stop",
                         usage={"prompt_tokens": 681, "completion_tokens": 97}), None)
    assert "completed" in tab.fields["status"].text()
    assert tab.error_banner.isHidden()
    assert tab.approx_banner.isHidden()
    assert tab.fields["error_code"].text() == "none"
    assert "412 characters" in tab.fields["reply"].text() and "stop" in tab.fields["reply"].text()
    assert "approximate" not in tab.fields["tokenizer"].text()


def test_blocks_model_roles_and_flags(tab):
    tab.set_state(_audit(), None)
    m = tab.blocks_model
    assert m.rowCount() == 5 and m.columnCount() == 8
    idx = lambda r, c: m.index(r, c)  # noqa: E731
    assert m.data(idx(2, 3)) == "message:0"
    assert m.data(idx(2, 4)) == "120"
    assert m.data(idx(2, 5)) == "excluded"
    assert m.data(idx(2, 6)) == reason_in_words("HISTORY_OLDEST_FIRST")
    assert m.data(idx(2, 6), Qt.ItemDataRole.ToolTipRole) == "HISTORY_OLDEST_FIRST"
    m_ = MARKS
    assert m.data(idx(3, 7)) == f"{m_['protected']} {m_['pinned']}"
    assert m.data(idx(2, 7)) == ""
    assert m.data(idx(2, 5), Qt.ItemDataRole.ForegroundRole) is not None
    assert m.data(idx(2, 5), Qt.ItemDataRole.BackgroundRole) != m.data(idx(3, 5), Qt.ItemDataRole.BackgroundRole)
    assert m.data(idx(2, 4), Qt.ItemDataRole.TextAlignmentRole) & int(Qt.AlignmentFlag.AlignRight)
    flags = m.flags(idx(0, 0))
    assert flags & Qt.ItemFlag.ItemIsSelectable and not flags & Qt.ItemFlag.ItemIsEditable
    assert m.data(m.index(99, 0)) is None
    assert tab.tabs.tabText(0) == "Blocks (5)"


def test_truncated_block_shows_original_tokens(tab):
    blocks = [pb(0, "message:0", 40, status="truncated", reason="CUT", original_tokens=300)]
    tab.set_state(_audit(blocks=blocks), None)
    assert tab.blocks_model.data(tab.blocks_model.index(0, 4)) == "40 (of 300)"


def test_provider_messages_json_read_only_and_copy(tab, qtbot):
    audit = _audit()
    tab.set_state(audit, None)
    assert tab.messages_view.isReadOnly()
    assert json.loads(tab.messages_view.toPlainText()) == audit.provider_messages
    assert "🧭" in tab.messages_view.toPlainText()  # not \u-escaped
    QGuiApplication.clipboard().setText("")
    qtbot.mouseClick(tab.copy_button, Qt.MouseButton.LeftButton)
    assert json.loads(QGuiApplication.clipboard().text()) == audit.provider_messages


def test_compare_tab_lists_changes(tab):
    preview_blocks = [
        AUDIT_BLOCKS[0],
        AUDIT_BLOCKS[2].model_copy(update={"status": "kept", "reason": "FITS_BUDGET"}),
        AUDIT_BLOCKS[3].model_copy(update={"tokens": 210}),
        AUDIT_BLOCKS[4].model_copy(update={"reason": "FITS_BUDGET", "protected": False}),
        pb(5, "message:3", 50, reason="CURRENT_INPUT"),
    ]
    tab.set_state(_audit(), _preview(preview_blocks, prompt_tokens=790))
    rows = tab.compare_model.rows()
    changes = {r.source: r.change for r in rows}
    assert changes == {"lorebook:World:3": "dropped", "message:0": "now_included", "message:1": "changed",
                       "message:2": "changed", "message:3": "added"}  # "system" unchanged: hidden
    text = tab.compare_summary.text()
    assert "1 added" in text and "1 dropped" in text and "1 now included" in text
    assert "680 → 790 (+110)" in text
    tab.show_unchanged.setChecked(True)
    assert tab.compare_model.rowCount() == 6
    m = tab.compare_model
    row = [r.source for r in m.rows()].index("message:1")
    assert m.data(m.index(row, 5)) == "+10"
    assert m.data(m.index(row, 0), Qt.ItemDataRole.BackgroundRole) is not None


def test_preview_refresh_keeps_audit_views(tab):
    audit = _audit()
    tab.set_state(audit, _preview(AUDIT_BLOCKS))
    assert tab.compare_model.rowCount() == 0  # nothing changed
    tab.messages_view.verticalScrollBar().setValue(0)
    blocks_model_rows = tab.blocks_model.rowCount()
    # A new preview (one block dropped) with the same stored audit: only the comparison changes.
    tab.set_state(audit.model_copy(), _preview(AUDIT_BLOCKS[:-1]))
    assert tab.blocks_model.rowCount() == blocks_model_rows
    assert [r.change for r in tab.compare_model.rows()] == ["dropped"]
    # A different audit refills everything.
    tab.set_state(_audit(status="cancelled", error_code="CANCELLED", blocks=AUDIT_BLOCKS[:2]), None)
    assert tab.blocks_model.rowCount() == 2
    assert "cancelled" in tab.fields["status"].text()
    assert message_for("CANCELLED") in tab.error_banner.text()


# --------------------------------------------------------------------- a real generation
def _texts(widget) -> str:
    from PySide6.QtWidgets import QLabel, QPlainTextEdit

    parts = [w.text() for w in widget.findChildren(QLabel)]
    parts += [w.toPlainText() for w in widget.findChildren(QPlainTextEdit)]
    return "\n".join(parts)


@pytest.mark.parametrize("mode, status, code", [("answer", "completed", None),
                                                ("500", "failed", "PROVIDER_SERVER_ERROR")])
def test_real_generation_audit_against_local_server(tab, mode, status, code):
    from engine.generation import ProviderConfig, generate
    from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
    from tests.fake_provider import UPSTREAM_MARKER, FakeProviderServer

    request = PreviewRequest(
        chat=Chat(messages=[ChatMessage(role="user", content="Where is the brass compass?")]),
        system_prompt="You are a terse narrator.",
        settings=ContextSettings(model="gpt-4o", context_limit=4000, reply_reserve=500),
    )
    with FakeProviderServer(mode) as server:
        result = generate(request, ProviderConfig(base_url=server.base_url, model="gpt-4o", stream=False),
                          chat_id="chat-1")
        sent = [r["body"]["messages"] for r in server.requests if r.get("body")]
    audit = result.audit
    assert audit.status == status and audit.error_code == code
    from engine.pipeline import preview

    tab.set_state(audit, preview(request))
    assert status in tab.fields["status"].text()
    assert tab.fields["generation_id"].text() == audit.generation_id
    assert tab.fields["model"].text() == "gpt-4o"
    assert "o200k_base" in tab.fields["tokenizer"].text() and tab.approx_banner.isHidden()
    assert tab.blocks_model.rowCount() == len(audit.blocks) > 0
    # The JSON view shows exactly what the server received.
    assert json.loads(tab.messages_view.toPlainText()) == sent[0]
    if code:
        assert code in tab.fields["error_code"].text()
        assert message_for(code) in tab.error_banner.text()
    else:
        assert tab.error_banner.isHidden()
    assert UPSTREAM_MARKER not in _texts(tab)
    # Nothing changed since the generation: the comparison with a fresh preview is empty.
    assert [r.change for r in tab.compare_rows()] == ["same"] * len(audit.blocks)
    assert "no block changed" in tab.compare_summary.text()


def test_facts_use_one_column_when_narrow(tab):
    from gui.widgets.audit_inspector import FACTS_TWO_COLUMN_W

    tab.show()
    tab.resize(FACTS_TWO_COLUMN_W + 100, 640)
    QGuiApplication.processEvents()
    assert tab.fact_columns() == 2
    tab.resize(FACTS_TWO_COLUMN_W - 200, 640)
    QGuiApplication.processEvents()
    assert tab.fact_columns() == 1
    grid = tab.facts.grid
    assert grid.getItemPosition(grid.indexOf(tab.fields["generation_id"]))[:2] == (1, 1)
    # the Reason column comes before the Role column on screen
    header = tab.blocks_view.horizontalHeader()
    keys = [key for key, _ in __import__("gui.widgets.audit_inspector", fromlist=["BLOCK_COLUMNS"]).BLOCK_COLUMNS]
    assert header.visualIndex(keys.index("reason")) < header.visualIndex(keys.index("role"))
