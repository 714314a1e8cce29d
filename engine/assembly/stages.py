"""Assembly stages: each turns part of a :class:`PreviewRequest` into ordered prompt blocks.

A stage is ``fn(ctx: AssemblyContext) -> list[Block]``, registered by name in a
:class:`StageRegistry`; ``ContextSettings.template`` lists stage names in prompt order.
Blocks that go "at depth" (author's note, character's note, World Info at depth N) are not
returned by a stage but queued on ``ctx.depth_inserts``; :func:`assemble` places them
among the chat messages afterwards (depth 0 = after the last message), as SillyTavern does.

Layout follows SillyTavern's chat-completion defaults: main prompt, World Info before
character, persona, description, personality (``"{{char}}'s personality: …"``), scenario
(``"Scenario: …"``), World Info after character, example dialogue (``<START>``
becomes ``[Example Chat]``) between World Info before/after examples, memory, history with
depth insertions, post-history instructions, then the current user input (the issue's order).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, attrgetter, is_not, setitem
from typing import Any

from ..registry import NamedRegistry
from ..schema._construct import construct_many
from ..schema.blocks import Block, BlockKind, BlockOrigin
from ..schema.lorebook import InsertionPosition
from ..schema.messages import ChatMessage
from ..schema.request import DEFAULT_SYSTEM_PROMPT, PreviewRequest
from ..shifting.groups import find_tool_groups
from .macros import MacroContext, expand_macros

_ROLE_BY_NUMBER = {0: "system", 1: "user", 2: "assistant"}
_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class DepthInsert:
    """A block to place ``depth`` messages from the end of the chat (0 = after the last)."""

    depth: int
    block: Block
    rank: tuple[Any, ...] = ()


@dataclass
class AssemblyContext:
    """State shared by the stages of one assembly.

    ``activation`` is the World Info result (``engine.lorebook.ActivationResult``) or ``None``.
    ``warnings`` collects user-visible warnings (unknown macros, ...).
    ``pre_excluded`` maps block ids to reasons for blocks that are shown but never sent
    (lorebook entries over the lorebook budget).
    """

    request: PreviewRequest
    macros: MacroContext
    activation: Any = None
    warnings: list[str] = field(default_factory=list)
    depth_inserts: list[DepthInsert] = field(default_factory=list)
    pre_excluded: dict[str, str] = field(default_factory=dict)
    current_input_index: int | None = None
    _next_id: int = 0

    def new_id(self) -> str:
        """A fresh temporary block id (renumbered in prompt order by :func:`assemble`)."""
        self._next_id += 1
        return f"t{self._next_id}"

    def expand(self, text: str, where: str, original: str | None = None) -> str:
        """Expand macros in ``text``; unknown macros become warnings naming ``where``."""
        if original is not None:
            self.macros.original = original
        out, unknown = expand_macros(text, self.macros)
        self.macros.original = None
        for u in dict.fromkeys(unknown):
            msg = f"unknown macro {u} in {where} (left as written)"
            if msg not in self.warnings:
                self.warnings.append(msg)
        return out

    def text_block(self, kind: BlockKind, source: str, text: str, *, role: str = "system",
                   protected: bool = False, reason: str = "FITS_BUDGET", priority: float = 0,
                   trace: dict[str, Any] | None = None) -> Block:
        """A block holding one text message."""
        return Block.model_construct(
            id=self.new_id(), kind=kind, role=role, source=source,
            message=ChatMessage(role=role, content=text),  # type: ignore[arg-type]
            protected=protected, reason=reason, priority=priority, trace=trace)


Stage = Callable[[AssemblyContext], list[Block]]


class StageRegistry(NamedRegistry[Stage]):
    """Named assembly stages; ``register`` returns a cleanup callable; duplicates raise."""

    kind = "template stage"
    unknown_code = "INVALID_SETTINGS"

    def register(self, name: str, fn: Stage) -> Callable[[], None]:
        """Add stage ``name``."""
        return self._add(name, fn)


# --------------------------------------------------------------------------- stages

def stage_system(ctx: AssemblyContext) -> list[Block]:
    """Main system prompt: the user's, or the card's override with ``{{original}}``."""
    req = ctx.request
    user_prompt = req.system_prompt
    card = req.character
    if user_prompt is None and card is None:
        return []  # OpenAI-shaped chats bring their own system message
    base = user_prompt if user_prompt is not None else DEFAULT_SYSTEM_PROMPT
    base = ctx.expand(base, "system prompt")
    text = base
    if card is not None and card.system_prompt.strip():
        text = ctx.expand(card.system_prompt, "card system_prompt", original=base)
    if not text.strip():
        return []
    return [ctx.text_block(BlockKind.SYSTEM, "system", text, protected=True, reason="SYSTEM_PROMPT")]


def stage_tools(ctx: AssemblyContext) -> list[Block]:
    """The tool schemas sent with the request: one protected block, counted."""
    tools = ctx.request.chat.tools
    if not tools:
        return []
    return [Block(id=ctx.new_id(), kind=BlockKind.TOOLS, role="system", source="tools",
                  tools=tools, protected=True, reason="TOOL_SCHEMAS")]


def _lore_entries(ctx: AssemblyContext) -> list[tuple[Any, bool]]:
    """Activated entries, then the ones the lorebook budget dropped (shown, never sent)."""
    act = ctx.activation
    if act is None:
        return []
    return [(e, False) for e in act.activated] + [(e, True) for e in getattr(act, "budget_dropped", [])]


def _lore_blocks(ctx: AssemblyContext, positions: set[InsertionPosition]) -> list[Block]:
    out: list[Block] = []
    for entry, dropped in _lore_entries(ctx):
        if entry.position in positions:
            block = _lore_block(ctx, entry)
            if dropped:
                ctx.pre_excluded[block.id] = "LOREBOOK_BUDGET"
            out.append(block)
    return out


def _lore_block(ctx: AssemblyContext, entry: Any, role: str = "system") -> Block:
    constant = bool(entry.constant)
    text = ctx.expand(entry.content, f"lorebook {entry.book!r} entry {entry.uid}")
    return Block(
        id=ctx.new_id(), kind=BlockKind.LOREBOOK, role=role,
        source=f"lorebook:{entry.book}:{entry.uid}",
        message=ChatMessage(role=role, content=text),  # type: ignore[arg-type]
        protected=constant,
        reason=entry.reason or ("LOREBOOK_CONSTANT" if constant else "LOREBOOK_MATCHED"),
        priority=float(entry.order), trace=dict(entry.trace or {}),
    )


def stage_lorebook_before_char(ctx: AssemblyContext) -> list[Block]:
    """World Info entries at position 0 (before the character definition)."""
    return _lore_blocks(ctx, {InsertionPosition.BEFORE_CHAR})


def stage_lorebook_after_char(ctx: AssemblyContext) -> list[Block]:
    """World Info entries at position 1 (after the character definition)."""
    return _lore_blocks(ctx, {InsertionPosition.AFTER_CHAR})


def stage_character(ctx: AssemblyContext) -> list[Block]:
    """Description, personality and scenario: protected blocks (``creator_notes`` never sent)."""
    card = ctx.request.character
    if card is None:
        return []
    out: list[Block] = []
    fields = (
        ("description", card.description, "{}"),
        ("personality", card.personality, "{{char}}'s personality: {}"),
        ("scenario", card.scenario, "Scenario: {}"),
    )
    for name, value, fmt in fields:
        if value and value.strip():
            text = ctx.expand(fmt.replace("{}", value), f"card {name}")
            out.append(ctx.text_block(BlockKind.CHARACTER, f"character:{name}", text,
                                      protected=True, reason="CHARACTER"))
    dp = card.depth_prompt()
    if dp is not None:
        role = dp.role if dp.role in ("system", "user", "assistant") else "system"
        block = ctx.text_block(BlockKind.INSTRUCTION, "character:depth_prompt",
                               ctx.expand(dp.prompt, "card depth_prompt"), role=role,
                               protected=True, reason="INSTRUCTION")
        ctx.depth_inserts.append(DepthInsert(max(0, int(dp.depth)), block, (1,)))
    return out


def stage_persona(ctx: AssemblyContext) -> list[Block]:
    """The user's persona description (protected)."""
    p = ctx.request.persona
    if p is None or not p.description.strip():
        return []
    return [ctx.text_block(BlockKind.PERSONA, "persona", ctx.expand(p.description, "persona"),
                           protected=True, reason="PERSONA")]


