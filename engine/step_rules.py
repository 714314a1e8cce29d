"""The rules of the pipeline's steps 4, 8, 9 and 10 that the block and column paths share, each written once.

:func:`engine.pipeline.prepare` runs its ten named steps over one run state
(:class:`~engine.runstate.RunState`); the block objects (:mod:`engine.pipeline`: a plugin strategy,
a chat template, an interceptor) and the columns (:mod:`engine.columnar`: the built-in
``truncate`` / ``manual``) hold their figures differently, but where a rule is the same it is
this module's one function, which both call:

* step 4: which blocks may be sent and their tool groups, with the warnings about those groups
  (:func:`split_sendable`, :func:`tool_group_warnings`); whether the counts are estimates
  (:func:`estimated_counts`); the safety margin and the budget the strategy gets
  (:func:`strategy_budget`); whether the strategy drops hand-excluded messages first
  (:func:`drops_excluded_first`: the shift over columns and the fit map ask);
* step 8: whether the tool schemas are sent (:func:`tools_sent`) and the warnings about content
  parts counted by estimate or not known (:func:`content_warnings`);
* step 9: ``TOKEN_BUDGET_EXCEEDED`` and its message (:func:`budget_error`);
* step 10: a lorebook block's trace with its entry's activation record (:func:`with_entry_records`);
  the strategy's budget at each context window the fit map tries (:func:`fit_budget`).

A chat from a SillyTavern folder has its own rules for these (its template's counts and fates
are final: :mod:`engine.assembly.st_result`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, repeat
from operator import eq
from typing import Any

from .runstate import RunState
from .schema.blocks import Block
from .schema.preview import PreviewError
from .shifting.fitmap import pipeline_shift_budget
from .shifting.groups import ToolGroups, find_tool_groups
from .shifting.registry import manual_strategy
from .tokenizers import TokenizerProfile, content_part_warnings


def split_sendable(run: RunState) -> list[Block]:
    """Step 4: the blocks that may be sent, their positions and tool groups, and the groups' warnings.

    (A cold run on the column path makes them at the end of step 3, beside the count:
    :func:`engine.columnar.read_columns`.)

    A block assembly left out (``run.pre_excluded``: hidden, out of a lorebook's budget, ...) is
    shown in the preview and never sent. Sets ``run.sendable`` (a new list: a plugin strategy
    gets it and may reorder it), ``run.sendable_at`` (their positions in ``run.blocks``),
    ``run.groups`` (:func:`engine.shifting.find_tool_groups` over them) and
    ``run.group_warnings`` (:func:`tool_group_warnings`); the caller adds those to the run's
    warnings.

    Returns
    -------
    list[Block]
        ``run.sendable``.
    """
    blocks, pre = run.blocks, run.pre_excluded
    if pre:
        at = [i for i, b in enumerate(blocks) if b.id not in pre]
        sendable = [blocks[i] for i in at]
    else:
        at, sendable = list(range(len(blocks))), list(blocks)
    run.sendable, run.sendable_at = sendable, at
    run.groups = groups = find_tool_groups(sendable)
    run.group_warnings = tool_group_warnings(sendable, groups)
    return sendable


def tool_group_warnings(blocks: Sequence[Block], groups: ToolGroups) -> list[str]:
    """The run's warnings about ``blocks``' tool groups: each incomplete one (not hidden), each reused call id.

    An incomplete group names its call ids and messages (``TOOL_PAIR_INCOMPLETE``: a provider
    rejects a call without its results); a call id used by more than one call is paired with
    the nearest earlier call carrying it.
    """
    out: list[str] = []
    for gid, what in groups.incomplete.items():
        members = [b for b, g in zip(blocks, groups.group_of) if g == gid]
        if any(b.hidden for b in members):
            continue  # the writer hid it: HIDDEN says why it is not sent
        where = ", ".join(str(b.message_index) if b.message_index is not None else b.id for b in members)
        out.append(f"incomplete tool calls ({'; '.join(what)}): messages {where} are not sent "
                   "(TOOL_PAIR_INCOMPLETE; a provider rejects a call without its results)")
    for cid in sorted(groups.reused_ids):
        out.append(f"tool-call id {cid!r} is used by more than one call; each result is paired "
                   "with the nearest earlier call carrying it")
    return out


def estimated_counts(profile: TokenizerProfile, blocks: Iterable[Block]) -> bool:
    """Step 4: whether the run's counts are estimates: an approximate profile, or an audio part in ``blocks``.

    Audio parts (``input_audio``) are counted by estimate
    (:func:`engine.tokenizers.accounting.audio_part_tokens`). Only a message whose content is a
    list of parts can have one, so a caller may pass just those blocks.
    """
    return profile.approximate or any(
        b.message is not None and isinstance(b.message.content, list) and any(
            isinstance(p, dict) and p.get("type") == "input_audio" for p in b.message.content)
        for b in blocks)


def strategy_budget(run: RunState) -> None:
    """Step 4: the safety margin and the budget the strategy gets (tokens of ``run.profile``).

    With estimated counts (``run.approximate``) ``safety_margin_percent`` of the budget is held
    back (SPEC §1), rounded up; the strategy gets ``budget − safety − priming`` (``run.priming``:
    the prompt's tokens no block owns). Sets ``run.safety`` and ``run.shift_budget``.
    """
    percent = run.request.settings.safety_margin_percent
    run.safety = math.ceil(run.budget * percent / 100) if run.approximate else 0
    run.shift_budget = run.budget - run.safety - run.priming


def drops_excluded_first(run: RunState) -> bool:
    """Whether the run's strategy is the built-in ``manual``, which drops the hand-excluded messages first.

    The shift over columns and the fit map (at which window each message would fit) follow it.
    Not :func:`engine.resolve.honours_exclusions`, which says whether a strategy may send a
    hand-excluded message at all (the host check holds a plugin strategy to it).
    """
    return run.reg.strategies.get(run.request.settings.strategy).fn is manual_strategy


def tools_sent(run: RunState, kept_kinds: Iterable[str]) -> list[dict[str, Any]]:
    """Step 8: the tool schemas sent with the prompt: the run's tools when the tools block is kept, else none.

    ``kept_kinds``: the kinds (:class:`~engine.schema.blocks.BlockKind` values) of the blocks sent.
    """
    return run.tools if "tools" in kept_kinds else []


def content_warnings(run: RunState) -> None:
    """Step 8: warn about the sent messages' content parts counted by estimate (audio) or not known.

    :func:`engine.tokenizers.content_part_warnings` over ``run.messages`` (indexes as sent),
    added to the run's warnings.
    """
    run.warnings.extend(content_part_warnings(run.messages))


def budget_error(run: RunState, error: str | None, protected_tokens: int) -> PreviewError | None:
    """Step 9: ``TOKEN_BUDGET_EXCEEDED`` when the protected blocks alone exceed the budget, else ``None``.

    Parameters
    ----------
    run:
        The run after step 8: ``budget``, ``safety``, ``priming``, ``limit``, ``reserve``,
        ``blocks`` / ``sendable_at`` (step 4) and ``prompt_tokens`` are read.
    error:
        The strategy's ``error`` (``ShiftResult`` or ``ColumnShift``): set when even the
        protected blocks do not fit.
    protected_tokens:
        The strategy's count of the protected (and pinned) blocks, without the priming tokens.

    Returns
    -------
    PreviewError | None
        The error with the protected tokens (priming included), the budget ``budget − safety``
        and the ids of the sendable protected or pinned blocks.

    Raises
    ------
    AssertionError
        Without an error, when the final prompt exceeds the budget (a bug in shifting).
    """
    budget, safety = run.budget - run.safety, run.safety
    if not error:
        if run.prompt_tokens > budget:  # pragma: no cover - would be a bug in shifting
            raise AssertionError(f"final prompt {run.prompt_tokens} tokens exceeds budget {budget}")
        return None
    protected, blocks = protected_tokens + run.priming, run.blocks
    return PreviewError(
        code="TOKEN_BUDGET_EXCEEDED",
        message=(f"the protected blocks alone need {protected} tokens but the budget is {budget} tokens "
                 f"(context {run.limit} − reply reserve {run.reserve}"
                 f"{f' − safety margin {safety}' if safety else ''})"),
        details={"protected_tokens": protected, "budget": budget,
                 "protected_blocks": [blocks[i].id for i in run.sendable_at if blocks[i].protected or blocks[i].pinned]},
    )


def with_entry_records(traces: list[dict[str, Any] | None], kinds: Sequence[str], sources: Sequence[str],
                       records: dict[str, dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Step 10: each lorebook block's trace with its entry's activation record merged in (the record wins).

    Parameters
    ----------
    traces:
        The blocks' own traces (``Block.trace``), one per block; replaced in place where a record is merged.
    kinds, sources:
        The blocks' kinds (:class:`~engine.schema.blocks.BlockKind` values) and sources, parallel to ``traces``.
    records:
        The activation record of each entry source (``lorebook:<book>:<uid>``) as a JSON dict.

    Returns
    -------
    list[dict[str, Any] | None]
        ``traces`` (the same list): a new dict at each lorebook block whose source has a record.
    """
    if records:
        for k in compress(range(len(traces)), map(eq, kinds, repeat("lorebook"))):
            record = records.get(sources[k])
            if record is not None:
                traces[k] = {**(traces[k] or {}), **record}
    return traces


def fit_budget(run: RunState) -> Callable[[int], int]:
    """Step 10: ``window → the strategy's budget`` at a context window of that many tokens (the fit map's question).

    The run's reply reserve rule, safety margin percent and priming tokens at another window
    (:func:`engine.shifting.fitmap.pipeline_shift_budget`); a reserve given in tokens is the same
    at every window. The margin applies under an approximate profile only: unlike
    :func:`strategy_budget`, an audio part's estimate does not add one (the previews' fit windows
    are recorded that way).
    """
    settings = run.request.settings
    fixed = settings.reply_reserve if isinstance(settings.reply_reserve, int) else None
    return pipeline_shift_budget(settings.resolve_reply_reserve, settings.safety_margin_percent,
                                 run.profile.approximate, run.priming, fixed_reserve=fixed)


__all__ = ["budget_error", "content_warnings", "drops_excluded_first", "estimated_counts", "fit_budget", "split_sendable",
           "strategy_budget", "tool_group_warnings", "tools_sent", "with_entry_records"]
