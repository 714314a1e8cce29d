"""The typed state of one pipeline run: what each of the ten steps reads and writes (issue 29 item 2).

:class:`RunState` is filled step by step by :func:`engine.pipeline.prepare`. Besides the block
objects it carries the run's figures as columns (:class:`RunColumns` around shifting's
:class:`~engine.shifting.BlockColumns`: one list per field, one entry per assembled block in prompt order), which the built-in ``truncate`` / ``manual``
strategies shift over (:mod:`engine.columnar`). A warm run (:mod:`engine.incremental` decides
when one applies) starts from the remembered run's state: step 3 copies the few blocks whose
message changed, step 4 patches the columns (:meth:`RunColumns.patched`: only the new texts are
counted), and step 10 reuses every row that did not change (:mod:`engine.rows`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, is_
from typing import Any, Literal

from .assembly.st_group import Speaker
from .assembly.st_types import AssembledPrompt, SillyTavernInputs
from .lorebook.models import ActivationResult
from .registries import Registries
from .resolve import LorebookPlan, SillyTavernLimits
from .schema.blocks import Block, ShiftResult, TruncatedBlock
from .schema.preview import ContextPreview, PreviewBlock, PreviewError, TokenizerInfo
from .schema.request import PreviewRequest
from .schema.trace import TraceRecord
from .shifting import BlockColumns, ColumnShift, ToolGroups, ToolLayout
from .shifting.explain import Explanation
from .tokenizers import TokenizerProfile
from .tokenizers.accounting import TOKENS_PER_MESSAGE, count_tools_tokens, message_overhead, message_texts
from .tokenizers.templates.base import PromptCount

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


@dataclass(frozen=True)
class RunColumns:
    """The run's figures per assembled block (prompt order): shifting's columns plus what the recount and rows read.

    ``cols`` are the columns every shifting rule reads (:class:`engine.shifting.BlockColumns`;
    its ``tokens`` are OpenAI chat-accounting counts, framing included). Per block besides:
    ``provider`` its provider message (``None``: the tools block), ``pieces`` the texts it spends
    tokens on and ``overhead`` its framing tokens, ``kept_reason`` the reason a kept block shows
    (``PINNED`` for a pinned block that is not protected otherwise), ``text`` its shown text,
    ``listy`` whether its content is a list of parts. Read-only: a warm run makes new columns.
    """

    cols: BlockColumns
    kept_reason: list[str]
    text: list[str]
    provider: list[ProviderMessage | None]
    pieces: list[list[str]]
    overhead: list[int]
    listy: list[bool]

    @classmethod
    def of(cls, blocks: Sequence[Block], profile: TokenizerProfile, layout: ToolLayout) -> RunColumns:
        """The columns of ``blocks``, counted with ``profile`` in one batch (OpenAI accounting).

        Parameters
        ----------
        blocks:
            The assembled blocks, in prompt order.
        profile:
            The run's tokenizer profile (no chat template).
        layout:
            The blocks' tool groups, in block positions.
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
        cols = BlockColumns.from_blocks(blocks, tokens, layout)
        reasons = map(attrgetter("reason"), blocks)
        kept_reason = [("PINNED" if p and not pr else r) for p, pr, r in zip(cols.pinned, cols.protected, reasons)]
        return cls(cols, kept_reason, list(map(block_text, blocks)), provider, pieces, overhead,
                   [p is not None and isinstance(p.get("content"), list) for p in provider])

    def patched(self, blocks: Sequence[Block], flagged: Sequence[int], edited: Sequence[int],
                profile: TokenizerProfile) -> RunColumns:
        """These columns for ``blocks``, where only the blocks at ``flagged`` / ``edited`` are new.

        ``flagged``: positions whose pin / exclude flags changed; ``edited``: positions whose
        (plain text) message changed, counted again in one batch through the per-text cache.
        Unchanged lists are shared with this instance, never mutated.
        """
        pinned, manual, kept_reason = list(self.cols.pinned), list(self.cols.manual), list(self.kept_reason)
        for pos in chain(flagged, edited):
            b = blocks[pos]
            pinned[pos], manual[pos] = b.pinned, b.manual_excluded
            kept_reason[pos] = "PINNED" if b.pinned and not b.protected else b.reason
        if not edited:
            return dataclasses.replace(self, cols=dataclasses.replace(self.cols, pinned=pinned, manual=manual),
                                       kept_reason=kept_reason)
        provider, pieces, overhead = list(self.provider), list(self.pieces), list(self.overhead)
        tokens, text = list(self.cols.tokens), list(self.text)
        for pos in edited:
            message = blocks[pos].message
            assert message is not None  # only message blocks are edited (engine.incremental)
            sent = provider[pos] = message.to_provider()
            pieces[pos], overhead[pos] = message_texts(sent), message_overhead(sent)
            text[pos] = block_text(blocks[pos])
        counts = profile.count_many([t for pos in edited for t in pieces[pos]])
        at = 0
        for pos in edited:
            k = len(pieces[pos])
            tokens[pos] = sum(counts[at:at + k]) + overhead[pos]
            at += k
        cols = dataclasses.replace(self.cols, pinned=pinned, manual=manual, tokens=tokens)
        return dataclasses.replace(self, cols=cols, kept_reason=kept_reason, text=text, provider=provider,
                                   pieces=pieces, overhead=overhead)


