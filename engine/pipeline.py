"""The pipeline shared by preview and generation (SPEC §2).

``prepare(request)`` runs every step up to the provider call and returns the final provider
messages with the preview that explains them; ``preview(request)`` returns just the preview.
Generation (``engine.generation``) calls ``prepare`` and sends ``messages`` only when
``budget_ok``.

Steps (one named function each, :func:`_prepare`): 1 resolve model → tokenizer profile and
context limit (unknown models get ``generic-approx`` and a warning); 2 reply reserve; 3 lorebook
activation and assembly through the stage registry; 4 one batched count per block (OpenAI chat
accounting); 5 the selected strategy; 6 host checks (a strategy that removes a protected block or
splits a tool group is rejected and ``truncate`` used instead, with a diagnostic); 7 interceptors
on the final provider messages; 8 mandatory recount and a final shifting pass; 9
``TOKEN_BUDGET_EXCEEDED`` when the protected blocks alone exceed the budget; 10 every block
reported with its status and stable reason.

Every request runs those ten steps, which read and write one run state
(:class:`~engine.runstate.RunState`); a step does its work on one of three paths:

* the block objects (this module): a plugin strategy, a chat template, an interceptor;
* the columns (:mod:`engine.columnar`): the built-in ``truncate`` / ``manual`` with OpenAI
  accounting and no interceptor; a warm run (a toggle) patches a remembered run;
* SillyTavern's template: a request carrying ``sillytavern`` (a chat imported from a SillyTavern
  folder). Steps 1–2 by SillyTavern's limit rules (:func:`_resolve_sillytavern`,
  :func:`engine.resolve.sillytavern_limits`); step 3 runs SillyTavern's ``Generate`` as the
  template (:func:`_assemble_template`, :func:`engine.assembly.st_result.assemble_sillytavern`:
  Chat Completion, or Text Completion's one prompt string), whose own history fill (newest
  first within the budget) and World Info budget stand in for a strategy; steps 4–7 take its
  counts and fates as final (no shift, no fit map, no interceptor); steps 8–10 apply
  SillyTavern's count, budget error and story order (:mod:`engine.assembly.st_result`).

A rule the block and column paths share is one function both call (:mod:`engine.step_rules`:
step 4's sendable part, tool-group warnings, estimated counts, safety margin and strategy
budget; step 8's tools sent and content-part warnings; step 9's ``TOKEN_BUDGET_EXCEEDED``;
step 10's lorebook-trace merge and the fit map's budget and manual rule).
Step 10's preview is one function for the three paths (:func:`engine.report.report_preview`);
only the rows differ (:func:`_preview_blocks`, :func:`engine.columnar.report_columns`,
:func:`engine.assembly.st_result.preview_rows`).
"""

from __future__ import annotations

import contextvars
import copy
import threading
from collections.abc import Callable, Sequence
from functools import partial
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any

from pydantic import ValidationError

from . import columnar
from .assembly import AssemblyContext, MacroContext, assemble
from .assembly.st_group import group_diagnostic, speaker_request
from .assembly.st_result import assemble_sillytavern, preview_rows, sillytavern_budget_error, sillytavern_prompt_tokens
from .assembly.st_types import SillyTavernInputs
from .compaction.options import strategy_host_options
from .errors import LoomscopeError, SettingsError
from .incremental import Remembered, Snapshot, context_of, remember, reuse, time_dependent
from .lorebook import ActivationResult, activate
from .plugins import Interceptor, InterceptorContext
from .registries import Registries, default_registries, shared_registries
from .report import report_preview
from .resolve import (
    LorebookPlan,
    SpeakerNames,
    honours_exclusions,
    lorebook_plan,
    model_profile_and_limit,
    sillytavern_book_groups,
    sillytavern_limits,
    sillytavern_setup_diagnostics,
    speaker_names,
)
from .rows import RowInputs, draft_rows
from .runstate import PreparedPrompt, RunState
from .schema.blocks import INTERCEPTOR_SOURCE_PREFIX, Block, BlockKind, BlockOrigin, ShiftResult
from .schema.messages import ChatMessage
from .schema.preview import ContextPreview, FitWindows, PreviewBlock, ReasonDetails, TokenizerInfo, rows_from_columns
from .schema.request import PreviewRequest
from .schema.trace import TraceRecord
from .shifting import (
    check_shift_result,
    shift_context,
    tool_sequence_problems,
)
from .shifting.explain import explain_blocks
from .shifting.fitmap import TRUNCATE_LIKE, fit_windows
from .shifting.groups import frozen_blocks
from .step_rules import (
    budget_error,
    content_warnings,
    drops_excluded_first,
    estimated_counts,
    fit_budget,
    split_sendable,
    strategy_budget,
    tools_sent,
    with_entry_records,
)
from .tokenizers import (
    REPLY_PRIMING_TOKENS,
    TokenizerProfile,
    TokenizerRegistry,
    count_messages_tokens,
    count_tools_tokens,
    prompt_count,
)


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
    return activate(
        plan.activated, request.chat.messages, request.settings.world_info,
        count_tokens=profile.count, context_limit=budget, user_name=names.user, char_name=names.char,
        character=request.character, persona=request.persona,
        chat_metadata=request.chat.metadata, book_scopes=[plan.scopes[i] for i in plan.order],
    )