def stage_examples(ctx: AssemblyContext) -> list[Block]:
    """Example dialogue (removable: the first thing to go), framed by World Info positions 5/6."""
    out = _lore_blocks(ctx, {InsertionPosition.BEFORE_EXAMPLES})
    card = ctx.request.character
    if card is not None and card.mes_example.strip():
        text = card.mes_example.replace("\r\n", "\n")
        text = re.sub(r"<START>", "[Example Chat]", text, flags=re.IGNORECASE).strip()
        out.append(ctx.text_block(BlockKind.EXAMPLE, "character:mes_example",
                                  ctx.expand(text, "card mes_example"),
                                  reason="EXAMPLE_DIALOGUE"))
    out += _lore_blocks(ctx, {InsertionPosition.AFTER_EXAMPLES})
    return out


def stage_memory(ctx: AssemblyContext) -> list[Block]:
    """Memory and summary items (removable, lowest priority first)."""
    out = []
    for item in ctx.request.memory:
        kind = BlockKind.SUMMARY if item.kind == "summary" else BlockKind.MEMORY
        out.append(ctx.text_block(kind, f"{item.kind}:{item.id}", ctx.expand(item.content, f"memory {item.id}"),
                                  reason="SUMMARY" if kind == BlockKind.SUMMARY else "MEMORY",
                                  priority=item.priority))
    return out


