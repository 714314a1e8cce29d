"""The preview result: ``ContextPreview`` (the CLI's ``--format json`` and the API body)."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_not, itemgetter, ne, setitem
from types import GenericAlias
from typing import Any, Literal, NotRequired

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    GetCoreSchemaHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    field_serializer,
    model_validator,
)
from pydantic_core import core_schema
from typing_extensions import TypedDict

from ..patched import ListColumn
from ._construct import construct_many
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


class SentMessage(dict[str, Any]):
    """One provider message of a preview (``ContextPreview.messages``): a dict that refuses changes.

    A preview's messages are shared with the run that made it and with the next warm preview
    (a toggle copies none of the ~thousands of kept messages), so none of them may change
    through another: every method that would change the dict raises ``TypeError``. Compares,
    serializes and pickles as the plain dict it holds; ``dict(m)`` or ``m.copy()`` is a plain,
    changeable copy (:attr:`engine.runstate.PreparedPrompt.messages` hands out such copies).
    Nested values (a content list, tool calls) are shared as they are: read them, do not change them.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a preview's messages are read-only (shared with the next preview): change dict(message)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def copy(self) -> dict[str, Any]:
        """A plain, changeable copy."""
        return dict(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return SentMessage, (dict(self),)

    def __copy__(self) -> SentMessage:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> SentMessage:
        return SentMessage(copy.deepcopy(dict(self), memo))


class Explanation:
    """One block's specific reason: ``text`` in words, ``data`` the figures (tokens, indices).

    Made by :func:`engine.shifting.explain.explain_columns`; a preview keeps one per row in
    :attr:`ContextPreview.reason_details` (``reason_detail`` / ``reason_data`` of each row in JSON).
    Read-only (``text`` and ``data`` have no setter; treat ``data`` as read-only too: previews
    share explanations). Two explanations are equal when their words and figures are. A
    subclass may write its words and figures when they are first read (:meth:`_write`, from
    figures it keeps; then :meth:`_key` names those figures, and explanations of that subclass
    compare by it without writing anything): a warm toggle makes a few hundred explanations
    whose words are rarely read (``engine.shifting.explain``'s room explanations).
    """

    __slots__ = ("_data", "_text")
    _text: str | None
    _data: dict[str, Any] | None

    def __init__(self, text: str, data: dict[str, Any]) -> None:
        self._text, self._data = text, data

    def _write(self) -> None:
        """Set ``_text`` and ``_data`` (a subclass that writes them when first read)."""
        raise NotImplementedError

    def _key(self) -> tuple[object, ...] | None:
        """The figures this explanation is written from (a subclass that writes on first read), or ``None``."""
        return None

    @property
    def text(self) -> str:
        """The reason in words."""
        if self._text is None:
            self._write()
        assert self._text is not None
        return self._text

    @property
    def data(self) -> dict[str, Any]:
        """The reason's figures (JSON values)."""
        if self._data is None:
            self._write()
        assert self._data is not None
        return self._data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Explanation):
            return NotImplemented
        if self is other:
            return True
        mine, theirs = self._key(), other._key()
        if mine is not None and theirs is not None:
            return mine == theirs
        return self.text == other.text and self.data == other.data

    __hash__ = None  # type: ignore[assignment]  # equal by value, and ``data`` is a dict

    def __repr__(self) -> str:
        return f"Explanation(text={self.text!r}, data={self.data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Explanation, (self.text, self.data)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """An explanation, or ``{"text", "data"}`` read as one; dumped as ``{"text", "data"}``."""
        as_dict = core_schema.typed_dict_schema({
            "text": core_schema.typed_dict_field(core_schema.str_schema()),
            "data": core_schema.typed_dict_field(core_schema.dict_schema(core_schema.str_schema()))})
        return core_schema.union_schema(
            [core_schema.is_instance_schema(cls),
             core_schema.no_info_after_validator_function(lambda d: cls(d["text"], d["data"]), as_dict)],
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda e: {"text": e.text, "data": e.data}, return_schema=as_dict))


class FitWindows(ListColumn[int | None]):
    """A preview's fit windows (:attr:`ContextPreview.fit_windows`): per row, a window in tokens or ``None``.

    Held as one read-only ``int64`` array (``array``; ``0`` where a row has none: a window is at
    least 1 token), the column the fit map computes (:func:`engine.shifting.fitmap.fit_columns`):
    a toggle at 10,000 messages moves the window of every older message, and a list would make
    (and free) one Python int per row. Reads as a sequence of ``int | None``; :meth:`take` and
    :meth:`tolist` read many rows at once. Equal to another ``FitWindows`` or to any sequence
    with the same values.
    """

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        a = np.asarray(array, dtype=np.int64)
        if a.flags.writeable:
            a = a.copy() if a is array else a
            a.flags.writeable = False
        self.array = a

    @classmethod
    def of(cls, values: Iterable[int | None]) -> FitWindows:
        """The column of ``values`` (``None``: no window)."""
        return cls(np.fromiter((0 if v is None else v for v in values), dtype=np.int64))

    @classmethod
    def none(cls, n: int) -> FitWindows:
        """``n`` rows without a window."""
        return cls(np.zeros(n, dtype=np.int64))

    @classmethod
    def column(cls, values: Sequence[int | None], n: int) -> FitWindows:
        """``values`` as a column of ``n`` rows: itself when it is one, a list read as one, ``None`` each when its length is not ``n``."""
        if len(values) != n:
            return cls.none(n)
        return values if isinstance(values, FitWindows) else cls.of(values)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return FitWindows(self.array[index])
        return int(self.array[index]) or None

    def tolist(self) -> list[int | None]:
        """Every row's window (``None`` where there is none), as a list."""
        return self.take(None)

    def take(self, rows: Sequence[int] | None) -> list[int | None]:
        """The windows of ``rows`` (``None``: every row) as a list, in one numpy pass."""
        a = self.array if rows is None else self.array[np.asarray(rows, dtype=np.intp)]
        out: list[int | None] = a.tolist()
        for k in np.flatnonzero(a == 0).tolist():
            out[k] = None
        return out

    def changed(self, other: FitWindows) -> list[int]:
        """The rows whose window differs from ``other``'s (as many rows)."""
        return np.flatnonzero(self.array != other.array).tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FitWindows):
            return bool(np.array_equal(self.array, other.array))
        return super().__eq__(other)

    __hash__ = None

    def __reduce__(self) -> tuple[Any, ...]:
        return FitWindows, (self.array,)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """A ``FitWindows``, or a list of ``int | None`` read as one; dumped as that list."""
        as_list = core_schema.list_schema(core_schema.nullable_schema(core_schema.int_schema()))
        return core_schema.union_schema(
            [core_schema.is_instance_schema(cls), core_schema.no_info_after_validator_function(cls.of, as_list)],
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda f: f.tolist(), return_schema=as_list))


