"""The incremental preview: what one pipeline run remembers for the next (issue 12 item 1).

The preview re-runs on every click and keystroke over chats of 10,000+ messages, and between
two runs almost nothing changes (one message pinned or excluded, one typed). Within a run
(:func:`blocks_frozen`) the engine treats every prompt block as immutable once built, so work
that depends only on blocks can be remembered per block *object*:

* tool groups (:func:`remembered_groups`): per list of blocks, reused when only blocks with the
  same tool shape changed (a toggle changes flags, not calls or results);
* per-message blocks and their token counts (:mod:`engine.assembly.stages`,
  :mod:`engine.pipeline`): a chat message's block is rebuilt only when the message, its position
  or its macro context changed; counts are remembered per block for each tokenizer profile.

Every cache lives in :mod:`engine.cache` (one owner). Outside a pipeline run nothing is
remembered: the public functions behave exactly as before for callers that build and mutate
their own blocks.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, eq, is_, is_not, ne, or_, setitem
from typing import Any, TypeVar

from .cache import lru
from .schema._construct import construct, construct_many, model_fields_of

T = TypeVar("T")

_FROZEN: ContextVar[bool] = ContextVar("loomscope_blocks_frozen", default=False)
_INCREMENTAL: ContextVar[bool] = ContextVar("loomscope_incremental", default=True)

#: Tool groups per exact list of block objects, and the latest per list length (for reuse
#: across a toggle: same length, a few blocks replaced).
_GROUPS = lru(16)
_GROUPS_BY_LENGTH = lru(8)
_GROUPS_LOCK = threading.Lock()
#: Changed blocks above which tool groups are recomputed rather than compared shape by shape.
_REUSE_MAX_CHANGED = 256


@contextmanager
def frozen_blocks() -> Iterator[None]:
    """Mark the current pipeline run: blocks are not mutated once built, so they may be remembered."""
    token = _FROZEN.set(True)
    try:
        yield
    finally:
        _FROZEN.reset(token)


@contextmanager
def full_pipeline() -> Iterator[None]:
    """Run previews without the remembered run and the per-block-list finish (the reference path).

    The pipeline then does every step over block objects, as for a plugin strategy; tests compare
    the two (``tests/engine/test_incremental.py``).
    """
    token = _INCREMENTAL.set(False)
    try:
        yield
    finally:
        _INCREMENTAL.reset(token)


def warm_up() -> None:
    """Import what a warm run needs ahead of the first toggle (numpy: 50-100 ms the first time).

    The cold path never imports numpy (a one-shot ``loomscope preview`` does not need it); a
    long-lived caller that will answer toggles (the app) calls this once at start-up, so that the
    writer's first click does not pay the import. Idempotent; safe from any thread.
    """
    import numpy  # noqa: F401


def blocks_frozen() -> bool:
    """Whether the caller runs inside :func:`frozen_blocks` (a pipeline run)."""
    return _FROZEN.get()


def changed_positions(new: Sequence[Any], old: Sequence[Any]) -> list[int]:
    """Positions ``i < min(len)`` where ``new[i] is not old[i]`` (one C-level pass)."""
    return list(compress(range(min(len(new), len(old))), map(is_not, new, old)))


def remembered_groups(blocks: Sequence[Any], shape: Callable[[Any], Any],
                      compute: Callable[[Sequence[Any]], T]) -> T:
    """``compute(blocks)``, remembered per list of block objects.

    A list seen before gives the remembered result. A list of the same length as the latest
    one, whose replaced blocks all have the same ``shape`` as the blocks they replace, gives the
    latest result too (tool groups depend on shapes and positions only).
    """
    key = tuple(map(id, blocks))
    # every read under the lock too: an LRU read reorders the cache, and two threads reordering
    # at once corrupt it (KeyError, issue 25 item 5)
    with _GROUPS_LOCK:
        hit = _GROUPS.get(key)
        prev = _GROUPS_BY_LENGTH.get(len(blocks)) if hit is None else None
    if hit is not None:
        return hit[1]
    result: Any = None
    if prev is not None:
        changed = changed_positions(blocks, prev[0])
        if len(changed) <= _REUSE_MAX_CHANGED and all(shape(blocks[i]) == shape(prev[0][i]) for i in changed):
            result = prev[1]
    if result is None:
        result = compute(blocks)
    entry = (tuple(blocks), result)  # holds the blocks: their ids stay unique while remembered
    with _GROUPS_LOCK:
        _GROUPS[key] = entry
        _GROUPS_BY_LENGTH[len(blocks)] = entry
    return result




# --------------------------------------------------------------------------------------------
# The remembered run: a warm preview after a pin / exclude toggle (issue 12 item 1)
#
# ``engine.pipeline._prepare`` hands every run it can finish here (:func:`finish_run`: the
# built-in ``truncate``/``manual`` strategies, OpenAI chat accounting, no interceptors) after
# assembly and counting; the run's per-block figures are kept in parallel lists
# (:class:`_Run`). The next request with the same context (everything but the chat messages)
# whose messages differ from the remembered ones only in ``meta.pinned`` /
# ``meta.manualExcluded`` (or in the text of a plain message, see :func:`_patched`) is answered
# from them (:func:`warm_run`): the changed blocks are copied with their new flags (or message), shifting, explanations and the fit map run over the lists
# (:mod:`engine.shifting`'s rules over columns), the final recount goes through the per-text count cache, and
# the preview's rows are a :class:`~engine.schema.preview.PreviewRows` built on first read
# (:func:`_preview_rows`), where rows whose figures did not change are the previous run's objects.

_RUNS = lru(4)
_RUNS_LOCK = threading.Lock()
#: Changed messages above which a warm run is not attempted (the pipeline runs in full).
WARM_MAX_CHANGED = 64
_TIME_MACRO = re.compile(r"\{\{\s*(?:time|date|weekday|isotime|isodate)\s*\}\}", re.IGNORECASE)


def _context(request: Any, reg: Any) -> tuple[Any, ...]:
    """Everything a preview depends on except the chat's messages (compared with ``==``)."""
    chat = request.chat
    settings = request.settings
    stages = tuple((name, reg.stages.get(name)) for name in settings.template if name in reg.stages)
    return (tuple(v for k, v in request.__dict__.items() if k != "chat"), request.__pydantic_extra__,
            tuple(v for k, v in chat.__dict__.items() if k != "messages"), chat.__pydantic_extra__,
            stages, reg.tokenizers.get(settings.tokenizer) if settings.tokenizer in reg.tokenizers else None)