@dataclass
class Outcome:
    """Each block's fate after steps 5-10, per block position (what the next run compares with).

    ``status`` (``kept`` / ``excluded``), ``reason``, ``detail`` (the explanation, or ``None``),
    ``fits`` (fit windows), ``explanations`` (text → explanation, for the next run's reuse).
    """

    status: list[str]
    reason: list[str]
    detail: list[Explanation | None]
    fits: list[int | None]
    explanations: dict[str, Explanation]


@dataclass
class RunState:
    """What one preview has worked out so far; each step of :func:`engine.pipeline.prepare` fills its part.

    Token figures are in tokens of ``profile``. ``status`` maps a block id to its fate
    ``(status, reason)`` (block path); ``ordered`` is every block in prompt order (strategy- and
    interceptor-made ones included), ``final_blocks`` the ones sent. ``columns`` and what follows
    it are set on the column path (:mod:`engine.columnar`); ``base`` is the remembered run a warm
    run patches (dropped when the run is done). A chat from a SillyTavern folder sets
    ``sillytavern`` (step 1), ``template_inputs`` and ``template`` (step 3: SillyTavern's
    ``Generate`` as the assembly template, whose counts and fates are final) and no block field.
    The preview's header (:func:`engine.report.report_preview`) reads ``strategy``, ``tokenizer``,
    ``limit`` … ``safety``, ``prompt_tokens``, ``overhead``, ``warnings``, ``error``, ``rows``,
    ``messages``, ``send_tools``, ``diagnostics``, ``strategy_info``, ``fit_method``, ``api``,
    ``prompt`` and ``stop``, whichever path filled them.
    """

    request: PreviewRequest
    reg: Registries
    warnings: list[str] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    # 1. model
    profile: TokenizerProfile = field(init=False)
    limit: int = field(init=False)
    strategy: str = field(init=False)  # the name the preview reports ("sillytavern": SillyTavern's own fill)
    sillytavern: SillyTavernLimits | None = None  # a SillyTavern chat: its steps 1–2 (set in step 1)
    speaker: Speaker | None = None  # a SillyTavern group chat: its next speaker
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
    timed_effects: dict[str, Any] | None = None  # chat_metadata["timedWorldInfo"] after this activation
    template_inputs: SillyTavernInputs = field(init=False)  # a SillyTavern chat: what steps 1–2 hand its template
    template: AssembledPrompt | None = None  # a SillyTavern chat: its template's prompt (counts and fates final)
    columnar: bool = False
    context: tuple[object, ...] = ()
    base: RunState | None = None
    position_of: dict[int, int] = field(default_factory=dict)
    flagged: list[int] = field(default_factory=list)
    edited: list[int] = field(default_factory=list)
    # 4. counts
    tokenizer: TokenizerInfo = field(init=False)  # the preview's tokenizer (profile, approximate, version)
    tokens: dict[str, int] = field(init=False)
    shift_tokens: dict[str, int] = field(init=False)
    count: Callable[[Block], int] = field(init=False)
    approximate: bool = field(init=False)
    safety: int = field(init=False)
    shift_budget: int = field(init=False)
    sendable: list[Block] = field(init=False)
    columns: RunColumns = field(init=False)
    send: BlockColumns = field(init=False)  # the sendable blocks' columns (``columns.cols`` when every block is)
    sendable_at: list[int] = field(init=False)  # their block positions
    group_warnings: list[str] = field(init=False)
    # 5–6. strategy and host checks
    groups: ToolGroups = field(init=False)
    group_of: dict[str, str] = field(init=False)
    result: ShiftResult | None = field(init=False)
    column_shift: ColumnShift = field(init=False)
    strategy_problems: list[str] = field(init=False)
    honor_manual: bool = field(init=False)
    status: dict[str, tuple[str, str]] = field(init=False)
    truncated: dict[str, TruncatedBlock] = field(init=False)
    ordered: list[Block] = field(init=False)
    final_blocks: list[Block] = field(init=False)
    kept_at: list[int] = field(init=False)
    fates: tuple[list[str], list[str]] = field(init=False)  # per block: status, reason (column path)
    outcome: Outcome = field(init=False)
    strategy_info: dict[str, Any] = field(default_factory=dict)  # the strategy's own report (ShiftResult.info)
    fit_method: str = "exact"  # how the fit windows were computed (ContextPreview.fit_method)
    # 7. interceptors
    interceptor_diags: list[str] = field(default_factory=list)
    intercepted: bool = False
    # 8. recount
    messages: list[dict[str, Any]] = field(init=False)
    send_tools: list[dict[str, Any]] = field(init=False)
    final: PromptCount = field(init=False)
    template_tokens: dict[str, int] = field(init=False)
    prompt_tokens: int = field(init=False)
    overhead: int = field(init=False)  # prompt tokens no block owns
    api: Literal["chat_completion", "text_completion"] = "chat_completion"
    prompt: str | None = None  # Text Completion: the prompt string
    stop: list[str] = field(default_factory=list)  # Text Completion: the stop strings
    # 9. budget
    error: PreviewError | None = None
    # 10. report
    rows: list[PreviewBlock] = field(init=False)
    lorebook_trace: list[TraceRecord] = field(default_factory=list)
    preview: ContextPreview = field(init=False)

    @property
    def shift(self) -> ShiftResult:
        """The strategy's result after the host checks (step 6 on, block path)."""
        assert self.result is not None
        return self.result


__all__ = ["Outcome", "PreparedPrompt", "RunColumns", "RunState", "block_text"]