class ReasonDetails(ListColumn[Explanation | None]):
    """A preview's specific reasons (:attr:`ContextPreview.reason_details`): per row an :class:`Explanation` or ``None``.

    Held as the explanations by code (``table``) and per row its code (``codes``, a read-only
    ``int32`` array; ``-1``: none), as :func:`engine.shifting.explain.explain_columns` makes
    them: the thousands of history messages removed for room share a few hundred explanations
    (one per token count), so a toggle that moves the free tokens in every one of them writes one
    array, not one list entry per row; a table may make an entry when it is first read. Reads as a sequence; :meth:`tolist` and
    :meth:`take` read many rows in one numpy pass, :meth:`changed` compares two previews'
    reasons once per pair of distinct explanations. Equal to any sequence with equal values.
    """

    __slots__ = ("codes", "table")

    def __init__(self, codes: Any, table: Sequence[Explanation]) -> None:
        c = np.asarray(codes, dtype=np.int32)
        if c.flags.writeable:
            c = c.copy() if c is codes else c
            c.flags.writeable = False
        # a list is copied; any other sequence is the maker's, read-only from here on
        self.codes, self.table = c, (tuple(table) if isinstance(table, list) else table)

    @classmethod
    def of(cls, values: Iterable[Explanation | None]) -> ReasonDetails:
        """The column of ``values`` (one table entry per distinct object)."""
        where: dict[int, int] = {}
        table: list[Explanation] = []
        codes: list[int] = []
        for e in values:
            if e is None:
                codes.append(-1)
                continue
            k = where.get(id(e))
            if k is None:
                k = where[id(e)] = len(table)
                table.append(e)
            codes.append(k)
        return cls(np.array(codes, dtype=np.int32), table)

    @classmethod
    def none(cls, n: int) -> ReasonDetails:
        """``n`` rows without a specific reason."""
        return cls(np.full(n, -1, dtype=np.int32), ())

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ReasonDetails(self.codes[index], self.table)
        k = int(self.codes[index])
        return self.table[k] if k >= 0 else None

    def _entries(self, codes: Any) -> Any:
        """The explanations of ``codes`` as an object array (``None`` for ``-1``), each distinct code read once.

        Only the codes present are read: a table may make its entries when first read.
        """
        distinct, inverse = np.unique(codes, return_inverse=True)
        table = self.table
        found = np.fromiter((table[k] if k >= 0 else None for k in distinct.tolist()), dtype=object,
                            count=len(distinct))
        return found[inverse.reshape(-1)]

    def tolist(self) -> list[Explanation | None]:
        """Every row's explanation (``None`` where there is none), as a list."""
        out: list[Explanation | None] = self._entries(self.codes).tolist()
        return out

    def take(self, rows: Sequence[int]) -> list[Explanation | None]:
        """The explanations of ``rows`` as a list, in one numpy pass."""
        out: list[Explanation | None] = self._entries(self.codes[np.asarray(rows, dtype=np.intp)]).tolist()
        return out

    def changed(self, other: ReasonDetails) -> list[int]:
        """The rows whose explanation (words or figures) differs from ``other``'s (as many rows).

        Each distinct pair of explanations is compared once (by identity, then by value).
        """
        width = len(self.table) + 1
        pairs = (other.codes.astype(np.int64) + 1) * width + (self.codes.astype(np.int64) + 1)
        distinct, inverse = np.unique(pairs, return_inverse=True)
        mine, theirs = self.table, other.table

        def differs(pair: int) -> bool:
            b, a = divmod(pair, width)
            return (mine[a - 1] if a else None) != (theirs[b - 1] if b else None)

        differ = np.fromiter(map(differs, distinct.tolist()), dtype=bool, count=len(distinct))
        return np.flatnonzero(differ[inverse.reshape(-1)]).tolist()

    def __reduce__(self) -> tuple[Any, ...]:
        # only the explanations some row has (a table may hold codes no row has: explain_columns' segments)
        distinct, inverse = np.unique(self.codes, return_inverse=True)
        used = [k for k in distinct.tolist() if k >= 0]
        codes = inverse.reshape(-1).astype(np.int32) - (len(distinct) - len(used))
        return ReasonDetails, (codes, tuple(map(self.table.__getitem__, used)))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """A ``ReasonDetails``, or a list of explanations / ``None`` read as one; dumped as that list."""
        as_list = core_schema.list_schema(core_schema.nullable_schema(handler.generate_schema(Explanation)))
        return core_schema.union_schema(
            [core_schema.is_instance_schema(cls), core_schema.no_info_after_validator_function(cls.of, as_list)],
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda d: d.tolist(), return_schema=as_list))