def _time_dependent(request: Any) -> bool:
    """Whether a ``{{time}}``-like macro appears anywhere (its expansion changes between runs)."""
    if _TIME_MACRO.search(request.model_dump_json(exclude={"chat": {"messages"}})):
        return True
    texts = [m.content if isinstance(m.content, str) else m.text() for m in request.chat.messages]
    return _TIME_MACRO.search("\x00".join(texts)) is not None


@dataclass
class _Run:
    """One finished run's inputs and per-block figures.

    Lists named ``b_*`` are per assembled block (prompt order), ``s_*`` per sendable block
    (``sendable`` holds their block positions; the same lists when every block is sendable).
    """

    reg: Any
    context: tuple[Any, ...]
    messages: list[Any]
    step: dict[str, Any]  # results of steps 1-4 (budget, warnings so far, ...)
    blocks: list[Any]
    pos_of_message: dict[int, int]
    sendable: list[int]
    b: dict[str, list[Any]]
    s: dict[str, list[Any]]
    provider: list[dict[str, Any] | None]
    pieces: list[list[str]]
    overhead: list[int]
    groups: list[list[int]]  # member positions in ``sendable`` order
    bgroups: list[list[int]]  # the same in block positions
    group_ids: list[str]
    group_of: list[str | None]  # per sendable position
    b_group_of: list[str | None]
    orphans: frozenset[int]
    incomplete: dict[str, Any]
    group_warnings: list[str]
    out: dict[str, Any] = field(default_factory=dict)  # last outcome per block (for reuse)
    pblocks: Sequence[Any] = field(default_factory=list)
    prepared: Any = None
    rebuilt: list[int] | None = None  # a patched run: positions whose block is new against ``rebuilt_base``
    rebuilt_base: list[Any] | None = None  # the blocks of the run it was patched from


#: Per-block flags a toggle changes, and the lists derived from them.
_FLAG_LISTS = ("pinned", "manual", "kept_reason")


def _block_lists(blocks: Sequence[Any]) -> dict[str, list[Any]]:
    """The per-block lists of :class:`_Run` (one C-level pass of ``attrgetter`` per field where it can)."""
    from .shifting.core import removal_tier

    def column(name: str) -> list[Any]:
        return list(map(attrgetter(name), blocks))

    mindex, source, history, protected, pinned = (column(k) for k in (
        "message_index", "source", "history", "protected", "pinned"))
    kinds = column("kind")
    tier = list(map(removal_tier, column("origin"), kinds, history))
    return {
        "id": column("id"),
        "kind": [k.value for k in kinds],
        "source": source,
        "message_index": mindex,
        "label": [f"message {mi}" if mi is not None else src for src, mi in zip(source, mindex)],
        "history": history,
        "protected": protected,
        "pinned": pinned,
        "manual": column("manual_excluded"),
        "hidden": column("hidden"),
        "tier": tier,
        "priority": column("priority"),
        "kept_reason": [("PINNED" if p and not pr else r) for p, pr, r in zip(pinned, protected, column("reason"))],
        "text": list(map(_text, blocks)),
    }


def _plain(block: Any) -> bool:
    """Whether the block is a plain text message: OpenAI shape ``{"role", "content"}``, 3 tokens of framing.

    (No name, tool calls, tool-result id, legacy function call or extra fields; text content.)
    """
    m = block.message
    return (m is not None and type(m.content) is str and not m.name and not m.tool_calls
            and m.role not in ("tool", "function") and not m.__pydantic_extra__)


def _text(block: Any) -> str:
    """``block.text()``; a plain text message (no tool calls) is its content."""
    m = block.message
    if m is not None and type(m.content) is str and not m.tool_calls and not m.__pydantic_extra__:
        return m.content
    return block.text()


def _sendable_lists(b: dict[str, list[Any]], tokens: list[int], sendable: list[int], n: int) -> dict[str, list[Any]]:
    def pick(values: list[Any]) -> list[Any]:
        return values if len(sendable) == n else [values[i] for i in sendable]

    return {"tokens": pick(tokens), "hidden": pick(b["hidden"]), "manual": pick(b["manual"]),
            "prot": pick(list(map(or_, b["protected"], b["pinned"]))), "tier": pick(b["tier"]),
            "priority": pick(b["priority"]), "id": pick(b["id"]), "message_index": pick(b["message_index"])}


