"""Steps 4-10 of the pipeline over the run's columns (the built-in ``truncate`` / ``manual`` strategies).

:func:`engine.pipeline.prepare` runs its ten named steps for every request; a run whose strategy
is built-in ``truncate`` or ``manual``, whose profile uses OpenAI chat accounting and which no
interceptor sees, does steps 4-10 over the columns of :class:`~engine.runstate.RunState`
(:class:`~engine.runstate.RunColumns`) with the one implementation of each rule over columns
(:func:`engine.shifting.shift_columns`, :func:`~engine.shifting.explain_columns`,
:func:`~engine.shifting.fit_columns`). A warm run (one that starts from a remembered run,
:mod:`engine.incremental`) patches the remembered columns at the changed positions only, keeps
the remembered tool groups, counts only the edited texts and reuses every unchanged row
(:mod:`engine.rows`). The rules the block path applies too (the sendable part and its tool
groups' warnings, estimated counts and the safety margin, whether the strategy drops hand
exclusions first, the tools sent, content-part warnings, the budget error) are
:mod:`engine.step_rules`'s; the preview around the rows is the one every
path has (:func:`engine.report.report_preview`).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from itertools import chain, compress, repeat
from operator import is_, is_not, setitem
from typing import Any

from .registries import Registries
from .rows import PriorRows, RowInputs, build_rows
from .runstate import Outcome, RunColumns, RunState
from .shifting import ToolLayout, explain_columns, fit_columns, shift_columns
from .shifting.registry import manual_strategy, truncate_strategy
from .step_rules import (
    content_warnings,
    drops_excluded_first,
    estimated_counts,
    fit_budget,
    split_sendable,
    strategy_budget,
    tools_sent,
)
from .tokenizers import REPLY_PRIMING_TOKENS, TokenizerProfile, count_tools_tokens

_KEPT = "kept"
_EXCLUDED = "excluded"


def applies(reg: Registries, strategy: str, profile: TokenizerProfile) -> bool:
    """Whether a run does steps 4-10 over columns (built-in ``truncate``/``manual``, OpenAI accounting, no interceptor)."""
    return (profile.chat is None and not reg.interceptors.names()
            and reg.strategies.get(strategy).fn in (truncate_strategy, manual_strategy))


def count_columns(run: RunState) -> None:
    """Step 4: the columns (one batched count of every new text), the sendable part, tool groups, the budget.

    The sendable part, its tool groups and their warnings, whether the counts are estimates and
    the strategy's budget are the rules every path shares (:mod:`engine.step_rules`). A warm run
    keeps its base's sendable positions and tool groups (a toggle or a plain edit changes no tool
    shape) and counts only the edited texts.
    """
    base, blocks, profile = run.base, run.blocks, run.profile
    run.honor_manual = drops_excluded_first(run)
    if base is None:
        split_sendable(run)
        at, s_layout = run.sendable_at, ToolLayout.from_groups(run.groups)
        every = len(at) == len(blocks)
        b_layout = s_layout if every else _block_layout(s_layout, at, len(blocks))
        run.columns = RunColumns.of(blocks, profile, b_layout)
        run.send = run.columns.cols if every else run.columns.cols.take(at, s_layout)
        # only messages with list content can have audio parts
        run.approximate = estimated_counts(profile, compress(blocks, run.columns.listy))
    else:
        run.columns = base.columns.patched(blocks, run.flagged, run.edited, profile)
        run.sendable_at, run.group_warnings, run.approximate = base.sendable_at, base.group_warnings, base.approximate
        run.send = _patched_send(run, base)
    run.priming = REPLY_PRIMING_TOKENS
    strategy_budget(run)
    run.warnings.extend(run.group_warnings)


def _block_layout(s_layout: ToolLayout, at: list[int], n: int) -> ToolLayout:
    """The sendable blocks' tool groups in block positions (groups only: orphans and incomplete ids are the sendable layout's)."""
    group_of: list[str | None] = [None] * n
    for k, i in enumerate(at):
        group_of[i] = s_layout.group_of[k]
    return ToolLayout(group_of, [[at[k] for k in ms] for ms in s_layout.members], list(s_layout.ids))


def _patched_send(run: RunState, base: RunState) -> Any:
    """A warm run's sendable columns: the base's, with the changed positions' flags (and counts) replaced."""
    cols = run.columns.cols
    at = run.sendable_at
    if len(at) == len(cols.ids):
        return cols
    k_of = {i: k for k, i in enumerate(at)}
    pinned, manual = list(base.send.pinned), list(base.send.manual)
    for pos in chain(run.flagged, run.edited):
        k = k_of[pos]
        pinned[k], manual[k] = cols.pinned[pos], cols.manual[pos]
    tokens = [cols.tokens[i] for i in at] if run.edited else base.send.tokens
    return dataclasses.replace(base.send, pinned=pinned, manual=manual, tokens=tokens)


