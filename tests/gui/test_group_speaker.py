"""The group chat's speaker picker (issue 27 item 7): pick a member, see that member's prompt.

The chat is the group fixture (``tests/engine/importers/st_group_fixture.py``): Kael and Mira, natural
order; SillyTavern's pick for the last message is Kael (``activateNaturalOrder``'s mention rule).
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.importers.st_folder import read_st_folder
from engine.storage import open_store
from gui.widgets.speaker_picker import AUTO_LABEL
from tests.engine.assembly.st_group_cases import CASES
from tests.engine.importers.st_group_fixture import build_group_user
from tests.gui.test_library_setup import _close, _open_window, rerun


def test_speaker_picker_previews_the_chosen_member(qtbot, tmp_path: Path, qsettings) -> None:
    db = f"sqlite:///{tmp_path / 'lib.db'}"
    with open_store(db, seed=False) as store:
        report = store.imports.st_folder(read_st_folder(build_group_user(tmp_path)))
    group_id = next(r.id for r in report.added if r.key.startswith("group chats/"))
    solo_id = next(r.id for r in report.added if r.key.startswith("chats/"))
    win = _open_window(qtbot, db, qsettings, group_id)
    try:
        picker = win.speaker_picker
        assert picker.isVisible()
        items = [picker.combo.itemText(i) for i in range(picker.combo.count())]
        assert items == [AUTO_LABEL, "Kael", "Mira"]
        assert win.preview is not None and win.preview.messages == CASES["natural_swap_kael"]["messages"]
        pv = rerun(qtbot, win, lambda: (picker.combo.setCurrentIndex(2), picker.combo.activated.emit(2)))
        assert pv.messages == CASES["natural_swap_mira"]["messages"]
        assert "the next speaker, Mira (chosen by the writer)" in pv.diagnostics[0]
        shot = os.environ.get("LOOMSCOPE_GROUP_SHOT")
        if shot:  # the closing note's screenshot (offscreen)
            picker.combo.showPopup()
            qtbot.wait(200)
            win.grab().save(shot)
            picker.combo.hidePopup()
        pv = rerun(qtbot, win, lambda: (picker.combo.setCurrentIndex(0), picker.combo.activated.emit(0)))
        assert pv.messages == CASES["natural_swap_kael"]["messages"]
        # a 1-on-1 chat has no speaker to pick
        with qtbot.waitSignal(win.preview_applied, timeout=20000):
            win.open_chat(solo_id)
        assert not picker.isVisible()
    finally:
        _close(win)
