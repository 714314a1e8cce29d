"""The SillyTavern preview's left-out rows in story order (issue 31 item 2), in one pass.

``in_story_order`` (:mod:`engine.assembly.st_result`) places every left-out block at once; it must give exactly the order of the
plain rule (each left-out block, in message-index order, inserted before the first sent block of a
later message, else after the last message block / new-chat marker; examples after the last
example; the rest at the end), which is written out here as the reference. The one-pass version
exists because inserting one by one cost O(n²): 12 s of a 10,000-message preview.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.assembly.st_result import in_story_order


def _slot(blocks: list[dict], row: dict) -> int | None:
    index = row.get("message_index")
    if index is None:
        if row.get("source") != "character:mes_example":
            return None
        examples = [k for k, b in enumerate(blocks) if b.get("kind") == "example"]
        return examples[-1] + 1 if examples else None
    last = None
    for k, b in enumerate(blocks):
        mi = b.get("message_index")
        if mi is not None and mi > index:
            return k
        if mi is not None or b.get("source") == "prompt:newMainChat":
            last = k + 1
    return last


def _reference(sent: list[dict], rows: list[dict]) -> list[dict]:
    blocks, rest = list(sent), []
    for row in rows:
        at = _slot(blocks, row)
        if at is None:
            rest.append(row)
        else:
            blocks.insert(at, row)
    return blocks + rest


_SENT = st.one_of(
    st.builds(lambda i: {"message_index": i}, st.integers(0, 15)),
    st.just({"kind": "example", "message_index": None}),
    st.just({"source": "prompt:newMainChat", "message_index": None}),
    st.just({"kind": "instruction", "message_index": None}),
)
_LEFT_OUT = st.one_of(
    st.builds(lambda i: {"message_index": i}, st.integers(0, 15)),
    st.just({"source": "character:mes_example", "kind": "example", "message_index": None}),
    st.just({"source": "injection:depth", "message_index": None}),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SENT, max_size=14), st.lists(_LEFT_OUT, max_size=9))
def test_one_pass_equals_inserting_one_by_one(sent, rows) -> None:
    sent = [{**b, "id": f"s{k}"} for k, b in enumerate(sent)]
    rows = sorted(({**b, "id": f"r{k}"} for k, b in enumerate(rows)),
                  key=lambda x: -1 if x["message_index"] is None else x["message_index"])
    assert [b["id"] for b in in_story_order(sent, rows)] == [b["id"] for b in _reference(sent, rows)]


def test_a_cut_history_keeps_the_greeting_on_top() -> None:
    sent = [{"id": "main", "message_index": None}, {"id": "marker", "source": "prompt:newMainChat",
                                                   "message_index": None},
            {"id": "m8", "message_index": 8}, {"id": "m9", "message_index": 9}]
    cut = [{"id": f"m{i}", "message_index": i} for i in range(8)]
    assert [b["id"] for b in in_story_order(sent, cut)] == ["main", "marker", *[f"m{i}" for i in range(10)]]
