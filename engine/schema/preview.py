"""The preview result: ``ContextPreview`` (the CLI's ``--format json`` and the API body)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

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

    @property
    def origin(self) -> BlockOrigin:
        """Who made the block: assembly, a strategy (a summary) or an interceptor (not serialized).

        Derived by :func:`engine.schema.blocks.preview_block_origin` from ``id`` and ``source``,
        so it is the same for a preview read back from JSON; equal to the engine block's
        ``Block.origin``.
        """
        return preview_block_origin(self.id, self.source)


class PreviewRows(Sequence[PreviewBlock]):
    """The blocks of a warm preview, built on first read (issue 12: a toggle builds no row up front).

    A pin / exclude toggle on a long chat moves a figure of nearly every row (every older
    message's ``fit_window``, every dropped message's free tokens in ``reason_detail`` /
    ``reason_data``), so building the rows costs more than working out the fates. The engine
    works the fates out in full (statuses, reasons, explanations, fit windows, the prompt that is
    sent: everything but the row objects) and hands this sequence over; the first read of a row,
    an iteration, a comparison or a serialization builds every row at once, under a lock, with the
    engine's own row builder, and the rows stay.

    It behaves as the read-only ``list[PreviewBlock]`` it stands for: ``len``, indexing and slices
    (a slice is a ``list``), iteration, ``in``, ``index``, ``count``, ``==`` with any list or
    sequence of rows, ``+`` and :meth:`copy` give lists; pickling and ``copy.deepcopy`` give a
    ``list``. It is never mutated. :class:`ContextPreview` serializes it as that list (its
    ``blocks`` field); nested ``include`` / ``exclude`` filters under ``blocks`` are not applied
    to a preview whose blocks are a :class:`PreviewRows` (serialize ``list(preview.blocks)``
    with a ``TypeAdapter`` for that).

    ``build`` returns the ``length`` rows in prompt order; it runs once (``ValueError`` if it
    returns another number of rows).
    """

    __slots__ = ("__weakref__", "_build", "_length", "_lock", "_rows")

    def __init__(self, length: int, build: Callable[[], list[PreviewBlock]]) -> None:
        self._length = length
        self._build: Callable[[], list[PreviewBlock]] | None = build
        self._rows: list[PreviewBlock] | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> list[PreviewBlock] | None:
        """The rows when they have been built, else ``None`` (building nothing)."""
        return self._rows

    def rows(self) -> list[PreviewBlock]:
        """Every row in prompt order, built now if not yet (the same list on every call; do not mutate it)."""
        rows = self._rows
        if rows is None:
            with self._lock:
                rows = self._rows
                if rows is None:
                    assert self._build is not None
                    rows = self._build()
                    if len(rows) != self._length:
                        raise ValueError(f"preview rows: built {len(rows)} rows for {self._length} blocks")
                    self._rows, self._build = rows, None
        return rows

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> PreviewBlock: ...

    @overload
    def __getitem__(self, index: slice) -> list[PreviewBlock]: ...

    def __getitem__(self, index: int | slice) -> PreviewBlock | list[PreviewBlock]:
        return self.rows()[index]

    def __iter__(self) -> Iterator[PreviewBlock]:
        return iter(self.rows())

    def __reversed__(self) -> Iterator[PreviewBlock]:
        return reversed(self.rows())

    def __contains__(self, value: object) -> bool:
        return value in self.rows()

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The first position of ``value`` (``ValueError`` when absent), as ``list.index``."""
        return self.rows().index(value, start, len(self) if stop is None else stop)

    def count(self, value: Any) -> int:
        """How many rows equal ``value``, as ``list.count``."""
        return self.rows().count(value)

    def copy(self) -> list[PreviewBlock]:
        """A new ``list`` of the rows (as ``list.copy``)."""
        return list(self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PreviewRows):
            return self is other or self.rows() == other.rows()
        if isinstance(other, list):
            return self.rows() == other
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes, tuple)):
            return self.rows() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[PreviewBlock]) -> list[PreviewBlock]:
        return [*self.rows(), *other]

    def __radd__(self, other: Sequence[PreviewBlock]) -> list[PreviewBlock]:
        return [*other, *self.rows()]

    def __repr__(self) -> str:
        return repr(self.rows())

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (self.rows(),))

    def __copy__(self) -> list[PreviewBlock]:
        return list(self.rows())

    def __deepcopy__(self, memo: dict[int, Any]) -> list[PreviewBlock]:
        import copy

        return copy.deepcopy(self.rows(), memo)

    def weak(self) -> weakref.ref[PreviewRows]:
        """A weak reference to this sequence (the next warm run reads the rows only if they are built by then)."""
        return weakref.ref(self)


def _rows_list(blocks: Sequence[PreviewBlock]) -> list[PreviewBlock]:
    """``blocks`` as the list pydantic serializes (a :class:`PreviewRows` is built first)."""
    if type(blocks) is list:
        return blocks
    if isinstance(blocks, PreviewRows):
        return blocks.rows()
    return list(blocks)


#: ``ContextPreview.blocks``: a list of rows, or a warm preview's :class:`PreviewRows`, serialized
#: as the list either way (same JSON and JSON schema as ``list[PreviewBlock]``).
PreviewBlocks = Annotated[list[PreviewBlock], PlainSerializer(_rows_list, return_type=list[PreviewBlock])]


class ContextPreview(BaseModel):
    """What the model would see, and why (SPEC §2, issue #2 item 7).

    Token fields are in tokens of ``tokenizer.profile``. ``budget = context_limit −
    reply_reserve``; ``headroom = budget − safety_margin − prompt_tokens``.
    ``prompt_tokens`` is the exact chat-accounting count of ``messages`` plus the tools block.
    ``overhead_tokens`` are the prompt tokens no block owns (OpenAI: the 3 reply-priming tokens;
    chat templates: BOS, the reply header, turns the template inserts): the ``tokens`` of the
    kept blocks plus ``overhead_tokens`` add up to ``prompt_tokens`` (truncated blocks aside).
    ``blocks`` is a list, or for a warm preview (one answered from the remembered run after a
    toggle, :mod:`engine.incremental`) a :class:`PreviewRows` that builds its rows on first read
    and otherwise reads as the same list; either serializes as the list.
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
    blocks: PreviewBlocks = Field(default_factory=list)
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
