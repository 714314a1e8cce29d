"""The typed state of one pipeline run: what each of the ten steps reads and writes (issue 29 item 2).

:class:`RunState` is filled step by step by :func:`engine.pipeline.prepare`. Besides the block
objects it carries the run's figures as columns (:class:`RunColumns` around shifting's
:class:`~engine.shifting.BlockColumns`: one list per field, one entry per assembled block in prompt order), which the built-in ``truncate`` / ``manual``
strategies shift over (:mod:`engine.columnar`). A cold run's step 3 hands step 4 the columns no
count changes (:class:`AssemblyColumns`, made while its own thread counts the chat) and step 4
puts the counts in (:meth:`RunColumns.counted`). A warm run (:mod:`engine.incremental` decides
when one applies) starts from the remembered run's state: step 3 copies the few blocks whose
message changed, step 4 patches the columns (:meth:`RunColumns.patched`: only the new texts are
counted), and step 10 reuses every row that did not change (:mod:`engine.rows`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, islice, repeat
from operator import add, and_, attrgetter, is_not
from typing import Any, Literal

from .assembly.st_group import Speaker
from .assembly.st_types import AssembledPrompt, SillyTavernInputs
from .incremental import Snapshot
from .lorebook.models import ActivationResult
from .patched import PatchedList
from .registries import Registries
from .resolve import LorebookPlan, SillyTavernLimits
from .schema.blocks import Block, ShiftResult, TruncatedBlock
from .schema.messages import ChatMessage
from .schema.preview import (
    ContextPreview,
    FitWindows,
    PreviewBlock,
    PreviewError,
    ReasonDetails,
    RowChanges,
    TokenizerInfo,
)
from .schema.request import PreviewRequest
from .schema.trace import TraceRecord
from .shifting import BlockColumns, ColumnShift, ToolGroups, ToolLayout
from .shifting.columns import Array, arrays_of, with_arrays
from .tokenizers import TokenizerProfile
from .tokenizers.accounting import TOKENS_PER_MESSAGE, count_tools_tokens, message_overhead, message_texts
from .tokenizers.templates.base import PromptCount

#: A provider message (OpenAI chat shape).
ProviderMessage = dict[str, Any]


def _unplain_positions(messages: Sequence[ChatMessage | None], roles: Sequence[str | None],
                       contents: Sequence[Any]) -> list[int]:
    """Positions of the blocks that are not a plain text message, ascending (one C-level pass per field).

    Plain: OpenAI shape ``{"role", "content"}``, 3 tokens of framing (a message with text
    content and no name, tool calls, tool-result role, legacy function call or extra fields).
    """
    every = range(len(messages))
    # no message (the tools block) has no text content either
    odd = {*compress(every, map(is_not, map(type, contents), repeat(str))),
           *compress(every, map(_RESULT_ROLES.__contains__, roles))}
    # one pass per field (a pass of a three-name attrgetter and ``any`` costs three times as much)
    for name in ("name", "tool_calls", "__pydantic_extra__"):
        odd.update(compress(every, map(getattr, messages, repeat(name), repeat(None))))
    return sorted(odd)


_MESSAGE, _REASON = attrgetter("message"), attrgetter("reason")
_PINNED, _MANUAL = attrgetter("pinned"), attrgetter("manual_excluded")
_RESULT_ROLES = frozenset(("tool", "function"))


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

    ``messages`` is made on its first read: plain, changeable copies of the run's message dicts
    (``sent``: on the column path the read-only :class:`~engine.schema.preview.SentMessage` dicts
    that ``preview.messages`` and the next warm run share), so that a caller changing them
    reaches neither the preview nor the next run. A preview that is only shown (a toggle in the
    app) never pays for the copies.
    """

    preview: ContextPreview
    #: the run's provider messages, as the run holds them: read ``messages`` instead
    sent: Sequence[dict[str, Any]] = field(repr=False)
    tools: list[dict[str, Any]]
    profile: TokenizerProfile
    budget_ok: bool
    interceptor_diagnostics: list[str] = field(default_factory=list)
    #: SillyTavern ``chat_metadata["timedWorldInfo"]`` after this activation (sticky/cooldown
    #: started by it); ``None`` without lorebooks. Stored after a completed generation only.
    timed_effects: dict[str, Any] | None = None

    @cached_property
    def messages(self) -> list[dict[str, Any]]:
        """The final provider messages: this prompt's own shallow copies of ``sent``, made on the first read."""
        return list(map(dict.copy, self.sent))