def _message_blocks(ctx: AssemblyContext, indices: list[int], msgs: list[ChatMessage], lead: Sequence[int] = (),
                    *, current: bool = False) -> list[Block]:
    """The blocks of chat messages ``msgs`` (chat indices ``indices``), in one columnar pass.

    ``lead``: positions in ``msgs`` of the leading system messages (the system prompt);
    ``current``: the messages are the current input. Blocks are built for every message on
    every preview (10,000+ for a long chat), so each column is one C-level pass over the
    messages; only the few messages with macros, names or tool calls get Python work of their
    own. The messages are not validated again (they were when the chat was read).
    """
    n = len(msgs)
    sources = list(map(_MESSAGE_SOURCES.upto(max(indices, default=-1) + 1).__getitem__, indices))
    metas = list(map(_META, msgs))
    # one copy per block of a split-key template holding the common values, then one C-level
    # pass per column that differs from block to block
    values = list(map(dict.copy, repeat(_CURRENT_TEMPLATE if current else _HISTORY_TEMPLATE, n)))
    # the temporary id is the source ("message:<i>", unique among the assembly's blocks; the
    # others are "t<k>"): :func:`assemble` numbers every block by its position
    roles = list(map(_ROLE, msgs))
    for key, column in (("id", sources), ("source", sources), ("role", roles),
                        ("message", _message_copies(ctx, indices, msgs)), ("pinned", map(bool, map(_PINNED, metas))),
                        ("manual_excluded", map(bool, map(_EXCLUDED, metas))), ("hidden", map(bool, map(_HIDDEN, metas))),
                        ("message_index", indices)):
        deque(map(setitem, values, repeat(key), column), maxlen=0)
    for k in lead:
        values[k].update(kind=BlockKind.SYSTEM, protected=True, reason="SYSTEM_PROMPT", history=False)
    for k in compress(range(n), map(_RESULT_ROLES.__contains__, roles)):
        values[k]["kind"] = BlockKind.TOOL_RESULT
    legacy = (k for k in compress(range(n), map(_EXTRA, msgs)) if (msgs[k].model_extra or {}).get("function_call"))
    for k in {*compress(range(n), map(_TOOL_CALLS, msgs)), *legacy}:  # calls, or OpenAI's old function_call
        if roles[k] == "assistant":
            values[k]["kind"] = BlockKind.TOOL_CALL
    # one fields set for the blocks of this call (``model_copy(update=)`` copies it; it holds every
    # field a message block is given, so an assignment to one of those adds nothing to it)
    return construct_many(Block, values, set(_MESSAGE_BLOCK_FIELDS_SET))


