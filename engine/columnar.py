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

from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from itertools import compress, repeat
from operator import setitem
from typing import Any

import numpy as np

from .patched import PatchedList
from .registries import Registries
from .rows import PriorRows, RowInputs, build_rows
from .runstate import AssemblyColumns, Outcome, ProviderMessage, RunColumns, RunState
from .schema.preview import FitWindows, SentMessage
from .shifting import ToolLayout, explain_columns, fit_columns, shift_columns
from .shifting.columns import SHIFT_REASONS, Array, arrays_of, with_arrays
from .shifting.explain import ROOM_REASONS, Fates
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


def read_columns(run: RunState) -> AssemblyColumns:
    """Step 3's hand-over to step 4 on a cold run: the blocks' count-free columns and their sendable part.

    The sendable part, its tool groups and their warnings, and whether the counts will be
    estimates (:mod:`engine.step_rules`), then :class:`~engine.runstate.AssemblyColumns` over the
    blocks' tool layout (``run.assembly``), and the few pieces of blocks that are not a plain text
    message counted into the profile's cache. None of it reads a count of the chat's texts: a cold
    run makes it in the helper thread while its own thread counts them
    (:func:`engine.pipeline._read_assembly`).
    """
    blocks = run.blocks
    split_sendable(run)
    at = run.sendable_at
    s_layout = ToolLayout.from_groups(run.groups)
    run.send_layout = s_layout
    b_layout = s_layout if len(at) == len(blocks) else _block_layout(s_layout, at, len(blocks))
    run.assembly = read = AssemblyColumns.read(blocks, b_layout)
    run.profile.count_many(read.odd_pieces)  # into the cache for step 4: tool names, call ids, arguments, ...
    # only messages with list content can have audio parts
    run.approximate = estimated_counts(run.profile, compress(blocks, read.listy))
    return read


def count_columns(run: RunState) -> None:
    """Step 4: the columns (one batched count of every new text), the sendable columns, the budget.

    A cold run counts step 3's columns (:func:`read_columns`; the chat's texts are mostly in the
    profile's cache by then). The strategy's budget is the rule every path shares
    (:mod:`engine.step_rules`). A warm run keeps its base's sendable positions and tool groups (a
    toggle or a plain edit changes no tool shape) and counts only the edited texts.
    """
    base, blocks, profile = run.base, run.blocks, run.profile
    run.honor_manual = drops_excluded_first(run)
    if base is None:
        assert run.assembly is not None
        run.columns = RunColumns.counted(run.assembly, profile)
        run.assembly = None  # the columns hold what the next steps read; the remembered run keeps no more
        at = run.sendable_at
        every = len(at) == len(blocks)
        run.send = run.columns.cols if every else with_arrays(run.columns.cols.take(at, run.send_layout))
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
    """A warm run's sendable columns: the base's, with the changed positions' flags (and counts) and arrays replaced."""
    cols = run.columns.cols
    at = run.sendable_at
    if len(at) == len(cols.ids):
        return cols
    changed = sorted({*run.flagged, *run.edited})
    ks = [bisect_left(at, pos) for pos in changed]  # their sendable positions (``at`` is ascending)
    pinned, manual = list(base.send.pinned), list(base.send.manual)
    tokens = list(base.send.tokens) if run.edited else base.send.tokens
    for pos, k in zip(changed, ks):
        pinned[k], manual[k] = cols.pinned[pos], cols.manual[pos]
        if run.edited:
            tokens[k] = cols.tokens[pos]
    return base.send.patched(ks, pinned=pinned, manual=manual, tokens=tokens)


def shift_sendable(run: RunState) -> None:
    """Step 5: the built-in strategy over the sendable columns (:func:`engine.shifting.shift_columns`)."""
    run.column_shift = shift_columns(run.send, run.shift_budget, honor_manual=run.honor_manual)
    run.diagnostics.extend(run.column_shift.diagnostics)


_TOO_LARGE, _LOREBOOK = "TOO_LARGE_FOR_BUDGET", "LOREBOOK_BUDGET"
_CODE = {r: k for k, r in enumerate(SHIFT_REASONS)}
#: The fate code of a block assembly left out (``run.pre_excluded``): after shifting's own codes.
_PRE = len(SHIFT_REASONS)
#: The fate codes whose reason is one of the reasons a history block is removed for room.
_ROOM_CODES = [k for k, r in enumerate(SHIFT_REASONS) if r in ROOM_REASONS]