def finish_run(request: Any, reg: Any, step: dict[str, Any], blocks: list[Any], pre_excluded: dict[str, str]) -> Any:
    """Finish a pipeline run over per-block lists, and remember it; ``None`` when it does not apply.

    Parameters
    ----------
    request, reg:
        The :class:`~engine.schema.request.PreviewRequest` and its registries.
    step:
        What steps 1-3 resolved: ``settings``, ``profile``, ``limit``, ``reserve``, ``budget``,
        ``warnings`` (up to and including assembly), ``diagnostics``, ``tools``,
        ``lorebook_trace``, ``trace_by_source``, ``timed``.
    blocks, pre_excluded:
        The assembled blocks and the ids shown but never sent (step 4 counts them here: one
        batched count of every text, as ``engine.pipeline._count_blocks`` does).

    Returns
    -------
    PreparedPrompt or None
        ``None`` (the pipeline goes on in full) unless the strategy is the built-in ``truncate``
        or ``manual``, the profile uses OpenAI chat accounting and no interceptor is registered.
    """
    from .pipeline import _incomplete_group_warnings
    from .shifting import find_tool_groups
    from .shifting.registry import manual_strategy, truncate_strategy
    from .tokenizers.accounting import TOKENS_PER_MESSAGE, count_tools_tokens, message_overhead, message_texts

    settings = request.settings
    profile = step["profile"]
    info = reg.strategies.get(settings.strategy)
    if not _INCREMENTAL.get() or profile.chat is not None or reg.interceptors.names() or info.fn not in (
            truncate_strategy, manual_strategy):
        return None
    n = len(blocks)
    sendable = [i for i, b in enumerate(blocks) if b.id not in pre_excluded] if pre_excluded else list(range(n))
    sb = [blocks[i] for i in sendable]
    groups = find_tool_groups(sb)
    members: dict[str, list[int]] = {}
    for k, g in enumerate(groups.group_of):
        if g is not None:
            members.setdefault(g, []).append(k)
    warnings = _incomplete_group_warnings(sb, groups)
    for cid in sorted(groups.reused_ids):
        warnings.append(f"tool-call id {cid!r} is used by more than one call; each result is paired "
                        "with the nearest earlier call carrying it")
    plain = list(map(_plain, blocks))
    provider: list[dict[str, Any] | None] = [
        {"role": m.role, "content": m.content} if ok else (m.to_provider() if m is not None else None)
        for ok, m in zip(plain, (b.message for b in blocks))]
    pieces = [[m.role, m.content] if ok else (message_texts(p) if p is not None else [])
              for ok, m, p in zip(plain, (b.message for b in blocks), provider)]
    overhead = [TOKENS_PER_MESSAGE if ok else (message_overhead(p) if p is not None else 0) for ok, p in zip(plain, provider)]
    # 4. one batched count of every text (OpenAI accounting: texts + framing per message)
    counts = profile.count_many(list(chain.from_iterable(pieces)))
    ends = list(accumulate(map(len, pieces)))
    prefix = [0, *accumulate(counts)]
    tok = [prefix[e] - prefix[e - len(p)] + o for p, e, o in zip(pieces, ends, overhead)]
    for i in compress(range(n), map(is_, provider, repeat(None))):
        tok[i] = count_tools_tokens(profile, blocks[i].tools or [])
    pos_of_message = {b.message_index: i for i, b in enumerate(blocks)
                      if b.message_index is not None and b.source.startswith("message:")}
    bl = _block_lists(blocks)
    bl["tokens"] = tok
    bl["listy"] = [p is not None and isinstance(p.get("content"), list) for p in provider]
    b_group_of: list[str | None] = [None] * n
    for k, i in enumerate(sendable):
        b_group_of[i] = groups.group_of[k]
    glists = list(members.values())
    run = _Run(
        reg=reg, context=_context(request, reg), messages=list(request.chat.messages), step=step, blocks=blocks,
        pos_of_message=pos_of_message, sendable=sendable, b=bl, s=_sendable_lists(bl, tok, sendable, n),
        provider=provider, pieces=pieces, overhead=overhead, groups=glists,
        bgroups=glists if len(sendable) == n else [[sendable[k] for k in ms] for ms in glists],
        group_ids=list(members), group_of=list(groups.group_of), b_group_of=b_group_of,
        orphans=groups.orphans, incomplete=dict(groups.incomplete), group_warnings=warnings)
    step = dict(step)
    # audio parts are estimated; only messages with list content (``listy``: to_provider keeps it) can have them
    step["approximate"] = profile.approximate or any(
        b.message is not None and isinstance(b.message.content, list) and any(
            isinstance(p, dict) and p.get("type") == "input_audio" for p in b.message.content)
        for b in compress(blocks, bl["listy"]))
    step["pre_excluded"] = dict(pre_excluded)
    step["honor_manual"] = info.fn is manual_strategy
    run.step = step
    prepared = _compute(run, None)
    if not _time_dependent(request):
        _remember(run)
    return prepared


def _remember(run: _Run) -> None:
    with _RUNS_LOCK:
        _RUNS[id(run.reg), run.step["profile"].name, len(run.messages)] = run


def warm_run(request: Any, reg: Any) -> Any:
    """The prepared prompt of ``request`` from a remembered run, or ``None`` (run the pipeline in full).

    Applies when a remembered run has the same registries, the same context (every request
    field but the chat's messages, compared with ``==``) and as many messages, and the messages
    that are not the very same objects differ only in ``meta.pinned`` / ``meta.manualExcluded``
    or in the text of a plain message (at most :data:`WARM_MAX_CHANGED` of them; see :func:`_patched`).
    """
    if not _INCREMENTAL.get():
        return None
    msgs = request.chat.messages
    from .shifting.registry import manual_strategy, truncate_strategy

    settings = request.settings
    info = reg.strategies.get(settings.strategy)
    if reg.interceptors.names() or info.fn not in (truncate_strategy, manual_strategy):
        return None
    with _RUNS_LOCK:
        candidates = [r for k, r in _RUNS.items() if k[0] == id(reg) and k[2] == len(msgs)]
    context = None
    for old in candidates:
        if old.reg is not reg or old.step["honor_manual"] != (info.fn is manual_strategy):
            continue
        profile = old.step["profile"]
        if profile.name not in reg.tokenizers or reg.tokenizers.get(profile.name) is not profile:
            continue  # the profile was registered again since
        if context is None:
            context = _context(request, reg)
        if old.context != context:
            continue
        changed = changed_positions(msgs, old.messages)
        if len(changed) > WARM_MAX_CHANGED:
            return None
        if not changed:  # the same request again: the same (frozen) preview, fresh message dicts
            prepared = old.prepared
            return dataclasses.replace(prepared, messages=list(map(dict.copy, prepared.messages)),
                                       tools=list(prepared.tools))
        patched = _patched(old, msgs, changed)
        if patched is None:
            return None
        prepared = _compute(patched, old)
        _remember(patched)
        return prepared
    return None