#: The chat-wide figures of a row and their JSON types: kept as columns of the preview, written
#: into each row of its JSON (before ``span``, where ``PreviewBlock`` had them as fields).
FIGURE_TYPES: dict[str, Any] = {"reason_detail": str | None, "reason_data": dict[str, Any] | None,
                                "fit_window": int | None}
ROW_FIGURES = tuple(FIGURE_TYPES)


def _figures_schema(schema: dict[str, Any]) -> None:
    """``PreviewBlock``'s JSON schema with the three figures its JSON rows carry (:data:`FIGURE_TYPES`)."""
    props = schema.setdefault("properties", {})
    for name, kind in FIGURE_TYPES.items():
        props[name] = {**TypeAdapter(kind).json_schema(), "default": None, "title": name.replace("_", " ").title()}


class PreviewBlock(BaseModel):
    """One block of the preview, in prompt order, with its fate.

    ``tokens`` is the block's own count including its chat-format overhead (3 per message,
    +1 per ``name``); for truncated blocks ``original_tokens`` gives the count before.
    With a chat-template profile (Llama, Mistral, Qwen, DeepSeek), ``tokens`` is the block's
    exact share of the final prompt and ``template_tokens`` how many of them the template
    added (headers, control tokens, separators); ``None`` for OpenAI accounting.
    ``position`` is the 0-based index in prompt order (all blocks, kept or not).
    A row holds the block's own facts only. The figures that depend on the whole chat (the
    specific reason's free tokens, the fit window: a toggle moves them on nearly every row) are
    columns of the preview (:attr:`ContextPreview.reason_details`,
    :attr:`ContextPreview.fit_windows`), so a warm preview shares every row whose own facts did
    not change (issue 29). In JSON each row still carries them, as before: ``reason_detail``,
    ``reason_data`` and ``fit_window`` (:data:`ROW_FIGURES`, written before ``span``).
    """

    model_config = ConfigDict(frozen=True, json_schema_extra=_figures_schema)

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