def _room(codes: Array) -> Array:
    """Per position: whether its fate code is a removal for room (a comparison per room code: cheaper than a lookup)."""
    room = codes == _ROOM_CODES[0]
    for k in _ROOM_CODES[1:]:
        room |= codes == k
    return room


def _block_codes(run: RunState) -> Array:
    """Per block: shifting's reason code (0: kept), :data:`_PRE` for a block assembly left out."""
    codes, n = run.column_shift.codes, len(run.blocks)
    assert codes is not None
    if len(run.sendable_at) == n:
        return codes
    out = np.full(n, _PRE, dtype=np.int8)
    out[np.asarray(run.sendable_at, dtype=np.intp)] = codes
    return out


def record_fates(run: RunState) -> tuple[Sequence[str], Sequence[str]]:
    """Step 6: each block's status and reason (pre-excluded ones are shown, never sent); sets ``kept_at``.

    The built-in strategies keep the host's rules by construction: nothing is rejected. A warm
    run takes the base run's columns with the positions whose fate code or kept reason moved
    (``run.moved``) replaced (:class:`~engine.patched.PatchedList`: no copy of 10,000 entries).
    """
    c, n = run.columns, len(run.blocks)
    codes = run.fate_codes = _block_codes(run)
    base = run.base
    if base is not None and base.fate_codes is not None and len(base.fate_codes) == n:
        moved = sorted({*(codes != base.fate_codes).nonzero()[0].tolist(), *run.flagged, *run.edited})
        if len(moved) * 8 < n:
            new_codes = codes[moved].tolist()
            kept_at = _kept_moved(base.kept_at, moved, new_codes, base.fate_codes[moved].tolist())
            status = PatchedList.of(base.fates[0], zip(moved, (_KEPT if k == 0 else _EXCLUDED for k in new_codes)))
            reason = PatchedList.of(base.fates[1], zip(moved, (
                c.kept_reason[i] if k == 0 else run.pre_excluded.get(c.cols.ids[i], "") if k == _PRE
                else SHIFT_REASONS[k] for i, k in zip(moved, new_codes))))
            run.kept_at, run.moved = kept_at, moved
            return status, reason
    run.kept_at = kept = (codes == 0).nonzero()[0]
    kept.flags.writeable = False  # shared by the warm runs that follow
    return _fates(run)


def _kept_moved(kept_at: Array, moved: list[int], codes: list[int], was: list[int]) -> Array:
    """The kept positions after the ``moved`` positions' fate codes went from ``was`` to ``codes`` (0: kept).

    ``kept_at`` itself (read-only, shared by the runs) when none of them was kept or dropped.
    """
    gained = [i for i, code, old in zip(moved, codes, was) if code == 0 and old != 0]
    lost = [i for i, code, old in zip(moved, codes, was) if code != 0 and old == 0]
    if not (gained or lost):
        return kept_at
    out = np.delete(kept_at, kept_at.searchsorted(lost)) if lost else kept_at
    if gained:
        out = np.insert(out, out.searchsorted(gained), gained)
    out.flags.writeable = False
    return out


def _fates(run: RunState) -> tuple[list[str], list[str]]:
    """Every block's status and reason, as new lists."""
    c, shift, n, kept_at = run.columns, run.column_shift, len(run.blocks), run.kept_at
    kept_reason = c.kept_reason
    if len(run.sendable_at) == n:
        # the kept ones (a minority in a long chat) get their kept reason below: no None is left
        reason: list[str] = list(shift.reasons)  # type: ignore[arg-type]
    else:
        pre = run.pre_excluded
        reason = [pre.get(x, "") for x in c.cols.ids]
        deque(map(reason.__setitem__, run.sendable_at, shift.reasons), maxlen=0)  # type: ignore[arg-type]
    kept = kept_at.tolist()
    deque(map(setitem, repeat(reason), kept, map(kept_reason.__getitem__, kept)), maxlen=0)
    status = [_EXCLUDED] * n
    deque(map(setitem, repeat(status), kept, repeat(_KEPT)), maxlen=0)
    return status, reason


