"""``import DIR`` stays inside DIR: a corpus of hostile SillyTavern folders (issue 25 items 2 and 6).

Each folder is the fixture user folder (``st_fixture.build_st_user``) plus hostile features: symbolic links (files
and folders, relative, absolute, chained, looping, dangling) leading out of the folder or to ``secrets.json``,
traversal names inside the files (``../../outside``), junk ``.jsonl`` files, sub-folders that cannot be listed
(a file, a FIFO or a dangling link where a folder should be: the tests run as root, for whom permissions do not
apply), FIFOs where files should be, and duplicate names. For every folder:

* nothing outside the folder is opened or listed, and no ``secrets.json`` is opened (an audit hook records every
  ``open``/``os.scandir``/``os.listdir`` of the process);
* each link out is listed as skipped with its target; an unlistable sub-folder makes the report partial;
* the folder is byte-for-byte unchanged (links included), and importing it twice changes nothing the second time.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import LoomscopeImportError
from engine.importers.st_folder import read_st_folder
from engine.st_sync import sync_st_folder
from engine.storage import open_store

from .st_fixture import CARD, SECRET_MARKER, build_st_user, card_png

CANARY = "CANARY-OUTSIDE-8d1e"
_EVENTS: list[tuple[str, str]] = []
_RECORDING = [False]


def _audit(event: str, args: tuple) -> None:
    if _RECORDING[0] and event in ("open", "os.scandir", "os.listdir") and args:
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)):
            _EVENTS.append((event, os.fsdecode(path)))


sys.addaudithook(_audit)  # hooks cannot be removed: it records only while a test asks it to


# ------------------------------------------------------------------------------------ the outside world
def _outside(root: Path) -> Path:
    """Files a link may point to, outside every folder imported: each carries the canary."""
    out = root / "outside"
    if out.exists():
        return out
    (out / "worlds_dir").mkdir(parents=True)
    (out / "chats_dir").mkdir()
    (out / "world.json").write_text(json.dumps({"entries": {"0": {"uid": 0, "key": [CANARY], "content": CANARY}}}))
    (out / "worlds_dir" / "Far.json").write_text((out / "world.json").read_text())
    (out / "card.png").write_bytes(card_png({**CARD, "name": CANARY}))
    chat = [{"user_name": "Alex", "character_name": "Kael", "chat_metadata": {}},
            {"name": "Alex", "is_user": True, "mes": CANARY, "send_date": "2024-01-01"}]
    (out / "chat.jsonl").write_text("\n".join(json.dumps(x) for x in chat))
    (out / "chats_dir" / "far.jsonl").write_text((out / "chat.jsonl").read_text())
    (out / "settings.json").write_text(json.dumps({"username": CANARY}))
    (out / "secrets.json").write_text(json.dumps({"api_key_openai": CANARY}))
    return out


def _link(at: Path, target: str | Path) -> None:
    if at.is_dir() and not at.is_symlink():
        for p in sorted(at.rglob("*"), reverse=True):
            p.unlink() if not p.is_dir() or p.is_symlink() else p.rmdir()
        at.rmdir()
    elif at.exists() or at.is_symlink():
        at.unlink()
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(target)


# ------------------------------------------------------------------------------------ hostile features
# each: (user folder, outside folder) -> the skipped entries it must produce, as (relative path, code)
Feature = Callable[[Path, Path], set[tuple[str, str]]]
OUT, FORBIDDEN = "IMPORT_OUTSIDE_FOLDER", "IMPORT_FORBIDDEN_FILE"


def f_world_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "Evil.json", o / "world.json")
    return {("worlds/Evil.json", OUT)}


def f_world_link_relative(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "Rel.json", os.path.relpath(o / "world.json", u / "worlds"))
    return {("worlds/Rel.json", OUT)}


def f_card_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "characters" / "evil.png", o / "card.png")
    return {("characters/evil.png", OUT)}


def f_chat_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "chats" / "hero" / "evil.jsonl", o / "chat.jsonl")
    return {("chats/hero/evil.jsonl", OUT)}


def f_chat_dir_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "chats" / "far", o / "chats_dir")
    return {("chats/far", OUT)}


def f_worlds_dir_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds", o / "worlds_dir")
    return {("worlds", OUT)}


def f_characters_dir_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "characters", o)
    return {("characters", OUT)}


def f_chats_dir_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "chats", o / "chats_dir")
    return {("chats", OUT)}


def f_settings_link(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "settings.json", o / "settings.json")
    return {("settings.json", OUT)}


def f_secrets_inside(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "Keys.json", "../secrets.json")
    return {("worlds/Keys.json", FORBIDDEN)}


def f_secrets_outside(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "chats" / "hero" / "keys.jsonl", o / "secrets.json")
    return {("chats/hero/keys.jsonl", FORBIDDEN)}


def f_secrets_settings(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "settings.json", "secrets.json")
    return {("settings.json", FORBIDDEN)}


def f_secrets_named_world(u: Path, o: Path) -> set[tuple[str, str]]:
    (u / "worlds" / "secrets.json").write_text(json.dumps({"entries": {}}))
    return {("worlds/secrets.json", FORBIDDEN)}


def f_link_chain(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "Hop2.json", o / "world.json")
    _link(u / "worlds" / "Hop1.json", "Hop2.json")
    return {("worlds/Hop1.json", OUT), ("worlds/Hop2.json", OUT)}


def f_link_inside(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "Alias.json", "Realm.json")  # stays inside: followed
    return set()


def f_link_loop(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "LoopA.json", "LoopB.json")
    _link(u / "worlds" / "LoopB.json", "LoopA.json")
    return set()


def f_dangling(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "Gone.json", "nowhere.json")
    _link(u / "chats" / "hero" / "gone.jsonl", "/nonexistent/loomscope/x.jsonl")
    return {("chats/hero/gone.jsonl", OUT)}


def f_traversal_names(u: Path, o: Path) -> set[tuple[str, str]]:
    settings = json.loads((u / "settings.json").read_text())
    settings["user_avatar"] = "../../outside/secrets.json"
    settings["world_info_settings"]["world_info"]["globalSelect"] = ["../../../outside/world", "Realm"]
    settings["world_info_settings"]["world_info"]["charLore"] = [{"name": "../hero", "extraBooks": ["../../x"]}]
    (u / "settings.json").write_text(json.dumps(settings))
    chat = (u / "chats" / "hero" / "voyage.jsonl").read_text().splitlines()
    head = json.loads(chat[0])
    head["chat_metadata"]["world_info"] = "../../outside/world"
    head["chat_metadata"]["persona"] = "../../../outside/secrets.json"
    (u / "chats" / "hero" / "voyage.jsonl").write_text("\n".join([json.dumps(head), *chat[1:]]))
    (u / "characters" / "trav.png").write_bytes(card_png({**CARD, "name": "Trav", "data": {
        **CARD["data"], "name": "Trav", "extensions": {"world": "../../../outside/world"}}}))
    return set()


def f_junk_jsonl(u: Path, o: Path) -> set[tuple[str, str]]:
    d = u / "chats" / "hero"
    (d / "binary.jsonl").write_bytes(bytes(range(256)) * 8)
    (d / "empty.jsonl").write_bytes(b"")
    (d / "nan.jsonl").write_text('{"user_name": NaN}\n{"mes": 1}')
    (d / "openai.jsonl").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (d / "png.jsonl").write_bytes(card_png(CARD))
    (d / "longline.jsonl").write_text('{"mes": "' + "x" * 200_000)
    return {(f"chats/hero/{n}.jsonl", "*") for n in ("binary", "empty", "nan", "openai", "png", "longline")}


def f_chats_is_a_file(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "chats", "settings.json")  # a link to a file, inside
    return set()


def f_worlds_is_a_fifo(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds", "x")
    (u / "worlds").unlink()
    os.mkfifo(u / "worlds")
    return set()


def f_characters_dangling(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "characters", "no-such-folder")
    return set()


def f_chat_subdir_is_a_file(u: Path, o: Path) -> set[tuple[str, str]]:
    (u / "chats" / "notadir").write_text("x")
    os.mkfifo(u / "chats" / "hero" / "pipe.jsonl")  # a FIFO named like a chat: never opened (it would block)
    return set()


def f_duplicate_names(u: Path, o: Path) -> set[tuple[str, str]]:
    (u / "worlds" / "realm.json").write_text((u / "worlds" / "Realm.json").read_text())
    (u / "worlds" / "Re\u0301alm.json").write_text((u / "worlds" / "Realm.json").read_text())
    (u / "characters" / "hero2.png").write_bytes(card_png(CARD))  # a second card named Kael
    (u / "chats" / "Kael").mkdir()
    (u / "chats" / "Kael" / "voyage.jsonl").write_text((u / "chats" / "hero" / "voyage.jsonl").read_text())
    return set()


def f_control_names(u: Path, o: Path) -> set[tuple[str, str]]:
    (u / "chats" / "hero" / "new\nline.jsonl").write_text((u / "chats" / "hero" / "voyage.jsonl").read_text())
    (u / "chats" / "hero" / ".hidden.jsonl").write_text((u / "chats" / "hero" / "voyage.jsonl").read_text())
    (u / "worlds" / "esc\x1b[31m.json").write_text((u / "worlds" / "Realm.json").read_text())
    return set()


def f_deep_and_group_links(u: Path, o: Path) -> set[tuple[str, str]]:
    (u / "chats" / "hero" / "sub" / "deeper").mkdir(parents=True)
    _link(u / "chats" / "hero" / "sub" / "deeper" / "x.jsonl", o / "chat.jsonl")
    _link(u / "group chats" / "far", o / "chats_dir")
    return set()


def f_link_into_outside_via_inner_dir(u: Path, o: Path) -> set[tuple[str, str]]:
    _link(u / "worlds" / "inner", o / "worlds_dir")  # a folder link in worlds/ (not read: worlds are files)
    _link(u / "worlds" / "Via.json", "inner/Far.json")
    return {("worlds/Via.json", OUT)}  # worlds/inner is not a world file: never looked at


FEATURES: list[Feature] = [
    f_world_link, f_world_link_relative, f_card_link, f_chat_link, f_chat_dir_link, f_worlds_dir_link,
    f_characters_dir_link, f_chats_dir_link, f_settings_link, f_secrets_inside, f_secrets_outside,
    f_secrets_settings, f_secrets_named_world, f_link_chain, f_link_inside, f_link_loop, f_dangling,
    f_traversal_names, f_junk_jsonl, f_chats_is_a_file, f_worlds_is_a_fifo, f_characters_dangling,
    f_chat_subdir_is_a_file, f_duplicate_names, f_control_names, f_deep_and_group_links,
    f_link_into_outside_via_inner_dir,
]
#: features that replace a whole sub-folder (two of them in one folder would undo each other)
_REPLACES = {f_worlds_dir_link: "worlds", f_characters_dir_link: "characters", f_chats_dir_link: "chats",
             f_chats_is_a_file: "chats", f_worlds_is_a_fifo: "worlds", f_characters_dangling: "characters",
             f_settings_link: "settings", f_secrets_settings: "settings"}
#: a feature whose sub-folder another replaces loses its files
_NEEDS = {f_world_link: "worlds", f_world_link_relative: "worlds", f_secrets_inside: "worlds",
          f_secrets_named_world: "worlds", f_link_chain: "worlds", f_link_inside: "worlds", f_link_loop: "worlds",
          f_dangling: "worlds chats", f_duplicate_names: "worlds characters chats", f_control_names: "worlds chats",
          f_link_into_outside_via_inner_dir: "worlds", f_card_link: "characters", f_chat_link: "chats",
          f_chat_dir_link: "chats", f_secrets_outside: "chats", f_junk_jsonl: "chats", f_chat_subdir_is_a_file: "chats",
          f_deep_and_group_links: "chats", f_traversal_names: "settings chats characters"}


def _combinations() -> list[tuple[Feature, ...]]:
    """Every feature alone, then 20 random compatible combinations of three (fixed seed): 47 folders."""
    rnd = random.Random(25)
    combos: list[tuple[Feature, ...]] = [(f,) for f in FEATURES]
    while len(combos) < len(FEATURES) + 20:
        pick = tuple(rnd.sample(FEATURES, 3))
        replaced = [_REPLACES[f] for f in pick if f in _REPLACES]
        if len(replaced) != len(set(replaced)) or any(set(_NEEDS.get(f, "").split()) & set(replaced) for f in pick):
            continue
        if f_duplicate_names in pick and f_traversal_names in pick:
            continue
        combos.append(pick)
    return combos


COMBOS = _combinations()


def _tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (not following links): file digests, link texts, FIFOs, folders."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(folder))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "special"
    return out


def _outside_touched(outside: Path, events: list[tuple[str, str]]) -> list[tuple[str, str]]:
    bad = []
    for event, path in events:
        real = Path(os.path.realpath(path))
        if real == outside or outside in real.parents or real.name == "secrets.json":
            bad.append((event, path))
    return bad


def test_the_corpus_has_forty_folders_or_more() -> None:
    assert len(COMBOS) >= 40


@pytest.mark.parametrize("features", COMBOS, ids=lambda c: "+".join(f.__name__[2:] for f in c))
def test_a_hostile_folder_is_read_without_leaving_it(tmp_path: Path, features: tuple[Feature, ...]) -> None:
    outside = _outside(tmp_path)
    user = build_st_user(tmp_path)
    expected: set[tuple[str, str]] = set()
    for feature in features:
        expected |= feature(user, outside)
    before = _tree(tmp_path / "data")
    _EVENTS.clear()
    _RECORDING[0] = True
    try:
        plan = read_st_folder(tmp_path / "data", skip_bad=True)
    finally:
        _RECORDING[0] = False
    events = list(_EVENTS)
    assert not _outside_touched(outside, events), _outside_touched(outside, events)
    assert not [p for _, p in events if "secrets" in p]
    skipped = {(s.file, s.code) for s in plan.skipped}
    for rel, code in expected:
        assert (rel, code) in skipped or (code == "*" and any(f == rel for f, _ in skipped)), (rel, code, skipped)
    for s in plan.skipped:
        if s.code == OUT:
            assert "outside" in s.message and " a link to " in f" {s.message}"  # the target is named
    replaced = {_REPLACES[f] for f in features if f in _REPLACES} & {"chats", "worlds", "characters"}
    replaced_unreadable = replaced - {"chats" if f_chats_dir_link in features else "",
                                      "worlds" if f_worlds_dir_link in features else "",
                                      "characters" if f_characters_dir_link in features else ""}
    assert {f for f, _ in plan.unreadable} == replaced_unreadable
    for item in plan.items:  # nothing from outside came in
        assert CANARY not in json.dumps(item.value.model_dump(mode="json")), item.key
    store = open_store("sqlite://", seed=False)
    try:
        first = store.imports.st_folder(plan)
        again = store.imports.st_folder(read_st_folder(tmp_path / "data", skip_bad=True))
    finally:
        store.close()
    assert first.partial == bool(replaced_unreadable) == again.partial
    assert not again.added and not again.changed
    assert len(again.unchanged) == len(first.added) + len(first.changed) + len(first.unchanged)
    _check_sync(tmp_path / "data", outside, bool(replaced_unreadable), len(again.unchanged))
    assert _tree(tmp_path / "data") == before
    assert SECRET_MARKER not in json.dumps(first.model_dump(mode="json"))


def _check_sync(data: Path, outside: Path, partial: bool, objects: int) -> None:
    """``loomscope import DIR`` runs :func:`sync_st_folder` (issue 30): its own listing and hashing stay inside too."""
    store = open_store("sqlite://", seed=False)
    _EVENTS.clear()
    _RECORDING[0] = True
    try:
        first = sync_st_folder(store, data, skip_bad=True)
        again = sync_st_folder(store, data, skip_bad=True)
    finally:
        _RECORDING[0] = False
        store.close()
    assert not _outside_touched(outside, _EVENTS), _outside_touched(outside, _EVENTS)
    assert not [p for _, p in _EVENTS if "secrets" in p]
    assert first.partial == partial == again.partial  # an unlistable sub-folder is never answered from the record
    assert not again.added and not again.changed and not again.conflicts
    assert len(again.unchanged) == objects


def test_a_user_folder_linked_from_outside_is_not_followed(tmp_path: Path) -> None:
    elsewhere = build_st_user(tmp_path / "elsewhere")
    data = tmp_path / "mine" / "data"
    data.mkdir(parents=True)
    (data / "default-user").symlink_to(elsewhere)
    _EVENTS.clear()
    _RECORDING[0] = True
    try:
        with pytest.raises(LoomscopeImportError) as err:
            read_st_folder(data)
    finally:
        _RECORDING[0] = False
    assert err.value.code == OUT and str(elsewhere) in err.value.message
    assert not [p for _, p in _EVENTS if str(tmp_path / "elsewhere") in os.path.realpath(p)]
    store = open_store("sqlite://", seed=False)
    _EVENTS.clear()
    _RECORDING[0] = True
    try:
        with pytest.raises(LoomscopeImportError) as err:
            sync_st_folder(store, data)  # before any listing or hashing
    finally:
        _RECORDING[0] = False
        store.close()
    assert err.value.code == OUT
    assert not [p for _, p in _EVENTS if str(tmp_path / "elsewhere") in os.path.realpath(p)]