class _BlockDict:
    """Holder whose instance dicts share one key table (CPython's split dicts): a message block's ``__dict__``.

    A split dict's ``copy()`` copies only the value pointers, and it takes about two thirds of
    an ordinary dict's memory. Any dict would be correct: this is only the cheaper kind.
    """


def _block_template(**values: Any) -> dict[str, Any]:
    """A split-key dict of every :class:`Block` field in field order: ``values``, the others ``None``.

    Attribute assignment builds the shared key table (``dict.update`` on an empty split dict
    would turn it into an ordinary one).
    """
    holder = _BlockDict()
    for key in Block.model_fields:
        setattr(holder, key, values.get(key))
    return holder.__dict__


_HISTORY_TEMPLATE = _block_template(kind=BlockKind.MESSAGE, protected=False, priority=0.0, reason="FITS_BUDGET",
                                    history=True, origin=BlockOrigin.ASSEMBLY)
_CURRENT_TEMPLATE = _block_template(kind=BlockKind.MESSAGE, protected=True, priority=0.0, reason="CURRENT_INPUT",
                                    history=False, origin=BlockOrigin.ASSEMBLY)


_ROLE, _TOOL_CALLS, _EXTRA = attrgetter("role"), attrgetter("tool_calls"), attrgetter("__pydantic_extra__")
_META = attrgetter("meta")
_PINNED, _EXCLUDED, _HIDDEN = attrgetter("pinned"), attrgetter("manualExcluded"), attrgetter("hidden")
_RESULT_ROLES = frozenset(("tool", "function"))


def _message_copies(ctx: AssemblyContext, indices: list[int], msgs: list[ChatMessage]) -> list[ChatMessage]:
    """The messages as sent: macros expanded, a name the provider would reject dropped (copies only where changed)."""
    out = list(msgs)
    contents = list(map(attrgetter("content"), msgs))
    # a macro needs "{{" or "<": one-character searches first (memchr), the exact test below
    macro = [k for k, c in enumerate(contents) if isinstance(c, str) and ("{" in c or "<" in c)]
    named = compress(range(len(msgs)), map(attrgetter("name"), msgs))
    for k in sorted({*macro, *named}):
        msg = msgs[k]
        content = msg.content
        if isinstance(content, str) and ("{{" in content or "<" in content):  # else no macro can match
            content = ctx.expand(content, f"message {indices[k]}")
        name = msg.name if msg.name and (_NAME_OK.match(msg.name) or msg.role in _RESULT_ROLES) else None
        if content is not msg.content or name != msg.name:
            out[k] = msg.model_copy(update={"content": content, "name": name})
    return out


#: The fields a chat-message block is given (validation would record these as set).
_MESSAGE_BLOCK_FIELDS_SET = frozenset(
    ("id", "kind", "role", "source", "message", "tools", "protected", "pinned", "manual_excluded", "hidden",
     "history", "priority", "reason", "group", "message_index", "trace"))


