"""The typed state of one pipeline run: what each of the ten steps reads and writes (issue 29 item 2).

:class:`RunState` is filled step by step by :func:`engine.pipeline.prepare`. Besides the block
objects it carries the run's figures as columns (:class:`BlockColumns`: one list per field, one
entry per assembled block in prompt order), which the built-in ``truncate`` / ``manual``
strategies shift over (:mod:`engine.columnar`). A warm run (:mod:`engine.incremental` decides
when one applies) starts from the remembered run's state: step 3 copies the few blocks whose
message changed, step 4 patches the columns (:meth:`BlockColumns.patched`: only the new texts are
counted), and step 10 reuses every row that did not change (:mod:`engine.rows`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, is_, or_
from typing import TYPE_CHECKING, Any

from .registries import Registries
from .resolve import LorebookPlan
from .schema.blocks import Block, ShiftResult, TruncatedBlock
from .schema.preview import ContextPreview, PreviewBlock, PreviewError
from .schema.request import PreviewRequest
from .shifting import ToolGroups
from .shifting.arrays import ArrayShift
from .shifting.core import removal_tier
from .shifting.explain import Explanation
from .tokenizers import TokenizerProfile
from .tokenizers.accounting import TOKENS_PER_MESSAGE, count_tools_tokens, message_overhead, message_texts
from .tokenizers.templates.base import PromptCount

if TYPE_CHECKING:
    from .lorebook.models import ActivationResult

#: A provider message (OpenAI chat shape).
ProviderMessage = dict[str, Any]


def _plain(block: Block) -> bool:
    """Whether the block is a plain text message: OpenAI shape ``{"role", "content"}``, 3 tokens of framing.

    (No name, tool calls, tool-result id, legacy function call or extra fields; text content.)
    """
    m = block.message
    return (m is not None and type(m.content) is str and not m.name and not m.tool_calls
            and m.role not in ("tool", "function") and not m.__pydantic_extra__)


def block_text(block: Block) -> str:
    """``block.text()``; a plain text message (no tool calls) is its content."""
    m = block.message
    if m is not None and type(m.content) is str and not m.tool_calls and not m.__pydantic_extra__:
        return m.content
    return block.text()


@dataclass(frozen=True)
class PreparedPrompt:
    """The outcome of pipeline steps 1–9.

    ``messages`` are the final provider messages (OpenAI chat shape) and ``tools`` the tool
    schemas to send; ``budget_ok`` is ``False`` exactly when ``preview.error`` is
    ``TOKEN_BUDGET_EXCEEDED`` (then nothing may be sent).
    """

    preview: ContextPreview
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    profile: TokenizerProfile
    budget_ok: bool
    interceptor_diagnostics: list[str] = field(default_factory=list)
    #: SillyTavern ``chat_metadata["timedWorldInfo"]`` after this activation (sticky/cooldown
    #: started by it); ``None`` without lorebooks. Stored after a completed generation only.
    timed_effects: dict[str, Any] | None = None


@dataclass
class BlockColumns:
    """The run's figures per assembled block, one list per field (prompt order).

    ``tokens`` are OpenAI chat-accounting counts (framing included); ``provider`` the block's
    provider message (``None``: the tools block), ``pieces`` the texts it spends tokens on and
    ``overhead`` its framing tokens; ``tier`` the removal tier of shifting rule 5;
    ``kept_reason`` the reason a kept block shows (``PINNED`` for a pinned block that is not
    protected otherwise); ``listy`` whether its content is a list of parts.
    """

    id: list[str]
    kind: list[str]
    source: list[str]
    message_index: list[int | None]
    label: list[str]
    history: list[bool]
    protected: list[bool]
    pinned: list[bool]
    manual: list[bool]
    hidden: list[bool]
    tier: list[int]
    priority: list[float]
    kept_reason: list[str]
    text: list[str]
    tokens: list[int]
    provider: list[ProviderMessage | None]
    pieces: list[list[str]]
    overhead: list[int]
    listy: list[bool]

    @classmethod
    def of(cls, blocks: Sequence[Block], profile: TokenizerProfile) -> BlockColumns:
        """The columns of ``blocks``, counted with ``profile`` in one batch (OpenAI accounting).

        Parameters
        ----------
        blocks:
            The assembled blocks, in prompt order.
        profile:
            The run's tokenizer profile (no chat template).
        """
        plain = list(map(_plain, blocks))
        messages = list(map(attrgetter("message"), blocks))
        provider: list[ProviderMessage | None] = [
            {"role": m.role, "content": m.content} if ok else (m.to_provider() if m is not None else None)
            for ok, m in zip(plain, messages)]
        pieces = [[m.role, m.content] if ok else (message_texts(p) if p is not None else [])
                  for ok, m, p in zip(plain, messages, provider)]
        overhead = [TOKENS_PER_MESSAGE if ok else (message_overhead(p) if p is not None else 0)
                    for ok, p in zip(plain, provider)]
        counts = profile.count_many(list(chain.from_iterable(pieces)))
        ends = list(accumulate(map(len, pieces)))
        prefix = [0, *accumulate(counts)]
        tokens = [prefix[e] - prefix[e - len(p)] + o for p, e, o in zip(pieces, ends, overhead)]
        for i in compress(range(len(blocks)), map(is_, provider, repeat(None))):
            tokens[i] = count_tools_tokens(profile, blocks[i].tools or [])
        return cls(**_flag_columns(blocks), tokens=tokens, provider=provider, pieces=pieces, overhead=overhead,
                   listy=[p is not None and isinstance(p.get("content"), list) for p in provider])

    def patched(self, blocks: Sequence[Block], flagged: Sequence[int], edited: Sequence[int],
                profile: TokenizerProfile) -> BlockColumns:
        """These columns for ``blocks``, where only the blocks at ``flagged`` / ``edited`` are new.

        ``flagged``: positions whose pin / exclude flags may have changed; ``edited``: positions
        whose (plain text) message changed, counted again in one batch through the per-text
        cache. Unchanged lists are shared with this instance, never mutated.
        """
        out = dataclasses.replace(self, pinned=list(self.pinned), manual=list(self.manual),
                                  kept_reason=list(self.kept_reason))
        for pos in chain(flagged, edited):
            b = blocks[pos]
            out.pinned[pos], out.manual[pos] = b.pinned, b.manual_excluded
            out.kept_reason[pos] = "PINNED" if b.pinned and not b.protected else b.reason
        if not edited:
            return out
        out.provider, out.pieces, out.overhead = list(self.provider), list(self.pieces), list(self.overhead)
        out.tokens, out.text = list(self.tokens), list(self.text)
        for pos in edited:
            message = blocks[pos].message
            assert message is not None  # only message blocks are edited (engine.incremental)
            provider = message.to_provider()
            out.provider[pos], out.pieces[pos] = provider, message_texts(provider)
            out.overhead[pos], out.text[pos] = message_overhead(provider), block_text(blocks[pos])
        counts = profile.count_many([t for pos in edited for t in out.pieces[pos]])
        at = 0
        for pos in edited:
            k = len(out.pieces[pos])
            out.tokens[pos] = sum(counts[at:at + k]) + out.overhead[pos]
            at += k
        return out


def _flag_columns(blocks: Sequence[Block]) -> dict[str, list[Any]]:
    """The columns of :class:`BlockColumns` read from the blocks' fields (one C-level pass each)."""

    def column(name: str) -> list[Any]:
        return list(map(attrgetter(name), blocks))

    mindex, source, history, protected, pinned = (column(k) for k in (
        "message_index", "source", "history", "protected", "pinned"))
    kinds = column("kind")
    return {
        "id": column("id"), "kind": [k.value for k in kinds], "source": source, "message_index": mindex,
        "label": [f"message {mi}" if mi is not None else src for src, mi in zip(source, mindex)],
        "history": history, "protected": protected, "pinned": pinned, "manual": column("manual_excluded"),
        "hidden": column("hidden"), "tier": list(map(removal_tier, column("origin"), kinds, history)),
        "priority": column("priority"),
        "kept_reason": [("PINNED" if p and not pr else r) for p, pr, r in zip(pinned, protected, column("reason"))],
        "text": list(map(block_text, blocks)),
    }


