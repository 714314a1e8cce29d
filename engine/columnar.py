"""Steps 4-10 of the pipeline over the run's columns (the built-in ``truncate`` / ``manual`` strategies).

:func:`engine.pipeline.prepare` runs its ten named steps for every request; a run whose strategy
is built-in ``truncate`` or ``manual``, whose profile uses OpenAI chat accounting and which no
interceptor sees, does steps 4-10 over the columns of :class:`~engine.runstate.RunState`
(:class:`~engine.runstate.BlockColumns`) with the list / numpy forms of shifting, explanations
and the fit map (:mod:`engine.shifting.arrays`). A warm run (one that starts from a remembered
run, :mod:`engine.incremental`) patches the remembered columns and numpy vectors at the changed
positions only, and reuses every unchanged row (:mod:`engine.rows`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from itertools import chain, compress, repeat
from operator import is_, is_not, not_, setitem
from typing import Any

import numpy as np

from .registries import Registries
from .rows import PriorRows, RowInputs, build_rows
from .runstate import BlockColumns, GroupLayout, Outcome, RunState, SendColumns
from .schema._construct import construct
from .schema.blocks import Block
from .schema.preview import ContextPreview, PreviewError, TokenizerInfo
from .shifting.arrays import explain_arrays, fit_arrays, fit_arrays_np, numpy_vectors, shift_arrays, shift_arrays_np
from .shifting.fitmap import TRUNCATE_LIKE, pipeline_shift_budget
from .shifting.groups import ToolGroups, find_tool_groups
from .shifting.registry import manual_strategy, truncate_strategy
from .tokenizers import REPLY_PRIMING_TOKENS, TokenizerProfile, content_part_warnings, count_tools_tokens

_KEPT = "kept"
_EXCLUDED = "excluded"


def applies(reg: Registries, strategy: str, profile: TokenizerProfile) -> bool:
    """Whether a run does steps 4-10 over columns (built-in ``truncate``/``manual``, OpenAI accounting, no interceptor)."""
    return (profile.chat is None and not reg.interceptors.names()
            and reg.strategies.get(strategy).fn in (truncate_strategy, manual_strategy))


def count_columns(run: RunState) -> None:
    """Step 4: the columns (one batched count of every new text), the sendable part, tool groups, the budget.

    A warm run keeps its base's tool groups (a toggle or a plain edit changes no tool shape) and
    counts only the edited texts.
    """
    base, blocks, profile = run.base, run.blocks, run.profile
    run.honor_manual = run.reg.strategies.get(run.request.settings.strategy).fn is manual_strategy
    if base is None:
        run.columns = BlockColumns.of(blocks, profile)
        pre = run.pre_excluded
        positions = [i for i, b in enumerate(blocks) if b.id not in pre] if pre else list(range(len(blocks)))
        run.send = SendColumns.of(run.columns, positions)
        run.layout = _layout([blocks[i] for i in positions], positions, len(blocks))
        # audio parts are estimated; only messages with list content can have them
        run.approximate = profile.approximate or any(
            b.message is not None and isinstance(b.message.content, list) and any(
                isinstance(p, dict) and p.get("type") == "input_audio" for p in b.message.content)
            for b in compress(blocks, run.columns.listy))
    else:
        run.columns = base.columns.patched(blocks, run.flagged, run.edited, profile)
        run.layout, run.approximate = base.layout, base.approximate
        _patch_send(run, base)
    run.priming = REPLY_PRIMING_TOKENS
    run.safety = math.ceil(run.budget * run.request.settings.safety_margin_percent / 100) if run.approximate else 0
    run.shift_budget = run.budget - run.safety - run.priming
    run.warnings.extend(run.layout.warnings)


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


def _layout(sendable: list[Block], positions: list[int], n: int) -> GroupLayout:
    """The tool groups of the sendable blocks as member positions (sendable and block positions)."""
    groups = find_tool_groups(sendable)
    warnings = tool_group_warnings(sendable, groups)
    members: dict[str, list[int]] = {}
    for k, g in enumerate(groups.group_of):
        if g is not None:
            members.setdefault(g, []).append(k)
    b_group_of: list[str | None] = [None] * n
    for k, i in enumerate(positions):
        b_group_of[i] = groups.group_of[k]
    glists = list(members.values())
    return GroupLayout(glists, glists if len(positions) == n else [[positions[k] for k in ms] for ms in glists],
                       list(members), list(groups.group_of), b_group_of, groups.orphans, dict(groups.incomplete),
                       warnings)


def _patch_send(run: RunState, base: RunState) -> None:
    """A warm run's sendable columns and numpy vectors: the base's, changed at the changed positions only."""
    c, bs = run.columns, base.send
    positions = bs.positions
    every = len(positions) == len(c.id)
    send = SendColumns(positions, c.tokens if every else bs.tokens, bs.hidden, c.manual if every else list(bs.manual),
                       list(bs.prot), bs.tier, bs.priority, bs.id, bs.message_index)
    at_of = None if every else {i: k for k, i in enumerate(positions)}
    flipped: list[tuple[int, bool, bool]] = []
    for pos in chain(run.flagged, run.edited):
        k = pos if at_of is None else at_of[pos]
        send.prot[k] = c.protected[pos] or c.pinned[pos]
        send.manual[k] = c.manual[pos]
        flipped.append((k, send.prot[k], send.manual[k]))
    if run.edited:
        send.tokens = c.tokens if every else [c.tokens[i] for i in positions]
    elif base.vectors is not None:  # counts unchanged: the base's vectors with the flags flipped
        vectors = dict(base.vectors)
        vectors["prot"], vectors["manual"] = base.vectors["prot"].copy(), base.vectors["manual"].copy()
        for k, prot, excluded in flipped:
            vectors["prot"][k] = prot
            vectors["manual"][k] = excluded
        run.vectors = vectors
    run.send = send


def shift_columns(run: RunState) -> None:
    """Step 5: the built-in strategy over the sendable columns (numpy vectors on a warm run)."""
    s, g = run.send, run.layout
    if run.base is not None:  # a warm run: over numpy arrays
        if run.vectors is None:
            run.vectors = numpy_vectors(s.tokens, s.hidden, s.prot, s.manual, s.tier, s.message_index, g.groups,
                                        g.orphans)
        run.array_shift = shift_arrays_np(run.vectors, s.hidden, s.prot, s.manual, s.priority, g.groups, g.group_ids,
                                          g.orphans, g.incomplete, run.shift_budget, honor_manual=run.honor_manual,
                                          ids=s.id)
    else:
        run.array_shift = shift_arrays(s.tokens, s.hidden, s.prot, s.manual, s.tier, s.priority, g.groups, g.group_ids,
                                       g.group_of, g.orphans, g.incomplete, run.shift_budget,
                                       honor_manual=run.honor_manual, ids=s.id)
    run.diagnostics.extend(run.array_shift.diagnostics)


def record_fates(run: RunState) -> tuple[list[str], list[str]]:
    """Step 6: each block's status and reason (pre-excluded ones are shown, never sent); sets ``kept_at``.

    The built-in strategies keep the host's rules by construction: nothing is rejected.
    """
    c, shift, n = run.columns, run.array_shift, len(run.blocks)
    kept_reason = c.kept_reason
    if len(run.send.positions) == n:
        if shift.codes is not None:  # numpy (a warm run): the kept positions in one vector pass
            kept_at = (shift.codes == 0).nonzero()[0].tolist()
        else:
            kept_at = list(compress(range(n), map(is_, shift.reasons, repeat(None))))
        # the kept ones (a minority in a long chat) get their kept reason below: no None is left
        reason: list[str] = list(shift.reasons)  # type: ignore[arg-type]
        deque(map(setitem, repeat(reason), kept_at, map(kept_reason.__getitem__, kept_at)), maxlen=0)
    else:
        pre = run.pre_excluded
        reason = [pre.get(x, "") for x in c.id]
        kept = [False] * n
        for k, i in enumerate(run.send.positions):
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
    kinds = c.kind
    run.send_tools = run.tools if len(kept_msg) != len(kept_at) and any(kinds[i] == "tools" for i in kept_at) else []
    tools_tokens = count_tools_tokens(profile, run.send_tools) if run.send_tools else 0
    run.prompt_tokens = (sum(counts) + sum(map(c.overhead.__getitem__, kept_msg)) + run.priming + tools_tokens)
    if any(map(c.listy.__getitem__, kept_msg)):
        run.warnings.extend(content_part_warnings(messages))  # type: ignore[arg-type]
    run.messages = messages  # type: ignore[assignment]


def check_budget_columns(run: RunState) -> None:
    """Step 9: ``TOKEN_BUDGET_EXCEEDED`` when the protected blocks alone exceed the budget."""
    shift, budget = run.array_shift, run.budget - run.safety
    if shift.error:
        protected = shift.protected_tokens + run.priming
        run.error = PreviewError(
            code="TOKEN_BUDGET_EXCEEDED",
            message=(f"the protected blocks alone need {protected} tokens but the budget is {budget} tokens "
                     f"(context {run.limit} − reply reserve {run.reserve}"
                     f"{f' − safety margin {run.safety}' if run.safety else ''})"),
            details={"protected_tokens": protected, "budget": budget,
                     "protected_blocks": [run.blocks[i].id for i in run.send.positions
                                          if run.blocks[i].protected or run.blocks[i].pinned]})
    elif run.prompt_tokens > budget:  # pragma: no cover - would be a bug in shifting
        raise AssertionError(f"final prompt {run.prompt_tokens} tokens exceeds budget {budget}")


def explain_and_fit(run: RunState, status: list[str], reason: list[str],
                    trace_by_source: dict[str, dict[str, Any]]) -> Outcome:
    """Step 10's figures: each block's explanation and fit window over the columns."""
    c, g, s, n = run.columns, run.layout, run.send, len(run.blocks)
    settings, codes = run.request.settings, run.array_shift.codes
    everything_sent = len(s.positions) == n
    kept = list(map(str.__eq__, status, repeat(_KEPT)))
    explanations: dict[str, Any] = {}
    previous = run.base.outcome.explanations if run.base is not None else None
    detail = explain_arrays(
        c.id, c.label, c.message_index, c.kind, c.history, c.pinned, c.protected, c.source, list(map(not_, kept)),
        reason, kept, c.tokens, run.shift_budget, g.bgroups, g.group_ids, g.b_group_of, trace_by_source, previous,
        explanations, _explain_inputs(run, codes) if everything_sent and codes is not None else None)
    reserve_fixed = settings.reply_reserve if isinstance(settings.reply_reserve, int) else None
    shift_budget_of = pipeline_shift_budget(settings.resolve_reply_reserve, settings.safety_margin_percent,
                                            run.profile.approximate, run.priming, fixed_reserve=reserve_fixed)
    linear = getattr(shift_budget_of, "linear_offset", None)
    arrays: dict[str, Any] = {}
    fits_s = None
    if run.vectors is not None and isinstance(linear, int):  # a warm run (see shift_columns)
        fits_s = fit_arrays_np(run.vectors, run.honor_manual, linear, arrays if everything_sent else None)
    if fits_s is None:
        arrays = {}
        fits_s = fit_arrays(s.tokens, s.hidden, s.prot, s.manual, s.tier, s.message_index, g.groups, g.orphans,
                            run.honor_manual, shift_budget_of)
    if everything_sent:
        fits = fits_s
    else:
        fits = [None] * n
        for k, i in enumerate(s.positions):
            fits[i] = fits_s[k]
    return Outcome(status, reason, detail, fits, explanations, codes if everything_sent else None,
                   arrays.get("fit") if everything_sent else None)


def _explain_inputs(run: RunState, codes: Any) -> dict[str, Any]:
    """The numpy inputs of ``explain_arrays`` for a warm run whose blocks are all sendable.

    What depends only on the blocks (history flags, group numbers, group tokens) is built once
    per run's vectors and kept in them; ``codes`` and the groups held by a pinned or protected
    member are this run's.
    """
    v, g, c = run.vectors, run.layout, run.columns
    assert v is not None
    if "group_tokens" not in v:  # built once per vectors, stored in one update
        number = {gid: k for k, gid in enumerate(g.group_ids)}
        v.update(history=np.array(c.history, dtype=bool),
                 group_index=np.array([-1 if x is None else number[x] for x in g.b_group_of], dtype=np.intp),
                 group_tokens={gid: sum(c.tokens[m] for m in ms) for gid, ms in zip(g.group_ids, g.bgroups)})
    held_groups = (np.flatnonzero(np.logical_or.reduceat(v["prot"][v["g_flat"]], v["g_starts"])).tolist()
                   if len(v["g_first"]) else [])
    return {"codes": codes, "tokens": v["tokens"], "history": v["history"], "group_index": v["group_index"],
            "group_tokens": v["group_tokens"], "held_groups": held_groups}


def report_columns(run: RunState, lorebook_trace: list[Any], trace_by_source: dict[str, dict[str, Any]],
                   outcome: Outcome) -> ContextPreview:
    """Step 10: the preview, its rows reusing the base run's unchanged rows."""
    settings, profile, base = run.request.settings, run.profile, run.base
    prior = None
    if base is not None and len(base.rows) == len(run.blocks):
        fresh = sorted({*run.flagged, *run.edited})
        prior = PriorRows(base.blocks, base.outcome, base.rows, fresh)
    run.outcome = outcome
    run.rows = build_rows(RowInputs(run.blocks, run.columns, run.layout.b_group_of, trace_by_source), outcome, prior)
    prompt_tokens, budget = run.prompt_tokens, run.budget
    return construct(ContextPreview, {
        "model": settings.model,
        "tokenizer": TokenizerInfo(profile=profile.name, approximate=run.approximate, version=profile.version),
        "context_limit": run.limit, "reply_reserve": run.reserve, "budget": budget, "safety_margin": run.safety,
        "headroom": budget - run.safety - prompt_tokens, "prompt_tokens": prompt_tokens,
        "strategy": settings.strategy, "overhead_tokens": run.priming, "warnings": run.warnings, "error": run.error,
        "blocks": run.rows, "lorebook_trace": lorebook_trace, "messages": list(map(dict.copy, run.messages)),
        "tools": [dict(t) for t in run.send_tools], "diagnostics": run.diagnostics,
        "fit_method": "exact" if settings.strategy in TRUNCATE_LIKE else "truncate-order",
        "strategy_info": {}, "api": "chat_completion", "prompt": None, "stop": []})


__all__ = ["applies", "check_budget_columns", "count_columns", "explain_and_fit", "record_fates",
           "recount_columns", "report_columns", "shift_columns", "tool_group_warnings"]
