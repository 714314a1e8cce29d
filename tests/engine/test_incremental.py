"""The incremental preview (issue 12 item 1): a warm preview equals a cold one, byte for byte.

For random chats (tool exchanges, some incomplete or orphaned, pins, exclusions, hidden messages,
lorebooks, memory, a card, examples) and random sequences of pin / exclude toggles, hidden flips
and edits, every preview of the sequence (cold on the first request, warm after a toggle) has the
same ``model_dump_json()`` as a cold preview of the same request with fresh registries (no
remembered run of an earlier request is involved: :mod:`engine.incremental` remembers runs per
registries). Run for every built-in strategy.

``LOOMSCOPE_LONG_PROPERTIES=1`` runs 500 examples per strategy instead of 40.
"""

from __future__ import annotations

import copy
import os
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.pipeline import default_registries, prepare, preview
from engine.schema import (
    Character,
    Chat,
    ChatMessage,
    ContextPreview,
    ContextSettings,
    Lorebook,
    LorebookEntry,
    MemoryItem,
    MessageMeta,
    PreviewRequest,
    SentMessage,
    ToolCall,
    ToolFunction,
)
from engine.schema._construct import construct

LONG = os.environ.get("LOOMSCOPE_LONG_PROPERTIES") == "1"
SETTINGS = settings(max_examples=500 if LONG else 40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STRATEGIES = ("truncate", "manual", "summarize", "vector-recall", "compact")
WORDS = ("harbor", "storm", "lantern", "sword", "the", "quiet", "river", "castle", "{{char}}", "<USER>")


@st.composite
def requests(draw: st.DrawFn) -> PreviewRequest:
    """A random preview request: chat, lorebook, memory, maybe a card, a small context window."""
    msgs: list[ChatMessage] = []
    if draw(st.booleans()):
        msgs.append(ChatMessage(role="system", content="You narrate."))
    pending: list[str] = []
    for t in range(draw(st.integers(1, 30))):
        meta = MessageMeta(pinned=draw(st.integers(0, 7)) == 0, manualExcluded=draw(st.integers(0, 6)) == 0,
                           hidden=draw(st.integers(0, 12)) == 0)
        choice = draw(st.sampled_from(["msg", "msg", "msg", "call", "result"]))
        if choice == "call":
            ids = [f"c{t}_{j}" for j in range(draw(st.integers(1, 2)))]
            msgs.append(ChatMessage(role="assistant", meta=meta, tool_calls=[
                ToolCall(id=i, function=ToolFunction(name="look", arguments='{"q": 1}')) for i in ids]))
            pending += ids
        elif choice == "result":
            cid = pending.pop(0) if pending and draw(st.integers(0, 4)) else f"lost{t}"
            msgs.append(ChatMessage(role="tool", tool_call_id=cid, meta=meta,
                                    content=" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12)))))
        else:
            msgs.append(ChatMessage(role=draw(st.sampled_from(["user", "assistant"])), meta=meta,
                                    content=" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=30)))))
    if draw(st.booleans()):
        msgs += [ChatMessage(role="tool", tool_call_id=c, content="done") for c in pending]
    if draw(st.booleans()):
        msgs.append(ChatMessage(role="user", content="What now?"))
    books = []
    if draw(st.booleans()):
        books.append(Lorebook(name="World", entries=[
            LorebookEntry(uid=k, keys=[draw(st.sampled_from(WORDS[:8]))], content=f"Lore {k}: " + "sea " * draw(
                st.integers(1, 40)), constant=draw(st.integers(0, 5)) == 0, order=draw(st.integers(0, 3)),
                position=draw(st.sampled_from([0, 1, 4])), depth=draw(st.integers(0, 5)))
            for k in range(draw(st.integers(1, 4)))]))
    memory = [MemoryItem(id=f"m{k}", content="remember " * draw(st.integers(1, 20)), priority=draw(st.integers(0, 3)))
              for k in range(draw(st.integers(0, 2)))]
    card = None
    if draw(st.booleans()):
        card = Character(name="Mira", description="A sailor.", mes_example="<START>\n{{char}}: Ahoy." * draw(
            st.integers(0, 3)), post_history_instructions=draw(st.sampled_from(["", "Stay in character."])))
    limit = draw(st.integers(60, 900))
    return PreviewRequest(
        chat=Chat(messages=msgs, user_name="Ann", character_name="Mira"), lorebooks=books, memory=memory,
        character=card, author_note=draw(st.sampled_from([None, "Keep it short."])),
        settings=ContextSettings(model="gpt-4o", context_limit=limit, reply_reserve=draw(st.integers(0, 40))))


@st.composite
def edits(draw: st.DrawFn, n: int) -> list[tuple[str, int]]:
    """A sequence of (what, message index): toggles mostly, some hidden flips and content edits."""
    kinds = st.sampled_from(["pin", "exclude", "exclude", "pin", "hide", "edit", "same"])
    return draw(st.lists(st.tuples(kinds, st.integers(0, max(0, n - 1))), min_size=1, max_size=6))


def _edited(request: PreviewRequest, what: str, i: int) -> PreviewRequest:
    msgs = list(request.chat.messages)
    if not msgs:
        return request
    m = msgs[i]
    if what == "pin":
        msgs[i] = m.model_copy(update={"meta": m.meta.model_copy(update={"pinned": not m.meta.pinned})})
    elif what == "exclude":
        msgs[i] = m.model_copy(update={"meta": m.meta.model_copy(update={"manualExcluded": not m.meta.manualExcluded})})
    elif what == "hide":
        msgs[i] = m.model_copy(update={"meta": m.meta.model_copy(update={"hidden": not m.meta.hidden})})
    elif what == "edit" and isinstance(m.content, str):
        msgs[i] = m.model_copy(update={"content": m.content + " storm"})
    return request.model_copy(update={"chat": request.chat.model_copy(update={"messages": msgs})})


def _reference(request: PreviewRequest) -> str:
    return preview(request, registries=default_registries()).model_dump_json()


@pytest.mark.parametrize("strategy", STRATEGIES)
@SETTINGS
@given(data=st.data())
def test_warm_preview_equals_cold_reference(strategy: str, data: st.DataObject) -> None:
    request = data.draw(requests())
    request = request.model_copy(update={"settings": request.settings.model_copy(update={"strategy": strategy})})
    regs = default_registries()
    assert preview(request, registries=regs).model_dump_json() == _reference(request)
    for what, i in data.draw(edits(len(request.chat.messages))):
        request = _edited(request, what, i)
        warm = prepare(request, registries=regs)
        assert warm.preview.model_dump_json() == _reference(request), (what, i)
        ref = prepare(request, registries=default_registries())
        assert warm.messages == ref.messages and warm.budget_ok == ref.budget_ok


def test_toggle_reuses_unchanged_preview_blocks() -> None:
    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if k % 2 else "assistant", content=f"turn {k} " + "wave " * 10) for k in range(40)]
    msgs.append(ChatMessage(role="user", content="Next?"))
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=100_000, reply_reserve=100))
    regs = default_registries()
    first = preview(request, registries=regs)
    toggled = _edited(request, "pin", 40)
    second = preview(toggled, registries=regs)
    assert second.model_dump_json() == _reference(toggled)
    # a row is the previous object exactly when nothing in it changed: here the pinned message only;
    # the fit windows of the protected rows moved too (the protected tokens grew), but they are the
    # preview's column, not the rows'
    same = [a is b for a, b in zip(first.blocks, second.blocks)]
    assert same == [a.model_dump() == b.model_dump() for a, b in zip(first.blocks, second.blocks)]
    assert [i for i, s in enumerate(same) if not s] == [40]
    assert [i for i, (a, b) in enumerate(zip(first.fit_windows, second.fit_windows)) if a != b] == [0, 41]


def test_same_request_again_shares_the_preview_not_the_messages() -> None:
    request = PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content="Hello there.")]),
                             settings=ContextSettings(model="gpt-4o", context_limit=1000, reply_reserve=100))
    regs = default_registries()
    first, again = prepare(request, registries=regs), prepare(request, registries=regs)
    assert again.preview is first.preview  # frozen: the remembered run's own
    assert again.messages == first.messages and again.messages[0] is not first.messages[0]


