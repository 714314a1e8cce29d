"""Importing a SillyTavern user folder (issue 17): links, settings, identity, bad input."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
from pathlib import Path

import pytest

from engine.errors import LoomscopeError, LoomscopeImportError
from engine.importers.st_folder import read_st_folder
from engine.storage import open_store
from tests.engine.importers.st_fixture import SECRET_MARKER, SETTINGS, WORLDS, build_st_user

ST_USER = "st-user/default-user"


def _store(tmp_path: Path, name: str = "lib.db"):
    return open_store(f"sqlite:///{tmp_path / name}", seed=False)


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_pristine_folder_links_and_settings(shared_data: Path, tmp_path: Path) -> None:
    store = _store(tmp_path)
    report = store.imports.st_folder(read_st_folder(shared_data / ST_USER))
    kinds = sorted(r.kind for r in report.added)
    assert kinds == ["character", "chat", "lorebook", "persona"] and not report.changed
    chat_ref = next(r for r in report.added if r.kind == "chat")
    setup = store.chats.get_setup(chat_ref.id)
    stored = store.chats.get(chat_ref.id)
    assert stored.character is not None and stored.character.name == "Seraphina"
    assert stored.persona is not None and stored.persona.name == "User"
    assert [(link.name, link.scope) for link in setup.lorebooks] == [("Eldoria", "character")]
    s = setup.settings
    # main_api koboldhorde: SillyTavern's Text Completion window, max_context 8192 − amount_gen 350 (issue 26)
    assert (s.model, s.context_limit, s.reply_reserve) == ("gpt-4-turbo", 8192, 350)
    wi = s.world_info
    assert (wi.scan_depth, wi.budget_percent, wi.recursive, wi.match_whole_words, wi.character_strategy,
            wi.rules) == (2, 25, True, True, "character_first", "sillytavern")
    st = setup.sillytavern
    assert st is not None and st.user_name == "User"
    # sanitizeServiceSettings: no order for the dummy id 100001 → the default order
    assert [o.identifier for o in st.prompt_order][:3] == ["main", "worldInfoBefore", "personaDescription"]
    main = next(p for p in st.prompts if p.identifier == "main")
    assert main.content == "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
    assert (st.author_note.depth, st.author_note.position, st.author_note.interval) == (4, 1, 1)
    tc = st.text_completion
    assert tc is not None and (tc.main_api, tc.max_context, tc.amount_gen, tc.tokenizer, tc.token_padding) == (
        "koboldhorde", 8192, 350, 99, 64)
    assert (tc.instruct.enabled, tc.instruct.preset, tc.context.preset, tc.sysprompt.name) == (
        False, "Alpaca", "Default", "Neutral - Chat")
    # power_user.context lacks names_as_stop_strings: loadContextSettings' default (true)
    assert (tc.context.use_stop_strings, tc.context.names_as_stop_strings, tc.context.chat_start) == (True, True, "***")
    assert len(tc.instruct_presets) == 29 and len(tc.context_presets) == 26 and len(tc.sysprompt_presets) == 12


def test_folder_is_byte_identical_after_import(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / ST_USER
    before = _tree_digest(folder)
    store = _store(tmp_path)
    store.imports.st_folder(read_st_folder(folder))
    store.imports.st_folder(read_st_folder(folder))
    assert _tree_digest(folder) == before


def test_fixture_folder_untouched_and_secrets_never_opened(tmp_path: Path, monkeypatch) -> None:
    user = build_st_user(tmp_path)
    before = _tree_digest(user)
    opened: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def spy(real):
        def wrapper(file, *a, **kw):
            opened.append(os.fspath(file) if isinstance(file, (str, bytes, os.PathLike)) else str(file))
            return real(file, *a, **kw)
        return wrapper

    monkeypatch.setattr(builtins, "open", spy(real_open))
    monkeypatch.setattr(io, "open", spy(real_io_open))
    monkeypatch.setattr(os, "open", spy(real_os_open))
    plan = read_st_folder(tmp_path / "data")
    monkeypatch.undo()
    assert not [p for p in opened if "secrets" in str(p)]
    store = _store(tmp_path)
    store.imports.st_folder(plan)
    store.close()
    assert _tree_digest(user) == before
    # the marker is nowhere in the library files (database, WAL, shared memory)
    for f in tmp_path.glob("lib.db*"):
        assert SECRET_MARKER.encode() not in f.read_bytes(), f


def test_fixture_scopes_persona_and_note(tmp_path: Path) -> None:
    build_st_user(tmp_path)
    store = _store(tmp_path)
    report = store.imports.st_folder(read_st_folder(tmp_path / "data"))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    setup = store.chats.get_setup(chat_id)
    assert [(link.name, link.scope) for link in setup.lorebooks] == [
        ("Realm", "global"), ("Voyage", "chat"), ("HeroLore", "character")]
    assert setup.sillytavern.user_name == "Alex"
    assert store.chats.get(chat_id).persona.description.startswith("Alex is a young cartographer")
    note = setup.sillytavern.author_note
    assert (note.depth, note.position, note.role) == (2, 1, 0)
    assert [s["file"] for s in report.skipped] == ["group chats/1700000000000.jsonl"]
    names = sorted(r.name for r in report.added if r.kind == "lorebook")
    assert names == ["HeroLore", "Realm", "Unused", "Voyage"]


def test_reimport_updates_in_place(tmp_path: Path) -> None:
    user = build_st_user(tmp_path)
    store = _store(tmp_path)
    first = store.imports.st_folder(read_st_folder(user))
    again = store.imports.st_folder(read_st_folder(user))
    assert not again.added and not again.changed
    assert sorted(r.id for r in again.unchanged) == sorted(r.id for r in first.added)
    world = json.loads((user / "worlds" / "Voyage.json").read_text())
    world["entries"]["0"]["content"] = "Voyage: the ship is the Gull, three masts now."
    (user / "worlds" / "Voyage.json").write_text(json.dumps(world))
    third = store.imports.st_folder(read_st_folder(user))
    assert [(r.kind, r.key) for r in third.changed] == [("lorebook", "worlds/Voyage.json")]
    voyage = next(r for r in third.changed)
    assert voyage.id == next(r.id for r in first.added if r.key == "worlds/Voyage.json")
    assert "three masts" in store.lorebooks.get(voyage.id).entries[0].content
    assert len(store.chats.summaries()) == 1 and len(store.lorebooks.summaries()) == 5  # 4 worlds + the card's book


def test_data_root_and_st_user(tmp_path: Path) -> None:
    build_st_user(tmp_path)
    assert read_st_folder(tmp_path / "data").user == "default-user"
    (tmp_path / "data" / "default-user").rename(tmp_path / "data" / "writer")
    assert read_st_folder(tmp_path / "data", st_user="writer").user == "writer"
    with pytest.raises(LoomscopeImportError) as err:
        read_st_folder(tmp_path / "data")
    assert err.value.code == "IMPORT_UNSUPPORTED_FORMAT" and err.value.file == str(tmp_path / "data")


def test_not_a_sillytavern_folder(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    with pytest.raises(LoomscopeImportError) as err:
        read_st_folder(tmp_path / "notes")
    assert err.value.code == "IMPORT_UNSUPPORTED_FORMAT" and err.value.file == str(tmp_path / "notes")


def test_bad_file_imports_nothing_unless_skip_bad(tmp_path: Path) -> None:
    user = build_st_user(tmp_path)
    (user / "worlds" / "Broken.json").write_text('{"entries": {"0": {"key": ["a"],\n "content": }}}')
    store = _store(tmp_path)
    with pytest.raises(LoomscopeImportError) as err:
        store.imports.st_folder(read_st_folder(user))
    assert err.value.file == str(user / "worlds" / "Broken.json") and err.value.place
    assert store.chats.summaries() == [] and store.lorebooks.summaries() == []
    report = store.imports.st_folder(read_st_folder(user, skip_bad=True))
    skipped = {s["file"]: s for s in report.skipped}
    assert skipped["worlds/Broken.json"]["code"].startswith("IMPORT_") and skipped["worlds/Broken.json"]["place"]
    assert len(store.chats.summaries()) == 1


def test_link_to_a_missing_world_is_a_warning(tmp_path: Path) -> None:
    settings = json.loads(json.dumps(SETTINGS))
    settings["world_info_settings"]["world_info"]["globalSelect"] = ["Realm", "Atlantis"]
    worlds = {k: v for k, v in WORLDS.items()}
    user = build_st_user(tmp_path, settings=settings, worlds=worlds)
    warnings: list[tuple[str, str]] = []
    plan = read_st_folder(user, on_warning=lambda f, m: warnings.append((f, m)))
    store = _store(tmp_path)
    report = store.imports.st_folder(plan)
    assert ("chats/hero/voyage.jsonl", "global world 'Atlantis' does not exist in worlds/; not linked") in warnings
    assert any("Atlantis" in w["message"] for w in report.warnings)
    assert len(store.chats.summaries()) == 1


@pytest.mark.parametrize("mutate", [
    lambda s: s["oai_settings"].update(prompts=[{"identifier": "main", "content": 5}]),
    lambda s: s["oai_settings"].update(openai_max_tokens=5000),
    lambda s: s["power_user"].update(personas={"alex.png": {"not": "a name"}}),
    lambda s: s.update(world_info_settings={"world_info_depth": -3}),
])
def test_bad_settings_name_the_file(tmp_path: Path, mutate) -> None:
    settings = json.loads(json.dumps(SETTINGS))
    mutate(settings)
    user = build_st_user(tmp_path, settings=settings)
    try:
        plan = read_st_folder(user)
    except LoomscopeImportError as exc:
        assert exc.file == str(user / "settings.json") and exc.code.startswith("IMPORT_")
        return
    # accepted: then it must import and preview without crashing
    from engine.pipeline import preview

    store = _store(tmp_path)
    report = store.imports.st_folder(plan)
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    try:
        preview(store.chats.build_request(chat_id))
    except LoomscopeError as exc:  # a bad number is a settings error, never a crash
        assert exc.code == "INVALID_SETTINGS"
