"""The preview result: ``ContextPreview`` (the CLI's ``--format json`` and the API body)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, Protocol, overload

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, SerializationInfo

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


class RowSource(Protocol):
    """What builds the rows of a :class:`PreviewRows` (the engine's warm run, :mod:`engine.incremental`).

    ``build_all()`` returns every row in prompt order; ``build_row(i)`` row ``i`` alone, equal
    to ``build_all()[i]``; ``column(name, positions)`` the values of field ``name`` at
    ``positions`` (every position when ``None``) without building rows, or ``None`` when it
    keeps no such column; ``changes_since(other)`` where the rows of two sources can differ
    (see :meth:`PreviewRows.changes_since`), or ``None`` when it cannot tell.
    """

    def build_all(self) -> list[PreviewBlock]:
        """Every row, in prompt order."""

    def build_row(self, index: int) -> PreviewBlock:
        """Row ``index`` alone."""

    def column(self, name: str, positions: Sequence[int] | None = None) -> list[Any] | None:
        """Field ``name`` at ``positions`` without building rows (``None``: not kept as a column)."""

    def changes_since(self, other: Any) -> dict[str, list[int]] | None:
        """Where the rows can differ from ``other``'s (``None``: cannot tell)."""


class PreviewRows(Sequence[PreviewBlock]):
    """The blocks of a preview from the engine's fast path, each row built when first read (issue 12).

    A pin / exclude toggle on a long chat moves a figure of nearly every row (every older
    message's ``fit_window``, every dropped message's free tokens in ``reason_detail`` /
    ``reason_data``), so building the rows costs more than working out the fates. The engine
    works the fates out in full (statuses, reasons, explanations, fit windows, the prompt that is
    sent: everything but the row objects) and hands this sequence over. Reading one row by index
    builds that row alone (up to :attr:`SINGLE_ROWS` of them; past that, every row at once);
    iterating, slicing, comparing or serializing builds every row at once with the engine's bulk
    builder. Each row is built once, under a lock: a row read by index is the very object every
    later read gives, the full list included.

    It behaves as the read-only ``list[PreviewBlock]`` it stands for: ``len``, indexing and slices
    (a slice is a ``list``), iteration, ``in``, ``index``, ``count``, ``==`` with any list or
    sequence of rows, ``+`` and :meth:`copy` give lists; pickling and ``copy.deepcopy`` give a
    ``list``. It is never mutated: treat ``ContextPreview.blocks`` as a read-only sequence
    (``list(preview.blocks)`` for a list of one's own). :class:`ContextPreview` serializes it
    as that list (its ``blocks`` field), nested ``include`` / ``exclude`` filters included.

    Besides the list's reads: :meth:`column` (a field of many rows without building them) and
    :meth:`changes_since` (where two previews' rows differ), for views that update in place.

    ``build`` returns the ``length`` rows in prompt order and runs at most once (``ValueError`` if
    it returns another number of rows); or ``source`` (a :class:`RowSource`) builds them, one at a
    time or all at once; ``rows``: the rows already built (then ``build`` is not needed).
    """

    #: Rows read one at a time before a read builds every row instead (a view that walks many
    #: rows by index pays the bulk builder's price once, not ~10 µs a row).
    SINGLE_ROWS = 256

    __slots__ = ("__weakref__", "_build", "_building", "_length", "_lock", "_rows", "_single", "_source")

    def __init__(self, length: int, build: Callable[[], list[PreviewBlock]] | None = None, *,
                 source: RowSource | None = None, rows: list[PreviewBlock] | None = None) -> None:
        if build is None and source is None and rows is None:
            raise TypeError("PreviewRows needs build, source or rows")
        if rows is not None and len(rows) != length:
            raise ValueError(f"preview rows: {len(rows)} rows for {length} blocks")
        self._length = length
        self._source = source
        self._build: Callable[[], list[PreviewBlock]] | None = (
            None if rows is not None else build if build is not None else source.build_all)  # type: ignore[union-attr]
        self._rows: list[PreviewBlock] | None = rows
        self._single: dict[int, PreviewBlock] = {}
        # re-entrant: a finalizer run by a collection during the build may read these rows
        self._lock = threading.RLock()
        self._building = False

    @property
    def built(self) -> list[PreviewBlock] | None:
        """The rows when every one has been built, else ``None`` (building nothing)."""
        return self._rows

    @property
    def source(self) -> RowSource | None:
        """What builds the rows (``None``: a plain ``build`` function)."""
        return self._source

    def rows(self) -> list[PreviewBlock]:
        """Every row in prompt order, built now if not yet (the same list on every call; do not mutate it)."""
        rows = self._rows
        if rows is None:
            with self._lock:
                rows = self._rows
                if rows is None:
                    rows = self._build_all()
        return rows

    def _build_all(self) -> list[PreviewBlock]:
        assert self._build is not None
        if self._building:  # re-entered on this thread mid-build: the same rows, not kept
            return self._build()
        self._building = True
        try:
            rows = self._build()
        finally:
            self._building = False
        if len(rows) != self._length:
            raise ValueError(f"preview rows: built {len(rows)} rows for {self._length} blocks")
        if self._single:
            rows = list(rows)
            for i, row in self._single.items():  # a row handed out stays the object handed out
                rows[i] = row
        self._rows, self._build, self._single = rows, None, {}
        return rows

    def _row(self, index: int) -> PreviewBlock:
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("preview row index out of range")
        with self._lock:
            if self._rows is not None:
                return self._rows[index]
            row = self._single.get(index)
            if row is None:
                if self._source is None or len(self._single) >= self.SINGLE_ROWS:
                    return self._build_all()[index]
                row = self._single[index] = self._source.build_row(index)
            return row

    def column(self, name: str, positions: Sequence[int] | None = None) -> list[Any]:
        """Field ``name`` of the rows at ``positions`` (every row when ``None``), in that order.

        Taken from the engine's own per-block lists where it keeps them (``status``, ``reason``,
        ``reason_detail``, ``reason_data``, ``fit_window``, ...: no row is built), else read from
        the rows. ``AttributeError`` for a name that is no ``PreviewBlock`` field.
        """
        if name not in PreviewBlock.model_fields:
            raise AttributeError(f"PreviewBlock has no field {name!r}")
        rows = self._rows
        if rows is None and self._source is not None:
            values = self._source.column(name, positions)
            if values is not None:
                return values
        picked = self.rows() if positions is None else [self[i] for i in positions]
        return [getattr(r, name) for r in picked]

    def changes_since(self, other: Sequence[PreviewBlock]) -> dict[str, list[int]] | None:
        """Where these rows can differ from ``other``'s (another preview of the same chat), without building rows.

        Returns ``{"block": [...], "status": [...], "reason": [...], "reason_detail": [...],
        "fit_window": [...]}``, sorted positions: at a ``block`` position any field may differ;
        at the others only that field (``reason_detail`` with ``reason_data``). Every other row
        equals ``other``'s row field for field. The lists may name positions whose values turn
        out equal (a superset, never a subset). ``None`` when it cannot tell (``other`` is no
        :class:`PreviewRows` of the engine's, or the two have different rows).
        """
        if not isinstance(other, PreviewRows) or other._length != self._length:
            return None
        if self._source is None or other._source is None:
            return None
        return self._source.changes_since(other._source)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> PreviewBlock: ...

    @overload
    def __getitem__(self, index: slice) -> list[PreviewBlock]: ...

    def __getitem__(self, index: int | slice) -> PreviewBlock | list[PreviewBlock]:
        rows = self._rows
        if rows is not None:
            return rows[index]
        if isinstance(index, slice):
            return self.rows()[index]
        return self._row(index.__index__())

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
    """``blocks`` as a list (a :class:`PreviewRows` builds its rows first)."""
    if type(blocks) is list:
        return blocks
    if isinstance(blocks, PreviewRows):
        return blocks.rows()
    return list(blocks)


_ROWS_ADAPTER: list[Any] = []


def _serialized_rows(blocks: Sequence[PreviewBlock], info: SerializationInfo) -> list[PreviewBlock]:
    """``ContextPreview.blocks`` as pydantic serializes it: the list of rows.

    Nested ``include`` / ``exclude`` filters under ``blocks`` (which a plain serializer's return
    value would not see) are applied here: the rows are dumped with them and handed back as rows
    holding only the fields kept (pydantic serializes the fields an instance holds).
    """
    rows = _rows_list(blocks)
    if info.include is None and info.exclude is None:
        return rows
    from pydantic import TypeAdapter

    from ._construct import construct

    if not _ROWS_ADAPTER:
        _ROWS_ADAPTER.append(TypeAdapter(list[PreviewBlock]))
    dumped = _ROWS_ADAPTER[0].dump_python(
        rows, include=info.include, exclude=info.exclude, exclude_unset=info.exclude_unset,
        exclude_defaults=info.exclude_defaults, exclude_none=info.exclude_none)
    return [construct(PreviewBlock, d, fields_set=set(d)) for d in dumped]


#: ``ContextPreview.blocks``: a list of rows, or the engine's :class:`PreviewRows`, serialized as
#: the list either way (same JSON and JSON schema as ``list[PreviewBlock]``).
PreviewBlocks = Annotated[list[PreviewBlock], PlainSerializer(_serialized_rows, return_type=list[PreviewBlock])]


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
    #: Which of SillyTavern's two paths the prompt takes (SPEC §9.1): ``chat_completion`` (a
    #: ``messages`` list) or ``text_completion`` (one ``prompt`` string).
    api: Literal["chat_completion", "text_completion"] = "chat_completion"
    #: Text Completion only: the exact prompt string sent (``None`` for Chat Completion).
    prompt: str | None = None
    #: Text Completion only: the stop strings sent with the prompt.
    stop: list[str] = Field(default_factory=list)
