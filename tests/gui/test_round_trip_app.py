"""Issue 30 in the app: export the Lumine chat, re-import the folder into a fresh library, same preview;
*File → Reload SillyTavern folder* brings in what changed and asks about conflicts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from engine.storage import open_store
from tests.conftest import shared_data_path
from tests.engine.importers.lived_in import LUMINE_CHAT, build_lived_in
from tests.gui.test_library_setup import _close, _open_window

LUMINE = f"chats/Lumine/{LUMINE_CHAT}.jsonl"
#: Where the writer-facing screenshots go when LOOMSCOPE_SHOTS names a folder (else the test's temp folder).
SHOTS_ENV = "LOOMSCOPE_SHOTS"


def _import(qtbot, win, folder: Path, chat_key: str):
    """Import ``folder`` through the app and open the chat imported from ``chat_key``; returns (report, preview)."""
    report = win.library_setup.import_folder(folder)
    assert report is not None
    win.library_setup.summary_box.close()
    chat_id = next(r.id for r in report.added if r.key == chat_key)
    with qtbot.waitSignal(win.preview_applied, timeout=20000) as blocker:
        win.open_chat(chat_id)
    return report, blocker.args[0]


def test_export_and_reimport_show_the_same_preview(qtbot, tmp_path: Path, qsettings) -> None:
    folder = build_lived_in(tmp_path / "st", shared_data_path())
    shots = Path(os.environ.get(SHOTS_ENV) or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    win = _open_window(qtbot, f"sqlite:///{tmp_path / 'one.sqlite3'}", qsettings)
    _report, before = _import(qtbot, win, folder, LUMINE)
    chat_id = win.ctx.document.chat_id
    out = tmp_path / "exported"
    win.library_setup.ask_directory = lambda *_a: str(out)
    win.library_setup.export_action.trigger()  # File → Export chat…
    assert (out / "characters" / "Lumine.png").is_file() and (out / "worlds" / "GI-Core.json").is_file()
    assert win.ctx.document.chat_id == chat_id
    win.grab().save(str(shots / "issue30-lumine-before-export.png"))
    _close(win)

    fresh = _open_window(qtbot, f"sqlite:///{tmp_path / 'two.sqlite3'}", qsettings)
    again, after = _import(qtbot, fresh, out, LUMINE)
    assert not again.warnings  # card, worlds and persona all came back
    assert after.model_dump(mode="json") == before.model_dump(mode="json")
    assert after.prompt_tokens == before.prompt_tokens
    fresh.grab().save(str(shots / "issue30-lumine-reimported.png"))
    _close(fresh)


def test_reload_folder_brings_in_changes_and_asks_about_conflicts(qtbot, tmp_path: Path, qsettings) -> None:
    folder = build_lived_in(tmp_path / "st")
    win = _open_window(qtbot, f"sqlite:///{tmp_path / 'lib.sqlite3'}", qsettings)
    report, _ = _import(qtbot, win, folder, LUMINE)
    setup = win.library_setup
    assert setup.reload_folder_action.shortcut().toString() == "Ctrl+Shift+R"
    unchanged = setup.reload_folder()
    assert unchanged is not None and unchanged.files_changed == [] and not unchanged.changed
    setup.summary_box.close()
    ids = {r.key: r.id for r in report.added}
    # a world changed in the folder, and the Lumine chat changed both there and here
    world = json.loads((folder / "worlds" / "Mondstadt.json").read_text("utf-8"))
    world["entries"]["0"]["content"] = "Mondstadt: the city of wind and song."
    (folder / "worlds" / "Mondstadt.json").write_text(json.dumps(world), encoding="utf-8")
    chat = folder / "chats" / "Lumine" / f"{LUMINE_CHAT}.jsonl"
    chat.write_text(chat.read_text("utf-8") + '\n{"name": "Aether", "is_user": true, "mes": "from SillyTavern"}',
                    encoding="utf-8")
    with open_store(win.ctx.store.url, seed=False) as other:
        other.chats.rename(ids[LUMINE], "renamed here")
    asked: list[list[str]] = []

    def ask(conflicts):
        asked.append([c.key for c in conflicts])
        return "keep-local"

    setup.ask_conflicts = ask
    synced = setup.reload_folder()
    assert asked == [[LUMINE]]
    assert synced is not None and [(c.key, c.resolution) for c in synced.conflicts] == [(LUMINE, "kept-local")]
    assert f"Changed in both places {LUMINE}: your edits kept" in setup.report_text(synced)
    assert win.ctx.store.chats.get(ids[LUMINE]).title == "renamed here"
    assert win.ctx.store.lorebooks.get(ids["worlds/Mondstadt.json"]).entries[0].content.endswith("wind and song.")
    setup.summary_box.close()
    _close(win)