def _json_row_type() -> Any:
    """The type of a serialized row: every ``PreviewBlock`` field with the figures before ``span`` (a TypedDict).

    The preview's and the audit's rows are written through it (their serializer's return type),
    so the serialization schema (``/api/v2/openapi.json``) describes each JSON row, figures
    included, in the order they are written.
    """
    fields: dict[str, Any] = {}
    for name, f in PreviewBlock.model_fields.items():
        if name == "span":
            fields.update({k: NotRequired[t] for k, t in FIGURE_TYPES.items()})
        # ``span`` as the row holds it (a tuple) or as a dump in JSON mode gave it (a list)
        annotation = tuple[int, int] | list[int] | None if name == "span" else f.annotation
        fields[name] = annotation if f.is_required() else NotRequired[annotation]
    return TypedDict("PreviewBlock", fields)  # type: ignore[operator]


#: One JSON row of a preview (or audit): ``PreviewBlock``'s fields and the row's figures.
PreviewRow: Any = _json_row_type()
#: The type the rows' serializer returns (a list of :data:`PreviewRow`).
JSON_ROWS: Any = GenericAlias(list, (PreviewRow,))


class _RowDict:
    """Holder whose instance dicts share one key table (CPython's split dicts): a row's ``__dict__``.

    A preview row's field values in a split dict take about a third of the memory of an ordinary
    dict, and ``dict.copy()`` of one copies the value pointers instead of a 64-slot key table.
    Any dict would be correct: this is only the cheaper kind.
    """


def _make_template() -> dict[str, Any]:
    """A split-key dict of every ``PreviewBlock`` field (in field order), each at its default (``None`` if required).

    Attribute assignment builds the shared key table once (``dict.update`` on an empty split dict
    would turn it into an ordinary one).
    """
    holder = _RowDict()
    for key, f in PreviewBlock.model_fields.items():
        setattr(holder, key, None if f.is_required() else f.get_default())
    return holder.__dict__


_ROW_TEMPLATE = _make_template()
_ROW_FIELDS = frozenset(PreviewBlock.model_fields)


def rows_from_columns(columns: Mapping[str, Sequence[Any] | Iterator[Any]], n: int) -> list[PreviewBlock]:
    """``n`` preview rows from per-field columns: the one way a pipeline run makes its rows (step 10).

    One C-level pass per field (``operator.setitem`` into copies of one split-key template in the
    model's field order), then the rows without validation
    (:func:`engine.schema._construct.construct_many`): the steps made every value.

    Parameters
    ----------
    columns:
        ``PreviewBlock`` field name → its ``n`` values in row order (a sequence or an iterator);
        a field left out keeps its default.
    n:
        The number of rows.

    Returns
    -------
    list
        The rows, frozen, in the columns' order.
    """
    dicts = list(map(dict.copy, repeat(_ROW_TEMPLATE, n)))
    for key, column in columns.items():
        deque(map(setitem, dicts, repeat(key), column), maxlen=0)
    return construct_many(PreviewBlock, dicts, set(_ROW_FIELDS))


