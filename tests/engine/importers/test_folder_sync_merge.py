"""Issue 25 meets issue 30: the re-sync of a SillyTavern folder keeps issue 25's guarantees.

* ``loomscope import DIR`` again (:func:`engine.st_sync.sync_st_folder`) lists the folder as the import does
  (:func:`engine.importers.st_folder.st_folder_files`): a link out is neither listed nor hashed, the progress
  callbacks reach their totals also when only the changed files are read again;
* the Text Completion presets (``instruct/``, ``context/``, ``sysprompt/``, issue 26) are read through the same
  listing (a link out is skipped with its target, never opened) and a changed preset is noticed on re-import.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from engine.importers.st_folder import read_st_folder, st_folder_files
from engine.st_sync import sync_st_folder
from engine.storage import open_store

from .st_fixture import SETTINGS, build_st_user
from .st_group_fixture import CHAT_ID, build_group_user

CANARY = "CANARY-PRESET-OUTSIDE-41c2"


def _text_completion_user(root: Path) -> Path:
    """The fixture folder on a Text Completion backend, with one preset of each kind and a preset linked out."""
    settings = {**SETTINGS, "main_api": "kobold"}
    user = build_st_user(root, settings=settings)
    for kind in ("instruct", "context", "sysprompt"):
        (user / kind).mkdir()
        (user / kind / "Mine.json").write_text(json.dumps({"name": "Mine", "content": "mine"}), encoding="utf-8")
    outside = root / "outside"
    outside.mkdir()
    (outside / "Evil.json").write_text(json.dumps({"name": CANARY, "input_sequence": CANARY}), encoding="utf-8")
    (user / "instruct" / "Evil.json").symlink_to(outside / "Evil.json")
    return user


def test_a_preset_linked_out_of_the_folder_is_skipped_not_read(tmp_path: Path) -> None:
    user = _text_completion_user(tmp_path)
    plan = read_st_folder(user)
    skipped = {(s.file, s.code) for s in plan.skipped}
    assert ("instruct/Evil.json", "IMPORT_OUTSIDE_FOLDER") in skipped
    chat = next(i for i in plan.items if i.kind == "chat")
    assert chat.setup is not None and chat.setup.text_completion is not None
    tc = chat.setup.text_completion
    assert CANARY not in tc.model_dump_json()
    assert [p.preset for p in tc.instruct_presets] == ["Mine"]  # the presets inside the folder are read
    assert [p.name for p in tc.sysprompt_presets] == ["Mine"]
    files, unreadable = st_folder_files(user, user.resolve())
    assert "instruct/Mine.json" in files and "instruct/Evil.json" not in files and not unreadable
    assert "secrets.json" not in files


def test_a_changed_preset_is_noticed_and_the_folder_read_again(tmp_path: Path) -> None:
    user = _text_completion_user(tmp_path)
    with open_store(str(tmp_path / "lib.db"), seed=False) as store:
        first = sync_st_folder(store, user)
        assert first.added and first.files_changed is None
        again = sync_st_folder(store, user)
        assert again.files_changed == [] and not again.changed
        (user / "instruct" / "Mine.json").write_text(json.dumps({"name": "Mine", "input_sequence": "### You:"}),
                                                     encoding="utf-8")
        synced = sync_st_folder(store, user)
    assert synced.files_changed == ["instruct/Mine.json"]
    assert {r.kind for r in synced.changed} == {"chat"}  # the chat's setup holds the preset library


def test_progress_reaches_its_totals_when_only_what_changed_is_read(tmp_path: Path) -> None:
    user = build_st_user(tmp_path)
    for n in range(5):
        (user / "chats" / "hero" / f"more {n}.jsonl").write_text(
            (user / "chats" / "hero" / "voyage.jsonl").read_text("utf-8"), encoding="utf-8")
    read: list[tuple[int, int]] = []
    stored: list[tuple[int, int]] = []
    with open_store(str(tmp_path / "lib.db"), seed=False) as store:
        sync_st_folder(store, user)
        chat = user / "chats" / "hero" / "more 3.jsonl"
        chat.write_text(chat.read_text("utf-8") + "\n" + json.dumps({"name": "Alex", "is_user": True, "mes": "again"}),
                        encoding="utf-8")
        report = sync_st_folder(store, user, on_read=lambda d, t: read.append((d, t)),
                                on_store=lambda d, t: stored.append((d, t)))
    assert [r.key for r in report.changed] == ["chats/hero/more 3.jsonl"]
    assert read and read[-1][0] == read[-1][1] == len(read)  # every listed file counted, read or not
    assert stored and stored[-1][0] == stored[-1][1]


def test_a_chat_folder_linked_out_is_neither_listed_nor_hashed(tmp_path: Path) -> None:
    user = build_st_user(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "hero"
    elsewhere.mkdir(parents=True)
    (elsewhere / "far.jsonl").write_text((user / "chats" / "hero" / "voyage.jsonl").read_text("utf-8"),
                                         encoding="utf-8")
    (user / "chats" / "far").symlink_to(elsewhere)
    files, _ = st_folder_files(user, Path(os.path.realpath(user)))
    assert not [f for f in files if f.startswith("chats/far/")]
    with open_store(str(tmp_path / "lib.db"), seed=False) as store:
        report = sync_st_folder(store, user)
    assert ("chats/far", "IMPORT_OUTSIDE_FOLDER") in {(s["file"], s["code"]) for s in report.skipped}
    assert not [r for r in report.added if r.key.startswith("chats/far/")]


def test_group_chats_are_read_only_through_the_listing(tmp_path: Path) -> None:
    """Issue 27's group chats under issue 25's rule: a group chat linked out is skipped, a member name that walks
    out of the folder (``../../outside/card.png``) opens nothing; the group inside still comes in, also on re-sync."""
    user = build_group_user(tmp_path, group={"members": ["hero.png", "mira.png", "../../outside/evil.png"],
                                             "chats": [CHAT_ID, "far"]})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.png").write_bytes((user / "characters" / "hero.png").read_bytes())
    (outside / "far.jsonl").write_text((user / "group chats" / f"{CHAT_ID}.jsonl").read_text("utf-8"), encoding="utf-8")
    (user / "group chats" / "far.jsonl").symlink_to(outside / "far.jsonl")
    opened: list[str] = []
    recording = [True]

    def audit(event: str, args: tuple) -> None:
        if recording[0] and event == "open" and args and isinstance(args[0], (str, os.PathLike)):
            opened.append(os.path.realpath(args[0]))

    sys.addaudithook(audit)  # hooks cannot be removed: it records only while this test runs
    try:
        plan = read_st_folder(user)
        with open_store(str(tmp_path / "lib.db"), seed=False) as store:
            first = sync_st_folder(store, user)
            again = sync_st_folder(store, user)
    finally:
        recording[0] = False
    reads = list(opened)
    assert not [p for p in reads if p.startswith(str(outside))], reads
    assert ("group chats/far.jsonl", "IMPORT_OUTSIDE_FOLDER") in {(s.file, s.code) for s in plan.skipped}
    assert [i.key for i in plan.items if i.kind == "chat" and i.key.startswith("group chats/")] == \
        [f"group chats/{CHAT_ID}.jsonl"]
    assert f"group chats/{CHAT_ID}.jsonl" in {r.key for r in first.added}
    assert again.files_changed == [] and not again.added and not again.changed