def _assembled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the runs that assemble their blocks (step 3 of a cold run; a warm one patches the remembered blocks)."""
    import engine.pipeline as pipeline

    calls: list[int] = []
    real = pipeline.assemble

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "assemble", spy)
    return calls


def test_plain_edit_is_answered_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    msgs = [ChatMessage(role="system", content="You narrate.")]
    msgs += [ChatMessage(role="user" if k % 2 else "assistant", content=f"turn {k} " + "wave " * 30) for k in range(60)]
    msgs.append(ChatMessage(role="user", content="Next?"))
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=900, reply_reserve=100))
    regs = default_registries()
    preview(request, registries=regs)
    for what, i in (("edit", 40), ("exclude", 41), ("edit", 3), ("pin", 55)):
        request = _edited(request, what, i)
        assembled = _assembled(monkeypatch)
        warm = prepare(request, registries=regs)
        assert assembled == [], (what, i)
        monkeypatch.undo()
        assert warm.preview.model_dump_json() == _reference(request)
    macro = _edited(request, "edit", 59)  # the last assistant message: {{lastCharMessage}} reads it
    assembled = _assembled(monkeypatch)
    prepare(macro, registries=regs)
    assert assembled == [1]


def test_copying_a_warm_row_leaves_the_other_rows_as_they_were() -> None:
    msgs = [ChatMessage(role="user" if k % 2 else "assistant", content=f"turn {k} " + "wave " * 20) for k in range(50)]
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=900, reply_reserve=100))
    regs = default_registries()
    preview(request, registries=regs)
    warm = preview(_edited(request, "exclude", 45), registries=regs)
    before = [set(b.model_fields_set) for b in warm.blocks]
    copied = warm.blocks[3].model_copy(update={"tokens": 1})
    assert copied.tokens == 1 and warm.blocks[3].tokens != 1
    assert [set(b.model_fields_set) for b in warm.blocks] == before


def test_column_tier_is_the_shifting_tier():
    """``engine.runstate.RunColumns`` carries rule 5's tier per block: it equals ``engine.shifting.core._tier``."""
    import itertools

    from engine.runstate import RunColumns
    from engine.schema.blocks import Block, BlockKind, BlockOrigin
    from engine.shifting import ToolLayout
    from engine.shifting.core import _tier
    from engine.tokenizers.defaults import default_tokenizer_registry

    blocks = [Block(id=f"b{k}", kind=kind, source=f"s{k}", history=history, origin=origin)
              for k, (kind, history, origin) in enumerate(itertools.product(BlockKind, (False, True), BlockOrigin))]
    profile = default_tokenizer_registry().get("o200k_base")
    columns = RunColumns.of(blocks, profile, ToolLayout.of([None] * len(blocks)))
    assert columns.cols.tier == [_tier(b) for b in blocks]