@dataclass
class SendColumns:
    """The columns shifting reads, per sendable block (``positions``: their block positions).

    The very lists of :class:`BlockColumns` when every block is sendable.
    """

    positions: list[int]
    tokens: list[int]
    hidden: list[bool]
    manual: list[bool]
    prot: list[bool]
    tier: list[int]
    priority: list[float]
    id: list[str]
    message_index: list[int | None]

    @classmethod
    def of(cls, c: BlockColumns, positions: list[int]) -> SendColumns:
        """The sendable part of ``c`` (``positions`` ascending)."""
        every = len(positions) == len(c.id)

        def pick(values: list[Any]) -> list[Any]:
            return values if every else [values[i] for i in positions]

        return cls(positions, pick(c.tokens), pick(c.hidden), pick(c.manual),
                   pick(list(map(or_, c.protected, c.pinned))), pick(c.tier), pick(c.priority), pick(c.id),
                   pick(c.message_index))


@dataclass(frozen=True)
class GroupLayout:
    """The tool groups of the sendable blocks, by position.

    ``groups``: member positions per group in sendable order, ``bgroups`` the same in block
    positions, ``group_ids`` their ids; ``group_of`` per sendable position, ``b_group_of`` per
    block; ``orphans`` (sendable positions never sent), ``incomplete`` as in
    :class:`~engine.shifting.ToolGroups`; ``warnings`` the run's warnings about them.
    """

    groups: list[list[int]]
    bgroups: list[list[int]]
    group_ids: list[str]
    group_of: list[str | None]
    b_group_of: list[str | None]
    orphans: frozenset[int]
    incomplete: dict[str, Any]
    warnings: list[str]