def _current_input_index(messages: list[ChatMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].meta.hidden:
            continue
        return i if messages[i].role == "user" else None
    return None


def stage_history(ctx: AssemblyContext) -> list[Block]:
    """Chat messages except the current input; leading system messages are the system prompt."""
    msgs = ctx.request.chat.messages
    current = ctx.current_input_index = _current_input_index(msgs)
    indices, sent = list(range(len(msgs))), list(msgs)
    if current is not None:
        del indices[current], sent[current]
    lead: list[int] = []
    for k, msg in enumerate(sent):  # the leading system messages (hidden ones neither count nor end them)
        if msg.meta.hidden:
            continue
        if msg.role not in ("system", "developer"):
            break
        lead.append(k)
    out = _message_blocks(ctx, indices, sent, lead)
    _queue_author_note(ctx)
    _queue_depth_lore(ctx)
    return out


def stage_input(ctx: AssemblyContext) -> list[Block]:
    """The current user input (the chat's last message when its role is ``user``): protected."""
    msgs = ctx.request.chat.messages
    if ctx.current_input_index is None:
        ctx.current_input_index = _current_input_index(msgs)
    i = ctx.current_input_index
    if i is None:
        return []
    return _message_blocks(ctx, [i], [msgs[i]], current=True)


def stage_post_history(ctx: AssemblyContext) -> list[Block]:
    """The card's post-history instructions (``{{original}}`` = the user's, empty here)."""
    card = ctx.request.character
    if card is None or not card.post_history_instructions.strip():
        return []
    text = ctx.expand(card.post_history_instructions, "card post_history_instructions", original="")
    if not text.strip():
        return []
    return [ctx.text_block(BlockKind.INSTRUCTION, "character:post_history_instructions", text,
                           protected=True, reason="INSTRUCTION")]


def _queue_author_note(ctx: AssemblyContext) -> None:
    meta = ctx.request.chat.metadata or {}
    note = ctx.request.author_note
    if note is None:
        note = meta.get("note_prompt") if isinstance(meta.get("note_prompt"), str) else ""
    try:
        depth = int(meta.get("note_depth", 4))
    except (TypeError, ValueError):
        depth = 4
    role = _ROLE_BY_NUMBER.get(meta.get("note_role", 0) if isinstance(meta.get("note_role"), int) else 0, "system")
    top = _lore_blocks(ctx, {InsertionPosition.AN_TOP})
    bottom = _lore_blocks(ctx, {InsertionPosition.AN_BOTTOM})
    rank = 0
    for b in top:
        ctx.depth_inserts.append(DepthInsert(depth, b, (0, rank)))
        rank += 1
    if note and note.strip():
        block = ctx.text_block(BlockKind.INSTRUCTION, "author_note", ctx.expand(note, "author's note"),
                               role=role, protected=True, reason="INSTRUCTION")
        ctx.depth_inserts.append(DepthInsert(depth, block, (0, rank)))
        rank += 1
    for b in bottom:
        ctx.depth_inserts.append(DepthInsert(depth, b, (0, rank)))
        rank += 1


def _queue_depth_lore(ctx: AssemblyContext) -> None:
    for k, (entry, dropped) in enumerate(_lore_entries(ctx)):
        if entry.position == InsertionPosition.AT_DEPTH:
            role = entry.role if entry.role in ("system", "user", "assistant") else "system"
            block = _lore_block(ctx, entry, role)
            if dropped:
                ctx.pre_excluded[block.id] = "LOREBOOK_BUDGET"
            ctx.depth_inserts.append(DepthInsert(max(0, int(entry.depth)), block, (2, k)))


BUILTIN_STAGES: dict[str, Stage] = {
    "system": stage_system,
    "tools": stage_tools,
    "lorebook_before_char": stage_lorebook_before_char,
    "character": stage_character,
    "lorebook_after_char": stage_lorebook_after_char,
    "persona": stage_persona,
    "examples": stage_examples,
    "memory": stage_memory,
    "history": stage_history,
    "post_history": stage_post_history,
    "input": stage_input,
}


def register_builtin_stages(registry: StageRegistry) -> list[Callable[[], None]]:
    """Register the built-in stages; returns their cleanup callables."""
    return [registry.register(name, fn) for name, fn in BUILTIN_STAGES.items()]


def _gather_tool_batches(ctx: AssemblyContext, blocks: list[Block]) -> tuple[list[Block], dict[int, int]]:
    """Send each tool batch as one run: the results directly after their call.

    OpenAI's chat shape requires an assistant message with ``tool_calls`` to be followed
    directly by the results of exactly those calls. Results that the chat holds later (a user
    message typed while a tool ran, or two batches interleaved) move up to follow their call,
    in their own order; the messages they skipped follow the batch. A moved result's trace
    says so, and one warning names the messages. Groups that can never be sent (a result
    before its call, a call without results) are left where they are: shifting drops them
    (``TOOL_PAIR_INCOMPLETE``).

    Returns
    -------
    (blocks, batch_start):
        The blocks in send order, and for every position strictly inside a batch (a result of
        a call; inserting before it would split the batch) the position of the batch's call.
    """
    if _TOOL_KINDS.isdisjoint(map(_KIND, blocks)):
        return blocks, {}
    msg_pos = list(compress(range(len(blocks)), map(and_, map(is_not, map(_MESSAGE, blocks), repeat(None)),
                                                    map(is_not, map(_MESSAGE_INDEX, blocks), repeat(None)))))
    msgs = list(map(blocks.__getitem__, msg_pos))
    groups = find_tool_groups(msgs)
    members: dict[str, list[int]] = {}
    group_of = groups.group_of
    for k in compress(range(len(group_of)), group_of):
        g = group_of[k]
        if g not in groups.incomplete:
            members.setdefault(g, []).append(k)  # type: ignore[arg-type]
    # the call of a group is its first member (results before their call make it incomplete)
    call_of = {g: ks[0] for g, ks in members.items()
               if (first := msgs[ks[0]].message) is not None and first.role == "assistant"}
    # a batch whose results follow their call directly is in send order already
    if all(ks[-1] - ks[0] == len(ks) - 1 for g, ks in members.items() if g in call_of):
        slot = msg_pos  # message k stays at block position msg_pos[k]
    else:
        order = _batch_send_order(group_of, members, call_of)
        blocks = list(blocks)
        for at, k in zip(msg_pos, order):
            blocks[at] = msgs[k]
        slot = [0] * len(msgs)
        for at, k in zip(msg_pos, order):
            slot[k] = at
    _note_moved_results(ctx, msgs, members, call_of)
    # positions strictly inside a batch → the batch's call position
    batch_start: dict[int, int] = {}
    for g, call_k in call_of.items():
        for r in members[g][1:]:
            batch_start[slot[r]] = slot[call_k]
    return blocks, batch_start


_KIND, _MESSAGE, _MESSAGE_INDEX = attrgetter("kind"), attrgetter("message"), attrgetter("message_index")
_TOOL_KINDS = frozenset((BlockKind.TOOL_CALL, BlockKind.TOOL_RESULT))


def _batch_send_order(group_of: Sequence[str | None], members: dict[str, list[int]],
                      call_of: dict[str, int]) -> list[int]:
    """Message positions in send order: each call followed directly by its results."""
    order: list[int] = []
    taken: set[int] = set()
    for k in range(len(group_of)):
        if k in taken:
            continue
        order.append(k)
        taken.add(k)
        g = group_of[k]
        if g is not None and call_of.get(g) == k:
            for r in members[g][1:]:
                order.append(r)
                taken.add(r)
    return order


def _note_moved_results(ctx: AssemblyContext, msgs: list[Block], members: dict[str, list[int]],
                        call_of: dict[str, int]) -> None:
    """Trace and warn about results that moved: a sent message of another kind stood between them and their batch."""
    moved: list[tuple[int, int]] = []
    for g, call_k in call_of.items():
        prev = call_k
        for r in members[g][1:]:
            if any(not msgs[j].hidden for j in range(prev + 1, r)):
                moved.append((r, call_k))
            prev = r
    if not moved:
        return
    moved.sort()
    for old_k, call_k in moved:
        b = msgs[old_k]
        b.trace = {**(b.trace or {}), "send_order": {
            "moved_after_tool_call": msgs[call_k].message_index,
            "note": f"sent directly after its tool call (message {msgs[call_k].message_index}), "
                    "as a provider requires"}}
    names = ", ".join(str(msgs[k].message_index) for k, _ in moved)
    ctx.warnings.append(f"tool results (messages {names}) are sent directly after their calls, "
                        "ahead of messages that came between them: a provider rejects a tool call "
                        "not followed by its results")


def assemble(ctx: AssemblyContext, registry: StageRegistry, template: list[str]) -> list[Block]:
    """Run the stages named in ``template`` in order, place depth insertions, number the blocks.

    Returns blocks with ids ``b0``, ``b1``, ... in prompt order. Each tool batch is sent as
    one run (:func:`_gather_tool_batches`). Depth ``d`` puts a block before the ``d``-th
    message counted from the end among the chat messages that are sent (history and current
    input; hidden messages do not count); with fewer messages it goes before the first one.
    A depth that falls inside a tool batch (between a call and its results) puts the block
    immediately before the batch's assistant message instead. Every inserted block's trace
    records ``placement`` (``depth``, ``before_message``, and ``moved_before_tool_call`` when a
    batch moved it).
    """
    blocks: list[Block] = []
    for name in template:
        blocks.extend(registry.get(name)(ctx))
    blocks, batch_start = _gather_tool_batches(ctx, blocks)
    if ctx.depth_inserts:
        # hidden messages are never sent, so they do not count towards a depth (SillyTavern
        # removes them before placing depth prompts)
        msg_positions = [i for i, b in enumerate(blocks) if b.message_index is not None and not b.hidden]
        placed: dict[int, list[tuple[tuple[Any, ...], Block]]] = {}
        for ins in ctx.depth_inserts:
            if not msg_positions:
                anchor = len(blocks)
            elif ins.depth == 0:
                anchor = msg_positions[-1] + 1
            elif ins.depth >= len(msg_positions):
                anchor = msg_positions[0]
            else:
                anchor = msg_positions[-ins.depth]
            start = batch_start.get(anchor)
            placement: dict[str, Any] = {"depth": ins.depth}
            if start is not None:
                # Never between a tool call and its results: a provider rejects the request.
                # The insertion goes immediately before the batch's assistant message.
                call = blocks[start]
                placement["moved_before_tool_call"] = call.message_index
                placement["note"] = (f"depth {ins.depth} fell inside the tool batch of message "
                                     f"{call.message_index}; placed before its tool call")
                anchor = start
            if anchor < len(blocks) and blocks[anchor].message_index is not None:
                placement["before_message"] = blocks[anchor].message_index
            placement.setdefault("note", f"depth {ins.depth}: " + (
                f"placed before message {placement['before_message']}" if "before_message" in placement
                else "placed after the last message"))
            ins.block.trace = {**(ins.block.trace or {}), "placement": placement}
            placed.setdefault(anchor, []).append(((-ins.depth, *ins.rank), ins.block))
        merged: list[Block] = []
        for i in range(len(blocks) + 1):
            for _, b in sorted(placed.get(i, []), key=lambda x: x[0]):
                merged.append(b)
            if i < len(blocks):
                merged.append(blocks[i])
        blocks = merged
    return _numbered(ctx, blocks)


def _numbered(ctx: AssemblyContext, blocks: list[Block]) -> list[Block]:
    """``blocks`` with ids ``b0``, ``b1``, ... by position (in place: this assembly created them); ``pre_excluded`` follows."""
    ids = _BLOCK_IDS.upto(len(blocks))
    pre = ctx.pre_excluded
    if pre:
        at = compress(range(len(blocks)), map(pre.__contains__, map(_ID, blocks)))
        renumber = {blocks[i].id: ids[i] for i in at}
        ctx.pre_excluded = {renumber.get(k, k): v for k, v in pre.items()}
    # "id" is a set field already: no validation on assignment
    deque(map(setitem, map(_DICT, blocks), repeat("id"), ids), maxlen=0)
    return blocks


_ID, _DICT = attrgetter("id"), attrgetter("__dict__")


class _Numbered:
    """The strings ``pattern % 0``, ``pattern % 1``, ... made once per process (every preview names its blocks).

    A longer chat extends them by a new list (assigned at once: a thread reading the old one
    meanwhile reads valid names); they last as long as the process, one short string per
    position of the longest assembly.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.names: list[str] = []

    def upto(self, n: int) -> list[str]:
        """The first ``n`` names (a new list)."""
        names = self.names
        if len(names) < n:
            names = self.names = names + list(map(self.pattern.__mod__, range(len(names), n)))
        return names[:n]


_BLOCK_IDS, _MESSAGE_SOURCES = _Numbered("b%d"), _Numbered("message:%d")