_FLAGS = ("pinned", "manualExcluded")


def _difference(new: Any, old: Any) -> str | None:
    """How two chat messages differ.

    ``"flags"``: at most in ``meta.pinned`` / ``meta.manualExcluded``; ``"content"``: also in the
    text, both plain text without macros; ``None``: in anything else.
    """
    if type(new) is not type(old):
        return None
    a = {k: v for k, v in new.__dict__.items() if k not in ("meta", "content")}
    b = {k: v for k, v in old.__dict__.items() if k not in ("meta", "content")}
    if a != b or new.__pydantic_extra__ != old.__pydantic_extra__:
        return None
    ma, mb = new.meta, old.meta
    if type(ma) is not type(mb) or ma.__pydantic_extra__ != mb.__pydantic_extra__:
        return None
    if ({k: v for k, v in ma.__dict__.items() if k not in _FLAGS}
            != {k: v for k, v in mb.__dict__.items() if k not in _FLAGS}):
        return None
    if new.content == old.content:
        return "flags"
    plain = [type(c) is str and "{{" not in c and "<" not in c for c in (new.content, old.content)]
    return "content" if all(plain) else None


def _macro_sources(msgs: Sequence[Any]) -> set[int]:
    """Messages whose text a macro reads (``{{lastMessage}}``, ``{{lastUserMessage}}``, ``{{lastCharMessage}}``)."""
    out = {len(msgs) - 1}
    for role in ("user", "assistant"):
        out.add(next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == role), -1))
    return out


def _patched(old: _Run, msgs: Sequence[Any], changed: list[int]) -> _Run | None:
    """``old`` with the blocks of the ``changed`` messages rebuilt (``None``: not a toggle or a plain edit).

    A toggle copies the block with its new flags. An edit of a plain text (no macro in the old or
    new text, no lorebook, not a message a macro reads) copies it with the new message and counts
    it again.
    """
    from .tokenizers.accounting import message_overhead, message_texts

    blocks = list(old.blocks)
    bl = dict(old.b)
    for key in _FLAG_LISTS:
        bl[key] = list(bl[key])
    s_of = None
    sl = dict(old.s)
    same_lists = len(old.sendable) == len(blocks)
    if same_lists:
        sl["manual"] = bl["manual"]
    else:
        sl["manual"] = list(sl["manual"])
    sl["prot"] = list(sl["prot"])
    edited: list[int] = []
    rebuilt: list[int] = []  # block positions whose block object is new
    for c in changed:
        new, prev = msgs[c], old.messages[c]
        pos = old.pos_of_message.get(c)
        what = _difference(new, prev) if pos is not None else None
        if what is None or pos is None:
            return None
        b = blocks[pos]
        pinned, excluded = bool(new.meta.pinned), bool(new.meta.manualExcluded)
        if what == "content":
            if old.step["lorebook_trace"] or c in _macro_sources(msgs) or b.message is None:
                return None
            message = new if b.message.name == new.name else new.model_copy(update={"name": b.message.name})
            blocks[pos] = b.model_copy(update={"message": message, "pinned": pinned, "manual_excluded": excluded})
            edited.append(pos)
            rebuilt.append(pos)
        elif b.pinned == pinned and b.manual_excluded == excluded:
            continue
        else:
            blocks[pos] = b.model_copy(update={"pinned": pinned, "manual_excluded": excluded})
            rebuilt.append(pos)
        b = blocks[pos]
        bl["pinned"][pos] = pinned
        bl["manual"][pos] = excluded
        bl["kept_reason"][pos] = "PINNED" if pinned and not b.protected else b.reason
        if same_lists:
            k = pos
        else:
            if s_of is None:
                s_of = {i: k for k, i in enumerate(old.sendable)}
            k = s_of[pos]
            sl["manual"][k] = excluded
        sl["prot"][k] = b.protected or pinned
    run = copy.copy(old)
    if edited:  # count the edited messages again (one batch through the per-text cache)
        run.provider, run.pieces, run.overhead = list(old.provider), list(old.pieces), list(old.overhead)
        bl["tokens"], bl["text"] = list(bl["tokens"]), list(bl["text"])
        for pos in edited:
            b = blocks[pos]
            provider = b.message.to_provider()
            run.provider[pos], run.pieces[pos], run.overhead[pos] = provider, message_texts(provider), message_overhead(provider)
            bl["text"][pos] = _text(b)
        profile = old.step["profile"]
        counts = profile.count_many([t for pos in edited for t in run.pieces[pos]])
        at = 0
        for pos in edited:
            k = len(run.pieces[pos])
            bl["tokens"][pos] = sum(counts[at:at + k]) + run.overhead[pos]
            at += k
        sl["tokens"] = (bl["tokens"] if same_lists
                        else [bl["tokens"][i] for i in old.sendable])
    run.messages = list(msgs)
    run.rebuilt = sorted(set(rebuilt))
    run.rebuilt_base = old.blocks
    run.blocks = blocks
    run.b = bl
    run.s = sl
    return run


