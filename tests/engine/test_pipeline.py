"""Pipeline: model resolution warnings, safety margin, strategies with host checks, interceptors."""

from __future__ import annotations

import pytest

from engine.errors import SettingsError
from engine.pipeline import default_registries, prepare, preview
from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, PreviewRequest, ShiftResult
from engine.shifting import shift_context


def _chat(n=20):
    msgs = [ChatMessage(role="system", content="You are a ship's log.")]
    msgs += [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"entry {i} " + "wind " * 20)
             for i in range(n)]
    msgs.append(ChatMessage(role="user", content="Next entry?"))
    return Chat(messages=msgs)


def _req(limit=400, reserve=50, **kw):
    return PreviewRequest(chat=kw.pop("chat", _chat()),
                          settings=ContextSettings(model=kw.pop("model", "gpt-4o"), context_limit=limit,
                                                   reply_reserve=reserve, **kw))


def test_unknown_model_gets_approximate_profile_warning_and_margin():
    pv = preview(_req(model="my-local-finetune", limit=1000, reserve=100))
    assert pv.tokenizer.profile == "generic-approx" and pv.tokenizer.approximate
    assert any("unknown model" in w for w in pv.warnings)
    assert pv.safety_margin == 45  # 5 % of the 900-token budget
    assert pv.prompt_tokens <= pv.budget - pv.safety_margin
    assert pv.headroom == pv.budget - pv.safety_margin - pv.prompt_tokens


def test_limit_above_known_warns_and_percent_reserve_resolves():
    pv = preview(PreviewRequest(chat=_chat(), settings=ContextSettings(
        model="gpt-4", context_limit=20_000, reply_reserve="10%")))
    assert pv.reply_reserve == 2000 and pv.budget == 18_000
    assert any("above" in w for w in pv.warnings)


def test_reserve_not_below_limit_is_invalid():
    with pytest.raises(SettingsError) as err:
        preview(_req(limit=100, reserve=100))
    assert err.value.code == "INVALID_SETTINGS"


def test_leading_system_message_is_protected_and_oldest_history_goes():
    pv = preview(_req())
    first = pv.blocks[0]
    assert first.source == "message:0" and first.protected and first.reason == "SYSTEM_PROMPT"
    excluded = [b for b in pv.blocks if b.status == "excluded"]
    assert excluded and all(b.reason == "HISTORY_OLDEST_FIRST" for b in excluded)
    kept_hist = [b.position for b in pv.blocks if b.status == "kept" and not b.protected]
    assert max(b.position for b in excluded) < min(kept_hist)


def test_manual_vs_truncate_strategy():
    chat = _chat()
    chat.messages[-3] = chat.messages[-3].model_copy(update={"meta": MessageMeta(manualExcluded=True)})
    pv = preview(_req(chat=chat, strategy="manual"))
    assert next(b for b in pv.blocks if b.message_index == len(chat.messages) - 3).reason == "MANUAL_EXCLUDED"
    pv = preview(_req(chat=chat, strategy="truncate"))
    assert next(b for b in pv.blocks if b.message_index == len(chat.messages) - 3).status == "kept"


def test_pinning_protects_under_tight_budget():
    chat = _chat()
    chat.messages[1] = chat.messages[1].model_copy(update={"meta": MessageMeta(pinned=True)})
    pv = preview(_req(chat=chat))
    pinned = next(b for b in pv.blocks if b.message_index == 1)
    assert pinned.status == "kept" and pinned.pinned and pinned.reason == "PINNED"


def test_budget_exceeded_is_reported_not_raised():
    prepared = prepare(_req(limit=15, reserve=5))
    assert not prepared.budget_ok
    assert prepared.preview.error.code == "TOKEN_BUDGET_EXCEEDED"
    assert prepared.preview.error.details["protected_tokens"] > prepared.preview.error.details["budget"]


def test_bad_strategy_falls_back_to_truncate():
    regs = default_registries()

    def greedy(blocks, count, budget, options):  # drops everything, protected included
        return ShiftResult(kept=[], excluded=[{"block_id": b.id, "reason": "LOW_RELEVANCE", "tokens": count(b)}
                                              for b in blocks])

    def boom(blocks, count, budget, options):
        raise RuntimeError("plugin bug")

    cleanup = regs.strategies.register("greedy", greedy)
    regs.strategies.register("boom", boom)
    for name in ("greedy", "boom"):
        pv = preview(_req(strategy=name), registries=regs)
        assert any("fell back to 'truncate'" in d for d in pv.diagnostics)
        assert pv.blocks[0].status == "kept"
        assert pv.prompt_tokens <= pv.budget
    cleanup()
    with pytest.raises(SettingsError) as err:
        preview(_req(strategy="greedy"), registries=regs)
    assert err.value.code == "UNKNOWN_STRATEGY"


