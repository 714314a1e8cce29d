"""What a pipeline run remembers for the next one, and what a difference invalidates (issue 29 item 2).

The preview re-runs on every click and keystroke over chats of 10,000+ messages, and between two
runs almost nothing changes (one message pinned or excluded, one typed). The pipeline
(:mod:`engine.pipeline`) is the only path for every run; this module is its reuse policy:

* :func:`remember` keeps a finished run (the last few, per registries, tokenizer profile and
  chat length) with the inputs it was computed from;
* :func:`reuse` finds the remembered run a new request can start from: the same registries
  and context (every request field but the chat's messages, compared with ``==``), as many
  messages, and the messages that are not the very same objects differ only in
  ``meta.pinned`` / ``meta.manualExcluded`` or in the text of a plain message (no macro, no
  lorebook, not a message a macro reads), at most :data:`WARM_MAX_CHANGED` of them. It returns
  the run's blocks with the changed ones copied (:class:`Reuse`), which step 3 of the pipeline
  takes instead of assembling; the later steps recompute only what those blocks touch.

Also the tool-group memo :func:`remembered_groups` (per list of block objects, inside a pipeline
run: :func:`frozen_blocks`), which :func:`engine.shifting.groups.find_tool_groups` uses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import compress, repeat
from operator import attrgetter, is_not, ne, not_
from typing import Any, Generic, TypeVar

from .cache import lru
from .patched import PatchedList
from .schema.blocks import Block
from .schema.messages import ChatMessage
from .schema.request import PreviewRequest

T = TypeVar("T")
S = TypeVar("S")

# --------------------------------------------------------------------------------------------
# The remembered runs

_RUNS = lru(4)
_RUNS_LOCK = threading.Lock()
#: Changed messages above which a run starts from nothing (a cold run).
WARM_MAX_CHANGED = 64
_TIME_MACRO = re.compile(r"\{\{\s*(?:time|date|weekday|isotime|isodate)\s*\}\}", re.IGNORECASE)
_FLAGS = ("pinned", "manualExcluded")
#: What :func:`_difference` sets aside: a message's meta and content, and in the meta the flags.
_NOT_COMPARED = dict.fromkeys(("meta", "content"))
_NO_FLAGS = dict.fromkeys(_FLAGS)
_CONTENT = attrgetter("content")


def context_of(request: PreviewRequest, reg: Any) -> tuple[object, ...]:
    """Everything a preview depends on except the chat's messages (compared with ``==``).

    ``reg`` is the run's :class:`~engine.registries.Registries` (its stages and tokenizers).
    """
    chat = request.chat
    settings = request.settings
    stages = reg.stages.pick(settings.template)
    # the request's and the chat's fields with the chat and its messages blanked (C-level dict copies)
    return ({**request.__dict__, "chat": None}, request.__pydantic_extra__,
            {**chat.__dict__, "messages": None}, chat.__pydantic_extra__,
            stages, reg.tokenizers.get(settings.tokenizer) if settings.tokenizer in reg.tokenizers else None)


def time_dependent(request: PreviewRequest) -> bool:
    """Whether a ``{{time}}``-like macro appears anywhere (its expansion changes between runs)."""
    if _TIME_MACRO.search(request.model_dump_json(exclude={"chat": {"messages"}})):
        return True
    # every message text (text content as it is, the few others through ``text()``) searched for
    # "{" first (a one-character search is a memchr; the ``in`` operator, which is cheaper than
    # mapping ``str.__contains__``), the pattern only in the texts that have one
    msgs = request.chat.messages
    contents = list(map(_CONTENT, msgs))
    plain = list(map(isinstance, contents, repeat(str)))
    texts = [*compress(contents, plain), *map(ChatMessage.text, compress(msgs, map(not_, plain)))]
    return any(map(_TIME_MACRO.search, [t for t in texts if "{" in t]))


@dataclass(frozen=True)
class Remembered(Generic[S]):
    """A finished run and the inputs it was computed from.

    ``key``: what must be equal for a run to start from it (the registries object, the tokenizer
    profile object, whether manual exclusions are honoured); ``context`` as :func:`context_of`;
    ``blocks`` the assembled blocks, ``position_of`` the block position of each chat message
    with a block of its own; ``lorebooks`` whether a lorebook took part (then no text edit is
    reused: it may activate entries); ``state`` the pipeline's run state. ``messages``: the
    request's messages as the next request's are compared with (:class:`Snapshot`).
    """

    key: tuple[object, ...]
    context: tuple[object, ...]
    messages: Snapshot
    blocks: Sequence[Block]
    position_of: dict[int, int]
    lorebooks: bool
    state: S


@dataclass(frozen=True)
class Reuse(Generic[S]):
    """Where a new run starts: ``base``'s blocks with the changed ones copied.

    ``flagged``: block positions whose pin / exclude flags changed; ``edited``: block positions
    whose plain text changed (counted again). Both empty: the very same request again.
    """

    base: Remembered[S]
    blocks: Sequence[Block]
    flagged: list[int]
    edited: list[int]
    #: the new request's messages as the next run compares them: ``base``'s with the chunks that differed replaced
    messages: Snapshot | None = None


def remember(entry: Remembered[S]) -> None:
    """Keep ``entry`` for the next run (the caller checks :func:`time_dependent` on a cold run)."""
    with _RUNS_LOCK:
        _RUNS[entry.key, len(entry.messages)] = entry


def reuse(request: PreviewRequest, key: tuple[object, ...], context: tuple[object, ...]) -> Reuse[Any] | None:
    """The remembered run ``request`` can start from, with its changed blocks copied; ``None``: start cold.

    Parameters
    ----------
    request:
        The new request.
    key, context:
        As :attr:`Remembered.key` and :attr:`Remembered.context` for this run.
    """
    msgs = request.chat.messages
    with _RUNS_LOCK:
        old = _RUNS.get((key, len(msgs)))
    if old is None or old.context != context:
        return None
    found = old.messages.compared(msgs, WARM_MAX_CHANGED)
    if found is None:
        return None
    return _patched(old, msgs, *found)


#: Messages per chunk of a :class:`Snapshot` (and per slice :func:`changed_messages` compares).
_SLICE = 512


@dataclass(frozen=True)
class Snapshot:
    """A request's messages as the next run compares its own with: chunks of :data:`_SLICE` messages.

    Comparing a new request's messages with a chunk slices only the new list (a list comparison
    takes identical items as equal without reading them); a warm run's snapshot is its base's
    with the chunks that differed replaced by the new request's slices (:meth:`compared`): no
    copy of every message, and no slice of the remembered messages, per run. Read-only.
    """

    chunks: tuple[list[ChatMessage], ...]

    @classmethod
    def of(cls, messages: Sequence[ChatMessage]) -> Snapshot:
        """``messages`` in chunks (one C-level slice each)."""
        return cls(tuple(list(messages[a:a + _SLICE]) for a in range(0, len(messages), _SLICE)))

    def __len__(self) -> int:
        return sum(map(len, self.chunks))

    def __getitem__(self, i: int) -> ChatMessage:
        return self.chunks[i // _SLICE][i % _SLICE]

    def compared(self, new: Sequence[ChatMessage], most: int) -> tuple[list[int], Snapshot] | None:
        """Positions ``i`` where ``new[i] is not self[i]`` and ``new`` as a snapshot; ``None`` past ``most`` of them.

        ``new`` has as many messages. A chunk equal to ``new``'s slice is kept; only one that
        differs is searched item by item. A message that is equal but not the same object in an
        otherwise equal chunk is not listed: it assembles the same block.
        """
        out: list[int] = []
        chunks = list(self.chunks)
        # each chunk against the new list's slice in one C-level pass; only the differing ones item by item
        parts = list(map(new.__getitem__, _slices(len(new))))
        for k in compress(range(len(chunks)), map(ne, parts, chunks)):
            a = k * _SLICE
            out += compress(range(a, a + len(chunks[k])), map(is_not, parts[k], chunks[k]))
            if len(out) > most:
                return None
            part = parts[k]
            chunks[k] = part if isinstance(part, list) else list(part)
        return out, Snapshot(tuple(chunks))


@lru_cache(maxsize=8)
def _slices(n: int) -> tuple[slice, ...]:
    """The slices of :data:`_SLICE` positions that cover ``n`` messages (a :class:`Snapshot`'s chunks)."""
    return tuple(slice(a, min(a + _SLICE, n)) for a in range(0, n, _SLICE))


def changed_messages(new: Sequence[ChatMessage], old: Sequence[ChatMessage] | Snapshot,
                     most: int) -> list[int] | None:
    """Positions ``i`` where ``new[i] is not old[i]`` (of as many messages), or ``None`` past ``most`` of them.

    As :meth:`Snapshot.compared` (``old`` made a snapshot when it is a list).
    """
    found = (old if isinstance(old, Snapshot) else Snapshot.of(old)).compared(new, most)
    return None if found is None else found[0]


def _difference(new: ChatMessage, old: ChatMessage) -> str | None:
    """How two chat messages differ.

    ``"flags"``: at most in ``meta.pinned`` / ``meta.manualExcluded``; ``"content"``: also in the
    text, both plain text without macros; ``None``: in anything else.
    """
    if type(new) is not type(old):
        return None
    # each object's fields with the ones set aside blanked (C-level dict copies, then one comparison)
    if ({**new.__dict__, **_NOT_COMPARED} != {**old.__dict__, **_NOT_COMPARED}
            or new.__pydantic_extra__ != old.__pydantic_extra__):
        return None
    ma, mb = new.meta, old.meta
    if type(ma) is not type(mb) or ma.__pydantic_extra__ != mb.__pydantic_extra__:
        return None
    if {**ma.__dict__, **_NO_FLAGS} != {**mb.__dict__, **_NO_FLAGS}:
        return None
    if new.content == old.content:
        return "flags"
    plain = [type(c) is str and "{{" not in c and "<" not in c for c in (new.content, old.content)]
    return "content" if all(plain) else None


def _macro_sources(msgs: Sequence[ChatMessage]) -> set[int]:
    """Messages whose text a macro reads (``{{lastMessage}}``, ``{{lastUserMessage}}``, ``{{lastCharMessage}}``)."""
    out = {len(msgs) - 1}
    for role in ("user", "assistant"):
        out.add(next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == role), -1))
    return out


