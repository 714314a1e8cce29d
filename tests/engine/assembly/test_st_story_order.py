"""Issue 31 item 2: a SillyTavern-assembled preview keeps its rows in story order.

SillyTavern's ``populateChatHistory`` (public/scripts/openai.js) sends the newest messages that
fit; the messages it leaves out (hidden by ``is_system``, or cut for the budget) are not in the
request, but the preview lists them where they sit in the chat, not after the last sent block.
"""

from __future__ import annotations

from pathlib import Path

from engine.importers.st_folder import read_st_folder
from engine.pipeline import preview
from engine.storage import open_store
from tests.engine.importers.st_fixture import build_st_user


def _request(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(build_st_user(tmp_path)))
    chat_id = next(r.id for r in report.added if r.kind == "chat")
    try:
        return store.chats.build_request(chat_id)
    finally:
        store.close()


def _message_order(pv) -> list[int]:
    return [b.message_index for b in pv.blocks if b.message_index is not None]


def test_hidden_message_stays_between_its_neighbours(tmp_path: Path) -> None:
    pv = preview(_request(tmp_path))
    hidden = next(b for b in pv.blocks if b.reason == "HIDDEN")
    assert hidden.message_index == 2
    assert _message_order(pv) == [0, 1, 2, 3, 4]  # before: [0, 1, 3, 4, 2]
    assert pv.blocks[-1].source == "prompt:jailbreak"  # the post-history instructions still end it
    assert [b.position for b in pv.blocks] == list(range(len(pv.blocks)))


def test_cut_greeting_stays_first(tmp_path: Path) -> None:
    request = _request(tmp_path)
    # a window where the oldest messages no longer fit: SillyTavern cuts from the oldest
    for limit in range(540, 400, -2):
        settings = request.settings.model_copy(update={"context_limit": limit})
        pv = preview(request.model_copy(update={"settings": settings}))
        cut = [b for b in pv.blocks if b.reason == "HISTORY_OLDEST_FIRST"]
        if cut:
            break
    assert cut and cut[0].message_index == 0
    assert _message_order(pv) == [0, 1, 2, 3, 4]
    first_message_row = next(k for k, b in enumerate(pv.blocks) if b.message_index is not None)
    assert pv.blocks[first_message_row].message_index == 0
    assert pv.blocks[first_message_row - 1].source == "prompt:newMainChat"
    # examples SillyTavern pushed out stay with the examples it sent
    kinds = [b.kind for b in pv.blocks]
    examples = [k for k, kind in enumerate(kinds) if kind == "example"]
    assert examples == list(range(examples[0], examples[-1] + 1))
    assert any(pv.blocks[k].reason == "EXAMPLES_PUSHED_OUT" for k in examples)
