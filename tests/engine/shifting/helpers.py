"""Builders for shifting tests: blocks whose size is their token count under a fixed counter."""

from __future__ import annotations

from engine.schema import Block, BlockKind, ChatMessage, ToolCall, ToolFunction


class Builder:
    """Appends blocks with explicit sizes; ``count`` is the zero-overhead test counter."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.sizes: dict[str, int] = {}

    def _add(self, size: int, kind: BlockKind, message: ChatMessage, **kw) -> str:
        bid = f"b{len(self.blocks)}"
        self.blocks.append(Block(id=bid, kind=kind, role=message.role, source=f"test:{bid}",
                                 message=message, **kw))
        self.sizes[bid] = size
        return bid

    def sys(self, size: int) -> str:
        return self._add(size, BlockKind.SYSTEM, ChatMessage(role="system", content="s"),
                         protected=True, reason="SYSTEM_PROMPT")

    def character(self, size: int) -> str:
        return self._add(size, BlockKind.CHARACTER, ChatMessage(role="system", content="c"),
                         protected=True, reason="CHARACTER")

    def msg(self, size: int, role: str = "user", *, current: bool = False, pinned: bool = False,
            manual: bool = False, hidden: bool = False) -> str:
        return self._add(size, BlockKind.MESSAGE, ChatMessage(role=role, content="m"),
                         protected=current, pinned=pinned, manual_excluded=manual, hidden=hidden,
                         history=not current, reason="CURRENT_INPUT" if current else "FITS_BUDGET")

    def call(self, size: int, *ids: str, pinned: bool = False) -> str:
        calls = [ToolCall(id=i, function=ToolFunction(name="f", arguments="{}")) for i in ids]
        return self._add(size, BlockKind.TOOL_CALL, ChatMessage(role="assistant", tool_calls=calls),
                         history=True, pinned=pinned)

    def result(self, size: int, call_id: str | None, key: str = "tool_call_id") -> str:
        kw = {key: call_id} if call_id else {}
        return self._add(size, BlockKind.TOOL_RESULT, ChatMessage(role="tool", content="r", **kw),
                         history=True)

    def lore(self, size: int, priority: float, constant: bool = False) -> str:
        return self._add(size, BlockKind.LOREBOOK, ChatMessage(role="system", content="l"),
                         protected=constant, priority=priority,
                         reason="LOREBOOK_CONSTANT" if constant else "LOREBOOK_MATCHED")

    def example(self, size: int) -> str:
        return self._add(size, BlockKind.EXAMPLE, ChatMessage(role="system", content="e"))

    def count(self, block: Block) -> int:
        return self.sizes[block.id]