class RowFigures(BaseModel):
    """Rows with figure columns (a preview, an audit): each JSON row carries its figures (:data:`ROW_FIGURES`).

    A model built on it declares ``blocks`` (``list[PreviewBlock]``), ``fit_windows`` and
    ``reason_details`` (excluded from the dump); reading JSON rows back moves their figures into
    the columns, writing puts them into each row before ``span``.
    """

    @model_validator(mode="before")
    @classmethod
    def _figures_in(cls, data: Any) -> Any:
        """JSON rows with ``fit_window`` / ``reason_detail`` / ``reason_data``: into the two columns."""
        return figures_from_rows(data)

    @field_serializer("blocks", mode="wrap", return_type=JSON_ROWS, check_fields=False)
    def _figures_out(self, blocks: list[PreviewBlock], handler: SerializerFunctionWrapHandler,
                     info: FieldSerializationInfo) -> Any:
        """Each row as JSON with its figures from the two columns."""
        return rows_with_figures(blocks, getattr(self, "fit_windows", []), getattr(self, "reason_details", []),
                                 handler, info)


class ContextPreview(RowFigures):
    """What the model would see, and why (SPEC §2, issue #2 item 7).

    Token fields are in tokens of ``tokenizer.profile``. ``budget = context_limit −
    reply_reserve``; ``headroom = budget − safety_margin − prompt_tokens``.
    ``prompt_tokens`` is the exact chat-accounting count of ``messages`` plus the tools block.
    ``overhead_tokens`` are the prompt tokens no block owns (OpenAI: the 3 reply-priming tokens;
    chat templates: BOS, the reply header, turns the template inserts): the ``tokens`` of the
    kept blocks plus ``overhead_tokens`` add up to ``prompt_tokens`` (truncated blocks aside).
    ``fit_windows`` and ``reason_details`` are columns parallel to ``blocks``: a copy that
    replaces ``blocks`` (``model_copy(update=...)``) replaces them too, or its rows' figures read
    ``None``. ``blocks`` is a plain list of frozen rows; a warm preview (one that started from a remembered
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
    #: Per row of ``blocks`` (same length; empty: none known): the smallest context window in
    #: tokens that would send that chat message under the same settings and strategy (``None``:
    #: none would, or not a chat message; :func:`engine.shifting.fitmap.fit_windows`). In JSON
    #: each row's ``fit_window``.
    fit_windows: FitWindows = Field(default_factory=lambda: FitWindows.none(0), exclude=True)
    #: Per row of ``blocks`` (same length; empty: none known): the specific reason where the code
    #: alone would mislead (a small message out while tokens are free, a tool call kept for its
    #: pinned result, a lorebook entry over the World Info budget), ``None`` otherwise
    #: (:func:`engine.shifting.explain.explain_blocks`). In JSON each row's ``reason_detail``
    #: (the words) and ``reason_data`` (the figures).
    reason_details: ReasonDetails = Field(default_factory=lambda: ReasonDetails.none(0), exclude=True)
    #: This preview's number in the process (set by the pipeline; not serialized, ``None`` when read back).
    _serial: int | None = PrivateAttr(default=None)
    #: A warm run's change set from the preview it started from: ``(that preview's serial, id of
    #: this preview's ``blocks`` list, changes)`` (a copy with other rows does not match).
    _changes: tuple[int, int, RowChanges] | None = PrivateAttr(default=None)

    def fit_window(self, row: int) -> int | None:
        """The fit window of ``blocks[row]`` in tokens (``None``: none, or not known)."""
        fits = self.fit_windows
        return fits[row] if row < len(fits) else None

    def reason_detail(self, row: int) -> Explanation | None:
        """The specific reason of ``blocks[row]`` (``None``: the code says it all, or not known)."""
        details = self.reason_details
        return details[row] if row < len(details) else None


def _fit_list(fits: Sequence[int | None], n: int) -> list[int | None]:
    """A fit-window column as a list of ``n`` rows (an empty one, not known: ``None`` each)."""
    if len(fits) != n:
        return [None] * n
    return fits.tolist() if isinstance(fits, FitWindows) else list(fits)


def _detail_list(details: Sequence[Explanation | None], n: int) -> list[Explanation | None]:
    """A reason column as a list of ``n`` rows (an empty one, not known: ``None`` each)."""
    if len(details) != n:
        return [None] * n
    return details.tolist() if isinstance(details, ReasonDetails) else list(details)


def rows_with_figures(blocks: list[PreviewBlock], fits: Sequence[int | None], details: Sequence[Explanation | None],
                      handler: SerializerFunctionWrapHandler, info: FieldSerializationInfo) -> Any:
    """The rows of a preview (or audit) as serialized, each with its figures from the columns.

    For JSON without options that drop fields (``model_dump_json()``, the CLI's and the API's
    output) the rows' own values are taken as they are, in C-level passes (pydantic then writes
    them as plain JSON values: about the cost of writing the rows as models, where going through
    ``handler`` and back doubles it); otherwise pydantic serializes the rows (``handler``) with
    every option honoured and :func:`figures_into_rows` adds the figures.
    """
    if not (info.mode_is_json() and info.include is None and info.exclude is None and not info.exclude_none
            and not info.exclude_defaults and not info.exclude_unset and not info.round_trip
            and all(type(b) is PreviewBlock for b in blocks)):
        return figures_into_rows(handler(blocks), fits, details, info, len(blocks))
    n = len(blocks)
    rows = list(map(dict.copy, map(_DICT_OF, blocks)))
    spans = list(map(dict.pop, rows, repeat("span")))
    # a dump's dicts are its own (``model_dump(mode="json")`` hands them out): the few traces copied
    traced = list(compress(range(n), map(is_not, map(itemgetter("trace"), rows), repeat(None))))
    for k in traced:
        rows[k]["trace"] = copy.deepcopy(rows[k]["trace"])
    details = _detail_list(details, n)
    data: list[Any] = list(map(getattr, details, repeat("data"), repeat(None)))
    with_data = list(compress(range(n), data))
    deque(map(setitem, repeat(data), with_data, map(dict.copy, map(data.__getitem__, with_data))), maxlen=0)
    columns = (("reason_detail", list(map(getattr, details, repeat("text"), repeat(None)))), ("reason_data", data),
               ("fit_window", _fit_list(fits, n)), ("span", spans))
    for key, values in columns:
        deque(map(setitem, rows, repeat(key), values), maxlen=0)
    return rows


def figures_into_rows(rows: Any, fits: Sequence[int | None], details: Sequence[Explanation | None],
                      info: FieldSerializationInfo | None = None, n: int | None = None) -> Any:
    """Serialized rows (dicts) with each row's figures from the columns, before ``span`` (field order of old).

    Parameters
    ----------
    rows:
        The rows as pydantic serialized them (a list of dicts; anything else is returned as is).
    fits, details:
        The preview's (or audit's) columns, one entry per row or empty.
    info:
        The serialization's options: with ``exclude_none`` / ``exclude_defaults`` a ``None``
        figure is left out, as a field at its default would be; ``include`` / ``exclude`` (row
        numbers, negative ones from the end, ``"__all__"``; fields per row) as pydantic applies
        them to the rows.
    n:
        The number of rows before ``include`` / ``exclude`` picked some (default ``len(rows)``).
    """
    if not isinstance(rows, list):
        return rows
    skip_none = info is not None and (info.exclude_none or info.exclude_defaults)
    total = len(rows) if n is None else n
    include, exclude = (_indexed(info.include, total), _indexed(info.exclude, total)) if info is not None else (None, None)
    picked = range(total) if include is None and exclude is None else [
        r for r in range(total) if _row_kept(r, include, exclude)]
    nf, nd = len(fits), len(details)
    for row, k in zip(rows, picked):
        if not isinstance(row, dict):
            continue
        why = details[k] if k < nd else None
        values = (why.text if why is not None else None, why.data if why is not None else None,
                  fits[k] if k < nf else None)
        span = row.pop("span", _ABSENT)
        for key, value in zip(ROW_FIGURES, values):
            if (value is not None or not skip_none) and (
                    (include is None and exclude is None) or _wanted(key, k, include, exclude)):
                row[key] = dict(value) if type(value) is dict else value
        if span is not _ABSENT:
            row["span"] = span
    return rows


_ABSENT = object()


def _indexed(spec: Any, n: int) -> Any:
    """A dump's ``include`` / ``exclude`` for the rows with negative row numbers counted from the end."""
    if isinstance(spec, dict):
        return {(k + n if isinstance(k, int) and k < 0 else k): v for k, v in spec.items()}
    if isinstance(spec, (set, frozenset)):
        return {k + n if isinstance(k, int) and k < 0 else k for k in spec}
    return spec


