"""File → Open SillyTavern folder: progress while reading and storing, warnings grouped (issue 25 item 4)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.storage import open_store
from gui.folder_import import run_folder_import
from gui.library_setup import LibrarySetup
from tests.engine.importers.st_fixture import build_st_user


def _folder(tmp_path: Path, n: int) -> Path:
    user = build_st_user(tmp_path)
    head, *rest = (user / "chats" / "hero" / "voyage.jsonl").read_text().splitlines()
    meta = json.loads(head)
    meta["chat_metadata"]["world_info"] = "Missing World"
    for i in range(n):
        (user / "chats" / "hero" / f"c{i:03d}.jsonl").write_text("\n".join([json.dumps(meta), *rest]))
    return tmp_path / "data"


def test_progress_reaches_the_end_and_warnings_are_grouped(qtbot, tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "lib.db"), seed=False)
    seen: list[tuple[str, int, int]] = []
    try:
        report, err = run_folder_import(store, _folder(tmp_path, 80), on_progress=lambda *a: seen.append(a))
    finally:
        store.close()
    assert err is None and report is not None
    reads = [s for s in seen if s[0] == "read"]
    stores = [s for s in seen if s[0] == "store"]
    assert reads and reads[-1][1] == reads[-1][2] == 86  # 4 worlds, 1 card, voyage and 80 chats
    assert stores and stores[-1][1] == stores[-1][2] == len(report.added)
    assert [r[1] for r in reads] == sorted(r[1] for r in reads)
    text = LibrarySetup.report_text(report)
    lines = [ln for ln in text.splitlines() if "Missing World" in ln]
    assert lines == ["Warning 80 chats: chat world 'Missing World' does not exist in worlds/; not linked "
                     "(first: chats/hero/c000.jsonl)"]