def _patched(old: Remembered[S], msgs: Sequence[ChatMessage], changed: list[int],
             snapshot: Snapshot) -> Reuse[S] | None:
    """``old``'s blocks with those of the ``changed`` messages copied (``None``: not a toggle or a plain edit).

    A toggle copies the block with its new flags. An edit of a plain text (no macro in the old or
    new text, no lorebook, not a message a macro reads) copies it with the new message.
    """
    blocks = old.blocks
    changes: dict[int, Block] = {}
    flagged: list[int] = []
    edited: list[int] = []
    for c in changed:
        new, prev = msgs[c], old.messages[c]
        pos = old.position_of.get(c)
        what = _difference(new, prev) if pos is not None else None
        if what is None or pos is None:
            return None
        b = changes.get(pos) or blocks[pos]
        pinned, excluded = bool(new.meta.pinned), bool(new.meta.manualExcluded)
        if what == "content":
            if old.lorebooks or c in _macro_sources(msgs) or b.message is None:
                return None
            message = new if b.message.name == new.name else new.model_copy(update={"name": b.message.name})
            changes[pos] = b.model_copy(update={"message": message, "pinned": pinned, "manual_excluded": excluded})
            edited.append(pos)
        elif b.pinned != pinned or b.manual_excluded != excluded:
            changes[pos] = b.model_copy(update={"pinned": pinned, "manual_excluded": excluded})
            flagged.append(pos)
    # the remembered blocks and messages with the changed ones replaced (no copy of every one)
    return Reuse(old, PatchedList.of(blocks, changes.items()), sorted(set(flagged)), sorted(set(edited)), snapshot)


__all__ = ["WARM_MAX_CHANGED", "Remembered", "Reuse", "Snapshot", "changed_messages", "context_of", "remember", "reuse",
           "time_dependent"]