def _for_row(spec: Any, row: int) -> Any:
    """What a row-level ``include`` / ``exclude`` says of ``row``: its field spec, ``True``, or ``None`` (nothing)."""
    if isinstance(spec, dict):
        return spec.get(row, spec.get("__all__"))
    return True if isinstance(spec, (set, frozenset)) and (row in spec or "__all__" in spec) else None


def _row_kept(row: int, include: Any, exclude: Any) -> bool:
    """Whether pydantic keeps ``row`` under the rows' ``include`` / ``exclude``."""
    if include is not None and _for_row(include, row) is None:
        return False
    return exclude is None or _for_row(exclude, row) not in (True, Ellipsis)


def _wanted(key: str, row: int, include: Any, exclude: Any) -> bool:
    """Whether a dump's ``include`` / ``exclude`` for ``blocks`` (pydantic's nested form) keep ``key`` of ``row``."""
    if include is not None:
        inc = _for_row(include, row)
        if inc is None or (isinstance(inc, (set, frozenset, dict)) and key not in inc):
            return False
    if exclude is not None:
        exc = _for_row(exclude, row)
        if exc is True or exc is Ellipsis:
            return False
        if isinstance(exc, (set, frozenset)) and key in exc:
            return False
        if isinstance(exc, dict) and exc.get(key) in (True, Ellipsis):
            return False
    return True


