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
- ``fell_back`` (the summary failed twice, was over its cap twice, freed nothing, or would
  push out one of the newest ``keep_recent`` messages:
  truncation to the target instead; ``fallback: "truncation"``),
- ``disabled`` (stopped after ``MAX_FAILURES`` failures in a row),
- ``no_candidates`` / ``no_progress`` (at or above the trigger, but nothing new to summarize, or
  summarizing it could not get below the trigger: truncation to the target),

with ``trigger``, ``target``, ``prompt_tokens_before``, ``prompt_tokens_after``, ``attempts``
(each ``{"outcome", "tokens", "error_code"}``), ``error_code``, ``summary_id``, ``range``
(first and last message index the summary covers), ``replaced_tokens``, ``summary_tokens``,
``reappended`` (count), ``covered`` (every message index the new summary stands for),
``artifacts`` (``found``, ``reattached``, ``dropped``, ``dropped_kinds``: every artifact of the
summarized messages is in the summary or counted as dropped), ``diagnostics`` (sentences, e.g.
the artifacts that did not fit), ``model`` and ``failures`` (in a row, after this run).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .. import pipeline  # pipeline.prepare looked up per call, as engine.generation does
from ..providers.config import ProviderConfig
from ..schema.messages import ChatMessage
from ..schema.progress import ProgressEvent
from ..schema.request import PreviewRequest
from ..tokenizers import count_messages_tokens, default_tokenizer_registry, lookup_model
from .options import CHAT_KEY, MAX_FAILURES, CompactionOptions
from .state import CompactionState, CompactionSummary, covers_label, make_summary
from .strategy import JUST_COMPACTED, summary_block
from .summarizer import Summarizer, SummaryOutcome, provider_summarizer, summarize_history

if TYPE_CHECKING:  # pragma: no cover
    from ..pipeline import PreparedPrompt
    from ..registries import Registries
    from ..tokenizers import TokenizerProfile

ProgressState = Literal["running", "done", "failed", "cancelled"]

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
    prepared = pipeline.prepare(request, registries=registries)
    info = prepared.preview.strategy_info
    if "fire" not in info:  # the strategy was rejected, or is not compact
        return CompactionOutcome(request, None, {"status": "not_run"}, prepared)
    state = CompactionState.of_chat(request.chat)
    record = _first_record(info, state, prepared.preview.prompt_tokens)
    if not info["fire"]:
        record["status"] = _STATUS_OF_REASON.get(info["reason"], info["reason"])
        if record["status"] != "not_needed":
            record["fallback"] = "truncation"
        return CompactionOutcome(request, None, record, prepared)
    run = _CompactionRun(request, registries, generation_id, on_progress, prepared, info, state, record)
    asked = _ask_summary(run, provider, summarizer, cancel)
    outcome = asked.outcome
    record.update(model=asked.model, attempts=[a.dump() for a in outcome.attempts], error_code=outcome.error_code,
                  input_cut=outcome.input_cut)
    if outcome.text is None:
        return run.fall_back("the summary request failed" if outcome.error_code not in ("SUMMARY_OVER_CAP",)
                             else "the summary was over its cap twice", outcome.error_code)
    summary, replaced = _new_summary(run, asked, outcome.text)
    if _count_block(prepared.profile, summary) >= replaced:
        record["summary_id"] = None
        return run.fall_back(f"the summary ({_count_block(prepared.profile, summary):,} tokens) would cost as much "
                             f"as the {replaced:,} tokens of history it replaces", outcome.error_code, stall=True)
    return run.compacted(summary, replaced, summary.tokens)


def _first_record(info: dict[str, Any], state: CompactionState, prompt_tokens_after: int) -> dict[str, Any]:
    """The audit record as the plan leaves it (before any summary)."""
    return {
        "trigger": info["trigger"], "target": info["target"], "prompt_tokens_before": info["prompt_tokens"],
        "prompt_tokens_after": prompt_tokens_after, "attempts": [], "failures": state.failures,
        "summary_id": (info.get("summary") or {}).get("id"),
        "range": (info.get("summary") or {}).get("covers"),
    }


@dataclass
class _Asked:
    """One summary request: what was asked (model, messages by index, the summary it extends) and its outcome."""

    model: str
    messages: dict[int, ChatMessage]
    previous: CompactionSummary | None
    outcome: SummaryOutcome


