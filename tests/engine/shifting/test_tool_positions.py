"""``tool_positions``: the blocks the tool-group linking looks at (every call and result, few others)."""

from __future__ import annotations

from engine.schema.blocks import Block, BlockKind
from engine.schema.messages import ChatMessage, ToolCall, ToolFunction
from engine.shifting.groups import find_tool_groups, tool_positions


def _block(i: int, message: ChatMessage | None, kind: BlockKind = BlockKind.MESSAGE) -> Block:
    return Block(id=f"b{i}", kind=kind, source=f"message:{i}", message=message, tools=None if message else [{}])


def test_every_call_and_result_is_a_candidate_and_plain_messages_are_not():
    call = ToolCall(id="c1", function=ToolFunction(name="f", arguments="{}"))
    messages = [
        None,  # the tools block
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="assistant", tool_calls=[call]),
        ChatMessage(role="tool", tool_call_id="c1", content="r"),
        ChatMessage(role="assistant", content="plain"),
        ChatMessage(role="assistant", content=None, function_call={"name": "old", "arguments": "{}"}),
        ChatMessage(role="function", name="old", content="legacy result"),
        ChatMessage(role="user", content="named", name="Ann"),
    ]
    blocks = [_block(i, m) for i, m in enumerate(messages)]
    assert tool_positions(blocks) == [2, 3, 5, 6]
    groups = find_tool_groups(blocks)
    assert groups.group_of == [None, None, "g0", "g0", None, "g1", "g1", None]
    assert not groups.incomplete and not groups.orphans