def figures_from_rows(data: Any) -> Any:
    """Model input whose ``blocks`` carry the row figures (JSON read back): the figures moved into the columns.

    Leaves ``data`` alone when it is not a dict, already has a column, or has no list of rows;
    otherwise returns a copy (the caller's dicts are not changed) whose columns have one entry per
    row (``None`` where a row has no figure): a model made with rows but no columns equals itself
    read back from its JSON.
    """
    if not isinstance(data, dict) or "fit_windows" in data or "reason_details" in data:
        return data
    blocks = data.get("blocks")
    if not isinstance(blocks, list):
        return data
    if not any(isinstance(b, dict) and not ROW_FIGURES_SET.isdisjoint(b) for b in blocks):
        return {**data, "fit_windows": [None] * len(blocks), "reason_details": [None] * len(blocks)}
    rows: list[Any] = []
    fits: list[Any] = []
    details: list[Explanation | None] = []
    for b in blocks:
        if isinstance(b, dict):
            b = dict(b)
            text, figures, fit = (b.pop(k, None) for k in ROW_FIGURES)
            details.append(None if text is None and figures is None
                           else Explanation(text if isinstance(text, str) else str(text),
                                            dict(figures) if isinstance(figures, dict) else {}))
            fits.append(fit)
        else:
            details.append(None)
            fits.append(None)
        rows.append(b)
    return {**data, "blocks": rows, "fit_windows": fits, "reason_details": details}


ROW_FIGURES_SET = frozenset(ROW_FIGURES)


#: The row fields :class:`PreviewChanges` names one by one (the figures are the preview's columns).
_FATE_FIELDS = ("status", "reason")
_OTHER_FIELDS = tuple(f for f in PreviewBlock.model_fields if f not in _FATE_FIELDS)
_IDENTITY = itemgetter("source", "message_index")
_DICT_OF = attrgetter("__dict__")


@dataclass(frozen=True)
class RowChanges:
    """Where the rows of two previews differ (sorted row positions; the figures aside).

    ``rows``: the rows that are not the very same objects (only they can differ); ``block``:
    rows where a field other than ``status`` and ``reason`` differs (flags, tokens, text, ...);
    ``status``, ``reason``: rows where that field differs.
    """

    rows: list[int]
    block: list[int]
    status: list[int]
    reason: list[int]


@dataclass(frozen=True)
class PreviewChanges:
    """Where the rows of one preview differ from another's (two previews of the same chat).

    Every list holds sorted row positions. ``rows``: the rows that are not the very same objects
    (only they can differ); ``block``: rows where a row field other than ``status`` and
    ``reason`` differs (flags, tokens, text, ...); ``status``, ``reason``: rows where that field
    differs; ``reason_detail``: rows whose specific reason (words or figures,
    :attr:`ContextPreview.reason_details`) differs; ``fit_window``: rows whose fit window
    (:attr:`ContextPreview.fit_windows`) differs. A row in none of the lists reads the same in
    both previews, figures included.
    """

    rows: list[int]
    block: list[int]
    status: list[int]
    reason: list[int]
    reason_detail: list[int]
    fit_window: list[int]


