"""The pipeline shared by preview and generation (SPEC §2).

``prepare(request)`` runs every step up to the provider call and returns the final provider
messages with the preview that explains them; ``preview(request)`` returns just the preview.
Generation (``engine.generation``) calls ``prepare`` and sends ``messages`` only when
``budget_ok``.

Steps: 1 resolve model → tokenizer profile and context limit (unknown models get
``generic-approx`` and a warning); 2 reply reserve; 3 lorebook activation and assembly
through the stage registry; 4 one batched count per block (OpenAI chat accounting);
5 the selected strategy; 6 host checks (a strategy that removes a protected block or splits a
tool group is rejected and ``truncate`` used instead, with a diagnostic); 7 interceptors on the
final provider messages; 8 mandatory recount and a final shifting pass; 9
``TOKEN_BUDGET_EXCEEDED`` when the protected blocks alone exceed the budget; 10 every block
reported with its status and stable reason.

A request carrying ``sillytavern`` (a chat imported from a SillyTavern folder) is assembled by
:func:`engine.assembly.sillytavern.prepare_sillytavern` instead: SillyTavern's Chat Completion
path, with its own history fill (newest first within the budget) in place of a strategy.
"""

from __future__ import annotations

import copy
import gc
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from .assembly import AssemblyContext, MacroContext, assemble
from .compaction.options import strategy_host_options
from .errors import LoomscopeError, SettingsError
from .incremental import frozen_blocks
from .plugins import InterceptorContext
from .registries import Registries, default_registries, shared_registries
from .resolve import LorebookPlan, SpeakerNames, lorebook_plan, model_profile_and_limit, speaker_names
from .schema.blocks import Block, BlockKind, ShiftResult
from .schema.messages import ChatMessage
from .schema.preview import ContextPreview, PreviewBlock, PreviewError, TokenizerInfo
from .schema.request import PreviewRequest
from .schema.trace import TraceRecord
from .shifting import (
    ToolGroups,
    check_shift_result,
    find_tool_groups,
    shift_context,
    tool_sequence_problems,
)
from .tokenizers import (
    REPLY_PRIMING_TOKENS,
    TokenizerProfile,
    content_part_warnings,
    count_messages_tokens,
    count_tools_tokens,
    prompt_count,
)

if TYPE_CHECKING:
    from .lorebook.models import ActivationResult

_PREVIEW_BLOCKS = TypeAdapter(list[PreviewBlock])


