"""Block identity is explicit (issue 10 item 2): ``Block.origin`` set by the engine, ``PreviewBlock.origin``
read from a preview (also one read back from JSON), never id or source prefixes at the call sites."""

from __future__ import annotations

from engine.pipeline import default_registries, preview
from engine.schema import Block, BlockKind, Chat, ChatMessage, ContextPreview, ContextSettings, PreviewRequest
from engine.schema.blocks import BlockOrigin, preview_block_origin
from engine.shifting import shift_context

FILLER = "The weather stayed grey and the tea went cold while they talked about nothing much. "


def _chat(n: int = 12) -> Chat:
    msgs = [ChatMessage(role="system", content="You narrate.")]
    for i in range(n):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"Turn {i}. " + FILLER * 6))
    msgs.append(ChatMessage(role="user", content="And then?"))
    return Chat(messages=msgs)


def _round_trip(pv: ContextPreview) -> ContextPreview:
    return ContextPreview.model_validate_json(pv.model_dump_json())


def test_assembled_blocks_are_assembly() -> None:
    pv = preview(PreviewRequest(chat=_chat(), settings=ContextSettings(model="gpt-4o", context_limit=600,
                                                                         reply_reserve=100)))
    assert pv.blocks and {b.origin for b in pv.blocks} == {BlockOrigin.ASSEMBLY}
    assert [b.origin for b in _round_trip(pv).blocks] == [b.origin for b in pv.blocks]


def test_a_summary_is_the_strategy_s() -> None:
    settings = ContextSettings(model="gpt-4o", context_limit=700, reply_reserve=100, strategy="summarize")
    pv = preview(PreviewRequest(chat=_chat(), settings=settings))
    made = [b for b in pv.blocks if b.origin is BlockOrigin.STRATEGY]
    assert len(made) == 1 and made[0].kind == "summary" and made[0].status == "kept"
    assert all(b.origin is BlockOrigin.ASSEMBLY for b in pv.blocks if b is not made[0])
    assert [b.origin for b in _round_trip(pv).blocks] == [b.origin for b in pv.blocks]


def test_an_interceptor_block_is_the_interceptor_s() -> None:
    regs = default_registries()

    def add(messages, ctx):
        return [*messages[:-1], {"role": "system", "content": "Remember the storm."}, *messages[-1:]], []

    regs.interceptors.register("storm", add)
    pv = preview(PreviewRequest(chat=_chat(2), settings=ContextSettings(model="gpt-4o", context_limit=4000)),
                 registries=regs)
    added = [b for b in pv.blocks if b.origin is BlockOrigin.INTERCEPTOR]
    assert [b.text for b in added] == ["Remember the storm."] and added[0].reason == "INTERCEPTOR_ADDED"
    assert [b.origin for b in _round_trip(pv).blocks] == [b.origin for b in pv.blocks]


def test_shifting_reads_the_origin_not_the_source() -> None:
    """Interceptor-added blocks go first when over budget (SPEC §3 rule 5): decided by ``origin``."""
    def block(i: int, **kw) -> Block:
        return Block(id=f"b{i}", kind=BlockKind.INSTRUCTION, source=kw.pop("source", f"instruction:{i}"),
                     message=ChatMessage(role="system", content=f"note {i}"), **kw)

    blocks = [block(0, source="interceptor:looks-like-one"), block(1, origin=BlockOrigin.INTERCEPTOR), block(2)]
    result = shift_context(blocks, lambda b: 10, 20)
    assert [e.block_id for e in result.excluded] == ["b1"]


def test_preview_block_origin_rule() -> None:
    assert preview_block_origin("b12", "message:3") is BlockOrigin.ASSEMBLY
    assert preview_block_origin("i1", "interceptor:x") is BlockOrigin.INTERCEPTOR
    assert preview_block_origin("s0", "summary:auto") is BlockOrigin.STRATEGY
    assert preview_block_origin("sc0", "summary:compaction") is BlockOrigin.STRATEGY
    # a memory summary from the request is assembled, whatever its source says
    assert preview_block_origin("b4", "summary:auto") is BlockOrigin.ASSEMBLY