def test_a_strategy_returning_nothing_is_rejected_with_a_reason():
    regs = default_registries()
    regs.strategies.register("nothing", lambda blocks, count, budget, options: None)
    pv = preview(_req(strategy="nothing"), registries=regs)
    assert "strategy 'nothing' rejected (returned NoneType, not a ShiftResult); fell back to 'truncate'" in (
        " ".join(pv.diagnostics))
    assert pv.blocks[0].status == "kept" and pv.prompt_tokens <= pv.budget


def _with_interceptor(fn, **kw):
    regs = default_registries()
    regs.interceptors.register("test", fn)
    return prepare(_req(**kw), registries=regs)


def test_interceptor_adding_a_long_message_cannot_break_the_budget():
    def add_long(messages, ctx):
        return [*messages[:-1], {"role": "system", "content": "lore " * 2000}, *messages[-1:]], ["added lore"]

    p = _with_interceptor(add_long)
    pv = p.preview
    assert pv.prompt_tokens <= pv.budget
    added = [b for b in pv.blocks if b.source == "interceptor:test"]
    assert added and added[0].status == "excluded"
    assert any("added lore" in d for d in p.interceptor_diagnostics)


def test_interceptor_adding_a_small_message_is_sent():
    def add(messages, ctx):
        return [*messages[:-1], {"role": "system", "content": "Remember the storm."}, *messages[-1:]], []

    pv = _with_interceptor(add, limit=4000).preview
    assert any(m["content"] == "Remember the storm." for m in pv.messages)
    b = next(b for b in pv.blocks if b.source == "interceptor:test")
    assert b.status == "kept" and b.reason == "INTERCEPTOR_ADDED"


def test_interceptor_removing_the_system_prompt_is_undone():
    p = _with_interceptor(lambda messages, ctx: (messages[1:], []))
    assert p.messages[0]["content"] == "You are a ship's log."
    assert any("restored" in d for d in p.interceptor_diagnostics)


@pytest.mark.parametrize("fn,expect", [
    (lambda m, c: (_ for _ in ()).throw(ValueError("kaboom")), "its output was ignored"),
    (lambda m, c: ("not a list", []), "invalid data"),
    (lambda m, c: ([{"role": "wizard", "content": 3}], []), "invalid data"),
])
def test_interceptor_failures_are_diagnostics(fn, expect):
    p = _with_interceptor(fn)
    plain = prepare(_req())
    assert p.messages == plain.messages
    assert any(expect in d for d in p.interceptor_diagnostics)


def test_preview_is_deterministic():
    assert preview(_req()).model_dump() == preview(_req()).model_dump()


def test_shift_context_public_signature():
    res = shift_context([], lambda b: 0, 10)
    assert res.kept == [] and res.error is None


def test_a_world_equal_to_the_cards_embedded_book_activates_once():
    from engine.schema import Character, Lorebook, LorebookEntry

    entries = [LorebookEntry(uid=0, keys=["harbor"], content="The harbor is closed."),
               LorebookEntry(uid=1, keys=["storm"], content="Storms come at dusk.")]
    card = Character(name="Mira", character_book=Lorebook(name="Coast", entries=entries))
    world = Lorebook(name="Coast", entries=[e.model_copy(update={"order": 50}) for e in reversed(entries)])
    chat = Chat(messages=[ChatMessage(role="user", content="Is the harbor open before the storm?")])
    req = PreviewRequest(chat=chat, character=card, lorebooks=[world, card.character_book],
                         settings=ContextSettings(model="gpt-4o", context_limit=4000, reply_reserve=100))
    pv = preview(req)
    lore = [b for b in pv.blocks if b.kind == "lorebook"]
    assert len(lore) == 2
    # the trace names the request's books: book 0 fired, book 1 is marked as its duplicate
    by_book = {}
    for rec in pv.lorebook_trace:
        by_book.setdefault(rec.book_index, set()).add(rec.code)
    assert by_book == {0: {"LOREBOOK_KEY_MATCH"}, 1: {"LOREBOOK_DUPLICATE_BOOK"}}
    other = Lorebook(name="Coast", entries=[LorebookEntry(uid=5, keys=["harbor"], content="Different lore.")])
    pv = preview(req.model_copy(update={"lorebooks": [world, other]}))
    assert len([b for b in pv.blocks if b.kind == "lorebook"]) == 3


