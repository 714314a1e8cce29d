"""Step 10's one preview: the :class:`~engine.schema.preview.ContextPreview` of every pipeline run.

:func:`engine.pipeline.prepare` runs its ten steps on one of three paths: the block objects (a
plugin strategy, a chat template, an interceptor), the columns (:mod:`engine.columnar`: the
built-in ``truncate`` / ``manual``) and SillyTavern's template (a chat from a SillyTavern folder:
``Generate`` as the assembly step, its counts and fates final). Each path fills the run state
(:class:`~engine.runstate.RunState`) and its rows; :func:`report_preview` is the only place a
preview is made from them.
"""

from __future__ import annotations

from itertools import count

from .runstate import RunState
from .schema._construct import construct
from .schema.preview import ContextPreview, FitWindows, ReasonDetails, SentMessage

#: Serial numbers of the previews made in this process (``ContextPreview._serial``).
_SERIALS = count(1)


def report_preview(run: RunState) -> ContextPreview:
    """The preview of a finished run: the header steps 1–9 worked out, the rows step 10 built.

    Reads ``run.request.settings.model``, ``strategy``, ``tokenizer``, ``limit``, ``reserve``,
    ``budget``, ``safety``, ``prompt_tokens``, ``overhead``, ``warnings``, ``error``, ``rows``,
    ``lorebook_trace``, ``messages``, ``send_tools``, ``diagnostics``, ``fit_method``,
    ``strategy_info``, ``api``, ``prompt``, ``stop``, ``fit_windows`` and ``reason_details`` (the
    rows' chat-wide figures; ``None`` each where a path computes none). ``headroom`` is ``budget − safety −
    prompt_tokens`` (tokens of ``run.profile``; SillyTavern's template has no safety margin).

    The values are already valid (the steps made them), so the model is built without
    validation (:func:`engine.schema._construct.construct`); the lists and dicts a later run or
    a caller may change (warnings, tools, ...) are the preview's own shallow copies. Its messages
    are read-only (:class:`~engine.schema.preview.SentMessage`): on the column path the run's own,
    which the next warm run shares (a toggle copies none), elsewhere read-only copies.
    Each preview gets a serial number, and a warm run's preview the change set from the preview
    it started from (``run.row_changes``: :func:`engine.schema.preview.preview_changes` then
    costs nothing).
    The rows (``run.rows``, frozen) are taken as they are: a warm run shares its unchanged rows
    with the previous preview.

    Parameters
    ----------
    run:
        A run whose steps 1–9 and step 10's rows are done.

    Returns
    -------
    ContextPreview
        The preview, fields in the model's order (``model_dump_json`` writes them in that order).
    """
    prompt_tokens, budget, safety = run.prompt_tokens, run.budget, run.safety
    n = len(run.rows)
    # the run's own columns, never changed after this step (the fits read-only, the details a new list per run)
    fits = run.fit_windows if len(run.fit_windows) == n else FitWindows.none(n)
    details = run.reason_details if len(run.reason_details) == n else ReasonDetails.none(n)
    return construct(ContextPreview, {
        "model": run.request.settings.model, "tokenizer": run.tokenizer,
        "context_limit": run.limit, "reply_reserve": run.reserve, "budget": budget, "safety_margin": safety,
        "headroom": budget - safety - prompt_tokens, "prompt_tokens": prompt_tokens,
        "strategy": run.strategy, "overhead_tokens": run.overhead, "warnings": list(run.warnings),
        "error": run.error, "blocks": run.rows, "lorebook_trace": list(run.lorebook_trace),
        "messages": list(run.messages) if run.columnar else list(map(SentMessage, run.messages)), "tools": list(map(dict.copy, run.send_tools)),
        "diagnostics": list(run.diagnostics), "fit_method": run.fit_method,
        "strategy_info": dict(run.strategy_info), "api": run.api, "prompt": run.prompt, "stop": list(run.stop),
        "fit_windows": fits, "reason_details": details},
        private={"_serial": next(_SERIALS), "_changes": run.row_changes})


__all__ = ["report_preview"]
