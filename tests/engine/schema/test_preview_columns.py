"""The preview's column types (issue 29): ``FitWindows``, ``ReasonDetails``, ``SentMessage``, lazy explanations.

A toggle at 10,000 messages moves the fit window and the free tokens of every older message, so a
preview keeps those figures as columns (an ``int64`` array; the distinct explanations and an
index per row) instead of one Python object per row. These tests pin that the columns read,
compare, copy and validate exactly as the plain lists they replace.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from engine.pipeline import default_registries, preview
from engine.schema import (
    Chat,
    ChatMessage,
    ContextPreview,
    ContextSettings,
    Explanation,
    FitWindows,
    PreviewRequest,
    ReasonDetails,
    SentMessage,
    preview_changes,
)
from engine.shifting.explain import _Room, _RoomExplanation

fits_lists = st.lists(st.one_of(st.none(), st.integers(1, 10**9)), max_size=40)


@given(values=fits_lists)
def test_fit_windows_read_as_the_list_they_hold(values: list[int | None]) -> None:
    fits = FitWindows.of(values)
    assert len(fits) == len(values) and list(fits) == values and fits.tolist() == values
    assert fits == values and fits == FitWindows.of(values) and [fits[i] for i in range(len(values))] == values
    assert fits[1:3] == values[1:3]
    rows = list(range(len(values)))[::-2]
    assert fits.take(rows) == [values[r] for r in rows]
    assert all(v is None or type(v) is int for v in fits.take(rows))
    assert not fits.array.flags.writeable
    assert pickle.loads(pickle.dumps(fits)) == fits and copy.deepcopy(fits) == fits


@given(old=fits_lists, new=fits_lists)
def test_fit_windows_changed_rows_are_the_unequal_ones(old: list[int | None], new: list[int | None]) -> None:
    n = min(len(old), len(new))
    a, b = FitWindows.of(old[:n]), FitWindows.of(new[:n])
    assert b.changed(a) == [r for r in range(n) if old[r] != new[r]]


def test_fit_windows_validate_from_a_list_and_keep_a_callers_array_apart() -> None:
    ta = TypeAdapter(FitWindows)
    assert ta.validate_python([3, None, 7]) == [3, None, 7]
    assert ta.dump_python(FitWindows.of([3, None])) == [3, None]
    mine = np.array([5, 0, 9], dtype=np.int64)
    fits = FitWindows(mine)
    mine[0] = 1  # the caller's array is still theirs
    assert fits.tolist() == [5, None, 9]
    with pytest.raises(ValueError):
        fits.array[0] = 2


def _explanations() -> list[Explanation]:
    room = _Room(free=40, budget=900, label="message 3", need=55, boundary_id="m3", boundary_message=3)
    return [Explanation("plain", {"tokens": 1}), _RoomExplanation(12, None, True, room),
            _RoomExplanation(70, "g1", False, room)]


@given(picks=st.lists(st.integers(-1, 2), max_size=40))
def test_reason_details_read_as_the_list_they_hold(picks: list[int]) -> None:
    made = _explanations()
    values = [made[k] if k >= 0 else None for k in picks]
    details = ReasonDetails.of(values)
    assert len(details) == len(values) and details.tolist() == values and list(details) == values
    assert all(a is b for a, b in zip(details, values))  # the very objects
    assert len(details.table) == len({id(v) for v in values if v is not None})  # each once
    rows = list(range(len(values)))[::-3]
    assert details.take(rows) == [values[r] for r in rows]
    assert details == values and pickle.loads(pickle.dumps(details)) == details


@given(old=st.lists(st.integers(-1, 2), max_size=30), new=st.lists(st.integers(-1, 2), max_size=30))
def test_reason_details_changed_rows_are_the_unequal_ones(old: list[int], new: list[int]) -> None:
    """One comparison per distinct pair of explanations finds the rows a row-by-row comparison finds."""
    a_made, b_made = _explanations(), _explanations()  # equal figures, other objects
    n = min(len(old), len(new))
    a = [a_made[k] if k >= 0 else None for k in old[:n]]
    b = [b_made[k] if k >= 0 else None for k in new[:n]]
    assert ReasonDetails.of(b).changed(ReasonDetails.of(a)) == [r for r in range(n) if a[r] != b[r]]


def test_a_lazy_explanation_equals_the_plain_one_with_its_words() -> None:
    """``engine.shifting.explain``'s room explanations write their words when first read."""
    room = _Room(free=40, budget=900, label="message 3", need=55, boundary_id="m3", boundary_message=3)
    short, behind = _RoomExplanation(1200, None, True, room), _RoomExplanation(12, "g1", False, room)
    assert short._text is None  # nothing written yet
    assert short == _RoomExplanation(1200, None, True, room) and short != behind
    assert short.text == "needs 1,200 tokens but only 40 of the 900-token budget are free"
    assert short.data == {"free": 40, "tokens": 1200, "group": None}
    assert behind.text == ("12 tokens would fit in the 40 free, but history is kept contiguous: the newer "
                           "message 3 (55 tokens) did not fit, so nothing older is sent")
    assert behind == Explanation(behind.text, dict(behind.data)) and Explanation(short.text, short.data) == short
    assert pickle.loads(pickle.dumps(behind)) == behind and type(pickle.loads(pickle.dumps(behind))) is Explanation
    with pytest.raises(AttributeError):
        short.text = "changed"  # type: ignore[misc]