@dataclass(frozen=True)
class AssemblyColumns:
    """Step 3's columns: every figure of the assembled blocks that no token count depends on (prompt order).

    What a cold run's step 3 hands to step 4 on the column path, made while its own thread counts
    the chat's texts (:func:`engine.pipeline._read_assembly`); step 4 puts the counts in
    (:meth:`RunColumns.counted`). The fields :class:`RunColumns` has mean the same here; ``cols``
    are shifting's columns and their arrays with every token ``0`` (not counted yet). Besides: ``blocks`` (the tools
    block's schemas are counted from it), per block the content and role a plain text message
    spends tokens on (``counted`` / ``counted_roles``, ``""`` for the others) and ``odd``, the
    positions of the others (tool calls and results, names, content parts, the tools block),
    ascending, with their pieces (``odd_pieces``). Read-only.
    """

    blocks: Sequence[Block]
    cols: BlockColumns
    kept_reason: Sequence[str]
    text: list[str]
    provider: list[ProviderMessage | None]
    pieces: list[Sequence[str]]
    overhead: list[int]
    listy: list[bool]
    counted: list[str]
    counted_roles: list[str]
    odd: list[int]
    #: the pieces of the blocks at ``odd`` one after another (``pieces[i]`` for ``i`` in ``odd``)
    odd_pieces: list[str]
    bare: tuple[int, ...]
    listed: tuple[int, ...]
    kept_reasons: frozenset[str]

    @classmethod
    def read(cls, blocks: Sequence[Block], layout: ToolLayout) -> AssemblyColumns:
        """The count-free columns of ``blocks`` (``layout``: their tool groups, in block positions).

        Every column is a C-level pass over the blocks; only the blocks that are not a plain text
        message (tool calls and results, names, content parts, the tools block) are read one by one.
        """
        n = len(blocks)
        messages = list(map(_MESSAGE, blocks))
        roles = list(map(getattr, messages, repeat("role"), repeat(None)))
        contents = list(map(getattr, messages, repeat("content"), repeat(None)))
        # a plain text message is sent as {"role", "content"} with 3 tokens of framing; the few
        # others (tool calls and results, names, content parts, the tools block) one by one
        provider: list[ProviderMessage | None] = [{"role": r, "content": c} for r, c in zip(roles, contents)]
        pieces: list[Sequence[str]] = list(zip(roles, contents))  # type: ignore[arg-type]  # plain: both str
        text: list[str] = contents  # type: ignore[assignment]  # plain: the content; the others set below
        counted: list[str] = list(contents)  # type: ignore[arg-type]  # what a plain message spends tokens on
        counted_roles: list[str] = list(roles)  # type: ignore[arg-type]
        overhead, listy = [TOKENS_PER_MESSAGE] * n, [False] * n
        odd = _unplain_positions(messages, roles, contents)
        for i in odd:
            m = messages[i]
            p = provider[i] = m.to_provider() if m is not None else None
            pieces[i] = message_texts(p) if p is not None else ()
            overhead[i] = message_overhead(p) if p is not None else 0
            listy[i] = p is not None and isinstance(p.get("content"), list)
            text[i] = block_text(blocks[i])
            counted[i] = counted_roles[i] = ""
        # the flag arrays now; the token array (zeros until counted) is replaced in step 4
        cols = with_arrays(BlockColumns.from_blocks(blocks, [0] * n, layout))
        kept_reason = list(map(_REASON, blocks))
        protected = cols.protected
        for i in compress(range(n), cols.pinned):
            if not protected[i]:
                kept_reason[i] = "PINNED"
        return cls(blocks, cols, kept_reason, text, provider, pieces, overhead, listy, counted, counted_roles, odd,
                   list(chain.from_iterable(map(pieces.__getitem__, odd))), tuple(i for i in odd if provider[i] is None),
                   tuple(i for i in odd if listy[i]), frozenset(kept_reason))

    def message_positions(self) -> dict[int, int]:
        """The block position of each chat message with a block of its own (source ``message:<i>``)."""
        mindex = self.cols.message_index
        own = map(and_, map(is_not, mindex, repeat(None)), map(str.startswith, self.cols.sources, repeat("message:")))
        return dict(compress(zip(mindex, range(len(mindex))), own))  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunColumns:
    """The run's figures per assembled block (prompt order): shifting's columns plus what the recount and rows read.

    ``cols`` are the columns every shifting rule reads (:class:`engine.shifting.BlockColumns`;
    its ``tokens`` are OpenAI chat-accounting counts, framing included). Per block besides:
    ``provider`` its provider message (``None``: the tools block), ``pieces`` the texts it spends
    tokens on and ``overhead`` its framing tokens, ``kept_reason`` the reason a kept block shows
    (``PINNED`` for a pinned block that is not protected otherwise), ``text`` its shown text,
    ``listy`` whether its content is a list of parts. Read-only: a warm run makes new columns.
    A cold run makes them from step 3's :class:`AssemblyColumns` (:meth:`counted`).
    """

    cols: BlockColumns
    kept_reason: Sequence[str]
    text: list[str]
    provider: list[ProviderMessage | None]
    pieces: list[Sequence[str]]
    overhead: list[int]
    listy: list[bool]
    #: positions of the blocks without a provider message (the tools block)
    bare: tuple[int, ...] = ()
    #: positions of the blocks whose content is a list of parts
    listed: tuple[int, ...] = ()
    #: every value ``kept_reason`` holds (a superset after a warm run's patch)
    kept_reasons: frozenset[str] = frozenset()

    @classmethod
    def of(cls, blocks: Sequence[Block], profile: TokenizerProfile, layout: ToolLayout) -> RunColumns:
        """The columns of ``blocks``, counted with ``profile`` (OpenAI accounting).

        :meth:`AssemblyColumns.read` then :meth:`counted`: what a run's steps 3 and 4 do in turn.

        Parameters
        ----------
        blocks:
            The assembled blocks, in prompt order.
        profile:
            The run's tokenizer profile (no chat template).
        layout:
            The blocks' tool groups, in block positions.
        """
        return cls.counted(AssemblyColumns.read(blocks, layout), profile)

    @classmethod
    def counted(cls, read: AssemblyColumns, profile: TokenizerProfile) -> RunColumns:
        """Step 4: ``read``'s columns with each block's tokens (OpenAI accounting, framing included).

        The plain messages' contents are counted in one batch (each new text encoded once: a
        cold run's step 3 counted the chat's texts into the profile's cache), each role once;
        then the few other blocks' pieces in one batch, and the tools block's schemas.

        Parameters
        ----------
        read:
            Step 3's columns of the blocks.
        profile:
            The run's tokenizer profile (no chat template).
        """
        odd, pieces, overhead, provider = read.odd, read.pieces, read.overhead, read.provider
        roles_once = list(dict.fromkeys(read.counted_roles))
        role_tokens = dict(zip(roles_once, profile.count_many(roles_once)))
        tokens = list(map(add, map(add, profile.count_many(read.counted),
                                   map(role_tokens.__getitem__, read.counted_roles)), overhead))
        odd_counts = iter(profile.count_many(read.odd_pieces))
        for i in odd:
            if provider[i] is None:
                tokens[i] = count_tools_tokens(profile, read.blocks[i].tools or [])
            else:
                tokens[i] = sum(islice(odd_counts, len(pieces[i]))) + overhead[i]
        cols = dataclasses.replace(read.cols, tokens=tokens)
        cols = dataclasses.replace(cols, arrays=arrays_of(read.cols).recounted(cols))
        return cls(cols, read.kept_reason, read.text, provider, pieces, overhead, read.listy, read.bare, read.listed,
                   read.kept_reasons)

    def patched(self, blocks: Sequence[Block], flagged: Sequence[int], edited: Sequence[int],
                profile: TokenizerProfile) -> RunColumns:
        """These columns for ``blocks``, where only the blocks at ``flagged`` / ``edited`` are new.

        ``flagged``: positions whose pin / exclude flags changed; ``edited``: positions whose
        (plain text) message changed, counted again in one batch through the per-text cache.
        Unchanged lists are shared with this instance, never mutated.
        """
        changed = sorted({*flagged, *edited})
        moved = list(map(blocks.__getitem__, changed))
        # the base's columns with the changed positions replaced (no copy of every entry)
        pinned = PatchedList.of(self.cols.pinned, zip(changed, map(_PINNED, moved)))
        manual = PatchedList.of(self.cols.manual, zip(changed, map(_MANUAL, moved)))
        kept_reason = PatchedList.of(self.kept_reason, zip(changed, (
            "PINNED" if b.pinned and not b.protected else b.reason for b in moved)))
        kept_reasons = self.kept_reasons.union(map(kept_reason.__getitem__, changed))
        if not edited:
            return RunColumns(self.cols.patched(changed, pinned=pinned, manual=manual), kept_reason, self.text,
                              self.provider, self.pieces, self.overhead, self.listy, self.bare, self.listed, kept_reasons)
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
        cols = self.cols.patched(changed, pinned=pinned, manual=manual, tokens=tokens)
        return dataclasses.replace(self, cols=cols, kept_reason=kept_reason,
                                   kept_reasons=kept_reasons, text=text, provider=provider, pieces=pieces,
                                   overhead=overhead)