def _compute(run: _Run, prev: _Run | None) -> Any:
    """Steps 5-10 over the run's lists: shifting, the recount, explanations, fit map, preview."""
    from .pipeline import PreparedPrompt
    from .schema.preview import ContextPreview, PreviewError, TokenizerInfo
    from .shifting.columns import BlockColumns, ToolLayout
    from .shifting.core import shift_columns
    from .shifting.explain import explain_columns
    from .shifting.fitmap import TRUNCATE_LIKE, fit_columns, pipeline_shift_budget
    from .tokenizers.accounting import REPLY_PRIMING_TOKENS, content_part_warnings, count_tools_tokens

    step = run.step
    settings = step["settings"]
    profile = step["profile"]
    budget, limit, reserve = step["budget"], step["limit"], step["reserve"]
    priming = REPLY_PRIMING_TOKENS
    approximate = step["approximate"]
    safety = math.ceil(budget * settings.safety_margin_percent / 100) if approximate else 0
    shift_budget = budget - safety - priming
    blocks = run.blocks
    n = len(blocks)
    sendable = run.sendable
    everything_sent = len(sendable) == n
    bl = run.b
    tok = bl["tokens"]
    honor = step["honor_manual"]
    s_layout = ToolLayout(run.group_of, run.groups, run.group_ids, run.orphans, frozenset(run.incomplete))
    cols = BlockColumns(bl["id"], bl["label"], bl["message_index"], bl["kind"], bl["source"], tok, bl["hidden"],
                        bl["protected"], bl["pinned"], bl["manual"], bl["history"], bl["tier"], bl["priority"],
                        s_layout if everything_sent else ToolLayout(run.b_group_of, run.bgroups, run.group_ids))
    cols_s = cols if everything_sent else cols.take(sendable, s_layout)
    shift = shift_columns(cols_s, shift_budget, honor_manual=honor)
    warnings = [*step["warnings"], *run.group_warnings]
    diagnostics = [*step["diagnostics"], *shift.diagnostics]

    # statuses and reasons of every block (pre-excluded ones are shown, never sent)
    kept_reason = bl["kept_reason"]
    if everything_sent:
        sreasons = shift.reasons
        kept = list(map(is_, sreasons, repeat(None)))
        kept_at = list(compress(range(n), kept))
        # the kept ones (a minority in a long chat) get their kept reason below: no None is left
        reason: list[str] = list(sreasons)  # type: ignore[arg-type]
        deque(map(setitem, repeat(reason), kept_at, map(kept_reason.__getitem__, kept_at)), maxlen=0)
    else:
        pre = step["pre_excluded"]
        kept = [False] * n
        reason = [pre.get(x, "") for x in bl["id"]]
        for k, i in enumerate(sendable):
            r = shift.reasons[k]
            if r is None:
                kept[i] = True
                reason[i] = kept_reason[i]
            else:
                reason[i] = r
        kept_at = list(compress(range(n), kept))
    kept_pos = kept_at
    status = [_EXCLUDED] * n
    deque(map(setitem, repeat(status), kept_pos, repeat(_KEPT)), maxlen=0)

    # 9. the final recount of what is sent, through the per-text count cache
    provider = run.provider
    kept_msg_pos = list(compress(kept_pos, map(is_not, map(provider.__getitem__, kept_pos), repeat(None))))
    messages_src = list(map(provider.__getitem__, kept_msg_pos))
    pieces = run.pieces
    counts = profile.count_many(list(chain.from_iterable(map(pieces.__getitem__, kept_msg_pos))))
    kinds = bl["kind"]
    send_tools = step["tools"] if len(kept_msg_pos) != len(kept_pos) and any(
        kinds[i] == "tools" for i in kept_pos) else []
    tools_tokens = count_tools_tokens(profile, send_tools) if send_tools else 0
    overhead = run.overhead
    prompt_tokens = sum(counts) + sum(map(overhead.__getitem__, kept_msg_pos)) + priming + tools_tokens
    listy = bl["listy"]
    if any(map(listy.__getitem__, kept_msg_pos)):
        warnings.extend(content_part_warnings(messages_src))  # type: ignore[arg-type]
    error = None
    if shift.error:
        sb = [blocks[i] for i in sendable]
        error = PreviewError(
            code="TOKEN_BUDGET_EXCEEDED",
            message=(f"the protected blocks alone need {shift.protected_tokens + priming} "
                     f"tokens but the budget is {budget - safety} tokens "
                     f"(context {limit} − reply reserve {reserve}{f' − safety margin {safety}' if safety else ''})"),
            details={"protected_tokens": shift.protected_tokens + priming, "budget": budget - safety,
                     "protected_blocks": [b.id for b in sb if b.protected or b.pinned]})
    elif prompt_tokens > budget - safety:  # pragma: no cover - would be a bug in shifting
        raise AssertionError(f"final prompt {prompt_tokens} tokens exceeds budget {budget - safety}")

    # 10. explanations and the fit map, over the same lists
    explanations: dict[str, Any] = {}
    detail = explain_columns(cols, status, reason, shift_budget, lorebook_traces=step["trace_by_source"],
                             previous=prev.out.get("explanations") if prev is not None and prev.out else None,
                             current=explanations)
    reserve_fixed = settings.reply_reserve if isinstance(settings.reply_reserve, int) else None
    shift_budget_of = pipeline_shift_budget(settings.resolve_reply_reserve, settings.safety_margin_percent,
                                            profile.approximate, priming, fixed_reserve=reserve_fixed)
    arrays: dict[str, Any] = {}
    fits_s = fit_columns(cols_s, shift_budget_of, honor_manual=honor)
    if everything_sent:
        fits = fits_s
    else:
        fits = [None] * n
        for k, i in enumerate(sendable):
            fits[i] = fits_s[k]

    pblocks = _preview_rows(run, prev, status, reason, detail, fits, arrays)
    fit_method = "exact" if settings.strategy in TRUNCATE_LIKE else "truncate-order"
    pv = construct(ContextPreview, {
        "model": settings.model,
        "tokenizer": TokenizerInfo(profile=profile.name, approximate=approximate, version=profile.version),
        "context_limit": limit, "reply_reserve": reserve, "budget": budget, "safety_margin": safety,
        "headroom": budget - safety - prompt_tokens, "prompt_tokens": prompt_tokens, "strategy": settings.strategy,
        "overhead_tokens": priming, "warnings": warnings, "error": error, "blocks": pblocks,
        "lorebook_trace": [dict(d) if isinstance(d, dict) else d for d in step["lorebook_trace"]],
        "messages": list(map(dict.copy, messages_src)),  # type: ignore[arg-type]
        "tools": [dict(t) for t in send_tools], "diagnostics": diagnostics, "fit_method": fit_method,
        "strategy_info": {}, "api": "chat_completion", "prompt": None, "stop": []})
    run.out = {"reason": reason, "status": status, "fit": fits, "detail": detail, "explanations": explanations,
               "arrays": arrays}
    run.pblocks = pblocks
    prepared = PreparedPrompt(pv, list(map(dict.copy, messages_src)), list(send_tools), profile,  # type: ignore[arg-type]
                              error is None, [], step["timed"])
    run.prepared = prepared
    return prepared


