"""``engine.rows``: a toggle's rows are the old rows with only the flag fields and the fate set."""

from __future__ import annotations

import itertools

from engine import rows
from engine.rows import RowInputs, draft_rows
from engine.runstate import AssemblyColumns
from engine.schema.blocks import Block, BlockKind
from engine.schema.messages import ChatMessage
from engine.shifting import ToolLayout


def _blocks(pinned: bool, excluded: bool) -> list[Block]:
    kinds = (BlockKind.SYSTEM, BlockKind.MESSAGE, BlockKind.MESSAGE)
    out = []
    for k, (kind, protected) in enumerate(itertools.product(kinds, (False, True))):
        message = ChatMessage(role="user", content=f"message {k}") if kind is BlockKind.MESSAGE else None
        out.append(Block(id=f"b{k}", kind=kind, source=f"s{k}", message=message, history=message is not None,
                         message_index=k if message is not None else None, protected=protected,
                         pinned=pinned, manual_excluded=excluded, role="user" if message else "system"))
    return out


def test_the_flag_fields_are_every_row_field_a_pin_or_exclusion_changes() -> None:
    """``build_rows`` sets only ``_flag_columns``' fields (and the fate) on a toggled block's old row
    (review s4, finding 1): a row field that read a flag anywhere else would make a warm row
    differ from a cold one. Rows drafted from blocks that differ in their flags only differ in
    exactly those fields."""
    drafted = {}
    for flags in itertools.product((False, True), repeat=2):
        blocks = _blocks(*flags)
        columns = AssemblyColumns.read(blocks, ToolLayout.of([None] * len(blocks)))
        drafted[flags] = [r.model_dump() for r in draft_rows(RowInputs(blocks, columns, {}))]
        names = {name for name, _ in rows._flag_columns(columns.cols)}
    assert names == {"pinned", "manual_excluded"}
    plain = drafted[False, False]
    for flags, drafts in drafted.items():
        differ = {key for a, b in zip(plain, drafts) for key in a if a[key] != b[key]}
        assert differ == {name for name, on in zip(("pinned", "manual_excluded"), flags) if on}, flags
