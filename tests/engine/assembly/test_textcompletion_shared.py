"""``st-user/default-user`` as SillyTavern 1.12.6 sends it over Text Completion (issue 26).

The folder says ``main_api: koboldhorde``, instruct preset Alpaca (off), context template Default.
Expected prompts come from SillyTavern's own ``Generate`` run under Node on the same files (see
``test_textcompletion.py`` for how), with the World Info entries Loomscope activated for the chat
(``Eldoria`` 0–3, before the card) given to ``getWorldInfoPrompt``. The shared texts are third-party
files, so only each prompt's SHA-256 and length are kept here (and the stop strings). Variants: as
is; instruct mode on (Alpaca); a 2,000-token window (reply 350) that cuts the history, with and
without instruct mode, counted with the tests' ``ceil(characters / 4)`` tokenizer on both sides.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import engine.resolve as resolve_module
from engine.assembly.textcompletion import text_completion_title
from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from engine.tokenizers import TokenizerProfile
from tests.conftest import st_user_copy
from tests.engine.assembly.test_textcompletion import CharTokenizer

EXPECTED = {
    "as-is": ("1eb1e00c1ead5a41648bf4196219e45a4acda9d072f4530620e850a0c91ad3d8", 10037, ["\nUser:", "\n***"]),
    "instruct": ("9372f6154a20b84b5f30dd5c0bca233c6b0d7d972a09586899a88dd553d7f89a", 10082,
                 ["\nUser:", "\n### Instruction:", "\n### Response:", "\n### Input:", "\n***"]),
    "cut": ("4b356de37670007fdd002f6fd7e14992ce7fbc89ee388cb7cbb478f991a9cfcc", 6033, ["\nUser:", "\n***"]),
    "instruct-cut": ("ffa7efebab939b1e74ea938bf131ffedddd618b27abd7e6d30cceb57292f5a80", 6059,
                     ["\nUser:", "\n### Instruction:", "\n### Response:", "\n### Input:", "\n***"]),
}
CHANGES: dict[str, dict] = {
    "instruct": {"instruct": {"enabled": True}},
    "cut": {"top": {"max_context": 2000, "amount_gen": 350}},
    "instruct-cut": {"top": {"max_context": 2000, "amount_gen": 350}, "instruct": {"enabled": True}},
}


def _preview(folder: Path, tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    return preview(store.chats.build_request(next(r.id for r in report.added if r.kind == "chat")))


def _check(pv, key: str) -> None:
    digest, chars, stop = EXPECTED[key]
    assert pv.api == "text_completion" and pv.prompt is not None
    assert (len(pv.prompt), hashlib.sha256(pv.prompt.encode("utf-8")).hexdigest()) == (chars, digest)
    assert pv.stop == stop


def test_the_folder_as_it_is(shared_data: Path, tmp_path: Path) -> None:
    """Counted with SillyTavern's own choice (best match for koboldhorde: LLaMA, approximate here); nothing is cut."""
    pv = _preview(shared_data / "st-user" / "default-user", tmp_path)
    _check(pv, "as-is")
    assert text_completion_title(pv) == "Text Completion · instruct off · llama approximate"
    assert (pv.context_limit, pv.reply_reserve, pv.budget) == (8192, 350, 7842)
    assert not any(b.reason == "HISTORY_OLDEST_FIRST" for b in pv.blocks)
    kept = [b for b in pv.blocks if b.status == "kept"]
    assert "".join(b.text for b in kept) == pv.prompt


@pytest.mark.parametrize("key", ["instruct", "cut", "instruct-cut"])
def test_the_folder_changed(key: str, shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    """Instruct mode on and / or a window that cuts the history (the tests' tokenizer on both sides)."""
    tok = CharTokenizer()
    if "cut" in key:
        monkeypatch.setattr(resolve_module, "text_completion_tokenizer", lambda tc: tok)
        monkeypatch.setattr(resolve_module, "text_tokenizer_profile", lambda t: TokenizerProfile(
            "chars4", True, "1", "test", count_batch=lambda texts: [tok.count(x) for x in texts]))
    folder = st_user_copy(shared_data, tmp_path / "st", main_api="koboldhorde", **CHANGES[key])
    pv = _preview(folder, tmp_path)
    _check(pv, key)
    if "cut" in key:
        assert any(b.reason == "HISTORY_OLDEST_FIRST" and b.status == "excluded" for b in pv.blocks)
    if key.startswith("instruct"):
        assert text_completion_title(pv).startswith("Text Completion · Alpaca · ")


@pytest.mark.parametrize("key", ["cut", "instruct-cut"])
def test_left_out_messages_stay_in_story_order(key: str, shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    """Issue 31 item 2 on the Text Completion path: messages SillyTavern's fill leaves out
    (``Generate``'s chat loop, public/script.js) are listed where they sit in the chat, not after
    the reply start at the end of the string (found by the writer's pass of issue 29)."""
    tok = CharTokenizer()
    monkeypatch.setattr(resolve_module, "text_completion_tokenizer", lambda tc: tok)
    monkeypatch.setattr(resolve_module, "text_tokenizer_profile", lambda t: TokenizerProfile(
        "chars4", True, "1", "test", count_batch=lambda texts: [tok.count(x) for x in texts]))
    pv = _preview(st_user_copy(shared_data, tmp_path / "st", main_api="koboldhorde", **CHANGES[key]), tmp_path)
    order = [b.message_index for b in pv.blocks if b.message_index is not None]
    cut = [b for b in pv.blocks if b.reason == "HISTORY_OLDEST_FIRST"]
    assert cut and order == sorted(order)
    spans = [b.span for b in pv.blocks if b.span is not None]
    assert spans == sorted(spans)  # the string's blocks keep the string's order
    kept = [b for b in pv.blocks if b.status == "kept"]
    assert kept[-1].span is not None and kept[-1].span[1] == len(pv.prompt or "")  # the reply start ends what is sent
    first = next(k for k, b in enumerate(pv.blocks) if b.message_index is not None)
    assert pv.blocks[first].message_index == 0 and pv.blocks[first].reason == "HISTORY_OLDEST_FIRST"