_KEPT = "kept"
_EXCLUDED = "excluded"


_DICT_OF = attrgetter("__dict__")


@dataclass(frozen=True)
class _RowInputs:
    """What building a run's preview rows reads: the run's blocks and per-block lists (not the run itself)."""

    blocks: list[Any]
    b: dict[str, list[Any]]
    b_group_of: list[str | None]
    trace_by_source: dict[str, Any]
    rebuilt: list[int] | None
    rebuilt_base: list[Any] | None


def _preview_rows(run: _Run, prev: _Run | None, status: list[str], reason: list[str], detail: list[Any],
                  fits: list[int | None], arrays: dict[str, Any]) -> Any:
    """The preview rows (``PreviewBlock``) of ``run``, one per block, from the lists ``_compute`` worked out.

    A :class:`~engine.schema.preview.PreviewRows` over a :class:`_RowSource`. A cold run
    (``prev`` is ``None``) gets its rows built now. A warm run's rows are built when read: one
    by index, or all at once (:func:`_built_rows`) against the previous run's rows when every one
    of those was built by then, else every row from its block. What the source holds is the
    run's blocks and lists and the previous run's outcome, never a run (no chain of runs stays
    alive through previews nobody read: the previous rows are held weakly while unbuilt).
    """
    from .schema.preview import PreviewRows

    src = _RowInputs(run.blocks, run.b, run.b_group_of, run.step["trace_by_source"], run.rebuilt, run.rebuilt_base)
    n = len(run.blocks)
    if prev is None:
        source = _RowSource(src, status, reason, detail, fits, arrays, None, None, None)
        return PreviewRows(n, source=source, rows=_built_rows(src, None, None, None, status, reason, detail, fits,
                                                              arrays))
    prior_rows: Any = None
    if len(prev.pblocks) == n and prev.out:
        prior = prev.pblocks
        if isinstance(prior, PreviewRows):
            prior_rows = prior.built if prior.built is not None else prior.weak()
        else:
            prior_rows = prior
    prev_blocks, prev_out = (prev.blocks, prev.out) if prior_rows is not None else (None, None)
    return PreviewRows(n, source=_RowSource(src, status, reason, detail, fits, arrays, prior_rows, prev_blocks,
                                            prev_out))


class _RowSource:
    """Builds the rows of one run's preview (:class:`~engine.schema.preview.RowSource`).

    All at once, one at a time, or a column of them without building any.
    """

    __slots__ = ("arrays", "detail", "fits", "prev_blocks", "prev_out", "prior_rows", "reason", "src", "status")

    def __init__(self, src: _RowInputs, status: list[str], reason: list[str], detail: list[Any],
                 fits: list[int | None], arrays: dict[str, Any], prior_rows: Any, prev_blocks: list[Any] | None,
                 prev_out: dict[str, Any] | None) -> None:
        self.src, self.status, self.reason, self.detail, self.fits, self.arrays = src, status, reason, detail, fits, arrays
        self.prior_rows, self.prev_blocks, self.prev_out = prior_rows, prev_blocks, prev_out

    def build_all(self) -> list[Any]:
        """Every row (:func:`_built_rows`; against the previous rows if every one was built by now)."""
        from .pipeline import gc_paused

        rows = self.prior_rows
        if rows is not None and type(rows) is not list:
            alive = rows()
            rows = alive.built if alive is not None else None
        with gc_paused():
            out = _built_rows(self.src, self.prev_blocks, self.prev_out, rows, self.status, self.reason, self.detail,
                              self.fits, self.arrays)
        self.prior_rows = self.prev_blocks = self.prev_out = None  # built: nothing of the previous run is needed
        return out

    def build_row(self, index: int) -> Any:
        """Row ``index`` alone, built from its block and the run's lists (as a cold run builds it)."""
        from .schema.preview import PreviewBlock

        dicts = _row_dicts(self.src, [index], self.status, self.reason, self.detail, self.fits)
        return construct_many(PreviewBlock, dicts, set(model_fields_of(PreviewBlock)))[0]

    def column(self, name: str, positions: Sequence[int] | None = None) -> list[Any] | None:
        """Field ``name`` at ``positions`` from the run's lists, or ``None`` for a field kept only in rows."""
        if name in ("reason_detail", "reason_data"):
            values: Sequence[Any] = self.detail
            attr = "text" if name == "reason_detail" else "data"
            picked = values if positions is None else list(map(values.__getitem__, positions))
            return list(map(getattr, picked, repeat(attr), repeat(None)))
        lists: dict[str, Sequence[Any]] = {"status": self.status, "reason": self.reason, "fit_window": self.fits,
                                           "group": self.src.b_group_of}
        column = lists.get(name)
        if column is None and name in _ROW_LISTS:
            column = self.src.b[_ROW_LISTS[name]]
        if column is None:
            return None
        return list(column) if positions is None else list(map(column.__getitem__, positions))

    def changes_since(self, other: Any) -> dict[str, list[int]] | None:
        """Where this run's rows can differ from ``other``'s (:meth:`PreviewRows.changes_since`).

        ``block``: the blocks that are not the same objects, and the positions where a per-block
        list the rows read differs (list by list, skipped where both runs share the list); the
        fate fields by one C-level comparison each (explanations by identity: equal ones are
        shared between runs, so this errs on the side of naming a row).
        """
        if not isinstance(other, _RowSource):
            return None
        a, b = self.src, other.src
        n = len(a.blocks)
        if len(b.blocks) != n or (a.trace_by_source is not b.trace_by_source and a.trace_by_source != b.trace_by_source):
            return None
        # a run patched from ``other``'s (the next toggle): its new blocks are known, and a pin /
        # exclude flag changes only with its block (``_patched``), so those lists need no pass
        adjacent = a.rebuilt is not None and a.rebuilt_base is b.blocks
        whole = set(a.rebuilt or ()) if adjacent else set(compress(range(n), map(is_not, a.blocks, b.blocks)))
        for field_name, key in _ROW_LISTS.items():
            if a.b[key] is not b.b[key] and not (adjacent and field_name in ("pinned", "manual_excluded")):
                whole.update(compress(range(n), map(ne, a.b[key], b.b[key])))
        if a.b_group_of is not b.b_group_of:
            whole.update(compress(range(n), map(ne, a.b_group_of, b.b_group_of)))

        def where(test: Any, mine: Sequence[Any], theirs: Sequence[Any]) -> list[int]:
            return [] if mine is theirs else list(compress(range(n), map(test, mine, theirs)))

        mine, theirs = self.arrays, other.arrays
        if all(x.get(k) is not None for x in (mine, theirs) for k in ("codes", "fit")):
            # numpy (warm runs, every block sent): a status or an excluded block's reason changes
            # with its code, a kept block's own reason only with its block (in ``block``)
            import numpy as np

            status = np.flatnonzero(mine["codes"] != theirs["codes"]).tolist()
            fit = np.flatnonzero(mine["fit"] != theirs["fit"]).tolist()
            return {"block": sorted(whole), "status": status, "reason": status,
                    "reason_detail": where(is_not, self.detail, other.detail), "fit_window": fit}
        return {"block": sorted(whole), "status": where(ne, self.status, other.status),
                "reason": where(ne, self.reason, other.reason),
                "reason_detail": where(is_not, self.detail, other.detail),
                "fit_window": where(ne, self.fits, other.fits)}