@pytest.mark.parametrize("strategy", ("truncate", "manual"))
@SETTINGS
@given(data=st.data())
def test_warm_previews_read_late_equal_the_reference(strategy: str, data: st.DataObject) -> None:
    """Previews kept while later toggles run (their rows shared with the next preview) and read
    afterwards, in any order, still equal the reference preview of their own request."""
    request = data.draw(requests())
    request = request.model_copy(update={"settings": request.settings.model_copy(update={"strategy": strategy})})
    regs = default_registries()
    previews = [(request, preview(request, registries=regs))]
    for what, i in data.draw(edits(len(request.chat.messages))):
        request = _edited(request, what, i)
        previews.append((request, preview(request, registries=regs)))
    order = data.draw(st.permutations(range(len(previews))))
    for k in order:
        req, pv = previews[k]
        assert pv.model_dump_json() == _reference(req), k


def _toggle_chain(n: int = 60) -> tuple[PreviewRequest, Any]:
    msgs = [ChatMessage(role="user" if k % 2 else "assistant", content=f"turn {k} " + "wave " * 20) for k in range(n)]
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=900, reply_reserve=100))
    regs = default_registries()
    return request, regs


def test_a_warm_preview_is_a_plain_list_of_rows() -> None:
    """Issue 29 item 3: the warm preview's blocks are a plain list, complete at once (no lazy rows)."""
    request, regs = _toggle_chain()
    cold = preview(request, registries=regs)
    toggled = _edited(request, "exclude", 55)
    warm = preview(toggled, registries=regs)
    assert type(cold.blocks) is list and type(warm.blocks) is list and len(warm.blocks) == len(cold.blocks)
    assert cold.messages != warm.messages
    assert warm.model_dump_json() == _reference(toggled)


def test_previews_hold_no_chain_of_runs() -> None:
    """Each remembered run drops the run it started from: dropping the previews frees their rows
    (only the last runs stay remembered); the next preview still gives the reference."""
    import gc
    import weakref

    request, regs = _toggle_chain()
    preview(request, registries=regs)
    refs = []
    pv = None
    for k in range(8):
        request = _edited(request, "exclude", 50 + k % 3)
        pv = preview(request, registries=regs)
        refs.append(weakref.ref(pv))
    del pv
    gc.collect()
    assert sum(r() is not None for r in refs) <= 1  # the last run is remembered
    last = preview(_edited(request, "pin", 3), registries=regs)
    assert last.model_dump_json() == _reference(_edited(request, "pin", 3))


def _without_record(pv: ContextPreview) -> ContextPreview:
    """``pv`` with the same rows but no recorded change set (``preview_changes`` compares the rows)."""
    return construct(ContextPreview, dict(pv.__dict__), private={"_serial": None, "_changes": None})