def _ask_summary(run: _CompactionRun, provider: ProviderConfig, summarizer: Summarizer | None,
                 cancel: threading.Event | None) -> _Asked:
    """Summarize the plan's candidates (retrying, cut to the summarizer's context) and report progress."""
    request, info = run.request, run.info
    opts = CompactionOptions.from_options(request.settings.strategy_options)
    model = opts.summary_model or provider.model or request.settings.model
    cap = int(info["summary_cap_tokens"])
    s_info = lookup_model(model)
    s_limit = opts.summary_context_limit or s_info.context_limit
    tokenizers = run.registries.tokenizers if run.registries is not None else default_tokenizer_registry()
    s_profile = tokenizers.get(s_info.profile)
    messages = {i: request.chat.messages[i] for i in info["candidates"]}
    previous = run.state.summary if info.get("summary") else None
    run.report("running", LABEL_RUNNING,
               f"summarizing {len(messages)} older messages with {model} (prompt {info['prompt_tokens']:,} tokens, "
               f"trigger {info['trigger']:,})",
               messages=len(messages), prompt_tokens=info["prompt_tokens"], trigger=info["trigger"], model=model)
    overhead = 3 * 2 + 3 + s_profile.count(SUMMARY_INSTRUCTIONS_SAMPLE)
    call = summarizer or provider_summarizer(provider.base_url, provider.api_key, model, cap=cap,
                                             timeout_s=provider.timeout_s, extra_body=provider.extra_body,
                                             cancel=cancel)
    outcome = summarize_history(
        messages, summarizer=call, cap=cap, count=run.prepared.profile.count,
        input_budget=max(0, s_limit - cap - overhead), input_count=s_profile.count,
        previous=previous, retry_delay_s=opts.retry_delay_s, cancel=cancel)
    return _Asked(model, messages, previous, outcome)


def _new_summary(run: _CompactionRun, asked: _Asked, text: str) -> tuple[CompactionSummary, int]:
    """The summary made of ``text`` and the tokens of the blocks it replaces (recorded for the audit)."""
    outcome, profile = asked.outcome, run.prepared.profile
    covered = {i: asked.messages[i] for i in outcome.covered}
    summary_tokens = profile.count(text)
    candidate_ids = set(run.info["candidate_block_ids"])
    replaced = sum(b.tokens for b in run.prepared.preview.blocks if b.message_index in covered
                   and b.id in candidate_ids) + ((run.info.get("summary") or {}).get("tokens") or 0)
    summary = make_summary(text, covered, previous=asked.previous, tokens=summary_tokens,
                           replaced_tokens=replaced, profile=profile.name, model=asked.model,
                           attempts=len(outcome.attempts), reappended=outcome.reappended)
    run.record.update(summary_id=summary.id, range=[summary.first, summary.last], summary_tokens=summary_tokens,
                      replaced_tokens=replaced, reappended=len(outcome.reappended), prose_cut=outcome.prose_cut,
                      covered=sorted(covered), artifacts=outcome.artifact_report())
    if outcome.dropped:
        note = artifacts_note(outcome)
        run.record.setdefault("diagnostics", []).append(note)
        log.warning("%s", note)
    return summary, replaced


def artifacts_note(outcome: SummaryOutcome) -> str:
    """The diagnostic for artifacts a summary lost: how many, of which kinds (never silent)."""
    kinds = outcome.artifact_report()["dropped_kinds"]
    what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"compaction: {len(outcome.dropped)} of {outcome.artifacts} verbatim artifacts of the summarized "
            f"messages did not fit the summary cap and are not in the summary ({what})")


