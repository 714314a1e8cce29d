"""Text Completion prompts equal, character for character, what SillyTavern 1.12.6 sends (issue 26).

Each case of :mod:`tests.engine.assembly.tc_cases` (instruct off / Default, Alpaca, ChatML, Llama 3
Instruct, Mistral V2 & V3, Gemma 2, each with its context template, plus variants: pinned examples
with a prompt bias and collapsed newlines, the card's post-history instructions with the system
prompt off and single-line mode, a user alignment message with stripped examples, the card's own
system prompt with ``{{original}}``, no names, skipped examples, the Author's Note after and before the
story string with the persona at the top of it) is written as a SillyTavern user
folder, imported, and previewed at two windows: one where everything fits and one where the
history must be cut. ``textcompletion_expected.json`` holds the ``prompt`` and ``stop`` that
SillyTavern's own code produced for the same inputs: ``public/script.js`` ``Generate`` (dry run,
``main_api`` ``textgenerationwebui``) run under Node 20 with the functions it calls taken verbatim
from the 1.12.6 sources (``getCharacterCardFields``, ``baseChatReplace``, ``substituteParams``,
``doChatInject``, ``getExtensionPrompt``, ``addPersonaDescriptionExtensionPrompt``,
``formatMessageHistoryItem``, ``getStoppingStrings``, ``addChatsSeparator``, ``getMaxContextSize``,
``authors-note.js`` ``setFloatingPrompt``, every ``instruct-mode.js`` formatter,
``power-user.js`` ``renderStoryString`` with ``handlebars@4.7.8`` and SillyTavern's helpers,
``openai.js`` ``parseExampleIntoIndividual``, ``macros.js`` ``evaluateMacros``); only browser
pieces were stubbed (jQuery, events, regex scripts as identity) and ``getWorldInfoPrompt`` returned
the fixture's constant entries bucketed as ``checkWorldInfo`` does. Both sides count with the same
test tokenizer (``ceil(characters / 4)``, ``getTokenCountAsync`` semantics: padding added to whole-
prompt counts) so the history cut is compared exactly.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

import engine.resolve as resolve_module
from engine.errors import SettingsError
from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from engine.tokenizers import TokenizerProfile
from tests.engine.assembly import tc_cases

EXPECTED = json.loads(Path(__file__).with_name("textcompletion_expected.json").read_text(encoding="utf-8"))


class CharTokenizer:
    """The tests' tokenizer: ``ceil(len(text) / 4)`` (the Node run used the same rule)."""

    key, st_id, label, approximate, version = "chars4", 99, "chars / 4 · approximate", True, "1"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4) if text else 0

    def prompt_tokens(self, prompt: str) -> int:
        return self.count(prompt)

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [(i, min(i + 4, len(text))) for i in range(0, len(text), 4)]


@pytest.fixture
def char_tokenizer(monkeypatch):
    tok = CharTokenizer()
    monkeypatch.setattr(resolve_module, "text_completion_tokenizer", lambda tc: tok)
    monkeypatch.setattr(resolve_module, "text_tokenizer_profile", lambda t: TokenizerProfile(
        "chars4", True, "1", "test: characters / 4", count_batch=lambda texts: [tok.count(x) for x in texts]))
    return tok


def _preview(tmp_path: Path, case: str, budget: str):
    folder = tc_cases.write_case(tmp_path / "st", case, budget)
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    return preview(store.chats.build_request(chat_id))


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_prompt_equals_sillytavern(key: str, tmp_path: Path, char_tokenizer) -> None:
    """``Generate`` → ``getCombinedPrompt`` and ``getStoppingStrings`` (see the module docstring)."""
    case, budget = key.split("@")
    pv = _preview(tmp_path, case, budget)
    assert pv.api == "text_completion" and pv.messages == []
    assert pv.prompt == EXPECTED[key]["prompt"]
    assert pv.stop == EXPECTED[key]["stop"]