@dataclass
class Outcome:
    """Each block's fate after steps 5-10, per block position (what the next run compares with).

    ``status`` (``kept`` / ``excluded``), ``reason``, ``detail`` (the explanation, or ``None``),
    ``fits`` (fit windows); ``codes`` / ``fit`` the numpy forms of the reasons and windows when
    the run computed them (a warm run, every block sent), else ``None``.
    """

    status: list[str]
    reason: list[str]
    detail: list[Explanation | None]
    fits: list[int | None]
    explanations: dict[str, Explanation]
    codes: Any = None
    fit: Any = None


@dataclass
class RunState:
    """What one preview has worked out so far; each step of :func:`engine.pipeline.prepare` fills its part.

    Token figures are in tokens of ``profile``. ``status`` maps a block id to its fate
    ``(status, reason)`` (block path); ``ordered`` is every block in prompt order (strategy- and
    interceptor-made ones included), ``final_blocks`` the ones sent. ``columns`` and what follows
    it are set on the column path (:mod:`engine.columnar`); ``base`` is the remembered run a warm
    run patches (dropped when the run is done).
    """

    request: PreviewRequest
    reg: Registries
    warnings: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    # 1. model
    profile: TokenizerProfile = field(init=False)
    limit: int = field(init=False)
    # 2. reply reserve
    reserve: int = field(init=False)
    budget: int = field(init=False)
    tools: list[dict[str, Any]] = field(init=False)
    priming: int = field(init=False)
    # 3. assembly
    plan: LorebookPlan = field(init=False)
    activation: ActivationResult | None = field(init=False)
    blocks: list[Block] = field(init=False)
    pre_excluded: dict[str, str] = field(init=False)
    assembled: tuple[list[str], list[str]] = field(init=False)  # warnings, diagnostics after step 3
    columnar: bool = False
    context: tuple[object, ...] = ()
    base: RunState | None = None
    position_of: dict[int, int] = field(default_factory=dict)
    flagged: list[int] = field(default_factory=list)
    edited: list[int] = field(default_factory=list)
    # 4. counts
    tokens: dict[str, int] = field(init=False)
    shift_tokens: dict[str, int] = field(init=False)
    count: Callable[[Block], int] = field(init=False)
    approximate: bool = field(init=False)
    safety: int = field(init=False)
    shift_budget: int = field(init=False)
    sendable: list[Block] = field(init=False)
    columns: BlockColumns = field(init=False)
    send: SendColumns = field(init=False)
    layout: GroupLayout = field(init=False)
    vectors: dict[str, Any] | None = None
    # 5–6. strategy and host checks
    groups: ToolGroups = field(init=False)
    group_of: dict[str, str] = field(init=False)
    result: ShiftResult | None = field(init=False)
    array_shift: ArrayShift = field(init=False)
    strategy_problems: list[str] = field(init=False)
    honor_manual: bool = field(init=False)
    status: dict[str, tuple[str, str]] = field(init=False)
    truncated: dict[str, TruncatedBlock] = field(init=False)
    ordered: list[Block] = field(init=False)
    final_blocks: list[Block] = field(init=False)
    kept_at: list[int] = field(init=False)
    fates: tuple[list[str], list[str]] = field(init=False)  # per block: status, reason (column path)
    outcome: Outcome = field(init=False)
    # 7. interceptors
    interceptor_diags: list[str] = field(default_factory=list)
    intercepted: bool = False
    # 8. recount
    messages: list[dict[str, Any]] = field(init=False)
    send_tools: list[dict[str, Any]] = field(init=False)
    final: PromptCount = field(init=False)
    template_tokens: dict[str, int] = field(init=False)
    prompt_tokens: int = field(init=False)
    # 9. budget
    error: PreviewError | None = None
    # 10. report
    rows: list[PreviewBlock] = field(init=False)
    preview: ContextPreview = field(init=False)

    @property
    def shift(self) -> ShiftResult:
        """The strategy's result after the host checks (step 6 on, block path)."""
        assert self.result is not None
        return self.result


__all__ = ["BlockColumns", "GroupLayout", "Outcome", "PreparedPrompt", "RunState", "SendColumns", "block_text"]