@dataclass
class _CompactionRun:
    """One run past the plan: the request, what the plan said, the stored state and the record being filled."""

    request: PreviewRequest
    registries: Registries | None
    generation_id: str
    on_progress: Callable[[ProgressEvent], None] | None
    prepared: PreparedPrompt
    info: dict[str, Any]
    state: CompactionState
    record: dict[str, Any]

    def report(self, state: ProgressState, label: str, text: str, **detail: Any) -> None:
        """One progress event of the ``compaction:<generation_id>`` step."""
        if self.on_progress is not None:
            self.on_progress(ProgressEvent(step_id=f"compaction:{self.generation_id}", step="compaction",
                                           label=label, state=state, text=text, detail=detail))

    def _prepare(self, state: CompactionState, *, just_compacted: bool = False) -> tuple[PreviewRequest,
                                                                                          PreparedPrompt]:
        req = with_state(self.request, state, just_compacted=just_compacted)
        return req, pipeline.prepare(req, registries=self.registries)

    def fall_back(self, why: str, error_code: str | None, *, stall: bool = False) -> CompactionOutcome:
        """Truncation instead of a summary: one more failure in a row (a stall remembered), re-prepared."""
        state, info = self.state, self.info
        failures = state.failures + 1
        new = state.model_copy(update={
            "failures": failures,
            "stall": {"prompt_tokens": info["prompt_tokens"], "messages": len(self.request.chat.messages)} if stall
            else state.stall,
            "last": {"status": "fell_back", "reason": why, "error_code": error_code,
                     "generation_id": self.generation_id}})
        log.warning("compaction fell back to truncation (%s; %s); failure %d in a row", why,
                    error_code or "no error code", failures)
        self.record.update(status="fell_back", fallback="truncation", reason=why, failures=failures)
        if failures >= MAX_FAILURES:
            self.record["disabled"] = True
        req, again = self._prepare(new)
        self.record["prompt_tokens_after"] = again.preview.prompt_tokens
        self.report("failed", LABEL_FELL_BACK,
                    f"fell back to truncation: {why} ({error_code or 'no error code'}); the oldest history was "
                    "truncated instead", outcome="fell_back", error_code=error_code, reason=why)
        return CompactionOutcome(req, new, self.record, again)

    def compacted(self, summary: CompactionSummary, replaced: int, summary_tokens: int) -> CompactionOutcome:
        """The new summary stored in the state and the prompt re-prepared; truncated to the target if still over."""
        record, generation_id = self.record, self.generation_id
        new = self.state.model_copy(update={"summary": summary, "failures": 0, "stall": None,
                                            "last": {"status": "compacted", "generation_id": generation_id}})
        req, again = self._prepare(new, just_compacted=True)
        after = again.preview.strategy_info
        if not after.get("summary"):  # the strategy would not send it (it pushed out a newest message)
            record["summary_id"] = None
            return self.fall_back("the summary would push out one of the newest messages", None, stall=True)
        record["prompt_tokens_after"] = again.preview.prompt_tokens
        record["failures"] = 0
        if after.get("prompt_tokens", 0) >= self.info["trigger"]:
            # no progress below the trigger: this pass truncated to the target; remember the stall
            new = new.model_copy(update={"stall": {"prompt_tokens": after.get("prompt_tokens"),
                                                   "messages": len(self.request.chat.messages)},
                                         "last": {"status": "compacted_then_truncated",
                                                  "generation_id": generation_id}})
            req, again = self._prepare(new, just_compacted=True)
            record["status"] = "compacted_then_truncated"
            record["fallback"] = "truncation"
        else:
            record["status"] = "compacted"
        record["truncated_to_target"] = bool(again.preview.strategy_info.get("truncated_to_target"))
        log.info("compacted messages #%d–#%d into %d tokens (replaced %d)", summary.first, summary.last,
                 summary_tokens, replaced)
        self.report("done", LABEL_DONE, done_text(record, summary, replaced, summary_tokens),
                    outcome=record["status"], summary_tokens=summary_tokens, replaced_tokens=replaced,
                    range=[summary.first, summary.last], messages=len(record.get("covered") or summary.covered),
                    artifacts=record.get("artifacts"))
        return CompactionOutcome(req, new, record, again)


def done_text(record: dict[str, Any], summary: CompactionSummary, replaced: int, summary_tokens: int) -> str:
    """The finished row's words: ``compacted 12 messages (#0–#11, 3,400 tokens) into a 380-token summary; …``."""
    n = len(record.get("covered") or summary.covered)
    text = (f"compacted {n} message{'s' if n != 1 else ''} ({covers_label(summary.covered)}, {replaced:,} tokens) "
            f"into a {summary_tokens:,}-token summary")
    arts = record.get("artifacts") or {}
    if arts.get("reattached"):
        text += f"; {arts['reattached']} verbatim artifact{'s' if arts['reattached'] != 1 else ''} re-attached"
    if arts.get("dropped"):
        kinds = ", ".join(f"{v} {k}" for k, v in sorted((arts.get("dropped_kinds") or {}).items()))
        text += f"; {arts['dropped']} did not fit the cap ({kinds})"
    if record.get("status") == "compacted_then_truncated":
        text += "; still at the trigger, so the oldest history was also truncated to the target"
    return text


def _count_block(profile: TokenizerProfile, summary: CompactionSummary) -> int:
    """Tokens the summary's prompt block costs (header and chat-format overhead included)."""
    block = summary_block(summary)
    assert block.message is not None  # a summary block always carries its message
    return int(count_messages_tokens(profile, [block.message.to_provider()])[0])


#: Stands for the instructions' size when budgeting the summarizer's request.
SUMMARY_INSTRUCTIONS_SAMPLE = (
    "[loomscope:compaction] You compress the earlier part of a conversation so that it can go on without it. "
    "Write a concise summary of the messages below: who wants what, decisions, facts, names, numbers and ids, "
    "what was done and what is still open. Copy every code block, file path, error message and stack trace "
    "exactly as written. Answer with the summary only, at most 100000 tokens. Your previous summary was "
    "100000 tokens, over the limit of 100000: write a shorter one. Summary so far: Messages to summarize:")