def recount_columns(run: RunState) -> None:
    """Step 8: the final count of what is sent: the kept blocks' column counts (each text counted once, when its column was made).

    A warm run's messages are its base's list with the moved positions' messages inserted,
    removed or replaced.
    """
    c, profile, codes = run.columns, run.profile, run.fate_codes
    assert codes is not None
    bare = [i for i in c.bare if codes[i] == 0]  # kept blocks without a message (the tools block)
    run.messages = _kept_messages(run, bare)
    run.send_tools = tools_sent(run, map(c.cols.kinds.__getitem__, bare)) if bare else []
    tools_tokens = count_tools_tokens(profile, run.send_tools) if run.send_tools else 0
    tokens = arrays_of(c.cols).tokens
    kept_tokens = int(np.dot(tokens, codes == 0)) - sum(map(c.cols.tokens.__getitem__, bare))
    run.prompt_tokens = kept_tokens + run.priming + tools_tokens
    if any(codes[i] == 0 for i in c.listed):  # only list content has parts
        content_warnings(run)


def _kept_messages(run: RunState, bare: list[int]) -> list[ProviderMessage]:
    """The provider messages of the kept blocks in prompt order (``bare``: the kept blocks without one).

    Read-only copies of the columns' messages (:class:`~engine.schema.preview.SentMessage`): the
    preview takes them as they are, and a warm run's list is its base's with the moved ones' copies.
    """
    provider, kept_at, base, codes = run.columns.provider, run.kept_at, run.base, run.fate_codes
    assert codes is not None
    if base is None or run.moved is None or base.fate_codes is None:
        kept = kept_at.tolist()
        kept_msg = [i for i in kept if provider[i] is not None] if bare else kept
        return list(map(SentMessage, map(provider.__getitem__, kept_msg)))  # type: ignore[arg-type]
    # ascending: every kept position before ``i`` is already as in this run, so ``i``'s index
    # in the list is the count of kept message blocks before it
    messages: list[ProviderMessage] = list(base.messages)
    for i, code, was in zip(run.moved, codes[run.moved].tolist(), base.fate_codes[run.moved].tolist()):
        sent = provider[i]
        if sent is None or (code != 0 and was != 0):
            continue
        sent = SentMessage(sent)
        k = int(kept_at.searchsorted(i)) - sum(b < i for b in bare)
        if code == 0 and was == 0:
            messages[k] = sent
        elif code == 0:
            messages.insert(k, sent)
        else:
            del messages[k]
    return messages


def explain_and_fit(run: RunState, status: Sequence[str], reason: Sequence[str],
                    trace_by_source: dict[str, dict[str, Any]]) -> Outcome:
    """Step 10's figures: each block's explanation and fit window over the columns."""
    c, n, codes = run.columns, len(run.blocks), run.fate_codes
    assert codes is not None
    if run.pre_excluded or _TOO_LARGE in c.kept_reasons:
        fates = Fates.of(status, reason)
    else:  # every reason is shifting's (by code) or a kept reason
        fates = Fates(codes != 0, _room(codes), codes == _CODE[_TOO_LARGE], _LOREBOOK in c.kept_reasons)
    detail = explain_columns(c.cols, status, reason, run.shift_budget, lorebook_traces=trace_by_source,
                             fates=fates)
    fits_s = fit_columns(run.send, fit_budget(run), honor_manual=run.honor_manual)
    if len(run.sendable_at) == n:
        fits = fits_s
    else:  # the blocks assembly left out have none
        every = np.zeros(n, dtype=np.int64)
        every[np.asarray(run.sendable_at, dtype=np.intp)] = fits_s.array
        fits = FitWindows(every)
    return Outcome(status, reason, detail, fits, run.moved)


def report_columns(run: RunState, trace_by_source: dict[str, dict[str, Any]], outcome: Outcome) -> None:
    """Step 10's rows on the column path (``run.rows``), reusing the base run's unchanged rows.

    A cold run's rows are step 3's drafts (:func:`engine.rows.draft_rows`) with their tokens and fate set.

    The preview around them is :func:`engine.report.report_preview`, as on every path.
    """
    base = run.base
    prior = None
    if base is not None and len(base.rows) == len(run.blocks):
        prior = PriorRows(base.blocks, base.outcome, base.rows, sorted({*run.flagged, *run.edited}),
                          frozenset(run.edited))
    run.outcome = outcome
    run.fit_windows, run.reason_details = outcome.fits, outcome.detail
    drafts, run.row_drafts = run.row_drafts, None  # a cold run's rows from step 3 (engine.rows.draft_rows)
    run.rows, changes = build_rows(RowInputs(run.blocks, run.columns, trace_by_source), outcome, prior, drafts)
    if changes is not None and base is not None:
        serial = base.preview._serial
        run.row_changes = (serial, id(run.rows), changes) if serial is not None else None


__all__ = ["applies", "count_columns", "explain_and_fit", "read_columns", "record_fates",
           "recount_columns", "report_columns", "shift_sendable"]