def test_activate_text_is_the_previews_activation_on_one_message():
    # the GUI's lorebook test box: same books, duplicates, budget and trace indexes as preview()
    from engine.lorebook import test_text
    from engine.pipeline import activate_text
    from engine.schema import Character, Lorebook, LorebookEntry

    entries = [LorebookEntry(uid=0, keys=["harbor"], content="The harbor is closed."),
               LorebookEntry(uid=1, keys=["storm"], content="Storms come at dusk.")]
    card = Character(name="Mira", character_book=Lorebook(name="Coast", entries=entries))
    world = Lorebook(name="Coast", entries=[e.model_copy(update={"order": 50}) for e in reversed(entries)])
    text = "Is the harbor open before the storm?"
    req = PreviewRequest(chat=Chat(messages=[ChatMessage(role="user", content="hello")]), character=card,
                         lorebooks=[world, card.character_book],
                         settings=ContextSettings(model="gpt-4o", context_limit=4000, reply_reserve=100))
    result = activate_text(req, text)
    one = preview(req.model_copy(update={"chat": Chat(messages=[ChatMessage(role="user", content=text)])}))
    assert result.trace == one.lorebook_trace
    assert sorted(e.uid for e in result.activated) == [0, 1]
    assert sorted(b.text for b in one.blocks if b.kind == "lorebook") == sorted(e.content for e in result.activated)
    # the plain engine.lorebook.test_text over every listed book counts the duplicate twice
    naive = test_text([world, card.character_book], text, req.settings.world_info,
                      count_tokens=len, context_limit=3900)
    assert len(naive.activated) == 4 and len(result.activated) == 2
    assert activate_text(req.model_copy(update={"lorebooks": [], "character": None}), text).trace == []


def test_trace_records_can_be_copied_with_updates():
    # records built without validation (engine.lorebook.records._fast) keep a mutable fields set
    from engine.lorebook import activate
    from engine.schema import Lorebook, LorebookEntry

    book = Lorebook(name="Coast", entries=[LorebookEntry(uid=0, keys=["harbor"], content="Closed.")])
    result = activate([book], [ChatMessage(role="user", content="the harbor")], ContextSettings().world_info,
                      count_tokens=len, context_limit=1000)
    rec = result.trace[0].model_copy(update={"tokens": 99})
    assert (rec.tokens, result.trace[0].tokens) == (99, len("Closed."))
    assert result.model_copy(update={"trace": []}).trace == []


def _long_chat(n: int = 300) -> PreviewRequest:
    msgs = [ChatMessage(role="user" if k % 2 else "assistant", content=f"turn {k} of the harbor story")
            for k in range(n)]
    return PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(model="gpt-4o", context_limit=2000,
                                                                             reply_reserve=200))


def test_the_engine_leaves_the_garbage_collector_alone():
    """Issue 29 item 5: no engine module switches the collector off, collects or freezes (the app owns
    that policy, on its main thread; ``engine/cli.py``'s console entry point owns its one-shot process);
    a preview leaves the collector on or off as it was and freezes nothing."""
    import gc
    import re
    from pathlib import Path

    import engine

    root = Path(engine.__file__).parent
    calls = re.compile(r"\bgc\.(disable|enable|collect|freeze|unfreeze)\(")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "cli.py" and calls.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    preview(_long_chat())
    # frozen objects of an earlier test (the app's policy) may die meanwhile: none is added
    assert gc.isenabled() == enabled and gc.get_freeze_count() <= frozen


class _Cycle:
    """Cyclic garbage a caller leaves behind (an exception and its traceback, say)."""

    def __init__(self) -> None:
        self.me = self
        self.pad = [0] * 50


def test_the_callers_cyclic_garbage_is_still_collected_between_previews():
    """The hand-off never moves the caller's young garbage out of reach of the young passes
    (found by review: without the ``gc.collect(1)`` on the way in, about 19,000 of 120,000 cycles
    were left after 400 toggles, and the pile grew linearly)."""
    import gc
    import weakref

    msgs = [ChatMessage(role="user" if k % 2 else "assistant", content=f"turn {k} wave wave") for k in range(2000)]
    request = PreviewRequest(chat=Chat(messages=msgs), settings=ContextSettings(
        model="gpt-4o", context_limit=4000, reply_reserve=100))
    regs = default_registries()
    prepare(request, registries=regs)
    gc.collect()
    refs: list[weakref.ref[_Cycle]] = []
    for it in range(400):
        refs.extend(weakref.ref(_Cycle()) for _ in range(300))  # the caller's garbage between two toggles
        m = list(request.chat.messages)
        k = 1 + it % 1990
        m[k] = m[k].model_copy(update={"meta": MessageMeta(pinned=not m[k].meta.pinned)})
        request = request.model_copy(update={"chat": request.chat.model_copy(update={"messages": m})})
        prepare(request, registries=regs)  # a warm toggle
    uncollected = sum(r() is not None for r in refs)
    gc.collect()
    assert uncollected < 0.01 * len(refs), uncollected


def test_a_preview_leaves_the_callers_frozen_objects_frozen():
    """With objects frozen by the caller (the app does this) the preview moves nothing."""
    import gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        preview(_long_chat())
        assert gc.get_freeze_count() > frozen * 0.9  # not released (a few frozen objects may die meanwhile)
    finally:
        gc.unfreeze()


def test_a_preview_leaves_a_disabled_collector_disabled():
    import gc

    gc.disable()
    try:
        preview(_long_chat())
        assert not gc.isenabled()
    finally:
        gc.enable()
