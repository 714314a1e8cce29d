"""Generation: the SPEC §2 pipeline, then one request to an OpenAI-compatible provider (SPEC §6).

The request follows the preview's path (SPEC §9.1): a Chat Completion preview
(``ContextPreview.api == "chat_completion"``) posts its ``messages`` to ``…/chat/completions``; a
Text Completion preview posts its exact ``prompt`` string with ``stop`` and ``max_tokens`` = the
reply length to ``…/v1/completions`` (:class:`~engine.providers.TextCompletionsClient`), and the
audit keeps ``api``, ``prompt``, ``stop`` and the blocks with their spans. An endpoint without the
text-completion route closes the audit ``failed`` / ``PROVIDER_NO_TEXT_COMPLETION``.

``generate`` runs :func:`engine.pipeline.prepare` (the same steps as the preview), creates the
:class:`~engine.schema.audit.PromptContextAudit` *before* any network call, refuses to send
anything over budget (``TOKEN_BUDGET_EXCEEDED``), streams the reply while reporting
:class:`~engine.schema.ProgressEvent` (step ``"stream"``), honours a cancel event, and closes the
audit as ``completed``, ``failed`` or ``cancelled`` with a normalized error code. Provider
failures never raise; the audit says what happened. The audit never holds the API key or the
upstream response body.

``generate_and_store`` is the library flavour: optional new user message, request built from
the stored chat, and the audit plus the reply stored in one transaction.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from . import pipeline  # pipeline.prepare looked up per call (tests swap it for a Text Completion one)
from .compaction.run import run_compaction
from .errors import ProviderError
from .providers import (
    ChatCompletionsClient,
    ProviderReply,
    TextCompletionsClient,
    public_endpoint,
    reply_limit_fields,
    resolve_api_key,
)
from .providers.config import ProviderConfig
from .providers.openai_compat import check_api_key
from .schema import ChatMessage, ContextPreview, ContextSettings, PreviewRequest, ProgressEvent
from .schema.audit import PromptContextAudit
from .schema.messages import ToolCall

if TYPE_CHECKING:  # pragma: no cover
    from .pipeline import PreparedPrompt
    from .registries import Registries
    from .storage import Store

__all__ = ["GenerationResult", "ProviderConfig", "generate", "generate_and_store", "resolve_api_key",
           "speaker_name"]

#: Default endpoint when neither ``--base-url`` nor ``$LOOMSCOPE_BASE_URL``/``$OPENAI_BASE_URL`` is set.
DEFAULT_BASE_URL = "https://api.openai.com/v1"

ProgressCallback = Callable[[ProgressEvent], None]


@dataclass(frozen=True)
class GenerationResult:
    """The closed audit and, when completed, the reply as a new assistant message.

    ``reply_index`` is the reply's message index once stored (``generate_and_store``).
    """

    audit: PromptContextAudit
    reply: ChatMessage | None = None
    reply_index: int | None = None
    #: World Info sticky/cooldown state to store with a completed generation (see
    #: ``PreparedPrompt.timed_effects``); ``None`` when there is nothing to store.
    timed_effects: dict[str, Any] | None = None
    #: The chat's compaction state after this run (new summary, failure count) to store with the
    #: chat (``Store.audits.record_generation(compaction=...)``); ``None`` when it did not change.
    compaction_state: Any = None


def _now() -> datetime:
    return datetime.now(UTC)


def _close(audit: PromptContextAudit, status: str, code: str | None = None,
           message: str | None = None, **extra: Any) -> PromptContextAudit:
    return audit.model_copy(update={"status": status, "error_code": code, "error_message": message,
                                    "finished_at": _now(), **extra})


def speaker_name(request: PreviewRequest, role: str) -> str | None:
    """The ``name`` a new message of ``role`` gets: the one its chat's messages carry.

    A chat whose messages of that role carry a speaker ``name`` (SillyTavern chats: the
    character's and the user's names on every line) gets the same on a new message — for the
    assistant the character (card name, else the chat's character name, else the latest name
    used), for the user the persona (else the chat's user name, else the latest). A chat whose
    messages carry no names (OpenAI message arrays) gets none. Tool-call turns are not looked at.
    """
    chat = request.chat
    named = [m.name for m in chat.messages if m.role == role and m.name and not m.tool_calls]
    if not named:
        return None
    if role == "assistant":
        card = request.character
        return (card.name if card is not None and card.name else None) or chat.character_name or named[-1]
    persona = request.persona
    return (persona.name if persona is not None and persona.name else None) or chat.user_name or named[-1]


#: The strategy whose generations run compaction first (SPEC §4).
COMPACT_STRATEGY = "compact"


def generate(
    request: PreviewRequest,
    provider: ProviderConfig,
    *,
    chat_id: str,
    registries: Registries | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    on_audit_created: Callable[[PromptContextAudit], None] | None = None,
    summarizer: Callable[[list[dict[str, Any]]], str] | None = None,
) -> GenerationResult:
    """Run the pipeline for ``request`` and, if the prompt fits, ask the provider for a reply.

    With the ``compact`` strategy, compaction runs first (``engine.compaction.run``): when the
    prompt reaches the trigger, old history is summarized by the provider (a progress step
    ``"compaction"`` reports it), the summary replaces that history in the prompt, and
    ``GenerationResult.compaction_state`` carries it (with the failure count) to store with the
    chat; ``audit.compaction`` records what happened. ``summarizer`` replaces the summary request
    (tests, plugins). The rest is :func:`_generate`.
    """
    generation_id = uuid.uuid4().hex
    if request.settings.strategy != COMPACT_STRATEGY:
        return _generate(request, provider, chat_id=chat_id, registries=registries, on_progress=on_progress,
                         cancel=cancel, on_audit_created=on_audit_created, generation_id=generation_id)

    try:
        outcome = run_compaction(request, provider, generation_id=generation_id, registries=registries,
                                 on_progress=on_progress, cancel=cancel, summarizer=summarizer)
    except ProviderError as exc:  # cancelled while summarizing: nothing was compacted
        if on_progress is not None:
            on_progress(ProgressEvent(step_id=f"compaction:{generation_id}", step="compaction",
                                      label="Compacting context… cancelled", state="cancelled",
                                      detail={"error_code": exc.code}))
        return _generate(request, provider, chat_id=chat_id, registries=registries, on_progress=on_progress,
                         cancel=cancel, on_audit_created=on_audit_created, generation_id=generation_id,
                         compaction_record={"status": "cancelled"})
    result = _generate(outcome.request, provider, chat_id=chat_id, registries=registries, on_progress=on_progress,
                       cancel=cancel, on_audit_created=on_audit_created, generation_id=generation_id,
                       prepared=outcome.prepared, compaction_record=outcome.record)
    return replace(result, compaction_state=outcome.state)


def _generate(
    request: PreviewRequest,
    provider: ProviderConfig,
    *,
    chat_id: str,
    registries: Registries | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    on_audit_created: Callable[[PromptContextAudit], None] | None = None,
    generation_id: str | None = None,
    prepared: PreparedPrompt | None = None,
    compaction_record: dict[str, Any] | None = None,
) -> GenerationResult:
    """Run the pipeline for ``request`` and, if the prompt fits, ask the provider for a reply.

    Parameters
    ----------
    request:
        Everything to assemble (see :class:`~engine.schema.PreviewRequest`).
    provider:
        Endpoint, model, key, timeout (seconds) and streaming choice.
    chat_id:
        The library chat the audit belongs to.
    registries:
        Pipeline registries (strategies, interceptors, ...); default the shared built-ins.
    on_progress:
        Receives ``ProgressEvent(step="stream")`` updates (partial text in ``text``) on the
        calling thread, ending with state ``done``, ``failed`` or ``cancelled``.
    cancel:
        Set it (from any thread) to abort; the audit is then ``cancelled`` / ``CANCELLED``.
    on_audit_created:
        Called with the ``pending`` audit before any network call.

    Returns
    -------
    GenerationResult
        ``audit.status`` is ``completed`` (``reply`` set), ``failed`` (``error_code`` one of
        ``TOKEN_BUDGET_EXCEEDED`` — nothing was sent — or a ``PROVIDER_*`` code) or
        ``cancelled`` (``CANCELLED``).

    Raises
    ------
    SettingsError
        From :func:`engine.pipeline.prepare` for invalid settings (unknown strategy, reserve ≥
        limit) — before any audit exists, as no prompt could be built.
    """
    created_at = _now()
    prepared = prepared if prepared is not None else pipeline.prepare(request, registries=registries)
    model = provider.model or request.settings.model
    reply_limit = _reply_limit(prepared.preview, model, provider)
    audit = _pending_audit(prepared, provider, model, chat_id=chat_id,
                           generation_id=generation_id or uuid.uuid4().hex, created_at=created_at,
                           compaction_record=compaction_record)
    if on_audit_created is not None:
        on_audit_created(audit)
    refused = _refused(audit, prepared, provider)
    if refused is not None:
        return GenerationResult(refused)
    report = _stream_reporter(on_progress, f"stream:{audit.generation_id}")
    report("running", "", model=model, prompt_tokens=prepared.preview.prompt_tokens)
    # What goes into the body besides messages and tools, recorded before the call.
    audit = audit.model_copy(update={"request_params": {**_extra_fields(provider.extra_body), "model": model,
                                                        "stream": provider.stream, **reply_limit}})
    if prepared.preview.api == TEXT_COMPLETION:
        return _send_text(request, prepared, provider, model, reply_limit, audit, report, cancel)
    return _send(request, prepared, provider, model, reply_limit, audit, report, cancel)


#: ``ContextPreview.api`` of a SillyTavern Text Completion prompt (one string, SPEC §9.1).
TEXT_COMPLETION = "text_completion"


#: Body fields Loomscope sets itself; ``ProviderConfig.extra_body`` never replaces them.
OWN_FIELDS = frozenset({"model", "messages", "prompt", "stream", "stop", "tools", "max_tokens",
                        "max_completion_tokens"})


def _extra_fields(extra_body: dict[str, Any] | None) -> dict[str, Any]:
    """The ``extra_body`` fields that reach the body (sampler settings and the like), for the audit."""
    return {k: v for k, v in (extra_body or {}).items() if k not in OWN_FIELDS}


def _reply_limit(preview: ContextPreview, model: str, provider: ProviderConfig) -> dict[str, int]:
    """The reply-limit fields of a request for ``preview``.

    Text Completion: always ``max_tokens`` = the reply length (the legacy Completions API knows no
    other; ``reply_limit_param="none"`` sends none). Chat Completion: per
    :func:`~engine.providers.reply_limit_fields`.
    """
    if preview.api == TEXT_COMPLETION:
        if provider.reply_limit_param == "none" or preview.reply_reserve <= 0:
            return {}
        return {"max_tokens": preview.reply_reserve}
    return reply_limit_fields(model, preview.reply_reserve, provider.reply_limit_param)


def _pending_audit(prepared: PreparedPrompt, provider: ProviderConfig, model: str, *, chat_id: str,
                   generation_id: str, created_at: datetime,
                   compaction_record: dict[str, Any] | None) -> PromptContextAudit:
    """The ``pending`` audit of a prepared prompt: what would be sent, before any network call."""
    pv = prepared.preview
    return PromptContextAudit(
        generation_id=generation_id,
        chat_id=chat_id,
        provider=public_endpoint(provider.base_url, provider.api_key),
        model=model,
        status="pending",
        created_at=created_at,
        context_limit=pv.context_limit,
        reply_reserve=pv.reply_reserve,
        budget=pv.budget,
        safety_margin=pv.safety_margin,
        prompt_tokens=pv.prompt_tokens,
        headroom=pv.headroom,
        strategy=pv.strategy,
        tokenizer=pv.tokenizer,
        blocks=list(pv.blocks),
        fit_windows=pv.fit_windows,
        reason_details=pv.reason_details,
        provider_messages=list(prepared.messages),
        tools=list(prepared.tools),
        interceptor_diagnostics=list(getattr(prepared, "interceptor_diagnostics", []) or []),
        warnings=list(pv.warnings),
        compaction=compaction_record,
        api=pv.api,
        prompt=pv.prompt,
        stop=list(pv.stop),
    )


def _refused(audit: PromptContextAudit, prepared: PreparedPrompt, provider: ProviderConfig) -> PromptContextAudit | None:
    """The ``failed`` audit when nothing may be sent (over budget, no messages, unusable key); else ``None``."""
    if not prepared.budget_ok:
        pv = prepared.preview
        message = pv.error.message if pv.error is not None else "the prompt does not fit the budget"
        return _close(audit, "failed", "TOKEN_BUDGET_EXCEEDED", message)
    if prepared.preview.api == TEXT_COMPLETION:
        if not prepared.preview.prompt:
            return _close(audit, "failed", "EMPTY_PROMPT", "nothing to send: the prompt string is empty")
    elif not prepared.messages:
        # An empty chat, or every message excluded: a provider rejects an empty message list.
        return _close(audit, "failed", "EMPTY_PROMPT", "nothing to send: the prompt has no messages")
    try:
        check_api_key(provider.api_key)
    except ProviderError as exc:  # a key no header can carry: refused here, nothing is sent
        return _close(audit, "failed", exc.code, exc.message)
    return None


ProgressState = Literal["running", "done", "failed", "cancelled"]
StreamReport = Callable[..., None]


def _stream_reporter(on_progress: ProgressCallback | None, step_id: str) -> StreamReport:
    """``report(state, text, **detail)``: one ``stream`` progress event (nothing without ``on_progress``)."""

    def report(state: ProgressState, text: str | None = None, **detail: Any) -> None:
        if on_progress is not None:
            on_progress(ProgressEvent(step_id=step_id, step="stream", label="Streaming reply…",
                                      state=state, text=text, detail=detail))

    return report


def _send(request: PreviewRequest, prepared: PreparedPrompt, provider: ProviderConfig, model: str,
          reply_limit: dict[str, int], audit: PromptContextAudit, report: StreamReport,
          cancel: threading.Event | None) -> GenerationResult:
    """Ask the provider (streaming when configured) and close the audit with the reply or the error."""
    client = ChatCompletionsClient(provider.base_url, provider.api_key, timeout_s=provider.timeout_s)
    try:
        reply = client.complete(
            model, prepared.messages, tools=prepared.tools or None, stream=provider.stream,
            extra_body=provider.extra_body,
            on_delta=lambda _piece, so_far: report("running", so_far),
            cancel=cancel, reply_limit=reply_limit,
        )
    except ProviderError as exc:
        status = "cancelled" if exc.code == "CANCELLED" else "failed"
        report(status, None, error_code=exc.code)
        return GenerationResult(_close(audit, status, exc.code, exc.message))
    try:
        tool_calls = [ToolCall.model_validate(c) for c in reply.tool_calls] or None
    except ValidationError:  # the client normalizes tool calls; this is the last line of defence
        report("failed", None, error_code="PROVIDER_BAD_RESPONSE")
        return GenerationResult(_close(audit, "failed", "PROVIDER_BAD_RESPONSE",
                                       "the provider's tool calls are malformed"))
    message = ChatMessage(role="assistant", content=reply.content if (reply.content or not tool_calls) else None,
                          tool_calls=tool_calls, name=speaker_name(request, "assistant"))
    closed = _close(audit, "completed", reply_chars=len(reply.content), finish_reason=reply.finish_reason,
                    usage=dict(reply.usage))
    report("done", reply.content, finish_reason=reply.finish_reason)
    return GenerationResult(closed, message, timed_effects=prepared.timed_effects)


def cut_at_stop(text: str, stop: list[str]) -> str:
    """A Text Completion reply as SillyTavern keeps it.

    Cut at the first stop string it holds (servers that ignore ``stop``), then without
    surrounding whitespace.

    SillyTavern 1.12.6 ``public/script.js`` ``cleanUpMessage``: the instruct stop sequence and
    the stopping strings end the reply; ``power_user.trim_spaces`` (default on) trims it.
    """
    cut = len(text)
    for s in stop:
        if s:
            i = text.find(s)
            if 0 <= i < cut:
                cut = i
    return text[:cut].strip()


def _send_text(request: PreviewRequest, prepared: PreparedPrompt, provider: ProviderConfig, model: str,
               reply_limit: dict[str, int], audit: PromptContextAudit, report: StreamReport,
               cancel: threading.Event | None) -> GenerationResult:
    """Post the preview's exact prompt string to ``…/v1/completions``; close the audit with the reply or the error."""
    pv = prepared.preview
    client = TextCompletionsClient(provider.base_url, provider.api_key, timeout_s=provider.timeout_s)
    try:
        reply = client.complete(
            model, pv.prompt or "", stop=list(pv.stop), max_tokens=reply_limit.get("max_tokens"),
            stream=provider.stream, extra_body=provider.extra_body,
            on_delta=lambda _piece, so_far: report("running", so_far), cancel=cancel,
        )
    except ProviderError as exc:
        status = "cancelled" if exc.code == "CANCELLED" else "failed"
        report(status, None, error_code=exc.code)
        return GenerationResult(_close(audit, status, exc.code, exc.message))
    return _completed(request, prepared, audit, report, reply, cut_at_stop(reply.content, list(pv.stop)))


def _completed(request: PreviewRequest, prepared: PreparedPrompt, audit: PromptContextAudit, report: StreamReport,
               reply: ProviderReply, text: str) -> GenerationResult:
    """The ``completed`` audit and the reply ``text`` as the character's new message."""
    message = ChatMessage(role="assistant", content=text, name=speaker_name(request, "assistant"))
    closed = _close(audit, "completed", reply_chars=len(reply.content), finish_reason=reply.finish_reason,
                    usage=dict(reply.usage))
    report("done", reply.content, finish_reason=reply.finish_reason)
    return GenerationResult(closed, message, timed_effects=prepared.timed_effects)


def generate_and_store(
    store: Store,
    chat_id: str,
    provider: ProviderConfig,
    *,
    message: str | None = None,
    settings: ContextSettings | None = None,
    registries: Registries | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    request: PreviewRequest | None = None,
) -> GenerationResult:
    """Generate for a stored chat and store the outcome.

    ``message`` (if given) is sent as a new user message and stored with the outcome (kept
    even if the provider fails or the run is cancelled, as chat front-ends do; not stored when
    the settings are invalid and nothing ran). ``settings`` overrides the chat's stored settings
    for this run only. The closed audit replaces the chat's previous one and the reply (when
    completed) is appended, in one transaction. ``request`` is what to send when the caller
    already holds the chat's request (the GUI's open document); by default it is built from the
    store (``Store.chats.build_request``). The GUI and the CLI store a generation only here.

    Raises
    ------
    NotFoundError
        ``CHAT_NOT_FOUND``.
    SettingsError
        Invalid settings (see :func:`generate`).
    """
    if request is None:
        request = store.chats.build_request(chat_id)
    user_message = (ChatMessage(role="user", content=message, name=speaker_name(request, "user"))
                    if message is not None else None)
    if user_message is not None:
        # Sent as the chat's next message, but stored only together with the audit: invalid
        # settings (raised by the pipeline before any audit exists) leave the chat untouched.
        chat = request.chat.model_copy(update={"messages": [*request.chat.messages, user_message]})
        request = request.model_copy(update={"chat": chat})
    if settings is not None:
        request = request.model_copy(update={"settings": settings})
    result = generate(request, provider, chat_id=chat_id, registries=registries,
                      on_progress=on_progress, cancel=cancel)
    index = store.audits.record_generation(result.audit, result.reply, user_message=user_message,
                                    timed_effects=result.timed_effects, compaction=result.compaction_state)
    return GenerationResult(result.audit, result.reply, index, result.timed_effects, result.compaction_state)
