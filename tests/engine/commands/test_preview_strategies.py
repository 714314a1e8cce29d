"""``loomscope preview --strategy compact|vector-recall|summarize`` on every real chat in shared/data."""

from __future__ import annotations

import json

import pytest

from engine.cli import main as cli_main

CHATS = ["127_ChatGPT_DFS_woFilter_w2.json", "1673323621108.jsonl", "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl",
         "airline-longest-task.json", "function_calling_simple.traj", "gpt-4o-airline.json", "test_case.json"]


def check(pv: dict) -> None:
    """SPEC §3 invariants as the CLI reports them."""
    assert all(b["status"] in ("kept", "excluded", "truncated") for b in pv["blocks"])
    assert len({b["id"] for b in pv["blocks"]}) == len(pv["blocks"])
    if pv["error"]:
        assert pv["error"]["code"] == "TOKEN_BUDGET_EXCEEDED"
        return
    assert pv["prompt_tokens"] <= pv["budget"] - pv["safety_margin"]
    for b in pv["blocks"]:
        if b["protected"] or b["pinned"]:
            assert b["status"] == "kept", b["id"]
        if b["status"] == "truncated":
            assert b["reason"] == "SUMMARIZED" and any(s["id"] == b["summary_id"] for s in pv["blocks"])
    groups: dict[str, set[bool]] = {}
    for b in pv["blocks"]:
        if b["group"]:
            groups.setdefault(b["group"], set()).add(b["status"] == "kept")
    assert all(len(v) == 1 for v in groups.values())
    kept_msgs = [m for m in pv["messages"]]
    assert len(kept_msgs) == sum(1 for b in pv["blocks"] if b["status"] == "kept" and b["kind"] != "tools")


@pytest.mark.parametrize("strategy", ["compact", "vector-recall", "summarize"])
@pytest.mark.parametrize("name", CHATS)
def test_preview_runs_on_every_shared_chat(shared_data, capsys, strategy, name):
    path = shared_data / "chats" / name
    for limit, reserve in (("2000", "300"), ("6000", "500")):
        code = cli_main(["preview", "--chat", str(path), "--strategy", strategy, "--context-limit", limit,
                         "--reply-reserve", reserve, "--format", "json"])
        out, err = capsys.readouterr()
        assert code in (0, 3), err
        pv = json.loads(out)
        check(pv)
        if strategy == "compact" and not pv["error"]:
            info = pv["strategy_info"]
            assert info["trigger"] == int(int(limit) * 0.92 * 0.8) and info["target"] == int(int(limit) * 0.65)
            if info["prompt_tokens"] >= info["trigger"]:
                assert pv["prompt_tokens"] <= info["target"] or not info["truncated_to_target"]
                if info["fire"]:
                    assert any("compaction runs at generation" in w for w in pv["warnings"])
        if strategy == "vector-recall":
            lore = [b for b in pv["blocks"] if b["kind"] in ("lorebook", "memory")]
            assert all("relevance" in (b["trace"] or {}) for b in lore if not b["protected"])


def test_table_says_where_the_prompt_stands_against_the_compaction_thresholds(shared_data, capsys):
    code = cli_main(["preview", "--chat", str(shared_data / "chats" / "airline-longest-task.json"), "--strategy",
                     "compact", "--context-limit", "6000", "--reply-reserve", "500", "--format", "table"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "trigger 4416 · target 3900 · compaction runs at generation" in " ".join(out.split())
