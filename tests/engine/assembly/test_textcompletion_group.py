"""Text Completion group chats (issue 27 item 7): the next speaker's prompt string equals SillyTavern's.

Expected: ``tc_group_expected.json``, from SillyTavern 1.12.6's ``Generate`` (non-OpenAI branch) with the
group selected (``group-chats.js`` ``getGroupCharacterCards`` / ``getGroupDepthPrompts`` loaded verbatim,
the speaker as ``this_chid`` as ``generateGroupWrapper`` sets it) and ``getStoppingStrings``; see
:mod:`tests.engine.assembly.tc_group_cases`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.assembly.st_group import with_speaker
from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from tests.engine.assembly import tc_group_cases as G
from tests.engine.assembly.test_textcompletion import char_tokenizer  # noqa: F401 (fixture)

EXPECTED = json.loads((Path(__file__).parent / "tc_group_expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("key", sorted(G.CASES))
def test_group_prompt_equals_sillytavern(key: str, tmp_path: Path, char_tokenizer) -> None:  # noqa: F811
    folder = G.write_group_case(tmp_path / "st", key)
    with open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False) as store:
        report = store.imports.st_folder(read_st_folder(folder))
        chat_id = next(r.id for r in report.added if r.key.startswith("group chats/"))
        request = store.chats.build_request(chat_id)
    pv = preview(with_speaker(request, G.CASES[key][1]))
    assert pv.api == "text_completion" and pv.error is None
    assert pv.prompt == EXPECTED[key]["prompt"]
    assert pv.stop == EXPECTED[key]["stop"]
