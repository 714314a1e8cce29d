"""The preview result: ``ContextPreview`` (the CLI's ``--format json`` and the API body)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress
from operator import attrgetter, is_not, itemgetter, ne
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .blocks import BlockOrigin, preview_block_origin
from .trace import TraceRecord


class TokenizerInfo(BaseModel):
    """The tokenizer profile used: its name, whether counts are estimates, and its version."""

    model_config = ConfigDict(frozen=True)

    profile: str
    approximate: bool
    version: str = "1"


class PreviewError(BaseModel):
    """A stable error code with a message (e.g. ``TOKEN_BUDGET_EXCEEDED``)."""

    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class PreviewBlock(BaseModel):
    """One block of the preview, in prompt order, with its fate.

    ``tokens`` is the block's own count including its chat-format overhead (3 per message,
    +1 per ``name``); for truncated blocks ``original_tokens`` gives the count before.
    With a chat-template profile (Llama, Mistral, Qwen, DeepSeek), ``tokens`` is the block's
    exact share of the final prompt and ``template_tokens`` how many of them the template
    added (headers, control tokens, separators); ``None`` for OpenAI accounting.
    ``position`` is the 0-based index in prompt order (all blocks, kept or not).
    ``reason_detail`` is the specific reason in words where the code alone would mislead (a
    small message out while tokens are free, a tool call kept for its pinned result, a lorebook
    entry over the World Info budget); ``reason_data`` holds its figures (tokens, message
    indices; see :func:`engine.shifting.explain.explain_blocks`). Both are ``None`` otherwise.
    ``fit_window`` (chat messages) is the smallest context window in tokens that would send
    this message under the same settings and strategy (``None``: none would; see
    :func:`engine.shifting.fitmap.fit_windows`).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    role: str
    source: str
    position: int
    tokens: int
    status: Literal["kept", "excluded", "truncated"]
    reason: str
    protected: bool
    pinned: bool
    group: str | None = None
    text: str = ""
    name: str | None = None
    original_tokens: int | None = None
    summary_id: str | None = None
    manual_excluded: bool = False
    template_tokens: int | None = None
    message_index: int | None = None
    trace: dict[str, Any] | None = None
    reason_detail: str | None = None
    reason_data: dict[str, Any] | None = None
    fit_window: int | None = None
    #: Text Completion (``ContextPreview.api == "text_completion"``): the block's character range
    #: ``[start, end)`` in ``ContextPreview.prompt`` (``None`` for blocks not in the string, and for
    #: Chat Completion previews).
    span: tuple[int, int] | None = None

    @property
    def origin(self) -> BlockOrigin:
        """Who made the block: assembly, a strategy (a summary) or an interceptor (not serialized).

        Derived by :func:`engine.schema.blocks.preview_block_origin` from ``id`` and ``source``,
        so it is the same for a preview read back from JSON; equal to the engine block's
        ``Block.origin``.
        """
        return preview_block_origin(self.id, self.source)


class ContextPreview(BaseModel):
    """What the model would see, and why (SPEC §2, issue #2 item 7).

    Token fields are in tokens of ``tokenizer.profile``. ``budget = context_limit −
    reply_reserve``; ``headroom = budget − safety_margin − prompt_tokens``.
    ``prompt_tokens`` is the exact chat-accounting count of ``messages`` plus the tools block.
    ``overhead_tokens`` are the prompt tokens no block owns (OpenAI: the 3 reply-priming tokens;
    chat templates: BOS, the reply header, turns the template inserts): the ``tokens`` of the
    kept blocks plus ``overhead_tokens`` add up to ``prompt_tokens`` (truncated blocks aside).
    ``blocks`` is a plain list of frozen rows; a warm preview (one that started from a remembered
    run after a toggle, :mod:`engine.incremental`) shares its unchanged rows with the previous
    preview (:func:`preview_changes` says where two previews' rows differ).
    """

    model_config = ConfigDict(frozen=True)

    model: str
    tokenizer: TokenizerInfo
    context_limit: int
    reply_reserve: int
    budget: int
    safety_margin: int
    headroom: int
    prompt_tokens: int
    strategy: str
    overhead_tokens: int = 0
    warnings: list[str] = Field(default_factory=list)
    error: PreviewError | None = None
    blocks: list[PreviewBlock] = Field(default_factory=list)
    lorebook_trace: list[TraceRecord] = Field(default_factory=list)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    diagnostics: list[str] = Field(default_factory=list)
    #: How ``blocks[*].fit_window`` was computed: ``exact`` (``truncate``/``manual``) or
    #: ``truncate-order`` (another strategy, read by truncate's removal order).
    fit_method: str = "exact"
    #: The strategy's own report (``ShiftResult.info``): for ``compact`` the trigger, target and
    #: summary in use; for ``vector-recall`` the relevance scores. Empty for other strategies.
    strategy_info: dict[str, Any] = Field(default_factory=dict)
    #: Which of SillyTavern's two paths the prompt takes (SPEC §9.1): ``chat_completion`` (a
    #: ``messages`` list) or ``text_completion`` (one ``prompt`` string).
    api: Literal["chat_completion", "text_completion"] = "chat_completion"
    #: Text Completion only: the exact prompt string sent (``None`` for Chat Completion).
    prompt: str | None = None
    #: Text Completion only: the stop strings sent with the prompt.
    stop: list[str] = Field(default_factory=list)
    #: This preview's number in the process (set by the pipeline; not serialized, ``None`` when read back).
    _serial: int | None = PrivateAttr(default=None)
    #: A warm run's change set from the preview it started from: ``(that preview's serial, id of
    #: this preview's ``blocks`` list, changes)`` (a copy with other rows does not match).
    _changes: tuple[int, int, PreviewChanges] | None = PrivateAttr(default=None)