def _pv() -> ContextPreview:
    chat = Chat(messages=[ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " * 30)
                          for i in range(40)])
    return preview(PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", context_limit=1500,
                                                                      reply_reserve=100)),
                   registries=default_registries())


def test_a_previews_columns_round_trip_through_json() -> None:
    pv = _pv()
    assert isinstance(pv.fit_windows, FitWindows) and isinstance(pv.reason_details, ReasonDetails)
    assert any(d is not None for d in pv.reason_details) and any(f is not None for f in pv.fit_windows)
    back = ContextPreview.model_validate_json(pv.model_dump_json())
    assert back.fit_windows == pv.fit_windows and back.reason_details == pv.reason_details
    assert back.model_dump_json() == pv.model_dump_json()
    assert all(isinstance(m, SentMessage) for m in pv.messages)
    assert pv.model_copy(deep=True).model_dump_json() == pv.model_dump_json()


def test_room_explanations_are_made_when_a_row_is_read() -> None:
    """``engine.shifting.explain._Table``: the figures are kept, the explanation object is made on the first read."""
    pv = _pv()
    table = pv.reason_details.table
    # not made yet: a segment's code (``None``, made from the token count it stands for) or figures (a tuple)
    pending = [k for k in range(len(table)) if table._items[k] is None  # type: ignore[attr-defined]
               or type(table._items[k]) is tuple]  # type: ignore[attr-defined]
    pending = [k for k in pending if k in set(pv.reason_details.codes.tolist())]
    assert pending, "a preview with messages out for room keeps their explanations' figures"
    row = next(r for r, k in enumerate(pv.reason_details.codes.tolist()) if k == pending[0])
    first = pv.reason_details[row]
    assert isinstance(first, _RoomExplanation) and pv.reason_details[row] is first  # made once, then kept
    assert "free" in first.data and first.text
    again = _pv()  # a cold run of the same request: equal rows, equal explanations
    assert again.reason_details == pv.reason_details


def test_a_pickled_reason_column_keeps_only_the_explanations_its_rows_have() -> None:
    """Review s5: a removed message of many tokens gave its segment as many codes; pickling or
    copying the column must not write an explanation for each of them."""
    messages = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " * 30) for i in range(40)]
    messages[3] = ChatMessage(role="assistant", content="word " * 3000)  # fits the budget, not what is free
    pv = preview(PreviewRequest(chat=Chat(messages=messages),
                                settings=ContextSettings(model="gpt-4o", context_limit=5000, reply_reserve=100)),
                 registries=default_registries())
    details = pv.reason_details
    assert pv.blocks[3].reason == "HISTORY_OLDEST_FIRST" and "needs 3,005 tokens" in details[3].text
    used = {k for k in details.codes.tolist() if k >= 0}
    assert len(details.table) > 3000 > len(used)  # a code per token count up to 3,005: most of them no row's
    for back in (pickle.loads(pickle.dumps(details)), copy.deepcopy(details)):
        assert back == details and back.tolist() == details.tolist()
        assert len(back.table) == len(used)


def test_a_copy_given_plain_lists_compares_as_the_columns() -> None:
    """A caller's ``model_copy(update=...)`` skips validation: plain lists in the columns still compare."""
    pv = _pv()
    other = pv.model_copy(update={"fit_windows": list(pv.fit_windows), "reason_details": list(pv.reason_details)})
    changes = preview_changes(pv, other)
    assert changes is not None and changes.fit_window == [] and changes.reason_detail == []
    moved = list(pv.fit_windows)
    moved[0] = (moved[0] or 0) + 5
    assert preview_changes(pv, pv.model_copy(update={"fit_windows": moved})).fit_window == [0]  # type: ignore[union-attr]
    assert FitWindows.column(moved, len(moved)).tolist() == moved and FitWindows.column(moved, 3) == [None] * 3
