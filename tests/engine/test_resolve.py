"""``engine.resolve``: the rules the preview resolves, asked of the engine instead of copied (issue 10 item 1).

Each rule is checked against what the preview of a real request actually does: its warnings and
limits, the names it substitutes, the ``book_index`` of its trace, the budget activation uses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import chat_lorebooks, lorebook_budget, lorebook_plan, model_profile_and_limit, speaker_names
from engine.importers import load_character, load_chat, load_lorebook
from engine.importers.st_folder import read_st_folder
from engine.lorebook import activate
from engine.pipeline import default_registries, preview
from engine.resolve import SpeakerNames
from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, Persona, PreviewRequest
from engine.storage import open_store
from tests.conftest import st_user_copy
from tests.engine.importers.st_fixture import build_st_user

CHAT = "chats/Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"
ST_USER = "st-user/default-user"


@pytest.fixture
def seraphina(shared_data: Path) -> PreviewRequest:
    """The Seraphina chat with its card (which embeds the Eldoria book)."""
    return PreviewRequest(chat=load_chat(shared_data / CHAT),
                          character=load_character(shared_data / "cards" / "default_Seraphina.png"),
                          settings=ContextSettings(model="gpt-4o", context_limit=16000))


def _st_request(folder: Path, tmp_path: Path, key: str | None = None) -> PreviewRequest:
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    try:
        report = store.imports.st_folder(read_st_folder(folder))
        refs = [r for r in report.added if r.kind == "chat"]
        return store.chats.build_request(next(r.id for r in refs if key is None or r.key == key))
    finally:
        store.close()


# ------------------------------------------------------------------ profile and limit

def test_known_model_resolves_to_the_preview_figures(seraphina: PreviewRequest) -> None:
    resolved = model_profile_and_limit(seraphina.settings)
    pv = preview(seraphina)
    assert resolved.known
    assert (resolved.profile, resolved.context_limit, resolved.reply_reserve, resolved.budget) == (
        pv.tokenizer.profile, pv.context_limit, pv.reply_reserve, pv.budget)
    assert resolved.warnings == ()


@pytest.mark.parametrize("overrides", [{}, {"context_limit": 9000}, {"tokenizer": "o200k_base"},
                                       {"context_limit": 9000, "tokenizer": "o200k_base"}])
def test_unknown_model_warnings_are_the_preview_warnings(seraphina: PreviewRequest, overrides: dict) -> None:
    settings = ContextSettings(model="my-local-model", **overrides)
    request = seraphina.model_copy(update={"settings": settings})
    resolved = model_profile_and_limit(settings, default_registries().tokenizers)
    pv = preview(request)
    assert not resolved.known
    assert resolved.profile == pv.tokenizer.profile
    assert resolved.context_limit == pv.context_limit == overrides.get("context_limit", pv.context_limit)
    assert resolved.warnings and list(resolved.warnings) == pv.warnings[:len(resolved.warnings)]
    assert resolved.warnings[0].startswith("unknown model 'my-local-model'")


def test_limit_above_the_known_one_is_warned(seraphina: PreviewRequest) -> None:
    settings = ContextSettings(model="gpt-4", context_limit=100000)
    resolved = model_profile_and_limit(settings)
    assert resolved.context_limit == 100000
    assert any("above gpt-4's known limit" in w for w in resolved.warnings)
    assert list(resolved.warnings) == preview(seraphina.model_copy(update={"settings": settings})).warnings[
        :len(resolved.warnings)]


def test_sillytavern_warnings_are_worded_as_its_preview(shared_data: Path, tmp_path: Path) -> None:
    request = _st_request(st_user_copy(shared_data, tmp_path), tmp_path)
    request = request.model_copy(update={"settings": request.settings.model_copy(update={"model": "mystery"})})
    resolved = model_profile_and_limit(request.settings, sillytavern=True)
    pv = preview(request)
    assert (resolved.context_limit, resolved.reply_reserve) == (pv.context_limit, pv.reply_reserve)
    assert list(resolved.warnings) == pv.warnings[:len(resolved.warnings)]
    assert resolved.warnings[0].startswith("unknown model 'mystery': counting with the approximate profile")


# ------------------------------------------------------------------ {{user}} / {{char}}

def _with_system_prompt(request: PreviewRequest) -> PreviewRequest:
    return request.model_copy(update={"system_prompt": "NAMES <{{user}}|{{char}}>"})


def _substituted(request: PreviewRequest) -> str:
    text = next(b.text for b in preview(request).blocks if "NAMES <" in b.text)
    return text[text.index("NAMES <") + 7:text.index(">", text.index("NAMES <"))]


def test_names_from_the_chat(seraphina: PreviewRequest) -> None:
    names = speaker_names(seraphina)
    assert names == SpeakerNames(user="Orion", char="Seraphina")
    assert _substituted(_with_system_prompt(seraphina)) == "Orion|Seraphina"


def test_persona_and_nickname_win(seraphina: PreviewRequest) -> None:
    card = seraphina.character.model_copy(update={"nickname": "Sera"})
    request = _with_system_prompt(seraphina.model_copy(update={"character": card, "persona": Persona(name="Ana")}))
    assert speaker_names(request) == SpeakerNames("Ana", "Sera")
    assert _substituted(request) == "Ana|Sera"


def test_no_card_no_names(shared_data: Path) -> None:
    chat = load_chat(shared_data / CHAT).model_copy(update={"user_name": None, "character_name": None})
    request = _with_system_prompt(PreviewRequest(chat=chat))
    assert speaker_names(request) == SpeakerNames("User", "")
    assert _substituted(request) == "User|"


def test_sillytavern_names_ignore_the_nickname(shared_data: Path, tmp_path: Path) -> None:
    """SillyTavern's name2 is the card's name (never its nickname) and name1 its own user name."""
    request = _st_request(st_user_copy(shared_data, tmp_path), tmp_path)
    card = request.character.model_copy(update={"nickname": "Sera"})
    request = request.model_copy(update={"character": card, "persona": Persona(name="Ana")})
    names = speaker_names(request)
    assert names == SpeakerNames("User", "Seraphina")
    main = preview(request).messages[0]["content"]
    assert main.startswith(f"Write {names.char}'s next reply in a fictional chat between {names.char} and {names.user}.")
    # the same request through the stage pipeline uses the nickname and the persona
    assert speaker_names(request.model_copy(update={"sillytavern": None})) == SpeakerNames("Ana", "Sera")


# ------------------------------------------------------------------ lorebooks

def _trace_matches(request: PreviewRequest) -> None:
    books = chat_lorebooks(request)
    trace = preview(request).lorebook_trace
    assert trace
    for rec in trace:
        book = books[rec.book_index]
        assert book.name == rec.book
        assert any(str(e.uid) == str(rec.uid) for e in book.entries)


def test_embedded_book_is_appended(seraphina: PreviewRequest, shared_data: Path) -> None:
    plan = lorebook_plan(seraphina)
    assert [b.name for b in plan.books] == ["Eldoria"]
    assert (plan.order, plan.duplicate_of, plan.scopes, plan.embedded) == ((0,), (0,), ("character",), 0)
    _trace_matches(seraphina)
    # a listed book of the same name replaces it
    listed = seraphina.model_copy(update={"lorebooks": [load_lorebook(shared_data / "lorebooks" / "Eldoria.json")]})
    plan = lorebook_plan(listed)
    assert (len(plan.books), plan.embedded, plan.scopes) == (1, None, (None,))


def test_other_card_book_comes_after_the_listed_ones(seraphina: PreviewRequest, shared_data: Path) -> None:
    request = seraphina.model_copy(update={
        "character": load_character(shared_data / "cards" / "Lumine.json"),
        "lorebooks": [load_lorebook(shared_data / "lorebooks" / "Eldoria.json")]})
    plan = lorebook_plan(request)
    assert [b.name for b in plan.books] == ["Eldoria", "Traveler-WI"]
    assert (plan.order, plan.embedded, plan.scopes) == ((0, 1), 1, (None, "character"))
    _trace_matches(request)


def test_duplicate_books_are_activated_once(seraphina: PreviewRequest, shared_data: Path) -> None:
    book = load_lorebook(shared_data / "lorebooks" / "Eldoria.json")
    request = seraphina.model_copy(update={"lorebooks": [book, book]})
    plan = lorebook_plan(request)
    assert (len(plan.books), plan.order, plan.duplicate_of) == (2, (0,), (0, 0))
    assert [b.name for b in plan.activated] == ["Eldoria"]
    _trace_matches(request)
    dups = [r for r in preview(request).lorebook_trace if r.code == "LOREBOOK_DUPLICATE_BOOK"]
    assert len(dups) == len(book.entries) and {r.book_index for r in dups} == {1}


def test_sillytavern_books_in_scan_order(tmp_path: Path) -> None:
    """A SillyTavern chat: ``request.lorebooks`` only, activated chat lore first (getSortedEntries)."""
    request = _st_request(build_st_user(tmp_path), tmp_path)
    plan = lorebook_plan(request)
    assert [b.name for b in plan.books] == ["Realm", "Voyage", "HeroLore"]
    assert plan.scopes == ("global", "chat", "character")
    assert plan.order == (1, 2, 0)  # chat, then character_first: character, global
    assert plan.duplicate_of == (0, 1, 2) and plan.embedded is None
    _trace_matches(request)


def test_sillytavern_folder_ignores_an_unlinked_card_book(shared_data: Path, tmp_path: Path) -> None:
    request = _st_request(st_user_copy(shared_data, tmp_path), tmp_path)
    assert request.character is not None and request.character.character_book is not None
    assert chat_lorebooks(request) == list(request.lorebooks)


# ------------------------------------------------------------------ lorebook budget

@pytest.mark.parametrize(("percent", "cap"), [(25, 0), (10, 0), (50, 300), (1, 0)])
def test_lorebook_budget_is_the_activation_budget(seraphina: PreviewRequest, percent: int, cap: int) -> None:
    wi = seraphina.settings.world_info.model_copy(update={"budget_percent": percent, "budget_cap": cap})
    settings = seraphina.settings.model_copy(update={"world_info": wi})
    resolved = model_profile_and_limit(settings)
    result = activate(lorebook_plan(seraphina).activated, seraphina.chat.messages, wi,
                      count_tokens=resolved.tokenizer.count, context_limit=resolved.budget)
    assert lorebook_budget(settings, resolved.budget) == result.budget
    if cap:
        assert lorebook_budget(settings, resolved.budget) <= cap


@pytest.mark.parametrize(("strategy", "options", "expected"), [
    ("manual", {}, True), ("summarize", {}, True), ("vector-recall", {}, True), ("compact", {}, True),
    ("truncate", {}, False), ("summarize", {"honor_manual": False}, False), ("manual", {"honor_manual": True}, True),
])
def test_honours_exclusions_is_the_registry_flag_and_the_option(strategy, options, expected) -> None:
    from engine.registries import default_registries
    from engine.resolve import honours_exclusions

    settings = ContextSettings(model="gpt-4o", strategy=strategy, strategy_options=options)
    assert honours_exclusions(settings, default_registries().strategies) is expected


def test_honours_exclusions_matches_what_the_preview_sends() -> None:
    # the rule the GUI asks is the one the pipeline applies: an excluded message is sent iff not honoured
    from engine.registries import default_registries
    from engine.resolve import honours_exclusions

    msgs = [ChatMessage(role="user", content=f"turn {i}") for i in range(6)]
    msgs[2] = msgs[2].model_copy(update={"meta": MessageMeta(manualExcluded=True)})
    for strategy, options in (("truncate", {}), ("summarize", {}), ("summarize", {"honor_manual": False})):
        settings = ContextSettings(model="gpt-4o", context_limit=8000, reply_reserve=100, strategy=strategy,
                                   strategy_options=options)
        pv = preview(PreviewRequest(chat=Chat(messages=msgs), settings=settings))
        sent = next(b for b in pv.blocks if b.message_index == 2).status == "kept"
        assert sent is not honours_exclusions(settings, default_registries().strategies), (strategy, options)