def preview_changes(old: ContextPreview, new: ContextPreview) -> PreviewChanges | None:
    """The typed change set from ``old``'s rows to ``new``'s, found by row identity, then equality.

    Rows: free when ``new`` is the warm run the engine made from ``old`` (the run recorded where
    its rows changed, :func:`known_changes`); otherwise one C-level identity pass over the rows,
    then for the rows that are new objects one C-level comparison pass per field group. Figures:
    one numpy pass over the fit windows (:meth:`FitWindows.changed`); the reasons compared once
    per distinct pair of explanations (:meth:`ReasonDetails.changed`).

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
        rc: RowChanges | None = known[2]  # the warm run that made ``new`` from ``old`` recorded it
    else:
        rc = _compared_rows(ob, nb)
    if rc is None:
        return None
    n = len(nb)
    of, nf = old.fit_windows, new.fit_windows
    if isinstance(old.reason_details, ReasonDetails) and isinstance(new.reason_details, ReasonDetails) and len(
            old.reason_details) == len(new.reason_details) == n:
        detail = new.reason_details.changed(old.reason_details)
    else:
        od, nd = _column(old.reason_details, n), _column(new.reason_details, n)
        maybe = list(compress(range(n), map(is_not, od, nd)))
        detail = list(compress(maybe, map(ne, map(od.__getitem__, maybe), map(nd.__getitem__, maybe))))
    fit = FitWindows.column(nf, n).changed(FitWindows.column(of, n))
    return PreviewChanges(rc.rows, rc.block, rc.status, rc.reason, detail, fit)


def _column(values: Sequence[Any], n: int) -> Sequence[Any]:
    """A figure column of ``n`` rows (an empty one, not known: ``None`` each)."""
    return values if len(values) == n else [None] * n


def _compared_rows(ob: list[PreviewBlock], nb: list[PreviewBlock]) -> RowChanges | None:
    """Where two previews' rows differ, by identity then per field group (``None``: other rows)."""
    rows = list(compress(range(len(nb)), map(is_not, ob, nb)))
    od = list(map(_DICT_OF, map(ob.__getitem__, rows)))
    nd = list(map(_DICT_OF, map(nb.__getitem__, rows)))
    if any(map(ne, map(_IDENTITY, od), map(_IDENTITY, nd))):
        return None

    def where(*fields: str) -> list[int]:
        get = itemgetter(*fields)
        return list(compress(rows, map(ne, map(get, od), map(get, nd))))

    return RowChanges(rows, where(*_OTHER_FIELDS), where("status"), where("reason"))


def known_changes(old_rows: list[PreviewBlock], new_rows: list[PreviewBlock], *, rows: list[int],
                  block: list[int], status: list[int], reason: list[int]) -> RowChanges:
    """The row changes from ``old_rows`` to ``new_rows`` where the caller knows where each field may have moved.

    A warm run knows it (:func:`engine.rows.build_rows`): which rows are new objects, which of
    them it built from new blocks (only their non-fate fields can differ) and where status and
    reason moved. ``block`` is narrowed here to the rows whose values really differ, so the result
    equals what :func:`preview_changes` finds by comparing (``tests/engine/test_incremental.py``
    checks it).

    Parameters
    ----------
    old_rows, new_rows:
        The two previews' rows (as many, the same blocks in the same places).
    rows:
        The rows of ``new_rows`` that are new objects (ascending).
    block:
        Rows whose non-fate fields may differ (ascending).
    status, reason:
        Rows where that field differs (ascending; exact).
    """
    get = itemgetter(*_OTHER_FIELDS)
    od = map(get, map(_DICT_OF, map(old_rows.__getitem__, block)))
    nd = map(get, map(_DICT_OF, map(new_rows.__getitem__, block)))
    return RowChanges(rows, list(compress(block, map(ne, od, nd))), status, reason)