@dataclass(frozen=True)
class PreparedPrompt:
    """The outcome of steps 1–9.

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


def preview(request: PreviewRequest, *, registries: Registries | None = None) -> ContextPreview:
    """What the model would see for ``request``, and why (no side effects)."""
    return prepare(request, registries=registries).preview


def _remap_trace(activation: ActivationResult, plan: LorebookPlan) -> list[TraceRecord]:
    """The activation's trace with ``book_index`` pointing into ``plan.books``.

    A duplicate book's entries get ``LOREBOOK_DUPLICATE_BOOK`` records pointing at the book that activated them.
    """
    distinct = plan.order  # activation index → book index
    out: list[TraceRecord] = []
    for rec in activation.trace:
        idx = rec.book_index
        if 0 <= idx < len(distinct) and distinct[idx] != idx:
            rec = TraceRecord.model_construct(**{**rec.__dict__, "book_index": distinct[idx]})
        out.append(rec)
    for i, d in enumerate(plan.duplicate_of):
        if d != i:
            book = plan.books[i]
            out.extend(TraceRecord(book=book.name, book_index=i, uid=entry.uid, comment=entry.comment,
                                   activated=False, code="LOREBOOK_DUPLICATE_BOOK",
                                   detail={"duplicate_of_book_index": d}, tokens=None)
                       for entry in book.entries)
    return out


def _activate(request: PreviewRequest, plan: LorebookPlan, profile: TokenizerProfile,
              budget: int, names: SpeakerNames) -> ActivationResult | None:
    if not plan.order:
        return None
    from .lorebook import activate

    return activate(
        plan.activated, request.chat.messages, request.settings.world_info,
        count_tokens=profile.count, context_limit=budget, user_name=names.user, char_name=names.char,
        character=request.character, persona=request.persona,
        chat_metadata=request.chat.metadata, book_scopes=[plan.scopes[i] for i in plan.order],
    )


def _provider_dict(block: Block) -> dict[str, Any] | None:
    return block.message.to_provider() if block.message is not None else None


def _count_blocks(profile: TokenizerProfile, blocks: list[Block]) -> dict[str, int]:
    msg_blocks = [b for b in blocks if b.message is not None]
    if profile.chat is not None:  # a chat template counts the blocks together, in prompt order
        tool_blocks = [b for b in blocks if b.message is None]
        pc = prompt_count(profile, [_provider_dict(b) for b in msg_blocks],  # type: ignore[misc]
                          [t for b in tool_blocks for t in (b.tools or [])])
        out = {b.id: c for b, c in zip(msg_blocks, pc.messages)}
        for k, b in enumerate(tool_blocks):
            out[b.id] = pc.tools if k == 0 else 0
        return out
    counts = count_messages_tokens(profile, [_provider_dict(b) for b in msg_blocks])  # type: ignore[misc]
    out = {b.id: c for b, c in zip(msg_blocks, counts)}
    for b in blocks:
        if b.message is None:
            out[b.id] = count_tools_tokens(profile, b.tools or [])
    return out


def _counter(profile: TokenizerProfile, tokens: dict[str, int]) -> Callable[[Block], int]:
    """Token count of a block.

    Precomputed for assembled blocks, counted on the fly for blocks a strategy creates (summaries), whose text may
    change between calls.
    """

    def count(block: Block) -> int:
        known = tokens.get(block.id)
        if known is not None and not block.id.startswith("s"):
            return known
        return _count_blocks(profile, [block])[block.id]

    return count


def _run_strategy(registries: Registries, name: str, blocks: list[Block], count: Callable[[Block], int],
                  budget: int, options: dict[str, Any], diagnostics: list[str],
                  groups: ToolGroups) -> ShiftResult:
    info = registries.strategies.get(name)
    honor_manual = bool(getattr(info, "honors_manual", False)) and options.get("honor_manual", True) is not False
    try:
        result = info.fn(blocks, count, budget, options)
        problems = check_shift_result(blocks, result, groups, honor_manual=honor_manual)
        by_id = {b.id: b for b in blocks}
        kept_total = (sum(count(by_id[k]) for k in result.kept if k in by_id)
                      + sum(t.remaining_tokens for t in result.truncated)
                      + sum(count(a) for a in result.added))
        if result.error is None and kept_total > budget:
            problems.append(f"left {kept_total} tokens for a budget of {budget}")
    except LoomscopeError:
        raise
    except Exception as exc:  # a plugin strategy must not break the pipeline
        problems = [f"raised {type(exc).__name__}: {exc}"]
    if problems:
        # The fallback may drop more than the strategy meant to, never send what the writer
        # removed: it honours manual exclusions and hidden messages whatever was selected.
        diagnostics.append(f"strategy {name!r} rejected ({'; '.join(problems)}); fell back to 'truncate' "
                           "(honouring manual exclusions and hidden messages)")
        result = shift_context(blocks, count, budget, honor_manual=True)
    return result


def _incomplete_group_warnings(blocks: list[Block], groups: ToolGroups) -> list[str]:
    """One warning per incomplete tool group (not hidden), naming its call ids and messages."""
    out: list[str] = []
    for gid, what in groups.incomplete.items():
        members = [b for b, g in zip(blocks, groups.group_of) if g == gid]
        if any(b.hidden for b in members):
            continue  # the writer hid it: HIDDEN says why it is not sent
        where = ", ".join(str(b.message_index) if b.message_index is not None else b.id for b in members)
        out.append(f"incomplete tool calls ({'; '.join(what)}): messages {where} are not sent "
                   "(TOOL_PAIR_INCOMPLETE; a provider rejects a call without its results)")
    return out


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while one preview allocates its blocks.

    A 10,000-message preview creates tens of thousands of short-lived objects next to a
    long-lived chat; the collector's full passes over that heap cost about a third of the
    preview's time, and nothing a preview builds is cyclic garbage.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def prepare(request: PreviewRequest, *, registries: Registries | None = None) -> PreparedPrompt:
    """Run pipeline steps 1–9 for ``request`` (see :func:`_prepare`)."""
    with _gc_paused(), frozen_blocks():
        return _prepare(request, registries)


def _prepare(request: PreviewRequest, registries: Registries | None) -> PreparedPrompt:
    """Run pipeline steps 1–9 for ``request``.

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` (reply reserve ≥ context limit), ``UNKNOWN_STRATEGY``,
        ``UNKNOWN_TOKENIZER``. A budget overflow is not raised: it is reported in
        ``preview.error`` with ``budget_ok=False``.
    """
    reg = registries or shared_registries()
    if request.sillytavern is not None:
        # a chat from a SillyTavern folder: SillyTavern's own Chat Completion assembly
        from .assembly.sillytavern import prepare_sillytavern

        return prepare_sillytavern(request, reg)
    settings = request.settings
    warnings: list[str] = []
    diagnostics: list[str] = []

    # 1. model → profile and limit
    resolved = model_profile_and_limit(settings, reg.tokenizers)
    profile = resolved.tokenizer
    assert profile is not None
    limit = resolved.context_limit
    warnings.extend(resolved.warnings)
    reg.strategies.get(settings.strategy)  # fail early on an unknown strategy

    # 2. reply reserve and budget
    reserve = settings.resolve_reply_reserve(limit)
    if reserve >= limit:
        raise SettingsError("INVALID_SETTINGS",
                            f"reply reserve {reserve} must be below the context limit {limit}")
    budget = limit - reserve
    tools = list(request.chat.tools)
    priming = REPLY_PRIMING_TOKENS  # tokens no block owns; a chat template's own figure after assembly

    # 3. lorebook activation and assembly
    card = request.character
    names = speaker_names(request)
    user, char = names.user, names.char
    plan = lorebook_plan(request)
    activation = _activate(request, plan, profile, budget, names)
    if activation is not None:
        diagnostics.extend(getattr(activation, "diagnostics", []) or [])
    values = {
        "persona": request.persona.description if request.persona else "",
        "description": card.description if card else "",
        "personality": card.personality if card else "",
        "scenario": card.scenario if card else "",
        "mesExamples": card.mes_example if card else "",
        "charPrompt": card.system_prompt if card else "",
        "charJailbreak": card.post_history_instructions if card else "",
        "charVersion": card.character_version if card else "",
        "char_version": card.character_version if card else "",
        "model": settings.model,
        "maxPrompt": str(budget),
        "group": char,
    }
    msgs = request.chat.messages
    last = next((m.text() for m in reversed(msgs)), "")
    values["lastMessage"] = last
    values["lastUserMessage"] = next((m.text() for m in reversed(msgs) if m.role == "user"), "")
    values["lastCharMessage"] = next((m.text() for m in reversed(msgs) if m.role == "assistant"), "")
    values["input"] = values["lastUserMessage"]
    ctx = AssemblyContext(request, MacroContext(user=user, char=char, values=values,
                                                seed=settings.world_info.seed), activation)
    blocks = assemble(ctx, reg.stages, settings.template)
    warnings.extend(ctx.warnings)

    # 4. count once per block
    tokens = _count_blocks(profile, blocks)
    # Audio parts are counted by estimate: the prompt is then approximate, with a safety margin.
    approximate = profile.approximate or any(
        b.message is not None and isinstance(b.message.content, list) and any(
            isinstance(p, dict) and p.get("type") == "input_audio" for p in b.message.content)
        for b in blocks)
    safety = math.ceil(budget * settings.safety_margin_percent / 100) if approximate else 0
    shift_budget = budget - safety - priming
    sendable = [b for b in blocks if b.id not in ctx.pre_excluded]
    if profile.chat is not None:  # template counts depend on the neighbours: count what is sent
        if len(sendable) != len(blocks):
            tokens.update(_count_blocks(profile, sendable))
        priming = prompt_count(profile, [_provider_dict(b) for b in sendable if b.message is not None],  # type: ignore[misc]
                               []).overhead
        shift_budget = budget - safety - priming

    # 5–6. strategy with host checks
    groups = find_tool_groups(sendable)
    group_of = {b.id: g for b, g in zip(sendable, groups.group_of) if g}
    warnings.extend(_incomplete_group_warnings(sendable, groups))
    for cid in sorted(groups.reused_ids):
        warnings.append(f"tool-call id {cid!r} is used by more than one call; each result is paired "
                        "with the nearest earlier call carrying it")
    count = _counter(profile, tokens)
    shift_tokens = dict(tokens)  # the counts the strategy works with (the fit map reuses them)
    options = {**settings.strategy_options,
               **strategy_host_options(request, context_limit=limit, prompt_overhead=priming)}
    result = _run_strategy(reg, settings.strategy, sendable, count, shift_budget,
                           options, diagnostics, groups)
    diagnostics.extend(result.diagnostics)
    warnings.extend(str(w) for w in result.info.get("warnings", []) or [])
    status: dict[str, tuple[str, str]] = {bid: ("excluded", r) for bid, r in ctx.pre_excluded.items()}
    for e in result.excluded:
        status[e.block_id] = ("excluded", e.reason)
    truncated = {t.block_id: t for t in result.truncated}
    for t in result.truncated:
        status[t.block_id] = ("truncated", t.reason)
    for k in result.kept:
        status[k] = ("kept", result.kept_reasons.get(k, "FITS_BUDGET"))

    by_id = {b.id: b for b in blocks}
    final_blocks = [by_id[k] for k in result.kept]
    interceptor_diags: list[str] = []
    ordered = list(blocks)
    for added in result.added:  # strategy-made blocks (summaries) go before their anchor
        tokens[added.id] = count(added)
        status[added.id] = ("kept", added.reason)
        anchor = result.added_before.get(added.id)
        for seq in (ordered, final_blocks):
            at = next((k for k, b in enumerate(seq) if b.id == anchor), len(seq))
            seq.insert(at, added)

    # 7–8. interceptors, then a mandatory recount and final shifting pass
    if reg.interceptors.names() and result.error is None:
        ictx = InterceptorContext(settings.model, budget, profile.name, settings.strategy)
        final_blocks, added, removed = _apply_interceptors(reg, final_blocks, ictx, interceptor_diags)
        if added:
            tokens.update(_count_blocks(profile, added))
            ordered = _merge_order(ordered, final_blocks)
        for bid in removed:
            status[bid] = ("excluded", "INTERCEPTOR_REMOVED")
        final_pass = shift_context(final_blocks, count, shift_budget)
        for e in final_pass.excluded:
            status[e.block_id] = ("excluded", e.reason)
        for k in final_pass.kept:
            if k not in status or status[k][0] != "kept":
                status[k] = ("kept", final_pass.kept_reasons.get(k, "INTERCEPTOR_ADDED"))
        keep = set(final_pass.kept)
        final_blocks = [b for b in final_blocks if b.id in keep]
        diagnostics.extend(f"interceptor: {d}" for d in interceptor_diags)

    # 9. recount independently and report
    messages = [_provider_dict(b) for b in final_blocks if b.message is not None]
    send_tools = tools if any(b.kind == BlockKind.TOOLS for b in final_blocks) else []
    final = prompt_count(profile, messages, send_tools)  # type: ignore[arg-type]
    prompt_tokens = final.total
    if profile.chat is not None and result.error is None:
        # A template merges turns (Mistral's system prompt, consecutive user turns), so dropping a
        # block can move a few tokens between its neighbours: shift again until the exact count fits.
        for _ in range(8):
            over = prompt_tokens - (budget - safety)
            if over <= 0:
                break
            again = shift_context(final_blocks, count, shift_budget - over)
            if again.error:
                break
            for e in again.excluded:
                status[e.block_id] = ("excluded", e.reason)
            keep = set(again.kept)
            final_blocks = [b for b in final_blocks if b.id in keep]
            messages = [_provider_dict(b) for b in final_blocks if b.message is not None]
            send_tools = tools if any(b.kind == BlockKind.TOOLS for b in final_blocks) else []
            final = prompt_count(profile, messages, send_tools)  # type: ignore[arg-type]
            prompt_tokens = final.total
    warnings.extend(content_part_warnings(messages))  # type: ignore[arg-type]
    template_tokens: dict[str, int] = {}
    msg_final = [b for b in final_blocks if b.message is not None]
    for b, n, t in zip(msg_final, final.messages, final.template):
        if b.id not in truncated:  # kept blocks show their exact share of the final prompt
            tokens[b.id] = n
            if profile.chat is not None:
                template_tokens[b.id] = t
    for b in final_blocks:
        if b.message is None:
            tokens[b.id] = final.tools
    error = None
    if result.error:
        error = PreviewError(
            code="TOKEN_BUDGET_EXCEEDED",
            message=(f"the protected blocks alone need {result.protected_tokens + priming} "
                     f"tokens but the budget is {budget - safety} tokens "
                     f"(context {limit} − reply reserve {reserve}{f' − safety margin {safety}' if safety else ''})"),
            details={"protected_tokens": result.protected_tokens + priming,
                     "budget": budget - safety,
                     "protected_blocks": [b.id for b in sendable if b.protected or b.pinned]},
        )
    elif prompt_tokens > budget - safety:  # pragma: no cover - would be a bug in shifting
        raise AssertionError(f"final prompt {prompt_tokens} tokens exceeds budget {budget - safety}")

    trace_by_source: dict[str, dict[str, Any]] = {}
    lorebook_trace: list[TraceRecord] = []
    if activation is not None:
        lorebook_trace = _remap_trace(activation, plan)
        lorebook_sources = {b.source for b in blocks}
        for rec in lorebook_trace:
            source = f"lorebook:{rec.book}:{rec.uid}"
            if rec.code != "LOREBOOK_DUPLICATE_BOOK" and source in lorebook_sources:
                trace_by_source[source] = rec.model_dump(mode="json")
    # specific reasons and the fit map (additive details; see engine.shifting.explain / fitmap)
    from .shifting.explain import explain_blocks
    from .shifting.fitmap import TRUNCATE_LIKE, fit_windows, pipeline_shift_budget

    shown_tokens = {b.id: (truncated[b.id].remaining_tokens if b.id in truncated else tokens.get(b.id, 0))
                    for b in ordered}
    explained = explain_blocks(ordered, status, shown_tokens, shift_budget, group_of, trace_by_source)
    fits = fit_windows(
        sendable, shift_tokens, group_of,
        pipeline_shift_budget(settings.resolve_reply_reserve, settings.safety_margin_percent,
                              profile.approximate, priming,
                              fixed_reserve=settings.reply_reserve if isinstance(settings.reply_reserve, int) else None),
        never_sent=frozenset(sendable[i].id for i in groups.orphans),
        honor_manual=settings.strategy == "manual")
    fit_method = "exact" if settings.strategy in TRUNCATE_LIKE else "truncate-order"
    preview_blocks = []
    for pos, b in enumerate(ordered):
        st, reason = status.get(b.id, ("excluded", "INTERCEPTOR_REMOVED"))
        t = truncated.get(b.id)
        trace = b.trace
        if b.kind == BlockKind.LOREBOOK and b.source in trace_by_source:
            trace = {**(trace or {}), **trace_by_source[b.source]}
        if b.id in result.trace_updates:  # the strategy's notes (vector-recall relevance, ...)
            trace = {**(trace or {}), **result.trace_updates[b.id]}
        preview_blocks.append(dict(
            id=b.id, kind=b.kind.value, role=b.role, source=b.source, position=pos,
            tokens=t.remaining_tokens if t else tokens[b.id], status=st, reason=reason,  # type: ignore[arg-type]
            protected=b.protected, pinned=b.pinned, group=group_of.get(b.id), text=b.text(),
            name=b.message.name if b.message else None,
            original_tokens=t.original_tokens if t else None,
            summary_id=t.summary_id if t else None, manual_excluded=b.manual_excluded,
            message_index=b.message_index, trace=trace, template_tokens=template_tokens.get(b.id),
            reason_detail=explained[b.id].text if b.id in explained else None,
            reason_data=explained[b.id].data if b.id in explained else None,
            fit_window=fits.get(b.message_index) if b.message_index is not None else None,
        ))
    preview_blocks = _PREVIEW_BLOCKS.validate_python(preview_blocks)
    pv = ContextPreview(
        model=settings.model,
        tokenizer=TokenizerInfo(profile=profile.name, approximate=approximate, version=profile.version),
        context_limit=limit, reply_reserve=reserve, budget=budget, safety_margin=safety,
        headroom=budget - safety - prompt_tokens, prompt_tokens=prompt_tokens, overhead_tokens=final.overhead,
        strategy=settings.strategy, warnings=warnings, error=error, blocks=preview_blocks,
        lorebook_trace=lorebook_trace, messages=messages, tools=send_tools,  # type: ignore[arg-type]
        diagnostics=diagnostics, strategy_info=dict(result.info), fit_method=fit_method,
    )
    timed = dict(activation.timed_effects) if activation is not None else None
    return PreparedPrompt(pv, messages, send_tools, profile, error is None, interceptor_diags,  # type: ignore[arg-type]
                          timed)


def _merge_order(original: list[Block], final: list[Block]) -> list[Block]:
    """Prompt order after interceptors: the original order with added blocks after their predecessor."""
    known = {b.id for b in original}
    after: dict[str | None, list[Block]] = {}
    prev: str | None = None
    for b in final:
        if b.id in known:
            prev = b.id
        else:
            after.setdefault(prev, []).append(b)
    out = list(after.get(None, []))
    for b in original:
        out.append(b)
        out.extend(after.get(b.id, []))
    return out


def _apply_interceptors(reg: Registries, kept: list[Block], ictx: InterceptorContext,
                        diags: list[str]) -> tuple[list[Block], list[Block], list[str]]:
    """Run interceptors over the provider messages of ``kept`` (tools block passes through).

    Returns (final blocks in order, blocks the interceptors added, ids they removed). Output
    that is not a list of valid chat messages, output that would split a tool call from its
    results (:func:`engine.shifting.tool_sequence_problems`), or an interceptor that raises, is
    ignored with a diagnostic. Protected blocks an interceptor removed or changed are restored
    in place.
    """
    msg_blocks = [b for b in kept if b.message is not None]
    current: list[tuple[dict[str, Any], Block | None]] = [(_provider_dict(b), b) for b in msg_blocks]  # type: ignore[misc]
    added: list[Block] = []
    counter = 0
    for name, fn in reg.interceptors.items():
        before = [m for m, _ in current]
        n_added = len(added)
        try:
            out, notes = fn(copy.deepcopy(before), ictx)
            if not isinstance(out, list):
                raise TypeError(f"returned {type(out).__name__}, expected a list of messages")
            parsed = [ChatMessage.model_validate(m) for m in out]
        except (ValidationError, TypeError, ValueError) as exc:
            diags.append(f"{name}: returned invalid data ({str(exc).splitlines()[0]}); its output was ignored")
            continue
        except Exception as exc:
            diags.append(f"{name}: raised {type(exc).__name__}: {exc}; its output was ignored")
            continue
        diags.extend(f"{name}: {n}" for n in (notes or []))
        pool = list(current)
        nxt: list[tuple[dict[str, Any], Block | None]] = []
        for msg in parsed:
            prov = msg.to_provider()
            match = next((k for k, (m, _) in enumerate(pool) if m == prov), None)
            if match is not None:
                nxt.append(pool.pop(match))
            else:
                counter += 1
                block = Block(id=f"i{counter}", kind=BlockKind.INSTRUCTION, role=msg.role,
                              source=f"interceptor:{name}", message=msg, reason="INTERCEPTOR_ADDED",
                              priority=float("-inf"))
                added.append(block)
                nxt.append((prov, block))
        # restore protected blocks the interceptor dropped or changed, at their old place
        for m, b in pool:
            if b is not None and (b.protected or b.pinned):
                diags.append(f"{name}: removed or changed protected block {b.id} ({b.source}); restored")
                idx = msg_blocks.index(b) if b in msg_blocks else len(nxt)
                insert_at = next((k for k, (_, ob) in enumerate(nxt)
                                  if ob is not None and ob in msg_blocks and msg_blocks.index(ob) > idx), len(nxt))
                nxt.insert(insert_at, (m, b))
        # A plugin cannot make the request one a provider rejects: output that splits a tool
        # call from its results (a message inside the batch, half a pair) is ignored.
        broken = [p for p in tool_sequence_problems([m for m, _ in nxt])
                  if p not in tool_sequence_problems(before)]
        if broken:
            diags.append(f"{name}: its output would split a tool call from its results ({broken[0]}); "
                         "its output was ignored")
            del added[n_added:]
            continue
        current = nxt
    final_ids = {id(b) for _, b in current}
    removed = [b.id for b in msg_blocks if id(b) not in final_ids]
    result = [b for b in kept if b.message is None] + [b for _, b in current if b is not None]
    # keep the tools block first, as it is sent as the request's `tools` field
    added = [b for b in added if id(b) in final_ids]
    return result, added, removed


__all__ = ["PreparedPrompt", "Registries", "default_registries", "prepare", "preview"]
