"""The numpy side of the column rules (issue 29 item 1) against plain references.

* ``LayoutArrays`` / ``ColumnArrays`` are the ``ToolLayout`` / ``BlockColumns`` lists as arrays, and a
  warm run's ``ColumnArrays.patched`` equals the arrays made afresh from the patched lists;
  ``arrays_of`` never hands out arrays made from other lists;
* ``shift_columns``' reasons are its reason codes' names;
* ``explain.per_value`` calls its function once per distinct value and equals a plain map;
* ``engine.incremental.changed_messages`` lists every position whose message is not the same object
  (an equal copy in an otherwise identical slice aside) and gives up past ``most``;
* a warm toggle on a chat long enough that the run patches its base's fate lists (``Outcome.moved``)
  still equals a cold preview byte for byte.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import columnar
from engine.incremental import Snapshot, changed_messages
from engine.pipeline import default_registries, prepare
from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, PreviewRequest
from engine.shifting import BlockColumns, shift_columns
from engine.shifting.columns import SHIFT_REASONS, ColumnArrays, LayoutArrays, arrays_of, with_arrays
from engine.shifting.explain import distinct_values

from .test_columns import SMALL, columns


def _layout_reference(cols: BlockColumns) -> dict[str, list]:
    lay = cols.layout
    n = len(cols)
    number = {g: k for k, g in enumerate(lay.ids)}
    group = [number[g] if g is not None else -1 for g in lay.group_of]
    unit = [lay.members[group[i]][0] if group[i] >= 0 else i for i in range(n)]
    return {"group": group, "unit": unit, "head": [unit[i] == i for i in range(n)],
            "multi": [group[i] >= 0 and len(lay.members[group[i]]) > 1 for i in range(n)],
            "members": [m for ms in lay.members for m in ms], "heads": [ms[0] for ms in lay.members],
            "orphans": sorted(lay.orphans), "lone": [g < 0 for g in group],
            "member_group": [k for k, ms in enumerate(lay.members) for _ in ms],
            "member_multi": [len(ms) > 1 for ms in lay.members for _ in ms]}


@SMALL
@given(cols=columns())
def test_units_are_rule_3s_units(cols: BlockColumns) -> None:
    """Each group's tokens, held flag and lowest tier on its first member; every other position its own figures."""
    units = ColumnArrays.of(cols).units
    held = [p or q for p, q in zip(cols.protected, cols.pinned)]
    tokens, unit_held, tier = list(cols.tokens), list(held), list(cols.tier)
    for ms in cols.layout.members:
        tokens[ms[0]] = sum(cols.tokens[m] for m in ms)
        unit_held[ms[0]] = any(held[m] for m in ms)
        tier[ms[0]] = min(cols.tier[m] for m in ms)
    assert (units.tokens.tolist(), units.held.tolist(), units.tier.tolist()) == (tokens, unit_held, tier)


@SMALL
@given(cols=columns())
def test_layout_arrays_are_the_layout(cols: BlockColumns) -> None:
    la = LayoutArrays.of(cols.layout, len(cols))
    ref = _layout_reference(cols)
    for name, values in ref.items():
        assert getattr(la, name).tolist() == values, name
    assert la.members[la.starts].tolist() == ref["heads"]
    flags = np.array(cols.hidden, dtype=bool)
    assert la.any_of(flags).tolist() == [any(cols.hidden[m] for m in ms) for ms in cols.layout.members]


@SMALL
@given(cols=columns(min_rows=1), data=st.data())
def test_patched_arrays_equal_fresh_arrays(cols: BlockColumns, data: st.DataObject) -> None:
    cols = with_arrays(cols)
    n = len(cols)
    at = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=5)))
    tokens, pinned, manual = list(cols.tokens), list(cols.pinned), list(cols.manual)
    for i in at:
        tokens[i] = data.draw(st.integers(0, 50))
        pinned[i], manual[i] = not pinned[i], data.draw(st.booleans())
    new = dataclasses.replace(cols, tokens=tokens, pinned=pinned, manual=manual)
    assert arrays_of(new) is not cols.arrays  # the old arrays were made from other lists
    kept = cols.patched(at, tokens=tokens, pinned=pinned, manual=manual)
    patched = kept.arrays
    assert patched is not None and arrays_of(kept) is patched  # made for the new lists, so kept
    fresh = ColumnArrays.of(new)
    for name in ("tokens", "hidden", "protected", "pinned", "manual", "history", "tier", "priority", "message", "held"):
        assert getattr(patched, name).tolist() == getattr(fresh, name).tolist(), name
        assert not getattr(patched, name).flags.writeable, name  # shared by later runs: read-only
    for name in ("tokens", "held", "tier"):  # rule 3's units, patched at the changed groups only
        assert getattr(patched.units, name).tolist() == getattr(fresh.units, name).tolist(), name
        assert not getattr(patched.units, name).flags.writeable, name
    assert cols.arrays.pinned.tolist() == cols.pinned  # type: ignore[union-attr]  # the base is unchanged