#: ``PreviewBlock`` fields read from the run's per-block lists (field -> key in ``_Run.b``).
_ROW_LISTS = {"id": "id", "kind": "kind", "source": "source", "tokens": "tokens", "protected": "protected",
              "pinned": "pinned", "text": "text", "manual_excluded": "manual", "message_index": "message_index"}


def _built_rows(src: _RowInputs, prev_blocks: list[Any] | None, po: dict[str, Any] | None, prev_rows: list[Any] | None,
                status: list[str], reason: list[str], detail: list[Any], fits: list[int | None],
                arrays: dict[str, Any]) -> list[Any]:
    """Build the rows of :func:`_preview_rows` (``prev_rows``: the previous run's built rows, or ``None``).

    A row whose block, fate (status, reason), explanation and fit window equal the previous
    run's is the previous run's very object. A row whose block is the same object but whose
    fate, explanation or window changed (after a toggle: every older message's window and every
    dropped message's "free tokens" explanation) is the previous row's values with the changed
    fields replaced (:func:`_refated_rows`). Other rows are built from their block. Every row
    shares one mutable set of field names: the rows are frozen and the set already holds every
    name, and ``model_copy(update=)`` updates a copy of it.
    """
    from .schema.preview import PreviewBlock

    blocks = src.blocks
    n = len(blocks)
    fields = set(model_fields_of(PreviewBlock))
    if prev_rows is not None and prev_blocks is not None and po is not None and len(prev_rows) == n:
        fresh: Sequence[int] = (src.rebuilt if src.rebuilt is not None and src.rebuilt_base is prev_blocks
                                else list(compress(range(n), map(is_not, blocks, prev_blocks))))
        pa = po.get("arrays") or {}
        detail_changed = map(is_not, detail, po["detail"])  # explanations are shared objects
        if all(x.get(k) is not None for x in (arrays, pa) for k in ("codes", "fit")):
            # numpy: a status or reason changes with its code (a kept block's own reason only
            # with its block, which is rebuilt whole); windows compared as int64 (-1: none)
            import numpy as np

            by_field = {"status": arrays["codes"] != pa["codes"], "fit_window": arrays["fit"] != pa["fit"],
                        "reason_detail": np.fromiter(detail_changed, dtype=bool, count=n)}
            by_field["reason"] = by_field["status"]
            redo = by_field["status"] | by_field["fit_window"] | by_field["reason_detail"]
            redo[fresh] = False
            at = np.flatnonzero(redo)
            refate = at.tolist()
            masks: dict[str, list[bool] | None] = {
                k: (None if bool(m[at].all()) else m[at].tolist()) for k, m in by_field.items() if m[at].any()}
        else:  # statuses are two shared strings: one C-level pass per field
            lists = {"status": list(map(is_not, status, po["status"])), "reason": list(map(ne, reason, po["reason"])),
                     "reason_detail": list(detail_changed), "fit_window": list(map(ne, fits, po["fit"]))}
            redo_l = list(map(or_, map(or_, lists["status"], lists["reason"]),
                              map(or_, lists["reason_detail"], lists["fit_window"])))
            deque(map(setitem, repeat(redo_l), fresh, repeat(False)), maxlen=0)  # rebuilt whole below
            refate = list(compress(range(n), redo_l))
            masks = {k: list(map(m.__getitem__, refate)) for k, m in lists.items()}
        pblocks = list(prev_rows)
        if refate:
            rows = _refated_rows(prev_rows, refate, masks, status, reason, detail, fits, fields)
            deque(map(setitem, repeat(pblocks), refate, rows), maxlen=0)
    else:
        fresh = range(n)
        pblocks = [None] * n
    if isinstance(fresh, range):  # every row (a cold run, or no built rows to start from)
        return construct_many(PreviewBlock, _row_dicts(src, fresh, status, reason, detail, fits), fields)
    if fresh:
        rows = construct_many(PreviewBlock, _row_dicts(src, fresh, status, reason, detail, fits), fields)
        deque(map(setitem, repeat(pblocks), fresh, rows), maxlen=0)
    return pblocks


