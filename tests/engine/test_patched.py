"""``engine.patched.PatchedList``: a warm run's status and reason columns without a copy of every entry."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.patched import FLATTEN, PatchedList


@given(base=st.lists(st.sampled_from(["kept", "excluded", None]), min_size=1, max_size=50),
       rounds=st.lists(st.lists(st.tuples(st.integers(0, 49), st.sampled_from(["kept", "excluded", None])),
                                max_size=30), max_size=8))
def test_patches_of_patches_read_as_the_list_changed_in_place(base: list, rounds: list) -> None:
    expected = list(base)
    current = PatchedList.of(base, [])
    for changes in rounds:
        changes = [(k % len(base), v) for k, v in changes]
        for k, v in changes:
            expected[k] = v
        before = list(current)
        current = PatchedList.of(current, changes)
        assert list(current) == expected and len(current) == len(expected)
        assert [current[k] for k in range(len(base))] == expected and current[-1] == expected[-1]
        assert current == expected and current[1:3] == expected[1:3]
        assert list(PatchedList.of(before, [])) == before  # the earlier one is unchanged
    assert base == list(base)  # never written to


def test_a_long_chain_is_written_out_once_and_pickles_as_a_list() -> None:
    base = ["kept"] * 200
    current = PatchedList.of(base, [])
    for k in range(FLATTEN):
        current = PatchedList.of(current, [(k, "excluded")])
        assert isinstance(current, PatchedList)
    current = PatchedList.of(current, [(FLATTEN, "excluded")])
    assert type(current) is list and current == ["excluded"] * (FLATTEN + 1) + ["kept"] * (199 - FLATTEN)
    again = PatchedList.of(base, [(3, "x")])
    assert pickle.loads(pickle.dumps(again)) == again.tolist() and base[3] == "kept"


def test_an_index_past_either_end_raises_as_a_lists_does() -> None:
    """Review finding: ``p[-11]`` on ten entries read the unpatched root's last entry instead of raising."""
    patched = PatchedList.of(list(range(10)), [(9, 99), (0, -5)])
    assert patched[-1] == 99 and patched[-10] == -5
    for index in (-11, -12, 10, 11):
        with pytest.raises(IndexError):
            patched[index]
