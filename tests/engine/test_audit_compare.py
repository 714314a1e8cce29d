"""The audit-vs-preview comparison (``engine.audit_compare``; moved from the Audit inspector, issue 10 item 1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.audit_compare import CHANGE_STATUS, CHANGE_WORDS, compare_audit_with_preview, summarize_comparison
from engine.schema import PreviewBlock
from engine.vocabulary import STATUS_COLOURS


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


def test_compare_identical_is_all_same():
    rows = compare_audit_with_preview(AUDIT_BLOCKS, AUDIT_BLOCKS)
    assert [r.change for r in rows] == ["same"] * 5
    assert all(r.delta == 0 for r in rows)
    assert summarize_comparison(rows).delta == 0


def test_compare_added_dropped_deltas_and_order():
    audit = [pb(0, "system", 40), pb(1, "lorebook:W:1", 80), pb(2, "message:0", 100), pb(3, "message:1", 60)]
    preview = [pb(0, "system", 45), pb(1, "message:0", 100, status="excluded", reason="HISTORY_OLDEST_FIRST"),
               pb(2, "memory:m1", 25), pb(3, "message:1", 60)]
    rows = compare_audit_with_preview(audit, preview)
    assert [(r.source, r.change, r.delta) for r in rows] == [
        ("system", "changed", 5),
        ("lorebook:W:1", "dropped", -80),  # placed where it was: after "system"
        ("message:0", "now_excluded", 0),
        ("memory:m1", "added", 25),
        ("message:1", "same", 0),
    ]
    dropped = rows[1]
    assert dropped.audit_tokens == 80 and dropped.preview_tokens is None and dropped.preview_status is None
    summary = summarize_comparison(rows)
    assert summary.added == 1 and summary.dropped == 1 and summary.now_excluded == 1
    # Sent tokens: +5 (system) −80 (lorebook) −100 (message:0 now excluded) +25 (memory).
    assert summary.delta == 5 - 80 - 100 + 25
    assert summary.count("same") == 1 and summary.count("changed") == 1


def test_compare_repeated_sources_match_in_order():
    audit = [pb(0, "tools", 10, reason="TOOL_SCHEMAS", kind="tools"), pb(1, "tools", 20, reason="TOOL_SCHEMAS", kind="tools")]
    preview = [pb(0, "tools", 10, reason="TOOL_SCHEMAS", kind="tools")]
    rows = compare_audit_with_preview(audit, preview)
    assert [(r.change, r.audit_tokens) for r in rows] == [("same", 10), ("dropped", 20)]
    assert compare_audit_with_preview(None, None) == []
    assert [r.change for r in compare_audit_with_preview([], preview)] == ["added"]


_sources = st.lists(st.sampled_from(["system", "a", "b", "c", "d", "e"]), max_size=8)


@given(_sources, _sources, st.integers(0, 50))
def test_compare_partitions_both_sides(audit_sources, preview_sources, tokens):
    audit = [pb(i, s, tokens + i) for i, s in enumerate(audit_sources)]
    preview = [pb(i, s, tokens) for i, s in enumerate(preview_sources)]
    rows = compare_audit_with_preview(audit, preview)
    from_audit = [r for r in rows if r.audit_tokens is not None]
    from_preview = [r for r in rows if r.preview_tokens is not None]
    assert len(from_audit) == len(audit) and len(from_preview) == len(preview)
    # Preview rows keep the preview's order.
    assert [r.source for r in from_preview] == preview_sources
    for r in rows:
        assert r.delta == (r.preview_tokens or 0) - (r.audit_tokens or 0)
        assert (r.change == "added") == (r.audit_tokens is None)
        assert (r.change == "dropped") == (r.preview_tokens is None)


def test_every_change_has_words_and_a_known_colour():
    assert set(CHANGE_WORDS) == {"added", "dropped", "now_excluded", "now_included", "changed", "same"}
    assert set(CHANGE_STATUS) == set(CHANGE_WORDS) - {"same"}
    assert set(CHANGE_STATUS.values()) <= set(STATUS_COLOURS)