#: The fields :class:`PreviewChanges` names one by one; ``reason_data`` goes with ``reason_detail``.
_FATE_FIELDS = ("status", "reason", "reason_detail", "fit_window")
_OTHER_FIELDS = tuple(f for f in PreviewBlock.model_fields if f not in (*_FATE_FIELDS, "reason_data"))
_IDENTITY = itemgetter("source", "message_index")
_DICT_OF = attrgetter("__dict__")


@dataclass(frozen=True)
class PreviewChanges:
    """Where the rows of one preview differ from another's (two previews of the same chat).

    Every list holds sorted row positions. ``rows``: the rows that are not the very same objects
    (only they can differ); ``block``: rows where a field other than the four below differs
    (flags, tokens, text, ...); ``status``, ``reason``, ``fit_window``: rows where that field
    differs; ``reason_detail``: rows where ``reason_detail`` or ``reason_data`` differs. A row
    in none of the lists equals the other preview's row field for field.
    """

    rows: list[int]
    block: list[int]
    status: list[int]
    reason: list[int]
    reason_detail: list[int]
    fit_window: list[int]


def preview_changes(old: ContextPreview, new: ContextPreview) -> PreviewChanges | None:
    """The typed change set from ``old``'s rows to ``new``'s, found by row identity, then equality.

    Cost: none when ``new`` is the warm run the engine made from ``old`` (the run recorded its
    change set, :func:`known_changes`). Otherwise one C-level identity pass over the rows, then for
    the rows that are new objects one C-level comparison pass per field group.

    Parameters
    ----------
    old, new:
        Two previews, normally of the same chat (the one shown and the next).

    Returns
    -------
    PreviewChanges or None
        ``None`` when the two have different rows: another number of rows, or a row whose
        identity (``source``, ``message_index``) moved; then a view rebuilds from scratch.
    """
    ob, nb = old.blocks, new.blocks
    if len(ob) != len(nb):
        return None
    known = new._changes
    if known is not None and old._serial is not None and known[0] == old._serial and known[1] == id(nb):
        return known[2]  # the warm run that made ``new`` from ``old`` recorded it (:func:`known_changes`)
    rows = list(compress(range(len(nb)), map(is_not, ob, nb)))
    od = list(map(_DICT_OF, map(ob.__getitem__, rows)))
    nd = list(map(_DICT_OF, map(nb.__getitem__, rows)))
    if any(map(ne, map(_IDENTITY, od), map(_IDENTITY, nd))):
        return None

    def where(*fields: str) -> list[int]:
        get = itemgetter(*fields)
        return list(compress(rows, map(ne, map(get, od), map(get, nd))))

    return PreviewChanges(rows, where(*_OTHER_FIELDS), where("status"), where("reason"),
                          where("reason_detail", "reason_data"), where("fit_window"))


def known_changes(old_rows: list[PreviewBlock], new_rows: list[PreviewBlock], *, block: list[int],
                  status: list[int], reason: list[int], detail: list[int], fit_window: list[int]) -> PreviewChanges:
    """The change set from ``old_rows`` to ``new_rows`` where the caller knows where each field may have moved.

    A warm run knows it (:func:`engine.rows.build_rows`): which rows it built from new blocks
    (only their non-fate fields can differ), and per fate field where the outcome moved. Every
    list is narrowed here to the rows whose values really differ, so the result equals
    :func:`preview_changes` (``tests/engine/test_incremental.py`` checks it).

    Parameters
    ----------
    old_rows, new_rows:
        The two previews' rows (as many, the same blocks in the same places).
    block:
        Rows whose non-fate fields may differ (ascending).
    status, reason, fit_window:
        Rows where that field differs (ascending; exact).
    detail:
        Rows whose ``reason_detail`` / ``reason_data`` may differ (ascending).
    """
    rows = list(compress(range(len(new_rows)), map(is_not, old_rows, new_rows)))

    def differ(positions: list[int], *fields: str) -> list[int]:
        get = itemgetter(*fields)
        od = map(get, map(_DICT_OF, map(old_rows.__getitem__, positions)))
        nd = map(get, map(_DICT_OF, map(new_rows.__getitem__, positions)))
        return list(compress(positions, map(ne, od, nd)))

    return PreviewChanges(rows, differ(block, *_OTHER_FIELDS), status, reason,
                          differ(detail, "reason_detail", "reason_data"), fit_window)