@SMALL
@given(cols=columns(), data=st.data())
def test_recounted_arrays_equal_fresh_arrays(cols: BlockColumns, data: st.DataObject) -> None:
    """Arrays made before the count (every token 0) and recounted equal the arrays of the counted columns."""
    uncounted = with_arrays(dataclasses.replace(cols, tokens=[0] * len(cols)))
    tokens = data.draw(st.lists(st.integers(0, 500), min_size=len(cols), max_size=len(cols)))
    counted = dataclasses.replace(uncounted, tokens=tokens)
    recounted = uncounted.arrays.recounted(counted)  # type: ignore[union-attr]
    fresh = ColumnArrays.of(counted)
    for name in ("tokens", "hidden", "protected", "pinned", "manual", "history", "tier", "priority", "message", "held"):
        assert getattr(recounted, name).tolist() == getattr(fresh, name).tolist(), name
    for name in ("tokens", "held", "tier"):
        assert getattr(recounted.units, name).tolist() == getattr(fresh.units, name).tolist(), name
    assert arrays_of(dataclasses.replace(counted, arrays=recounted)) is recounted
    assert not recounted.tokens.flags.writeable and uncounted.arrays.tokens.tolist() == [0] * len(cols)  # type: ignore[union-attr]


@SMALL
@given(cols=columns(), budget=st.integers(0, 200), honor=st.booleans())
def test_shift_reasons_are_its_codes(cols: BlockColumns, budget: int, honor: bool) -> None:
    """``ColumnShift.reasons`` (made on the first read, then the same list) are the codes' reasons."""
    shift = shift_columns(cols, budget, honor_manual=honor)
    assert shift.codes.dtype == np.int8 and len(shift.codes) == len(cols)
    assert shift.reasons == [SHIFT_REASONS[c] for c in shift.codes.tolist()]
    assert shift.reasons is shift.reasons
    assert shift.kept == [r is None for r in shift.reasons]


@given(values=st.lists(st.one_of(st.integers(0, 40), st.integers(0, 10**9)), max_size=60))
def test_distinct_values_index_each_value_once(values: list[int]) -> None:
    """``engine.shifting.explain.distinct_values``: both ways (a lookup table, ``np.unique``) agree."""
    distinct, inverse = distinct_values(np.array(values, dtype=np.int64))
    assert distinct == sorted(set(values)) and all(type(v) is int for v in distinct)
    assert [distinct[k] for k in inverse.tolist()] == values


@given(n=st.integers(0, 1500), changes=st.lists(st.integers(0, 1499), max_size=12), most=st.integers(0, 20))
def test_changed_messages_lists_every_replaced_message(n: int, changes: list[int], most: int) -> None:
    old = [ChatMessage(role="user", content=f"m{i}") for i in range(n)]
    new = list(old)
    for i in changes:
        if i < n:
            new[i] = ChatMessage(role="user", content=f"x{i}")
    expected = sorted({i for i in changes if i < n})
    assert changed_messages(new, old, most) == (expected if len(expected) <= most else None)


@given(n=st.integers(1, 1500), earlier=st.lists(st.integers(0, 1499), max_size=12),
       changes=st.lists(st.integers(0, 1499), max_size=12), most=st.integers(0, 20))
def test_changed_messages_against_a_warm_runs_snapshot(n: int, earlier: list[int], changes: list[int],
                                                       most: int) -> None:
    """A warm run remembers its messages as its base's snapshot with the chunks that differed
    replaced (``engine.incremental.Snapshot.compared``): comparing with it finds what comparing
    with the request's own list finds."""
    root = [ChatMessage(role="user", content=f"m{i}") for i in range(n)]
    before = list(root)
    for i in earlier:
        before[i % n] = ChatMessage(role="user", content=f"e{i}")
    found = Snapshot.of(root).compared(before, 10**6)
    assert found is not None and found[0] == sorted({i % n for i in earlier})
    snapshot = found[1]
    assert [snapshot[i] for i in range(n)] == before and len(snapshot) == n
    new = list(before)
    for i in changes:
        new[i % n] = ChatMessage(role="user", content=f"x{i}")
    expected = sorted({i % n for i in changes})
    assert changed_messages(new, snapshot, most) == (expected if len(expected) <= most else None)
    assert changed_messages(new, before, most) == changed_messages(new, snapshot, most)


def test_an_equal_copy_is_not_a_change() -> None:
    old = [ChatMessage(role="user", content=f"m{i}") for i in range(2000)]
    new = list(old)
    new[700] = old[700].model_copy()  # equal, another object: assembles the same block
    new[1500] = ChatMessage(role="user", content="changed")
    assert changed_messages(new, old, 64) == [1500]


def test_a_long_chat_toggle_patches_the_fates_and_equals_a_cold_preview(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a long chat a warm run copies its base's status / reason lists and sets the moved positions."""
    full: list[int] = []
    fates = columnar._fates
    monkeypatch.setattr(columnar, "_fates", lambda run: full.append(len(run.blocks)) or fates(run))
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    msgs = [ChatMessage(role="user" if i % 2 else "assistant", content=" ".join(words[: 3 + i % 7]) * (1 + i % 3),
                        meta=MessageMeta(pinned=i % 97 == 5)) for i in range(600)]
    request = PreviewRequest(chat=Chat(messages=msgs),
                             settings=ContextSettings(model="gpt-4o", context_limit=3000, reply_reserve=200))
    regs = default_registries()
    first = prepare(request, registries=regs)
    assert first.preview.blocks[0].status == "excluded"
    assert full == [600]
    for i in (590, 20, 585, 300, 590):
        m = msgs[i]
        msgs = [*msgs[:i], m.model_copy(update={"meta": m.meta.model_copy(
            update={"manualExcluded": not m.meta.manualExcluded})}), *msgs[i + 1:]]
        request = request.model_copy(update={"chat": request.chat.model_copy(update={"messages": msgs})})
        warm = prepare(request, registries=regs)
        assert full == [600]  # the warm run patched its base's lists
        cold = prepare(request, registries=default_registries())
        full.pop()
        assert warm.preview.model_dump_json() == cold.preview.model_dump_json()
        assert warm.messages == cold.messages