@dataclass
class Outcome:
    """Each block's fate after steps 5-10, per block position (what the next run compares with).

    ``status`` (``kept`` / ``excluded``), ``reason``, ``detail`` (the explanation, or ``None``),
    ``fits`` (fit windows).
    ``moved``: on a warm run, the positions whose status or reason may differ from the base
    run's (every other position's are the base's values); ``None``: not known (a cold run, or
    too many moved).
    """

    status: Sequence[str]
    reason: Sequence[str]
    detail: ReasonDetails
    fits: FitWindows
    moved: list[int] | None = None


#: A run's figures before step 10 makes them: none (read-only, so every run shares these).
_NO_FITS, _NO_DETAILS = FitWindows.none(0), ReasonDetails.none(0)


@dataclass
class RunState:
    """What one preview has worked out so far; each step of :func:`engine.pipeline.prepare` fills its part.

    Token figures are in tokens of ``profile``. ``status`` maps a block id to its fate
    ``(status, reason)`` (block path); ``ordered`` is every block in prompt order (strategy- and
    interceptor-made ones included), ``final_blocks`` the ones sent. ``columns`` and what follows
    it are set on the column path (:mod:`engine.columnar`); ``base`` is the remembered run a warm
    run patches (dropped when the run is done); a remembered run has no ``request`` (released when
    it is remembered: the caller's request, with its list of every message, is the caller's to
    free, and the next run compares messages through the remembered snapshot). A chat from a SillyTavern folder sets
    ``sillytavern`` (step 1), ``template_inputs`` and ``template`` (step 3: SillyTavern's
    ``Generate`` as the assembly template, whose counts and fates are final) and no block field.
    The fields a rule both the block and the column path apply fills (the sendable part and its
    tool groups, ``approximate``, ``safety``, ``shift_budget``, ``send_tools``, ``error``) are set
    by that rule's one function (:mod:`engine.step_rules`).
    The preview's header (:func:`engine.report.report_preview`) reads ``strategy``, ``tokenizer``,
    ``limit`` … ``safety``, ``prompt_tokens``, ``overhead``, ``warnings``, ``error``, ``rows``,
    ``messages``, ``send_tools``, ``diagnostics``, ``strategy_info``, ``fit_method``, ``api``,
    ``prompt`` and ``stop``, whichever path filled them.
    """

    #: the caller's request; a remembered run no longer has one (``engine.pipeline._remember``)
    request: PreviewRequest = field(repr=False)
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
    blocks: Sequence[Block] = field(init=False)  # a warm run: its base's with the changed ones replaced (PatchedList)
    pre_excluded: dict[str, str] = field(init=False)
    assembled: tuple[list[str], list[str]] = field(init=False)  # warnings, diagnostics after step 3
    timed_effects: dict[str, Any] | None = None  # chat_metadata["timedWorldInfo"] after this activation
    template_inputs: SillyTavernInputs = field(init=False)  # a SillyTavern chat: what steps 1–2 hand its template
    template: AssembledPrompt | None = None  # a SillyTavern chat: its template's prompt (counts and fates final)
    columnar: bool = False
    context: tuple[object, ...] = ()
    base: RunState | None = None
    position_of: dict[int, int] = field(default_factory=dict)
    message_snapshot: Snapshot | None = None  # a warm run: its messages as the next run compares them
    flagged: list[int] = field(default_factory=list)
    edited: list[int] = field(default_factory=list)
    # a cold run on the column path: what step 3 hands on, made beside the count (engine.pipeline._read_assembly)
    # the blocks' count-free columns (engine.columnar.read_columns): steps 3-4 of a cold column-path run, then dropped
    assembly: AssemblyColumns | None = None
    send_layout: ToolLayout = field(init=False)  # the sendable blocks' tool groups, in sendable positions
    row_drafts: list[PreviewBlock] | None = None  # every row but its tokens and fate (engine.rows.draft_rows)
    remembers: bool = False  # whether the next run may start from this one (no time-dependent macro)
    # 4. counts
    tokenizer: TokenizerInfo = field(init=False)  # the preview's tokenizer (profile, approximate, version)
    tokens: dict[str, int] = field(init=False)
    shift_tokens: dict[str, int] = field(init=False)
    count: Callable[[Block], int] = field(init=False)
    approximate: bool = field(init=False)
    safety: int = field(init=False)
    shift_budget: int = field(init=False)
    # the sendable part (engine.step_rules.split_sendable; a warm run keeps its base's positions and groups)
    sendable: list[Block] = field(init=False)  # not pre-excluded (set by a cold run)
    sendable_at: list[int] = field(init=False)  # their block positions
    groups: ToolGroups = field(init=False)  # their tool groups (set by a cold run)
    group_warnings: list[str] = field(init=False)
    columns: RunColumns = field(init=False)
    send: BlockColumns = field(init=False)  # the sendable blocks' columns (``columns.cols`` when every block is)
    # 5–6. strategy and host checks
    group_of: dict[str, str] = field(init=False)
    result: ShiftResult | None = field(init=False)
    column_shift: ColumnShift = field(init=False)
    strategy_problems: list[str] = field(init=False)
    # columns: the strategy drops hand-excluded messages first (built-in ``manual``); blocks: the host check
    # holds the strategy to the writer's exclusions (engine.resolve.honours_exclusions)
    honor_manual: bool = field(init=False)
    status: dict[str, tuple[str, str]] = field(init=False)
    truncated: dict[str, TruncatedBlock] = field(init=False)
    ordered: list[Block] = field(init=False)
    final_blocks: list[Block] = field(init=False)
    kept_at: Array = field(init=False)  # the kept block positions, ascending (read-only int64; column path)
    fates: tuple[Sequence[str], Sequence[str]] = field(init=False)  # per block: status, reason (column path)
    fate_codes: Array | None = None  # per block: shifting's reason code, 0 kept (column path: engine.columnar)
    moved: list[int] | None = None  # a warm run: the positions whose status or reason may have moved
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
    # per row: the chat-wide figures (ContextPreview.fit_windows / reason_details; empty: none computed)
    fit_windows: FitWindows = field(default_factory=lambda: _NO_FITS)  # (read-only: shared)
    reason_details: ReasonDetails = field(default_factory=lambda: _NO_DETAILS)
    #: A warm run's change set from the base run's preview: ``(its serial, id(rows), changes)`` (column path).
    row_changes: tuple[int, int, RowChanges] | None = None
    lorebook_trace: list[TraceRecord] = field(default_factory=list)
    #: each lorebook entry source's activation record as a JSON dict (``None``: not made yet; block traces)
    trace_by_source: dict[str, dict[str, Any]] | None = None
    preview: ContextPreview = field(init=False)

    @property
    def shift(self) -> ShiftResult:
        """The strategy's result after the host checks (step 6 on, block path)."""
        assert self.result is not None
        return self.result


__all__ = ["AssemblyColumns", "Outcome", "PreparedPrompt", "RunColumns", "RunState", "block_text"]