def test_a_warm_run_records_its_change_set() -> None:
    """The warm preview after a toggle carries the change set from the preview it started from."""
    from engine.schema import preview_changes

    chat = Chat(messages=[ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " * 30)
                          for i in range(40)])
    request = PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", context_limit=1500, reply_reserve=100))
    regs = default_registries()
    old = preview(request, registries=regs)
    msgs = list(chat.messages)
    msgs[30] = msgs[30].model_copy(update={"meta": msgs[30].meta.model_copy(update={"manualExcluded": True})})
    new = preview(request.model_copy(update={"chat": chat.model_copy(update={"messages": msgs})}), registries=regs)
    assert new._changes is not None and new._changes[0] == old._serial
    recorded, found = new._changes[2], preview_changes(old, new)
    # the rows' changes are the recorded ones; the figures' are read off the two columns
    assert (found.rows, found.block, found.status, found.reason) == (
        recorded.rows, recorded.block, recorded.status, recorded.reason)
    assert found.fit_window == [i for i, (a, b) in enumerate(zip(old.fit_windows, new.fit_windows)) if a != b]
    assert preview_changes(old, new) == preview_changes(old, _without_record(new))
    assert 30 in preview_changes(old, new).status
    assert preview_changes(new, old) == preview_changes(_without_record(new), old)  # the other way: compared


@pytest.mark.parametrize("strategy", ("truncate", "manual"))
@SETTINGS
@given(data=st.data())
def test_preview_changes_describe_the_rows(strategy: str, data: st.DataObject) -> None:
    """``engine.schema.preview_changes`` names every position where two previews' rows differ and
    the fields that differ there: every other row is equal field for field."""
    from engine.schema import preview_changes

    request = data.draw(requests())
    request = request.model_copy(update={"settings": request.settings.model_copy(update={"strategy": strategy})})
    regs = default_registries()
    old = preview(request, registries=regs)
    for what, i in data.draw(edits(len(request.chat.messages))):
        request = _edited(request, what, i)
        new = preview(request, registries=regs)
        changes = preview_changes(old, new)
        if changes is None:  # another row set (a hidden flip adds or drops a block): a view rebuilds
            assert ([(b.source, b.message_index) for b in old.blocks]
                    != [(b.source, b.message_index) for b in new.blocks])
            old = new
            continue
        # a warm run recorded its change set (engine.schema.preview.known_changes): it is exactly
        # what comparing the rows finds
        compared = preview_changes(old, _without_record(new))
        assert compared == changes, (compared, changes)
        named = {"block": set(changes.block), "status": set(changes.status), "reason": set(changes.reason)}
        for r, (a, b) in enumerate(zip(old.blocks, new.blocks)):
            da, db = a.model_dump(), b.model_dump()
            differ = {k for k in da if da[k] != db[k]}
            if r not in changes.rows:
                assert a is b
                continue
            allowed = {f for f, rows in named.items() if r in rows}
            if r not in named["block"]:
                assert differ <= allowed, (r, differ, allowed)
            assert {f for f in differ if f in named and f != "block"} <= allowed
        # the figure columns: exactly the named rows differ
        assert changes.fit_window == [r for r, (a, b) in enumerate(zip(old.fit_windows, new.fit_windows)) if a != b]
        assert changes.reason_detail == [r for r, (a, b) in enumerate(zip(old.reason_details, new.reason_details))
                                         if a != b]
        old = new



def test_a_warm_previews_messages_are_read_only_and_shared() -> None:
    """``engine.report.report_preview``: a warm preview shares its unchanged messages with the
    previous preview (a toggle copies none), so no caller can change them: every message is a
    read-only ``SentMessage`` that still compares, dumps, copies and pickles as a dict."""
    chat = Chat(messages=[ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " * 30)
                          for i in range(40)])
    request = PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", context_limit=1500, reply_reserve=100))
    regs = default_registries()
    first = preview(request, registries=regs)
    toggled = _edited(request, "exclude", 38)
    second = preview(toggled, registries=regs)
    assert second.model_dump_json() == _reference(toggled)
    shared = {id(m) for m in first.messages} & {id(m) for m in second.messages}
    assert len(shared) >= len(second.messages) - 2  # only the moved messages are new objects
    for m in second.messages:
        assert isinstance(m, SentMessage) and m == dict(m)
        with pytest.raises(TypeError, match="read-only"):
            m["content"] = "changed by a caller"
        for change in (m.clear, m.popitem, lambda: m.update(x=1), lambda: m.setdefault("x", 1), lambda: m.pop("role")):
            with pytest.raises(TypeError):
                change()
        mutable = m.copy()
        mutable["content"] = "changed by a caller"  # a plain copy: the caller's own
        assert type(mutable) is dict and m["content"] != "changed by a caller"
        assert pickle.loads(pickle.dumps(m)) == m and copy.deepcopy(m) == m
    assert second.model_copy(deep=True).messages == second.messages
    third = preview(_edited(toggled, "exclude", 30), registries=regs)
    assert third.model_dump_json() == _reference(_edited(toggled, "exclude", 30))
