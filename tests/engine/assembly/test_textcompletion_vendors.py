"""``prompt_tokens`` of a Text Completion preview equals the vendors' own count of the prompt (issue 26).

Llama 3 Instruct (``power_user.tokenizer`` 12): ``llama_models``' ``Tokenizer.encode(prompt, bos=True,
eos=False, allowed_special="all")``, as llama.cpp's server tokenizes a completion prompt (BOS,
control-token text parsed). Mistral V2 & V3 (tokenizer 7, the V1 SentencePiece vocabulary):
``mistral_common``'s ``SentencePieceTokenizer.encode`` of the text between the control tokens
(``</s>`` one token each) plus BOS, which is llama.cpp's ``parse_special`` tokenization.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from engine.tokenizers import vocab as vocab_mod
from tests.engine.assembly import tc_cases


def _preview(tmp_path: Path, case: str, tokenizer_id: int):
    folder = tc_cases.write_case(tmp_path / "st", case, "full")
    settings_file = folder / "settings.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8"))
    settings["power_user"]["tokenizer"] = tokenizer_id
    settings_file.write_text(json.dumps(settings), encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    return preview(store.chats.build_request(next(r.id for r in report.added if r.kind == "chat")))


def test_llama3_prompt_tokens_equal_llama_models(tmp_path: Path) -> None:
    tokenizer = pytest.importorskip("llama_models.llama3.tokenizer").Tokenizer
    pv = _preview(tmp_path, "llama3", 12)
    assert (pv.tokenizer.profile, pv.tokenizer.approximate) == ("llama3", False)
    vendor = tokenizer(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["llama3"]))
    assert pv.prompt is not None and "<|eot_id|>" in pv.prompt
    assert pv.prompt_tokens == len(vendor.encode(pv.prompt, bos=True, eos=False, allowed_special="all"))


def test_mistral_prompt_tokens_equal_mistral_common(tmp_path: Path) -> None:
    sp_mod = pytest.importorskip("mistral_common.tokens.tokenizers.sentencepiece")
    pv = _preview(tmp_path, "mistral", 7)
    assert (pv.tokenizer.profile, pv.tokenizer.approximate) == ("mistral", False)
    vendor = sp_mod.SentencePieceTokenizer(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["mistral-v1"]))
    assert pv.prompt is not None
    fragments = pv.prompt.split("</s>")
    assert len(fragments) > 2
    expected = 1 + sum(len(vendor.encode(f, bos=False, eos=False)) for f in fragments if f) + len(fragments) - 1
    assert pv.prompt_tokens == expected
