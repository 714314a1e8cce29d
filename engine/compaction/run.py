"""Compaction at generation time (SPEC §4): plan, summarize with the provider, check progress.

:func:`run_compaction` is what ``engine.generation.generate`` calls before it prepares the
prompt when the strategy is ``compact``. It never raises for provider failures and never puts
error text into the chat: the outcome carries the new compaction state to store with the chat
and a record for the audit.

Record (``PromptContextAudit.compaction``): ``status`` is one of

- ``not_needed`` (below the trigger; a stored summary may be reused: ``summary_id``),
- ``compacted`` (a new summary, the prompt is below the trigger),
- ``compacted_then_truncated`` (a new summary, but the prompt stayed at or above the trigger:
  the same pass truncated to the target; the next turns do not fire again without progress),
- ``fell_back`` (the summary failed twice, was over its cap twice, or freed nothing:
  truncation to the target instead; ``fallback: "truncation"``),
- ``disabled`` (stopped after ``MAX_FAILURES`` failures in a row),
- ``no_candidates`` / ``no_progress`` (at or above the trigger, but nothing new to summarize, or
  summarizing it could not get below the trigger: truncation to the target),

with ``trigger``, ``target``, ``prompt_tokens_before``, ``prompt_tokens_after``, ``attempts``
(each ``{"outcome", "tokens", "error_code"}``), ``error_code``, ``summary_id``, ``range``
(first and last message index the summary covers), ``replaced_tokens``, ``summary_tokens``,
``reappended`` (count), ``model`` and ``failures`` (in a row, after this run).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..schema.progress import ProgressEvent
from ..schema.request import PreviewRequest
from .options import CHAT_KEY, MAX_FAILURES, CompactionOptions
from .state import CompactionState, make_summary
from .strategy import JUST_COMPACTED
from .summarizer import Summarizer, provider_summarizer, summarize_history

if TYPE_CHECKING:  # pragma: no cover
    from ..generation import ProviderConfig
    from ..pipeline import PreparedPrompt, Registries

log = logging.getLogger("loomscope.compaction")

LABEL_RUNNING = "Compacting context…"
LABEL_DONE = "Compacting context… done"
LABEL_FELL_BACK = "Compacting context… fell back to truncation"
_STATUS_OF_REASON = {"below_trigger": "not_needed", "disabled": "disabled", "no_candidates": "no_candidates",
                     "no_progress": "no_progress"}


@dataclass
class CompactionOutcome:
    """What one compaction run gives the caller.

    The ``request`` to prepare next (with the new state in the chat), the ``state`` to store with the chat (``None``:
    unchanged), the audit ``record``, and the prompt already ``prepared`` from ``request`` when the run had to prepare
    it anyway (``None`` otherwise).
    """

    request: PreviewRequest
    state: CompactionState | None
    record: dict[str, Any] = field(default_factory=dict)
    prepared: PreparedPrompt | None = None


def with_state(request: PreviewRequest, state: CompactionState, *, just_compacted: bool = False) -> PreviewRequest:
    """``request`` whose chat carries ``state`` (as the stored chat would).

    ``just_compacted`` asks the strategy to end at the target (the prepares right after a new summary).
    """
    update: dict[str, Any] = {"chat": request.chat.model_copy(update={CHAT_KEY: state.dump()})}
    if just_compacted:
        options = {**request.settings.strategy_options, JUST_COMPACTED: True}
        update["settings"] = request.settings.model_copy(update={"strategy_options": options})
    return request.model_copy(update=update)


def run_compaction(
    request: PreviewRequest,
    provider: ProviderConfig,
    *,
    generation_id: str,
    registries: Registries | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    cancel: threading.Event | None = None,
    summarizer: Summarizer | None = None,
) -> CompactionOutcome:
    """Compact ``request``'s chat if the ``compact`` strategy's plan says so.

    Parameters
    ----------
    request:
        The generation's request (strategy ``compact``).
    provider:
        Where the summary is asked for (the generation's endpoint; the model is
        ``summary_model`` or the generation's).
    generation_id:
        Names the progress step (``compaction:<generation_id>``).
    summarizer:
        Replaces the provider call (tests, plugins); default :func:`provider_summarizer`.

    Raises
    ------
    ProviderError
        ``CANCELLED`` only (cancel set during the summary); other failures fall back.
    SettingsError
        Invalid settings or compaction options (from the pipeline).
    """
    from ..pipeline import prepare
    from ..tokenizers import default_tokenizer_registry, lookup_model

    prepared = prepare(request, registries=registries)
    info = prepared.preview.strategy_info
    if "fire" not in info:  # the strategy was rejected, or is not compact
        return CompactionOutcome(request, None, {"status": "not_run"}, prepared)
    state = CompactionState.of_chat(request.chat)
    record: dict[str, Any] = {
        "trigger": info["trigger"], "target": info["target"], "prompt_tokens_before": info["prompt_tokens"],
        "prompt_tokens_after": prepared.preview.prompt_tokens, "attempts": [], "failures": state.failures,
        "summary_id": (info.get("summary") or {}).get("id"),
        "range": (info.get("summary") or {}).get("covers"),
    }
    if not info["fire"]:
        record["status"] = _STATUS_OF_REASON.get(info["reason"], info["reason"])
        if record["status"] != "not_needed":
            record["fallback"] = "truncation"
        return CompactionOutcome(request, None, record, prepared)

    step_id = f"compaction:{generation_id}"

    def report(state_: str, label: str, text: str, **detail: Any) -> None:
        if on_progress is not None:
            on_progress(ProgressEvent(step_id=step_id, step="compaction", label=label, state=state_,  # type: ignore[arg-type]
                                      text=text, detail=detail))

    opts = CompactionOptions.from_options(request.settings.strategy_options)
    model = opts.summary_model or provider.model or request.settings.model
    cap = int(info["summary_cap_tokens"])
    profile = prepared.profile
    s_info = lookup_model(model)
    s_limit = opts.summary_context_limit or s_info.context_limit
    tokenizers = registries.tokenizers if registries is not None else default_tokenizer_registry()
    s_profile = tokenizers.get(s_info.profile)
    messages = {i: request.chat.messages[i] for i in info["candidates"]}
    previous = state.summary if info.get("summary") else None
    report("running", LABEL_RUNNING,
           f"summarizing {len(messages)} older messages with {model} (prompt {info['prompt_tokens']:,} tokens, "
           f"trigger {info['trigger']:,})",
           messages=len(messages), prompt_tokens=info["prompt_tokens"], trigger=info["trigger"], model=model)
    overhead = 3 * 2 + 3 + s_profile.count(SUMMARY_INSTRUCTIONS_SAMPLE)
    call = summarizer or provider_summarizer(provider.base_url, provider.api_key, model, cap=cap,
                                             timeout_s=provider.timeout_s, extra_body=provider.extra_body,
                                             cancel=cancel)
    outcome = summarize_history(
        messages, summarizer=call, cap=cap, count=profile.count,
        input_budget=max(0, s_limit - cap - overhead), input_count=s_profile.count,
        previous=previous, retry_delay_s=opts.retry_delay_s, cancel=cancel)
    record.update(model=model, attempts=[a.dump() for a in outcome.attempts], error_code=outcome.error_code,
                  input_cut=outcome.input_cut)

    def fall_back(why: str, *, stall: bool = False) -> CompactionOutcome:
        failures = state.failures + 1
        new = state.model_copy(update={
            "failures": failures,
            "stall": {"prompt_tokens": info["prompt_tokens"], "messages": len(request.chat.messages)} if stall
            else state.stall,
            "last": {"status": "fell_back", "reason": why, "error_code": outcome.error_code,
                     "generation_id": generation_id}})
        log.warning("compaction fell back to truncation (%s; %s); failure %d in a row", why,
                    outcome.error_code or "no error code", failures)
        record.update(status="fell_back", fallback="truncation", reason=why, failures=failures)
        if failures >= MAX_FAILURES:
            record["disabled"] = True
        req = with_state(request, new)
        again = prepare(req, registries=registries)
        record["prompt_tokens_after"] = again.preview.prompt_tokens
        report("failed", LABEL_FELL_BACK,
               f"{why} ({outcome.error_code or 'no error code'}); the oldest history was truncated instead",
               error_code=outcome.error_code, reason=why)
        return CompactionOutcome(req, new, record, again)

    if outcome.text is None:
        return fall_back("the summary request failed" if outcome.error_code not in ("SUMMARY_OVER_CAP",)
                         else "the summary was over its cap twice")
    covered = {i: messages[i] for i in outcome.covered}
    summary_tokens = profile.count(outcome.text)
    candidate_ids = set(info["candidate_block_ids"])
    replaced = sum(b.tokens for b in prepared.preview.blocks if b.message_index in covered
                   and b.id in candidate_ids) + ((info.get("summary") or {}).get("tokens") or 0)
    summary = make_summary(outcome.text, covered, previous=previous, tokens=summary_tokens,
                           replaced_tokens=replaced, profile=profile.name, model=model,
                           attempts=len(outcome.attempts), reappended=outcome.reappended)
    record.update(summary_id=summary.id, range=[summary.first, summary.last], summary_tokens=summary_tokens,
                  replaced_tokens=replaced, reappended=len(outcome.reappended), prose_cut=outcome.prose_cut)
    block_tokens = _count_block(profile, summary)
    if block_tokens >= replaced:
        record["summary_id"] = None
        return fall_back("the summary freed nothing", stall=True)
    new = state.model_copy(update={"summary": summary, "failures": 0, "stall": None,
                                   "last": {"status": "compacted", "generation_id": generation_id}})
    req = with_state(request, new, just_compacted=True)
    again = prepare(req, registries=registries)
    after = again.preview.strategy_info
    record["prompt_tokens_after"] = again.preview.prompt_tokens
    record["failures"] = 0
    if after.get("prompt_tokens", 0) >= info["trigger"]:
        # no progress below the trigger: this pass truncated to the target; remember the stall
        new = new.model_copy(update={"stall": {"prompt_tokens": after.get("prompt_tokens"),
                                               "messages": len(request.chat.messages)},
                                     "last": {"status": "compacted_then_truncated", "generation_id": generation_id}})
        req = with_state(request, new, just_compacted=True)
        again = prepare(req, registries=registries)
        record["status"] = "compacted_then_truncated"
        record["fallback"] = "truncation"
    else:
        record["status"] = "compacted"
    record["truncated_to_target"] = bool(again.preview.strategy_info.get("truncated_to_target"))
    log.info("compacted messages #%d–#%d into %d tokens (replaced %d)", summary.first, summary.last,
             summary_tokens, replaced)
    report("done", LABEL_DONE,
           f"messages #{summary.first}–#{summary.last} ({replaced:,} tokens) → a {summary_tokens:,}-token summary",
           summary_tokens=summary_tokens, replaced_tokens=replaced, range=[summary.first, summary.last])
    return CompactionOutcome(req, new, record, again)


def _count_block(profile: Any, summary: Any) -> int:
    """Tokens the summary's prompt block costs (header and chat-format overhead included)."""
    from ..tokenizers import count_messages_tokens
    from .strategy import summary_block

    block = summary_block(summary)
    return int(count_messages_tokens(profile, [block.message.to_provider()])[0])  # type: ignore[union-attr]


#: Stands for the instructions' size when budgeting the summarizer's request.
SUMMARY_INSTRUCTIONS_SAMPLE = (
    "[loomscope:compaction] You compress the earlier part of a conversation so that it can go on without it. "
    "Write a concise summary of the messages below: who wants what, decisions, facts, names, numbers and ids, "
    "what was done and what is still open. Copy every code block, file path, error message and stack trace "
    "exactly as written. Answer with the summary only, at most 100000 tokens. Your previous summary was "
    "100000 tokens, over the limit of 100000: write a shorter one. Summary so far: Messages to summarize:")