def activate_text(request: PreviewRequest, text: str, *,
                  tokenizers: TokenizerRegistry | None = None) -> ActivationResult:
    """The preview's World Info activation (SPEC step 3) run on ``text`` as the chat's only message.

    What the GUI's lorebook test box shows: the same books in the same activation order with the
    same scopes (:func:`engine.resolve.lorebook_plan`; a duplicate book is traced
    ``LOREBOOK_DUPLICATE_BOOK``, not activated twice), the same tokenizer profile and prompt budget
    the lorebook percentage applies to (:func:`engine.resolve.model_profile_and_limit`), the same
    ``{{user}}``/``{{char}}`` names (:func:`engine.resolve.speaker_names`). The text is one user
    message; the chat's stored timed effects (``chat_metadata``) are left out, since their message
    indexes belong to the real chat.

    Parameters
    ----------
    request:
        The chat's request: lorebooks, World Info settings, card, persona, names.
    text:
        The test text (any length, characters).
    tokenizers:
        The registry to count with; the built-in profiles when ``None``.

    Returns
    -------
    ActivationResult
        ``trace[*].book_index`` indexes ``plan.books`` (``engine.resolve.chat_lorebooks``), as in
        ``ContextPreview.lorebook_trace``; an empty result when the chat has no lorebook.

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for a profile the registry lacks.
    """
    resolved = model_profile_and_limit(request.settings, tokenizers,
                                       sillytavern=request.sillytavern is not None)
    plan = lorebook_plan(request)
    chat = request.chat.model_copy(update={"messages": [ChatMessage(role="user", content=text)], "metadata": {}})
    probe = request.model_copy(update={"chat": chat})
    assert resolved.tokenizer is not None  # model_profile_and_limit always sets it
    activation = _activate(probe, plan, resolved.tokenizer, resolved.budget, speaker_names(request))
    if activation is None:
        return ActivationResult()  # no lorebook at all (a plan with books has a distinct one)
    return activation.model_copy(update={"trace": _remap_trace(activation, plan)})