@pytest.mark.parametrize("case", ["plain", "chatml", "llama3", "mistral"])
def test_blocks_cover_the_string_and_the_cut_history_is_excluded(case: str, tmp_path: Path, char_tokenizer) -> None:
    """Kept blocks tile the prompt in order (``span``); messages cut newest-first are ``HISTORY_OLDEST_FIRST``."""
    pv = _preview(tmp_path, case, "cut")
    assert pv.prompt is not None
    kept = [b for b in pv.blocks if b.status == "kept"]
    assert kept[0].span is not None and kept[0].span[0] == 0 and kept[-1].span is not None and kept[-1].span[1] == len(pv.prompt)
    for a, b in itertools.pairwise(kept):
        assert a.span is not None and b.span is not None and a.span[1] == b.span[0]
    for b in kept:
        assert b.span is not None and pv.prompt[b.span[0]:b.span[1]] == b.text
        assert b.tokens == math.ceil(len(b.text) / 4)
    cut = [b for b in pv.blocks if b.reason == "HISTORY_OLDEST_FIRST"]
    assert cut and all(b.status == "excluded" and b.span is None for b in cut)
    sent_idx = [b.message_index for b in kept if b.kind == "message" and b.message_index is not None]
    cut_idx = [b.message_index for b in cut if b.message_index is not None]
    assert max(cut_idx) < min(sent_idx)  # the oldest went first
    # "Turn 5" (message 6: the greeting is message 0) is hidden: never sent
    assert 6 not in sent_idx and any(b.reason == "HIDDEN" and b.message_index == 6 for b in pv.blocks)
    kinds = {b.kind for b in kept}
    assert {"system", "character", "lorebook", "message", "instruction"} <= kinds
    assert pv.prompt_tokens == math.ceil(len(pv.prompt) / 4)
    assert pv.budget == 620 - 220 and pv.context_limit == 620 and pv.reply_reserve == 220


def test_story_string_error_names_the_preset_and_place(tmp_path: Path, char_tokenizer) -> None:
    """A story string Handlebars rejects: ``INVALID_SETTINGS`` naming the context preset, line and column."""
    folder = tc_cases.write_case(tmp_path / "st", "plain", "full")
    settings_file = folder / "settings.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    settings["power_user"]["context"]["story_string"] = "{{#if system}}{{system}}\n{{#if persona}}{{persona}}{{/if}}"
    settings_file.write_text(json.dumps(settings), encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    with pytest.raises(SettingsError) as err:
        preview(store.chats.build_request(chat_id))
    assert err.value.code == "INVALID_SETTINGS"
    assert "'Default'" in str(err.value) and "never closed" in str(err.value) and "line 1, column 1" in str(err.value)


def test_lorebook_report_counts_as_the_text_completion_preview(tmp_path: Path, capsys) -> None:
    """``loomscope lorebook-report`` on a Text Completion chat: budget ``max_context − amount_gen``, entries
    counted with SillyTavern's Text Completion tokenizer (issue 26 item 6)."""
    from engine.cli import main
    from engine.tokenizers.sillytavern_text import sillytavern_text_tokenizer

    folder = tc_cases.write_case(tmp_path / "st", "chatml", "full")
    db = str(tmp_path / "lib.db")
    assert main(["import", str(folder), "--db", db, "--format", "json"]) == 0
    chat_id = next(r["id"] for r in json.loads(capsys.readouterr().out)["added"] if r["kind"] == "chat")
    assert main(["lorebook-report", "--chat-id", chat_id, "--db", db, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["budget"] == 8192 - 300
    tok = sillytavern_text_tokenizer(99, "textgenerationwebui", None)
    entries = {e["uid"]: e for e in report["entries"]}
    harbor = tc_cases.WORLD["entries"]["0"]["content"]
    assert entries[0]["turns_fired"] == report["turns"][-1]["turn"]
    assert {t for _turn, t in entries[0]["fired"]} == {tok.count(harbor)}


def test_a_window_too_small_for_any_message_warns(tmp_path: Path, char_tokenizer) -> None:
    """Nothing of the chat fits (``Generate`` then sends the story string alone): a warning, no error."""
    folder = tc_cases.write_case(tmp_path / "st", "chatml", "cut")
    settings_file = folder / "settings.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    settings["max_context"], settings["amount_gen"] = 300, 100
    settings_file.write_text(json.dumps(settings), encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    pv = preview(store.chats.build_request(next(r.id for r in report.added if r.kind == "chat")))
    assert pv.error is None and pv.prompt
    assert not any(b.kind == "message" and b.status == "kept" for b in pv.blocks)
    assert any("no chat message fits" in w for w in pv.warnings)