def _row_dicts(run: _RowInputs, positions: Sequence[int], status: list[str], reason: list[str], detail: list[Any],
               fits: list[int | None]) -> list[dict[str, Any]]:
    """The ``PreviewBlock`` values of the blocks at ``positions`` (a ``range`` for every block).

    One C-level pass per field over the chosen positions (``operator.setitem`` into copies of one
    split-key template, :func:`_row_template`); a lorebook block's trace gets the activation
    record of its entry (``trace_by_source``).
    """
    every = isinstance(positions, range) and len(positions) == len(run.blocks)

    def pick(column: Sequence[Any]) -> Sequence[Any]:
        return column if every else list(map(column.__getitem__, positions))

    blocks = pick(run.blocks)
    bl = run.b
    kinds, sources = pick(bl["kind"]), pick(bl["source"])
    traces = list(map(attrgetter("trace"), blocks))
    trace_by_source = run.trace_by_source
    if trace_by_source:
        for k in compress(range(len(blocks)), map(eq, kinds, repeat("lorebook"))):
            extra = trace_by_source.get(sources[k])
            if extra is not None:
                traces[k] = {**(traces[k] or {}), **extra}
    dicts = list(map(dict.copy, repeat(_row_template(), len(blocks))))
    messages = map(attrgetter("message"), blocks)
    columns: dict[str, Any] = {
        "id": pick(bl["id"]), "kind": kinds, "role": map(attrgetter("role"), blocks), "source": sources,
        "position": positions, "tokens": pick(bl["tokens"]), "status": pick(status), "reason": pick(reason),
        "protected": pick(bl["protected"]), "pinned": pick(bl["pinned"]), "group": pick(run.b_group_of),
        "text": pick(bl["text"]), "name": map(getattr, messages, repeat("name"), repeat(None)),
        "manual_excluded": pick(bl["manual"]), "message_index": pick(bl["message_index"]), "trace": traces}
    for key, column in columns.items():
        deque(map(setitem, dicts, repeat(key), column), maxlen=0)
    explanations = pick(detail)
    deque(map(setitem, dicts, repeat("reason_detail"), map(getattr, explanations, repeat("text"), repeat(None))),
          maxlen=0)
    deque(map(setitem, dicts, repeat("reason_data"), map(getattr, explanations, repeat("data"), repeat(None))),
          maxlen=0)
    deque(map(setitem, dicts, repeat("fit_window"), pick(fits)), maxlen=0)
    return dicts


def _refated_rows(old_rows: Sequence[Any], idx: list[int], masks: dict[str, list[bool] | None],
                  status: list[str], reason: list[str], detail: list[Any], fits: list[int | None],
                  fields: set[str]) -> list[Any]:
    """Copies of ``old_rows[i]`` (``i`` in ``idx``) with their changed fate fields replaced.

    ``masks[field][k]`` says whether ``field`` changed in row ``idx[k]`` (``None``: in every
    one; a field missing: in none). Each field is set only in the rows where it changed; every
    step is a C-level pass (``operator.setitem`` and ``getattr`` are fast calls, unlike
    ``dict.__setitem__``).
    """
    from .schema.preview import PreviewBlock

    dicts = list(map(dict.copy, map(_DICT_OF, map(old_rows.__getitem__, idx))))
    columns = {"status": status, "reason": reason, "reason_detail": detail, "fit_window": fits}
    for field_name, mask in masks.items():
        targets, where = (dicts, idx) if mask is None else (list(compress(dicts, mask)), list(compress(idx, mask)))
        values: Any = map(columns[field_name].__getitem__, where)
        if field_name == "reason_detail":
            explanations = list(values)
            deque(map(setitem, targets, repeat("reason_data"), map(getattr, explanations, repeat("data"), repeat(None))),
                  maxlen=0)
            values = map(getattr, explanations, repeat("text"), repeat(None))
        deque(map(setitem, targets, repeat(field_name), values), maxlen=0)
    return construct_many(PreviewBlock, dicts, fields)


class _RowDict:
    """Holder whose instance dicts share one key table (CPython's split dicts): a row's ``__dict__``.

    A preview row's 22 field values in a split dict take about a third of the memory of an
    ordinary dict, and ``dict.copy()`` of one copies 22 value pointers instead of a 64-slot key
    table, which is most of the cost of a toggle's thousands of re-fated rows. Any dict would be
    correct: this is only the cheaper kind.
    """


_ROW_TEMPLATE: list[dict[str, Any]] = []


def _row_template() -> dict[str, Any]:
    """A split-key dict of every ``PreviewBlock`` field (in field order), each set to ``None``.

    Attribute assignment builds the shared key table once (``dict.update`` on an empty split dict
    would turn it into an ordinary one).
    """
    if not _ROW_TEMPLATE:
        from .schema.preview import PreviewBlock

        holder = _RowDict()
        for key in PreviewBlock.model_fields:
            setattr(holder, key, None)
        _ROW_TEMPLATE.append(holder.__dict__)
    return _ROW_TEMPLATE[0]


__all__ = ["WARM_MAX_CHANGED", "blocks_frozen", "changed_positions", "finish_run", "frozen_blocks", "full_pipeline",
           "remembered_groups", "warm_run", "warm_up"]