def _messages_of(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    """The provider messages of ``blocks`` that carry one, in order (the tools block carries none)."""
    return [b.message.to_provider() for b in blocks if b.message is not None]


def _count_blocks(profile: TokenizerProfile, blocks: Sequence[Block]) -> dict[str, int]:
    msg_blocks = [b for b in blocks if b.message is not None]
    if profile.chat is not None:  # a chat template counts the blocks together, in prompt order
        tool_blocks = [b for b in blocks if b.message is None]
        pc = prompt_count(profile, _messages_of(msg_blocks), [t for b in tool_blocks for t in (b.tools or [])])
        out = {b.id: c for b, c in zip(msg_blocks, pc.messages)}
        for k, b in enumerate(tool_blocks):
            out[b.id] = pc.tools if k == 0 else 0
        return out
    counts = count_messages_tokens(profile, _messages_of(msg_blocks))
    out = {b.id: c for b, c in zip(msg_blocks, counts)}
    for b in blocks:
        if b.message is None:
            out[b.id] = count_tools_tokens(profile, b.tools or [])
    return out


def _counter(profile: TokenizerProfile, tokens: dict[str, int]) -> Callable[[Block], int]:
    """Token count of a block.

    Precomputed for the blocks the pipeline counted (assembled, interceptor-added), counted on the fly for blocks
    a strategy creates (``BlockOrigin.STRATEGY``: summaries), whose text may change between calls.
    """

    def count(block: Block) -> int:
        known = tokens.get(block.id)
        if known is not None and block.origin is not BlockOrigin.STRATEGY:
            return known
        return _count_blocks(profile, [block])[block.id]

    return count


def prepare(request: PreviewRequest, *, registries: Registries | None = None) -> PreparedPrompt:
    """Run pipeline steps 1–9 for ``request`` (see :func:`_prepare`)."""
    with frozen_blocks():
        return _prepare(request, registries)


def _prepare(request: PreviewRequest, registries: Registries | None) -> PreparedPrompt:
    """Run the ten SPEC §2 steps for ``request``, one named step function each.

    The only path for a cold and a warm run alike: a warm run (a pin / exclude toggle or a plain
    edit of a remembered run, :mod:`engine.incremental`) patches the remembered blocks in step 3
    and recomputes in the later steps only what the changed blocks touch. A chat from a
    SillyTavern folder runs the same steps with its template's figures (module docstring).

    Raises
    ------
    SettingsError
        ``INVALID_SETTINGS`` (reply reserve ≥ context limit; for a SillyTavern chat also a bad
        speaker or story string), ``UNKNOWN_STRATEGY``, ``UNKNOWN_TOKENIZER``. A budget overflow
        is not raised: it is reported in ``preview.error`` with ``budget_ok=False``.
    """
    run = RunState(request, registries or shared_registries())
    _resolve_model(run)  # 1
    _reserve_reply(run)  # 2
    _assemble_blocks(run)  # 3
    if run.base is not None and not (run.flagged or run.edited):
        return _prepared(run.base)  # the same request again: the same (frozen) preview
    _count_tokens(run)  # 4
    _shift_context(run)  # 5
    _check_host(run)  # 6
    _intercept(run)  # 7
    _recount(run)  # 8
    _check_budget(run)  # 9
    return _report(run)  # 10


def _resolve_model(run: RunState) -> None:
    """Step 1: tokenizer profile and context limit (:func:`engine.resolve.model_profile_and_limit`).

    Also fails early on an unknown strategy (``UNKNOWN_STRATEGY``). A SillyTavern chat:
    :func:`_resolve_sillytavern`.
    """
    settings = run.request.settings
    if run.request.sillytavern is not None:
        _resolve_sillytavern(run)
        return
    resolved = model_profile_and_limit(settings, run.reg.tokenizers)
    run.profile, run.limit, run.strategy = resolved.tokenizer, resolved.context_limit, settings.strategy
    run.warnings.extend(resolved.warnings)
    run.reg.strategies.get(settings.strategy)


def _resolve_sillytavern(run: RunState) -> None:
    """Step 1 for a chat from a SillyTavern folder: its next speaker, tokenizer and limits, step 1's notes.

    A group chat is first the request for its next speaker (``group-chats.js``
    ``generateGroupWrapper``; :func:`engine.assembly.st_group.speaker_request`): ``run.request``
    becomes that request. SillyTavern's tokenizer, context limit and reply reserve
    (:func:`engine.resolve.sillytavern_limits`, steps 1–2 at once: ``run.sillytavern``). The notes:
    why this speaker, and (Chat Completion) what SillyTavern's setup leaves out, the interceptors
    among it (a SillyTavern chat runs none).
    """
    request, speaker = speaker_request(run.request)
    setup = request.sillytavern
    assert setup is not None
    limits = sillytavern_limits(request, run.reg.tokenizers)
    run.request, run.speaker, run.sillytavern = request, speaker, limits
    run.profile, run.limit, run.strategy = limits.profile, limits.context_limit, "sillytavern"
    run.warnings.extend(limits.warnings)
    if speaker is not None:
        run.diagnostics.append(group_diagnostic(setup, speaker.why))
        if speaker.warning:
            run.warnings.append(speaker.warning)
    if setup.text_completion is None:
        run.diagnostics.extend(sillytavern_setup_diagnostics(request, run.reg.interceptors.names()))


def _reserve_reply(run: RunState) -> None:
    """Step 2: the reply reserve and the budget ``context limit − reserve``.

    Raises ``INVALID_SETTINGS`` when the reserve is not below the context limit. A SillyTavern
    chat: the reserve and budget step 1 resolved by SillyTavern's rules; no tools, and no priming
    tokens besides the template's own counts.
    """
    if run.sillytavern is not None:
        run.reserve, run.budget = run.sillytavern.reply_reserve, run.sillytavern.budget
        run.tools, run.priming = [], 0
        return
    reserve = run.request.settings.resolve_reply_reserve(run.limit)
    if reserve >= run.limit:
        raise SettingsError("INVALID_SETTINGS",
                            f"reply reserve {reserve} must be below the context limit {run.limit}")
    run.reserve, run.budget = reserve, run.limit - reserve
    run.tools = list(run.request.chat.tools)
    run.priming = REPLY_PRIMING_TOKENS  # tokens no block owns; a chat template's own figure after assembly


def _assemble_blocks(run: RunState) -> None:
    """Step 3: lorebook activation, then the blocks in prompt order through the stage registry.

    A run on the column path that a remembered run can answer (:func:`engine.incremental.reuse`)
    takes that run's blocks with the changed ones copied instead (:func:`_patch_blocks`). A
    SillyTavern chat: its template (:func:`_assemble_template`). Otherwise (a cold run) the
    assembly (:func:`_assemble_new`) runs beside the count of the chat's message texts
    (:func:`_texts_to_count`, :func:`_beside`), so step 4 finds most counts made; on the column
    path the assembly's thread then reads what steps 4–10 need of the new blocks
    (:func:`_read_assembly`).
    """
    request, settings = run.request, run.request.settings
    if run.sillytavern is not None:
        _assemble_template(run)
        return
    run.columnar = columnar.applies(run.reg, settings.strategy, run.profile)
    if run.columnar:
        run.context = context_of(request, run.reg)
        found = reuse(request, _reuse_key(run), run.context)
        if found is not None:
            _patch_blocks(run, found.base.state, found.blocks, found.flagged, found.edited)
            run.position_of, run.message_snapshot = found.base.position_of, found.messages
            return
    texts = _texts_to_count(run)
    if texts:
        # a process's first count loads the encoder, holding the GIL: before the helper starts
        run.profile.count_many(texts[:1])
        _beside(partial(_assemble_new, run), partial(run.profile.prime, texts[1:]))
    else:
        _assemble_new(run)


def _assemble_new(run: RunState) -> None:
    """Step 3 without a remembered run: lorebook activation, the stages in template order, then (column path) :func:`_read_assembly`."""
    request = run.request
    names = speaker_names(request)
    run.plan = lorebook_plan(request)
    run.activation = _activate(request, run.plan, run.profile, run.budget, names)
    if run.activation is not None:
        run.diagnostics.extend(run.activation.diagnostics)
    macros = MacroContext(user=names.user, char=names.char, values=_macro_values(request, run.budget, names.char),
                          seed=request.settings.world_info.seed)
    ctx = AssemblyContext(request, macros, run.activation)
    run.blocks = assemble(ctx, run.reg.stages, request.settings.template)
    run.pre_excluded = ctx.pre_excluded
    run.warnings.extend(ctx.warnings)
    run.assembled = (list(run.warnings), list(run.diagnostics))
    run.timed_effects = run.activation.timed_effects if run.activation is not None else None
    if run.columnar:
        _read_assembly(run)


def _read_assembly(run: RunState) -> None:
    """Step 3's hand-over on the column path: all that steps 4–10 read of the new blocks and no count changes.

    The blocks' columns and sendable part (:func:`engine.columnar.read_columns`), the lorebook
    trace, every row but its tokens and fate (:func:`engine.rows.draft_rows`), and whether the run
    may be remembered with its messages' block positions (:func:`_remember`). A cold run makes
    them in the helper thread while its own thread counts the chat's texts (:func:`_beside`), so
    after the count only the counts, the shift and the figures are left.
    """
    read = columnar.read_columns(run)
    run.lorebook_trace, run.trace_by_source = _lorebook_trace(run)
    run.row_drafts = draft_rows(RowInputs(run.blocks, read, run.trace_by_source))
    run.remembers = not time_dependent(run.request)
    if run.remembers:
        run.position_of = read.message_positions()


#: Characters of message text from which a cold run counts them while it assembles (below, the
#: thread costs more than the overlap gives).
COUNT_BESIDE_CHARS = 65_536


def _texts_to_count(run: RunState) -> list[str]:
    """The chat's message texts a cold run counts while it assembles (:func:`_beside`), or ``[]``.

    Most blocks are chat messages sent as written, so step 4 finds their counts in the profile's
    cache. Only with OpenAI accounting (a chat template counts the rendered prompt, not the
    texts alone), a profile that counts outside the GIL (``counts_without_gil``: the built-in
    ones) and at least :data:`COUNT_BESIDE_CHARS` characters, and not when 16 texts spread over
    the chat are all counted already (the same chat again: a block-path strategy has no warm run;
    an edited text is counted in step 4. Not the first or last text alone: many chats share their
    system prompt or a last line). A text a macro changes is counted again in step 4.
    """
    profile = run.profile
    if profile.chat is not None or not profile.counts_without_gil:
        return []
    contents = list(map(_CONTENT, run.request.chat.messages))
    texts = list(compress(contents, map(is_, map(type, contents), repeat(str))))
    step = max(1, len(texts) // 16)
    if not texts or all(map(profile.is_cached, texts[step // 2::step])):
        return []
    return texts if sum(map(len, texts)) >= COUNT_BESIDE_CHARS else []


_CONTENT = attrgetter("content")


def _beside(work: Callable[[], None], count: Callable[[], object]) -> None:
    """``work()`` in a helper thread while this thread runs ``count()``; ``work``'s error is raised here.

    Step 3 of a cold run: tiktoken encodes outside the GIL, and fastest on the main thread (it
    encodes a 10,000-message chat in ~47 ms there, ~61 ms in any other thread; two threads
    encoding at once are slower than one: :mod:`engine.tokenizers.ordinary`), so this thread
    counts the chat while the helper runs the assembly's Python and reads its columns and rows
    (:func:`_read_assembly`, ~45 ms) beside it. The helper waits until this thread is about to
    count: a new thread that runs Python at once keeps the GIL from the thread that started it
    for the interpreter's switch interval (5 ms), which would delay the count by as much. The
    helper runs in a copy of this thread's context (:func:`engine.shifting.groups.frozen_blocks`).
    """
    failed: list[BaseException] = []
    context = contextvars.copy_context()
    go = threading.Event()

    def run() -> None:
        go.wait()  # released right before the count: this thread keeps the GIL until it encodes
        try:
            context.run(work)
        except BaseException as exc:  # raised in the caller's thread below
            failed.append(exc)

    helper = threading.Thread(target=run, name="loomscope-assembly", daemon=True)
    helper.start()
    try:
        go.set()
        count()
    finally:
        go.set()
        helper.join()
    if failed:
        raise failed[0]


def _reuse_key(run: RunState) -> tuple[object, ...]:
    """What must be the same objects for a run to start from a remembered one (registries, profile, strategy)."""
    return id(run.reg), id(run.profile), run.reg.strategies.get(run.request.settings.strategy).fn


def _patch_blocks(run: RunState, base: RunState, blocks: Sequence[Block], flagged: list[int], edited: list[int]) -> None:
    """Step 3 of a warm run: ``base``'s assembly with the changed blocks (``flagged``, ``edited``) copied."""
    run.base, run.blocks, run.flagged, run.edited = base, blocks, flagged, edited
    run.plan, run.activation, run.pre_excluded = base.plan, base.activation, base.pre_excluded
    run.assembled, run.timed_effects = base.assembled, base.timed_effects
    run.warnings, run.diagnostics = list(base.assembled[0]), list(base.assembled[1])


def _assemble_template(run: RunState) -> None:
    """Step 3 for a chat from a SillyTavern folder: SillyTavern's ``Generate`` as the template.

    The template (:func:`engine.assembly.st_result.assemble_sillytavern`: Chat Completion, or Text
    Completion's one prompt string) gets what steps 1–2 resolved: the limits, ``name1`` /
    ``name2``, the books in ``getSortedEntries`` order and groups, the speaker, and the warnings
    and notes so far (``run.template_inputs``). Its :class:`~engine.assembly.st_types.AssembledPrompt`
    (``run.template``) holds every block with the fate SillyTavern's own history fill and World
    Info budget gave it; its warnings and notes (the inputs' first) become the run's.
    """
    request = run.request
    setup, limits = request.sillytavern, run.sillytavern
    assert setup is not None and limits is not None
    names = speaker_names(request)
    run.plan = plan = lorebook_plan(request)
    groups = sillytavern_book_groups([s or "global" for s in plan.scopes],
                                     request.settings.world_info.character_strategy)
    run.template_inputs = inputs = SillyTavernInputs(
        request=request, setup=setup, profile=run.profile, context_limit=run.limit,
        reply_reserve=run.reserve, budget=run.budget, user_name=names.user, char_name=names.char,
        books=plan.books, book_order=plan.order, book_groups=tuple(tuple(g) for g in groups),
        text_tokenizer=limits.text_tokenizer, speaker=run.speaker, warnings=tuple(run.warnings),
        diagnostics=tuple(run.diagnostics))
    run.template = template = assemble_sillytavern(inputs)
    run.warnings, run.diagnostics = list(template.warnings), list(template.diagnostics)
    run.timed_effects = template.timed_effects


def _macro_values(request: PreviewRequest, budget: int, char: str) -> dict[str, str]:
    """The values of the card, persona and chat macros (``{{description}}``, ``{{lastMessage}}``, ...)."""
    card = request.character
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
        "model": request.settings.model,
        "maxPrompt": str(budget),
        "group": char,
    }
    msgs = request.chat.messages
    values["lastMessage"] = next((m.text() for m in reversed(msgs)), "")
    values["lastUserMessage"] = next((m.text() for m in reversed(msgs) if m.role == "user"), "")
    values["lastCharMessage"] = next((m.text() for m in reversed(msgs) if m.role == "assistant"), "")
    values["input"] = values["lastUserMessage"]
    return values


def _count_tokens(run: RunState) -> None:
    """Step 4: one batched count per block, the safety margin, and the budget the strategy gets.

    On the column path the run's columns (:func:`engine.columnar.count_columns`: a cold run puts
    the counts into step 3's columns, a warm run counts only its edited texts). A SillyTavern
    chat: its template's counts are final (:func:`_count_template`). Sets the preview's tokenizer
    (profile, whether the counts are estimates, version).
    """
    if run.template is not None:
        _count_template(run)
        return
    profile = run.profile
    if run.columnar:
        columnar.count_columns(run)
    else:
        _count_blocks_step(run)
    run.tokenizer = TokenizerInfo(profile=profile.name, approximate=run.approximate, version=profile.version)


def _count_template(run: RunState) -> None:
    """Step 4 for a SillyTavern chat: the template counted each block, so only the tokenizer and no safety margin.

    Text Completion counts with SillyTavern's ``getTokenCountAsync`` tokenizer (its key and
    version name the preview's tokenizer), Chat Completion with the model's profile.
    """
    template, tok, profile = run.template, run.template_inputs.text_tokenizer, run.profile
    assert template is not None
    if template.api == "text_completion" and tok is not None:
        run.tokenizer = TokenizerInfo(profile=tok.key, approximate=tok.approximate, version=tok.version)
    else:
        run.tokenizer = TokenizerInfo(profile=profile.name, approximate=profile.approximate, version=profile.version)
    run.approximate, run.safety = run.tokenizer.approximate, 0


def _count_blocks_step(run: RunState) -> None:
    """Step 4 on the block path: one batched count per block (a chat template counts what is sent).

    The sendable part, its tool groups and their warnings, whether the counts are estimates and
    the strategy's budget: the rules every path shares (:mod:`engine.step_rules`).
    """
    profile, blocks = run.profile, run.blocks
    tokens = _count_blocks(profile, blocks)
    sendable = split_sendable(run)
    if profile.chat is not None:  # template counts depend on the neighbours: count what is sent
        if len(sendable) != len(blocks):
            tokens.update(_count_blocks(profile, sendable))
        run.priming = prompt_count(profile, _messages_of(sendable), []).overhead
    run.tokens, run.approximate = tokens, estimated_counts(profile, blocks)
    strategy_budget(run)
    run.warnings.extend(run.group_warnings)
    run.count = _counter(profile, tokens)
    run.shift_tokens = dict(tokens)  # the counts the strategy works with (the fit map reuses them)


def _shift_context(run: RunState) -> None:
    """Step 5: the selected strategy over the sendable blocks (its tool groups warned about first).

    A plugin strategy that raises does not break the pipeline: its error is kept for step 6.
    On the column path the built-in strategy over the columns (:func:`engine.columnar.shift_sendable`).
    A SillyTavern chat: its own history fill (newest first within the budget) stood in for a
    strategy in step 3; its fates are final, no fit map is made and its report is the template's
    header facts (Text Completion: api, presets, tokenizer).
    """
    settings = run.request.settings
    if run.template is not None:
        run.strategy_info = run.template.strategy_info
        return
    run.fit_method = "exact" if settings.strategy in TRUNCATE_LIKE else "truncate-order"
    if run.columnar:
        columnar.shift_sendable(run)
        return
    request, sendable = run.request, run.sendable
    run.group_of = {b.id: g for b, g in zip(sendable, run.groups.group_of) if g}
    options = {**settings.strategy_options,
               **strategy_host_options(request, context_limit=run.limit, prompt_overhead=run.priming)}
    info = run.reg.strategies.get(settings.strategy)
    run.result, run.strategy_problems = None, []
    try:
        result = info.fn(sendable, run.count, run.shift_budget, options)
    except LoomscopeError:
        raise
    except Exception as exc:  # a plugin strategy must not break the pipeline
        run.strategy_problems = [f"raised {type(exc).__name__}: {exc}"]
    else:
        if isinstance(result, ShiftResult):
            run.result = result
        else:  # a plugin's contract breach is reported like a raise, not as an empty reason
            run.strategy_problems = [f"returned {type(result).__name__}, not a ShiftResult"]
    run.honor_manual = honours_exclusions(settings, run.reg.strategies)


def _check_host(run: RunState) -> None:
    """Step 6: reject a result that breaks the host's rules and fall back to ``truncate``; record each block's fate.

    Rejected: a protected block or a manual exclusion not honoured, a split tool group
    (:func:`engine.shifting.check_shift_result`), more tokens left than the budget, or a strategy
    that raised. The fallback may drop more than the strategy meant to, never send what the
    writer removed: it honours manual exclusions and hidden messages whatever was selected.
    On the column path (a built-in strategy, right by construction) each block's fate only. A
    SillyTavern chat: nothing to check (the template's fates are final).
    """
    if run.template is not None:
        return
    if run.columnar:
        run.fates = columnar.record_fates(run)
        return
    name, result, problems = run.request.settings.strategy, run.result, run.strategy_problems
    if result is not None:
        try:
            problems = _shift_problems(run, result)
        except LoomscopeError:
            raise
        except Exception as exc:  # a malformed plugin result
            problems = [f"raised {type(exc).__name__}: {exc}"]
    if problems or result is None:
        run.diagnostics.append(f"strategy {name!r} rejected ({'; '.join(problems)}); fell back to 'truncate' "
                               "(honouring manual exclusions and hidden messages)")
        result = shift_context(run.sendable, run.count, run.shift_budget, honor_manual=True)
    run.result, run.strategy_info = result, result.info
    run.diagnostics.extend(result.diagnostics)
    run.warnings.extend(str(w) for w in result.info.get("warnings", []) or [])
    _record_shift(run, result)


def _shift_problems(run: RunState, result: ShiftResult) -> list[str]:
    """What breaks the host's rules in ``result`` (empty when it may be used)."""
    blocks, count, budget = run.sendable, run.count, run.shift_budget
    problems = check_shift_result(blocks, result, run.groups, honor_manual=run.honor_manual)
    by_id = {b.id: b for b in blocks}
    kept_total = (sum(count(by_id[k]) for k in result.kept if k in by_id)
                  + sum(t.remaining_tokens for t in result.truncated)
                  + sum(count(a) for a in result.added))
    if result.error is None and kept_total > budget:
        problems.append(f"left {kept_total} tokens for a budget of {budget}")
    return problems


def _record_shift(run: RunState, result: ShiftResult) -> None:
    """Each block's fate after the strategy; its summaries placed before their anchors."""
    status: dict[str, tuple[str, str]] = {bid: ("excluded", r) for bid, r in run.pre_excluded.items()}
    for e in result.excluded:
        status[e.block_id] = ("excluded", e.reason)
    run.truncated = {t.block_id: t for t in result.truncated}
    for t in result.truncated:
        status[t.block_id] = ("truncated", t.reason)
    kept_reasons = result.kept_reasons
    for k in result.kept:
        status[k] = ("kept", kept_reasons.get(k, "FITS_BUDGET"))
    by_id = {b.id: b for b in run.blocks}
    final_blocks = [by_id[k] for k in result.kept]
    ordered = list(run.blocks)
    for added in result.added:  # strategy-made blocks (summaries) go before their anchor
        if added.origin is not BlockOrigin.STRATEGY:
            added = added.model_copy(update={"origin": BlockOrigin.STRATEGY})
        run.tokens[added.id] = run.count(added)
        status[added.id] = ("kept", added.reason)
        anchor = result.added_before.get(added.id)
        for seq in (ordered, final_blocks):
            at = next((k for k, b in enumerate(seq) if b.id == anchor), len(seq))
            seq.insert(at, added)
    run.status, run.ordered, run.final_blocks = status, ordered, final_blocks


def _intercept(run: RunState) -> None:
    """Step 7: plugin interceptors on the final provider messages (not after a budget error).

    A SillyTavern chat runs none (step 1 noted the ones installed).
    """
    reg, settings = run.reg, run.request.settings
    if run.template is not None or run.columnar or not reg.interceptors.names() or run.shift.error is not None:
        return
    ictx = InterceptorContext(settings.model, run.budget, run.profile.name, settings.strategy)
    final_blocks, added, removed = _apply_interceptors(reg, run.final_blocks, ictx, run.interceptor_diags)
    if added:
        run.tokens.update(_count_blocks(run.profile, added))
        run.ordered = _merge_order(run.ordered, final_blocks)
    for bid in removed:
        run.status[bid] = ("excluded", "INTERCEPTOR_REMOVED")
    run.final_blocks = final_blocks
    run.intercepted = True
    run.diagnostics.extend(f"interceptor: {d}" for d in run.interceptor_diags)


def _recount(run: RunState) -> None:
    """Step 8: after interceptors a final shifting pass; then the independent recount of what is sent.

    A chat template can move a few tokens between neighbours when a block drops, so the
    blocks are shifted again until the exact count fits. On the column path the recount of the
    kept blocks' texts through the per-text cache (:func:`engine.columnar.recount_columns`). A
    SillyTavern chat: the template's prompt and its count (:func:`_recount_template`).
    """
    if run.template is not None:
        _recount_template(run)
        return
    if run.columnar:
        columnar.recount_columns(run)
        run.overhead = run.priming
        return
    _recount_blocks(run)
    run.prompt_tokens, run.overhead = run.final.total, run.final.overhead


def _recount_template(run: RunState) -> None:
    """Step 8 for a SillyTavern chat: what the template sends and its count (no priming tokens of ours).

    Chat Completion: the provider messages; Text Completion: the one prompt string and its stop
    strings. The count: :func:`engine.assembly.st_result.sillytavern_prompt_tokens`.
    """
    template = run.template
    assert template is not None
    run.messages, run.send_tools, run.overhead = template.messages, [], 0
    run.api, run.prompt, run.stop = template.api, template.prompt, template.stop
    run.prompt_tokens = sillytavern_prompt_tokens(template, run.template_inputs)


def _recount_blocks(run: RunState) -> None:
    """Step 8 on the block path: the final shifting pass after interceptors, then the exact recount."""
    status = run.status
    if run.intercepted:  # a plugin cannot add text late to slip past the limit
        final_pass = shift_context(run.final_blocks, run.count, run.shift_budget)
        for e in final_pass.excluded:
            status[e.block_id] = ("excluded", e.reason)
        for k in final_pass.kept:
            if k not in status or status[k][0] != "kept":
                status[k] = ("kept", final_pass.kept_reasons.get(k, "INTERCEPTOR_ADDED"))
        keep = set(final_pass.kept)
        run.final_blocks = [b for b in run.final_blocks if b.id in keep]
    _count_final(run)
    if run.profile.chat is not None and run.shift.error is None:
        _fit_template(run)
    content_warnings(run)
    _final_shares(run)


def _count_final(run: RunState) -> None:
    """The provider messages and tools of ``final_blocks``, and their exact prompt count."""
    run.messages = _messages_of(run.final_blocks)
    run.send_tools = tools_sent(run, (b.kind for b in run.final_blocks))
    run.final = prompt_count(run.profile, run.messages, run.send_tools)


def _fit_template(run: RunState) -> None:
    """Shift again (at most 8 times) until a chat template's exact count fits the budget."""
    for _ in range(8):
        over = run.final.total - (run.budget - run.safety)
        if over <= 0:
            break
        again = shift_context(run.final_blocks, run.count, run.shift_budget - over)
        if again.error:
            break
        for e in again.excluded:
            run.status[e.block_id] = ("excluded", e.reason)
        keep = set(again.kept)
        run.final_blocks = [b for b in run.final_blocks if b.id in keep]
        _count_final(run)


def _final_shares(run: RunState) -> None:
    """Kept blocks show their exact share of the final prompt (and, with a template, its part of it)."""
    tokens, truncated, final = run.tokens, run.truncated, run.final
    template_tokens: dict[str, int] = {}
    with_template = run.profile.chat is not None
    msg_final = [b for b in run.final_blocks if b.message is not None]
    for b, n, t in zip(msg_final, final.messages, final.template):
        if b.id not in truncated:
            tokens[b.id] = n
            if with_template:
                template_tokens[b.id] = t
    for b in run.final_blocks:
        if b.message is None:
            tokens[b.id] = final.tools
    run.template_tokens = template_tokens


def _check_budget(run: RunState) -> None:
    """Step 9: ``TOKEN_BUDGET_EXCEEDED`` when the protected blocks alone exceed the budget.

    One rule and message for the block and column paths (:func:`engine.step_rules.budget_error`),
    from the strategy's result after the host checks. A SillyTavern chat: when a prompt
    SillyTavern requires does not fit (:func:`engine.assembly.st_result.sillytavern_budget_error`);
    then nothing is sent.
    """
    if run.template is not None:
        run.error = sillytavern_budget_error(run.template, run.template_inputs)
        if run.error is not None:
            run.messages, run.prompt_tokens = [], 0
        return
    shift = run.column_shift if run.columnar else run.shift
    run.error = budget_error(run, shift.error, shift.protected_tokens)


def _report(run: RunState) -> PreparedPrompt:
    """Step 10: every block with its status, stable reason, specific reason and fit window; the preview.

    The rows: on the column path :func:`engine.columnar.report_columns` (reusing a warm run's
    unchanged rows), on the block path :func:`_preview_blocks`, for a SillyTavern chat the
    template's blocks in story order (:func:`engine.assembly.st_result.preview_rows`). The
    preview around them: :func:`engine.report.report_preview`, one for every path. A column-path
    run is remembered for the next one (:func:`_remember`).
    """
    if run.template is not None:
        run.rows = preview_rows(run.template, run.error)
        run.lorebook_trace = run.template.lorebook_trace
    else:
        if run.trace_by_source is None:  # made in step 3 on a cold run's column path
            run.lorebook_trace, run.trace_by_source = _lorebook_trace(run)
        trace_by_source = run.trace_by_source
        if run.columnar:
            outcome = columnar.explain_and_fit(run, *run.fates, trace_by_source)
            columnar.report_columns(run, trace_by_source, outcome)
        else:
            run.rows = _preview_blocks(run, trace_by_source)
    run.preview = report_preview(run)
    if run.columnar:
        _remember(run, bool(run.lorebook_trace))
    return _prepared(run)


def _prepared(run: RunState) -> PreparedPrompt:
    """The :class:`PreparedPrompt` of a finished run; its ``messages`` are copies of the run's, made when first read."""
    timed = dict(run.timed_effects) if run.timed_effects is not None else None
    return PreparedPrompt(run.preview, run.messages, list(run.send_tools), run.profile, run.error is None,
                          run.interceptor_diags, timed)


def _remember(run: RunState, lorebooks: bool) -> None:
    """Keep a column-path run for the next one (:func:`engine.incremental.remember`); no chain of runs."""
    request = run.request
    if run.base is None and not run.remembers:  # a cold run: a time-dependent macro (step 3 looked)
        return
    run.base = None
    # what the next run compares its messages with: this request's (a warm run's: its base's with the changed ones)
    snapshot = run.message_snapshot if run.message_snapshot is not None else Snapshot.of(request.chat.messages)
    # the caller's request (and its list of every message) stays the caller's: a remembered run
    # reads its figures, never its request, and keeping it would make the next run free it
    key = _reuse_key(run)
    del run.request
    remember(Remembered(key, run.context, snapshot, run.blocks, run.position_of, lorebooks, run))


def _lorebook_trace(run: RunState) -> tuple[list[TraceRecord], dict[str, dict[str, Any]]]:
    """The preview's lorebook trace, and the records of the blocks' sources as dicts (block traces)."""
    trace_by_source: dict[str, dict[str, Any]] = {}
    if run.activation is None:
        return [], trace_by_source
    lorebook_trace = _remap_trace(run.activation, run.plan)
    sources = {b.source for b in run.blocks}
    for rec in lorebook_trace:
        source = f"lorebook:{rec.book}:{rec.uid}"
        if rec.code != "LOREBOOK_DUPLICATE_BOOK" and source in sources:
            trace_by_source[source] = rec.model_dump(mode="json")
    return lorebook_trace, trace_by_source


def _preview_blocks(run: RunState, trace_by_source: dict[str, dict[str, Any]]) -> list[PreviewBlock]:
    """One :class:`PreviewBlock` per block of ``run.ordered`` (block path); each one's specific reason and fit window into the run.

    The rows are made the one way every run makes them (:func:`engine.schema.preview.rows_from_columns`),
    from the block path's columns: the strategy's truncations, notes and a chat template's tokens.
    """
    sendable, group_of, ordered = run.sendable, run.group_of, run.ordered
    status, truncated, tokens = run.status, run.truncated, run.tokens
    shown_tokens = {b.id: (truncated[b.id].remaining_tokens if b.id in truncated else tokens.get(b.id, 0))
                    for b in ordered}
    explained = explain_blocks(ordered, status, shown_tokens, run.shift_budget, group_of, trace_by_source)
    fits = fit_windows(sendable, run.shift_tokens, group_of, fit_budget(run),
                       never_sent=frozenset(sendable[i].id for i in run.groups.orphans),
                       honor_manual=drops_excluded_first(run))
    trace_updates, template_tokens = run.shift.trace_updates, run.template_tokens
    traces = with_entry_records([b.trace for b in ordered], [b.kind for b in ordered], [b.source for b in ordered],
                                trace_by_source)
    for k, b in enumerate(ordered):
        if b.id in trace_updates:  # the strategy's notes (vector-recall relevance, ...)
            traces[k] = {**(traces[k] or {}), **trace_updates[b.id]}
    fates = [status.get(b.id, ("excluded", "INTERCEPTOR_REMOVED")) for b in ordered]
    cut = [truncated.get(b.id) for b in ordered]
    run.reason_details = ReasonDetails.of([explained.get(b.id) for b in ordered])
    run.fit_windows = FitWindows.of([fits.get(b.message_index) if b.message_index is not None else None for b in ordered])
    return rows_from_columns({
        "id": [b.id for b in ordered], "kind": [b.kind.value for b in ordered], "role": [b.role for b in ordered],
        "source": [b.source for b in ordered], "position": range(len(ordered)),
        "tokens": [t.remaining_tokens if t else tokens[b.id] for b, t in zip(ordered, cut)],
        "status": [f[0] for f in fates], "reason": [f[1] for f in fates],
        "protected": [b.protected for b in ordered], "pinned": [b.pinned for b in ordered],
        "group": [group_of.get(b.id) for b in ordered], "text": [b.text() for b in ordered],
        "name": [b.message.name if b.message else None for b in ordered],
        "original_tokens": [t.original_tokens if t else None for t in cut],
        "summary_id": [t.summary_id if t else None for t in cut],
        "manual_excluded": [b.manual_excluded for b in ordered], "message_index": [b.message_index for b in ordered],
        "trace": traces, "template_tokens": [template_tokens.get(b.id) for b in ordered]}, len(ordered))


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


#: Provider messages paired with the block each came from (``None``: not from a block).
_Pairs = list[tuple[dict[str, Any], Block | None]]


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
    current: _Pairs = [(b.message.to_provider(), b) for b in kept if b.message is not None]
    added: list[Block] = []
    counter = 0  # interceptor-added blocks are i1, i2, … (ids of ignored output are not reused)
    for name, fn in reg.interceptors.items():
        before = [m for m, _ in current]
        parsed = _run_interceptor(name, fn, before, ictx, diags)
        if parsed is None:
            continue
        nxt, new, pool = _match_output(name, parsed, current, counter)
        counter += len(new)
        _restore_protected(name, pool, nxt, msg_blocks, diags)
        # A plugin cannot make the request one a provider rejects: output that splits a tool
        # call from its results (a message inside the batch, half a pair) is ignored.
        broken = [p for p in tool_sequence_problems([m for m, _ in nxt])
                  if p not in tool_sequence_problems(before)]
        if broken:
            diags.append(f"{name}: its output would split a tool call from its results ({broken[0]}); "
                         "its output was ignored")
            continue
        added.extend(new)
        current = nxt
    final_ids = {id(b) for _, b in current}
    removed = [b.id for b in msg_blocks if id(b) not in final_ids]
    # keep the tools block first, as it is sent as the request's `tools` field
    result = [b for b in kept if b.message is None] + [b for _, b in current if b is not None]
    added = [b for b in added if id(b) in final_ids]
    return result, added, removed


def _run_interceptor(name: str, fn: Interceptor, before: list[dict[str, Any]], ictx: InterceptorContext,
                     diags: list[str]) -> list[ChatMessage] | None:
    """One interceptor's output as chat messages (its notes added to ``diags``); ``None`` when ignored."""
    try:
        out, notes = fn(copy.deepcopy(before), ictx)
        if not isinstance(out, list):
            raise TypeError(f"returned {type(out).__name__}, expected a list of messages")
        parsed = [ChatMessage.model_validate(m) for m in out]
    except (ValidationError, TypeError, ValueError) as exc:
        diags.append(f"{name}: returned invalid data ({str(exc).splitlines()[0]}); its output was ignored")
        return None
    except Exception as exc:
        diags.append(f"{name}: raised {type(exc).__name__}: {exc}; its output was ignored")
        return None
    diags.extend(f"{name}: {n}" for n in (notes or []))
    return parsed


def _match_output(name: str, parsed: list[ChatMessage], current: _Pairs, counter: int
                  ) -> tuple[_Pairs, list[Block], _Pairs]:
    """Pair each output message with the unchanged input it equals, or a new interceptor block.

    Returns (the output pairs, the new blocks ``i<counter + 1>``…, the input pairs not matched).
    """
    pool = list(current)
    nxt: _Pairs = []
    new: list[Block] = []
    for msg in parsed:
        prov = msg.to_provider()
        match = next((k for k, (m, _) in enumerate(pool) if m == prov), None)
        if match is not None:
            nxt.append(pool.pop(match))
            continue
        block = Block(id=f"i{counter + len(new) + 1}", kind=BlockKind.INSTRUCTION, role=msg.role,
                      source=f"{INTERCEPTOR_SOURCE_PREFIX}{name}", message=msg, reason="INTERCEPTOR_ADDED",
                      priority=float("-inf"), origin=BlockOrigin.INTERCEPTOR)
        new.append(block)
        nxt.append((prov, block))
    return nxt, new, pool


def _restore_protected(name: str, pool: _Pairs, nxt: _Pairs, msg_blocks: list[Block], diags: list[str]) -> None:
    """Put protected blocks the interceptor dropped or changed back into ``nxt``, at their old place."""
    for m, b in pool:
        if b is not None and (b.protected or b.pinned):
            diags.append(f"{name}: removed or changed protected block {b.id} ({b.source}); restored")
            idx = msg_blocks.index(b) if b in msg_blocks else len(nxt)
            insert_at = next((k for k, (_, ob) in enumerate(nxt)
                              if ob is not None and ob in msg_blocks and msg_blocks.index(ob) > idx), len(nxt))
            nxt.insert(insert_at, (m, b))


__all__ = ["PreparedPrompt", "Registries", "activate_text", "default_registries", "prepare", "preview"]