def shift_sendable(run: RunState) -> None:
    """Step 5: the built-in strategy over the sendable columns (:func:`engine.shifting.shift_columns`)."""
    run.column_shift = shift_columns(run.send, run.shift_budget, honor_manual=run.honor_manual)
    run.diagnostics.extend(run.column_shift.diagnostics)


def record_fates(run: RunState) -> tuple[list[str], list[str]]:
    """Step 6: each block's status and reason (pre-excluded ones are shown, never sent); sets ``kept_at``.

    The built-in strategies keep the host's rules by construction: nothing is rejected.
    """
    c, shift, n = run.columns, run.column_shift, len(run.blocks)
    kept_reason = c.kept_reason
    if len(run.sendable_at) == n:
        kept_at = list(compress(range(n), map(is_, shift.reasons, repeat(None))))
        # the kept ones (a minority in a long chat) get their kept reason below: no None is left
        reason: list[str] = list(shift.reasons)  # type: ignore[arg-type]
        deque(map(setitem, repeat(reason), kept_at, map(kept_reason.__getitem__, kept_at)), maxlen=0)
    else:
        pre = run.pre_excluded
        reason = [pre.get(x, "") for x in c.cols.ids]
        kept = [False] * n
        for k, i in enumerate(run.sendable_at):
            r = shift.reasons[k]
            kept[i] = r is None
            reason[i] = kept_reason[i] if r is None else r
        kept_at = list(compress(range(n), kept))
    status = [_EXCLUDED] * n
    deque(map(setitem, repeat(status), kept_at, repeat(_KEPT)), maxlen=0)
    run.kept_at = kept_at
    return status, reason


def recount_columns(run: RunState) -> None:
    """Step 8: the final recount of what is sent, through the per-text count cache."""
    c, kept_at, profile = run.columns, run.kept_at, run.profile
    provider = c.provider
    kept_msg = list(compress(kept_at, map(is_not, map(provider.__getitem__, kept_at), repeat(None))))
    messages = list(map(provider.__getitem__, kept_msg))
    counts = profile.count_many(list(chain.from_iterable(map(c.pieces.__getitem__, kept_msg))))
    # only the tools block carries no message: a kept one makes the two lists' lengths differ
    run.send_tools = tools_sent(run, map(c.cols.kinds.__getitem__, kept_at)) if len(kept_msg) != len(kept_at) else []
    tools_tokens = count_tools_tokens(profile, run.send_tools) if run.send_tools else 0
    run.prompt_tokens = sum(counts) + sum(map(c.overhead.__getitem__, kept_msg)) + run.priming + tools_tokens
    run.messages = messages  # type: ignore[assignment]
    if any(map(c.listy.__getitem__, kept_msg)):  # only list content has parts
        content_warnings(run)


def explain_and_fit(run: RunState, status: list[str], reason: list[str],
                    trace_by_source: dict[str, dict[str, Any]]) -> Outcome:
    """Step 10's figures: each block's explanation and fit window over the columns."""
    c, n = run.columns, len(run.blocks)
    explanations: dict[str, Any] = {}
    previous = run.base.outcome.explanations if run.base is not None else None
    detail = explain_columns(c.cols, status, reason, run.shift_budget, lorebook_traces=trace_by_source,
                             previous=previous, current=explanations)
    fits_s = fit_columns(run.send, fit_budget(run), honor_manual=run.honor_manual)
    if len(run.sendable_at) == n:
        fits = fits_s
    else:
        fits = [None] * n
        for k, i in enumerate(run.sendable_at):
            fits[i] = fits_s[k]
    return Outcome(status, reason, detail, fits, explanations)


def report_columns(run: RunState, trace_by_source: dict[str, dict[str, Any]], outcome: Outcome) -> None:
    """Step 10's rows on the column path (``run.rows``), reusing the base run's unchanged rows.

    The preview around them is :func:`engine.report.report_preview`, as on every path.
    """
    base = run.base
    prior = None
    if base is not None and len(base.rows) == len(run.blocks):
        prior = PriorRows(base.blocks, base.outcome, base.rows, sorted({*run.flagged, *run.edited}))
    run.outcome = outcome
    run.fit_windows, run.reason_details = outcome.fits, outcome.detail
    run.rows, changes = build_rows(RowInputs(run.blocks, run.columns, trace_by_source), outcome, prior)
    if changes is not None and base is not None:
        serial = base.preview._serial
        run.row_changes = (serial, id(run.rows), changes) if serial is not None else None


__all__ = ["applies", "count_columns", "explain_and_fit", "record_fates",
           "recount_columns", "report_columns", "shift_sendable"]
