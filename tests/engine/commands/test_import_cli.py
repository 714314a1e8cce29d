"""``loomscope import``: the table names the right file for every imported item."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main as cli_main


def test_table_rows_name_their_own_file_after_a_multi_transcript_file(shared_data: Path, tmp_path: Path,
                                                                      capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    card = tmp_path / "Wren.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Wren"}}))
    multi = shared_data / "chats" / "127_ChatGPT_DFS_woFilter_w2.json"  # three transcripts
    db = tmp_path / "lib.sqlite3"
    code = cli_main(["import", str(multi), str(card), "--db", str(db), "--format", "table"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [line for line in out.splitlines() if "│" in line and ("chat" in line or "character" in line)]
    assert len(rows) == 4
    assert all(multi.name in r for r in rows[:3])
    assert "Wren" in rows[3] and card.name in rows[3] and multi.name not in rows[3]


def test_store_reports_the_source_of_each_ref(shared_data: Path, tmp_path: Path) -> None:
    from engine.storage import open_store

    multi = shared_data / "chats" / "127_ChatGPT_DFS_woFilter_w2.json"
    book = shared_data / "lorebooks" / "Eldoria.json"
    with open_store(str(tmp_path / "lib.sqlite3"), seed=False) as store:
        sources: list[str] = []
        refs = store.imports.files([multi, book], sources=sources)
    assert [r.kind for r in refs] == ["chat", "chat", "chat", "lorebook"]
    assert sources == [str(multi)] * 3 + [str(book)]
