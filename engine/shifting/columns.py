"""The columns every shifting rule reads: one list per block figure, one entry per block (issue 29).

Shifting (:func:`engine.shifting.core.shift_columns`), the explanation of each fate
(:func:`engine.shifting.explain.explain_columns`) and the fit map
(:func:`engine.shifting.fitmap.fit_columns`) exist once, over a :class:`BlockColumns`. The
functions other code and plugins call with block objects (``shift_context``, the ``truncate``
and ``manual`` strategies, ``explain_blocks``, ``fit_windows``) build the columns with
:meth:`BlockColumns.from_blocks`, call the rule and map the outcome back.

Positions index every list; a tool group is its member positions (:class:`ToolLayout`). The
rules compute over the same figures as numpy arrays (:class:`ColumnArrays`, with the tool groups
as :class:`LayoutArrays`): a run keeps them with its columns, a warm run patches copies at the
changed positions (:meth:`ColumnArrays.patched`), and columns made without them get them when a
rule first asks (:func:`arrays_of`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, is_, is_not, itemgetter, or_
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ..schema.blocks import Block, BlockKind, BlockOrigin
from .groups import ToolGroups, find_tool_groups


def removal_tier(origin: BlockOrigin, kind: BlockKind, history: bool) -> int:
    """SPEC §3 rule 5's removal tier of one block.

    Parameters
    ----------
    origin, kind, history:
        The block's ``origin``, ``kind`` and ``history`` flag (separate so that per-block
        columns can be mapped over it).

    Returns
    -------
    int
        0 interceptor-added, 1 example dialogue, 2 history, 3 the rest (lorebook, memory, ...:
        removed by priority, last).
    """
    if origin is BlockOrigin.INTERCEPTOR:
        return 0
    if kind == BlockKind.EXAMPLE:
        return 1
    if history:
        return 2
    return 3


#: An enum member's value (``BlockKind`` / ``BlockOrigin``: plain ``str``), read without the enum's property.
_VALUE = attrgetter("_value_")
_DICT = attrgetter("__dict__")
#: :func:`removal_tier` by (origin value, kind value, history flag): one dict lookup per block.
_TIERS = {(o.value, k.value, h): removal_tier(o, k, h) for o in BlockOrigin for k in BlockKind for h in (False, True)}


def _labels(mindex: Sequence[int | None], sources: Sequence[str]) -> list[str]:
    """How an explanation names each block: ``message <i>`` for a chat message, else its source."""
    return [src if mi is None else f"message {mi}" for src, mi in zip(sources, mindex)]


@dataclass(frozen=True, slots=True)
class ToolLayout:
    """The tool groups of a column set, in its positions (SPEC §1 "tool group").

    Attributes
    ----------
    group_of:
        Per position: the tool group id, ``None`` outside groups.
    members:
        Per group: its member positions, ascending; groups ordered by their first member.
    ids:
        Per group: its id (parallel to ``members``).
    orphans:
        Positions of tool results whose call is not among the blocks (``TOOL_RESULT_ORPHANED``).
    incomplete:
        Ids of incomplete groups (``TOOL_PAIR_INCOMPLETE``, see :mod:`engine.shifting.groups`).
    """

    group_of: list[str | None]
    members: list[list[int]]
    ids: list[str]
    orphans: frozenset[int] = frozenset()
    incomplete: frozenset[str] = frozenset()

    @classmethod
    def of(cls, group_of: Sequence[str | None], orphans: Iterable[int] = (),
           incomplete: Iterable[str] = ()) -> ToolLayout:
        """The layout of per-position group ids (members gathered in one pass).

        Parameters
        ----------
        group_of:
            Per position: the group id or ``None``.
        orphans, incomplete:
            Orphaned result positions, incomplete group ids.
        """
        members: dict[str, list[int]] = {}
        for k in [k for k, g in enumerate(group_of) if g is not None]:
            members.setdefault(group_of[k], []).append(k)  # type: ignore[arg-type]
        return cls(list(group_of), list(members.values()), list(members), frozenset(orphans), frozenset(incomplete))

    @classmethod
    def from_groups(cls, groups: ToolGroups) -> ToolLayout:
        """The layout of :func:`~engine.shifting.groups.find_tool_groups`' result."""
        return cls.of(groups.group_of, groups.orphans, groups.incomplete)

    def take(self, positions: Sequence[int]) -> ToolLayout:
        """The layout of the rows at ``positions`` (ascending), renumbered; group ids are kept."""
        new = {p: k for k, p in enumerate(positions)}
        return ToolLayout.of([self.group_of[p] for p in positions],
                             (new[p] for p in self.orphans if p in new), self.incomplete)


@dataclass(frozen=True, slots=True)
class BlockColumns:
    """Per-block figures of a prompt as parallel lists, one entry per block in prompt order.

    Treat the lists as read-only; a run that changes a flag makes new columns
    (``dataclasses.replace(cols, pinned=new_list)``, or :meth:`patched`). ``arrays``: the lists
    as numpy arrays (:class:`ColumnArrays`), kept only while they were made from these very lists.

    Attributes
    ----------
    ids, labels, message_index, kinds, sources:
        Block id; how an explanation names the block (``message <i>`` for a chat message, else
        its source); the chat message index (``None`` for other blocks); ``BlockKind`` value;
        the block's source.
    tokens:
        Tokens of each block as shifting counts them (chat-format overhead included).
    hidden, protected, pinned, manual, history:
        The block's flags (``protected`` is its own flag, without the pin; ``manual`` is
        ``manual_excluded``). A warm run's ``pinned`` and ``manual`` are its base's with the
        toggled positions replaced (:class:`engine.patched.PatchedList`): read them by position.
    tier, priority:
        Rule 5's removal tier (:func:`removal_tier`) and the block's priority.
    layout:
        The tool groups (:class:`ToolLayout`).
    """

    ids: list[str]
    labels: list[str]
    message_index: list[int | None]
    kinds: list[str]
    sources: list[str]
    tokens: list[int]
    hidden: list[bool]
    protected: list[bool]
    pinned: Sequence[bool]
    manual: Sequence[bool]
    history: list[bool]
    tier: list[int]
    priority: list[float]
    layout: ToolLayout
    arrays: ColumnArrays | None = None

    def __post_init__(self) -> None:
        # arrays made from other lists (``dataclasses.replace`` of one list) are dropped: ``arrays``
        # is always this instance's, so :func:`arrays_of` need not check it at every read
        a = self.arrays
        if a is not None and not all(map(is_, a.sources, _sources(self))):
            object.__setattr__(self, "arrays", None)

    def __len__(self) -> int:
        """Number of blocks."""
        return len(self.ids)

    @property
    def held(self) -> list[bool]:
        """Per position: protected or pinned (what shifting may never remove)."""
        return list(map(or_, self.protected, self.pinned))

    def patched(self, positions: Sequence[int], *, tokens: list[int] | None = None,
                pinned: Sequence[bool] | None = None, manual: Sequence[bool] | None = None) -> BlockColumns:
        """These columns with new ``tokens`` / ``pinned`` / ``manual`` lists (``None``: this one's) that differ only at ``positions``.

        The arrays are this instance's patched at ``positions`` (:meth:`ColumnArrays.patched`), not made again.
        """
        tokens = self.tokens if tokens is None else tokens
        pinned = self.pinned if pinned is None else pinned
        manual = self.manual if manual is None else manual
        arrays = arrays_of(self).patched(positions, tokens, pinned, manual)
        return BlockColumns(self.ids, self.labels, self.message_index, self.kinds, self.sources, tokens, self.hidden,
                            self.protected, pinned, manual, self.history, self.tier, self.priority, self.layout, arrays)

    @classmethod
    def from_blocks(cls, blocks: Sequence[Block], tokens: Sequence[int],
                    layout: ToolLayout | None = None) -> BlockColumns:
        """The columns of ``blocks`` (one C-level pass per field).

        Parameters
        ----------
        blocks:
            Blocks in prompt order.
        tokens:
            Tokens per block, same order (zeros for columns counted later: a pipeline run's step 3,
            :class:`engine.runstate.AssemblyColumns`).
        layout:
            The tool groups; ``None``: :func:`~engine.shifting.groups.find_tool_groups` of ``blocks``.
        """
        fields = list(map(_DICT, blocks))  # a block's fields are its __dict__'s keys (a key read beats an attribute's)

        def column(name: str) -> list[Any]:
            return list(map(itemgetter(name), fields))

        mindex, source, history = column("message_index"), column("source"), column("history")
        kinds = list(map(_VALUE, column("kind")))
        return cls(
            ids=column("id"), labels=_labels(mindex, source), message_index=mindex, kinds=kinds, sources=source,
            tokens=list(tokens), hidden=column("hidden"), protected=column("protected"), pinned=column("pinned"),
            manual=column("manual_excluded"), history=history,
            tier=list(map(_TIERS.__getitem__, zip(map(_VALUE, column("origin")), kinds, history))),
            priority=column("priority"),
            layout=layout if layout is not None else ToolLayout.from_groups(find_tool_groups(blocks)))

    def take(self, positions: Sequence[int], layout: ToolLayout | None = None) -> BlockColumns:
        """The rows at ``positions`` (ascending); ``layout`` ``None``: this layout, renumbered."""
        def pick(values: Sequence[Any]) -> list[Any]:
            return list(map(values.__getitem__, positions))

        return BlockColumns(
            pick(self.ids), pick(self.labels), pick(self.message_index), pick(self.kinds), pick(self.sources),
            pick(self.tokens), pick(self.hidden), pick(self.protected), pick(self.pinned), pick(self.manual),
            pick(self.history), pick(self.tier), pick(self.priority),
            layout if layout is not None else self.layout.take(positions))


#: A numpy array of positions, flags or figures (one entry per block or per group).
Array = npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class LayoutArrays:
    """A :class:`ToolLayout` as numpy arrays (what the rules' group passes index with).

    Attributes
    ----------
    group:
        Per position: its group's number (index into ``ToolLayout.members``), ``-1`` outside groups.
    head:
        Per position: whether it is a unit's head (outside groups, or a group's first member).
    multi:
        Per position: whether it is a member of a group of two or more.
    unit:
        Per position: its unit's head position (itself outside groups).
    members, starts, heads:
        Every group's members, group by group (ascending within a group); where each group
        starts in ``members`` (``np.ufunc.reduceat`` offsets); each group's first member.
    orphans:
        Positions of orphaned tool results, ascending.
    lone:
        Per position: outside every group.
    member_group, member_multi:
        Per entry of ``members``: its group's number, and whether that group has two or more members.
    tails:
        Positions of the group members that are not their group's first (not a unit's head), ascending.
    """

    group: Array
    head: Array
    multi: Array
    unit: Array
    members: Array
    starts: Array
    heads: Array
    orphans: Array
    lone: Array
    member_group: Array
    member_multi: Array
    tails: Array

    def __post_init__(self) -> None:
        _read_only(self)

    @classmethod
    def of(cls, layout: ToolLayout, n: int) -> LayoutArrays:
        """The arrays of ``layout`` over ``n`` positions (one Python pass over the groups' members only)."""
        group = np.full(n, -1, dtype=np.intp)
        multi = np.zeros(n, dtype=bool)
        unit = np.arange(n, dtype=np.intp)
        sizes = np.fromiter(map(len, layout.members), dtype=np.intp, count=len(layout.members))
        members = np.fromiter(chain.from_iterable(layout.members), dtype=np.intp, count=int(sizes.sum()))
        starts = np.zeros(len(sizes), dtype=np.intp)
        np.cumsum(sizes[:-1], out=starts[1:])
        heads = members[starts]
        number = np.repeat(np.arange(len(sizes), dtype=np.intp), sizes)
        group[members] = number
        unit[members] = heads[number]
        multi[members] = sizes[number] > 1
        head = unit == np.arange(n, dtype=np.intp)
        orphans = np.array(sorted(layout.orphans), dtype=np.intp)
        return cls(group, head, multi, unit, members, starts, heads, orphans, group < 0, number, sizes[number] > 1,
                   np.flatnonzero(~head))

    def any_of(self, flags: Array) -> Array:
        """Per group: whether any member has ``flags`` (a bool array over positions)."""
        return np.logical_or.reduceat(flags[self.members], self.starts) if len(self.starts) else flags[:0]


@dataclass(frozen=True, slots=True)
class Units:
    """SPEC §3 rule 3's units as arrays over positions: each tool group's figures on its head.

    ``tokens`` / ``held`` / ``tier``: at a group's first member the whole group's tokens,
    whether any member is protected or pinned, its lowest removal tier; at every other position
    the block's own figures (shifting and the fit map read the heads and lone blocks only).
    """

    tokens: Array
    held: Array
    tier: Array

    @classmethod
    def of(cls, tokens: Array, held: Array, tier: Array, la: LayoutArrays) -> Units:
        """The units of the blocks' ``tokens``, ``held`` and ``tier`` (one ``reduceat`` per figure over the groups)."""
        tokens, held, tier = tokens.copy(), held.copy(), tier.copy()
        if len(la.heads):
            tokens[la.heads] = np.add.reduceat(tokens[la.members], la.starts)
            held[la.heads] = np.logical_or.reduceat(held[la.members], la.starts)
            tier[la.heads] = np.minimum.reduceat(tier[la.members], la.starts)
        return _read_only(cls(tokens, held, tier))

    def patched(self, tokens: Array, held: Array, at: list[int], la: LayoutArrays) -> Units:
        """These units after the blocks at ``at`` changed ``tokens`` / ``held`` (tiers never change): O(changed).

        An array whose values at the changed units are as before is shared, not copied.
        """
        units = {p: (tokens[p], held[p]) for p in at}  # per position its unit's figures, each position once
        for k in {int(la.group[p]) for p in at} - {-1}:  # a group's figures on its head (over its own)
            ms = la.members[la.starts[k]:la.starts[k + 1] if k + 1 < len(la.starts) else len(la.members)]
            units[int(ms[0])] = (tokens[ms].sum(), held[ms].any())
        where, figures = list(units), list(units.values())
        return Units(patched_array(self.tokens, where, [t for t, _ in figures]),
                     patched_array(self.held, where, [h for _, h in figures]), self.tier)


@dataclass(frozen=True, slots=True)
class ColumnArrays:
    """:class:`BlockColumns`' figures as numpy arrays (``tokens`` int64, flags bool, ``tier`` int8).

    ``sources`` are the lists they were made from (:func:`arrays_of` uses them only while the
    columns still hold those very lists); ``layout`` the tool groups as arrays; ``message``
    whether each block is a chat message (has a ``message_index``); ``held`` protected or
    pinned; ``units`` rule 3's units (:class:`Units`).
    """

    tokens: Array
    hidden: Array
    protected: Array
    pinned: Array
    manual: Array
    history: Array
    tier: Array
    priority: Array
    message: Array
    layout: LayoutArrays
    sources: tuple[object, ...]
    held: Array
    units: Units

    @classmethod
    def of(cls, cols: BlockColumns) -> ColumnArrays:
        """The arrays of ``cols`` (one C-level conversion per column)."""
        n = len(cols)

        def flags(values: Sequence[bool]) -> Array:
            return np.fromiter(values, dtype=bool, count=n)

        tokens, protected, pinned = np.fromiter(cols.tokens, dtype=np.int64, count=n), flags(cols.protected), flags(
            cols.pinned)
        tier, held, la = np.fromiter(cols.tier, dtype=np.int8, count=n), protected | pinned, LayoutArrays.of(cols.layout, n)
        return _read_only(cls(tokens, flags(cols.hidden), protected, pinned, flags(cols.manual), flags(cols.history),
                              tier, np.fromiter(cols.priority, dtype=float, count=n),
                              np.fromiter(map(is_not, cols.message_index, repeat(None)), dtype=bool, count=n),
                              la, _sources(cols), held, Units.of(tokens, held, tier, la)))

    def recounted(self, cols: BlockColumns) -> ColumnArrays:
        """These arrays for ``cols``, which differ from the columns they were made of in ``tokens`` only.

        The token array and the units are new; every flag array is shared (a pipeline run makes
        its flag arrays before the count: :class:`engine.runstate.AssemblyColumns`).
        """
        tokens = np.fromiter(cols.tokens, dtype=np.int64, count=len(cols))
        tokens.flags.writeable = False
        return dataclasses.replace(self, tokens=tokens, sources=_sources(cols),
                                   units=Units.of(tokens, self.held, self.tier, self.layout))

    def patched(self, positions: Sequence[int], tokens: Sequence[int], pinned: Sequence[bool],
                manual: Sequence[bool]) -> ColumnArrays:
        """These arrays for new ``tokens`` / ``pinned`` / ``manual`` lists that differ from their sources only at ``positions``.

        The other lists (and arrays) are this instance's; the result's ``sources`` are those lists.
        An array whose values at ``positions`` are as before is shared (a toggled exclusion
        copies the exclusion array only).
        """
        at = list(positions)
        src = self.sources
        sources = (tokens, *src[1:3], pinned, manual, *src[5:])
        if not at:
            return dataclasses.replace(self, sources=sources)
        a_tokens = patched_array(self.tokens, at, list(map(tokens.__getitem__, at)))
        a_pinned = patched_array(self.pinned, at, list(map(pinned.__getitem__, at)))
        a_manual = patched_array(self.manual, at, list(map(manual.__getitem__, at)))
        held = patched_array(self.held, at, self.protected[at] | a_pinned[at])
        units = self.units
        if a_tokens is not self.tokens or held is not self.held:
            units = units.patched(a_tokens, held, at, self.layout)
        return ColumnArrays(a_tokens, self.hidden, self.protected, a_pinned, a_manual, self.history, self.tier,
                            self.priority, self.message, self.layout, sources, held, units)


def patched_array(array: Array, at: Sequence[int], values: Sequence[Any] | Array) -> Array:
    """``array`` with ``values`` at positions ``at``: a read-only copy, or ``array`` itself when they are there already."""
    new = np.asarray(values, dtype=array.dtype)
    if array[at].tolist() == new.tolist():  # a few positions: compared as lists (C-level, no numpy wrapper)
        return array
    out = array.copy()
    out[at] = new
    out.flags.writeable = False
    return out


def running_sums(values: Array) -> Array:
    """``np.cumsum(values)`` as ``int64`` (shape ``(len(values),)``), made through a reversed output.

    numpy's accumulate over a contiguous input into a contiguous output reloads each running sum
    from memory (about 1.8 ns a value here: 18 µs for 10,000 values); into a buffer read
    backwards (a view with a negative stride, no more memory) it runs about 3 × faster. The
    result is that view.
    """
    out = np.empty(len(values), dtype=np.int64)[::-1]
    np.cumsum(values, out=out)
    return out


_A = TypeVar("_A")


def _read_only(arrays: _A) -> _A:
    """Make every numpy array field of ``arrays`` read-only (runs share them, and a warm run patches copies); returns ``arrays``."""
    for name in arrays.__slots__:  # type: ignore[attr-defined]
        value = getattr(arrays, name)
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return arrays


def _sources(cols: BlockColumns) -> tuple[object, ...]:
    return (cols.tokens, cols.hidden, cols.protected, cols.pinned, cols.manual, cols.history, cols.tier,
            cols.priority, cols.message_index, cols.layout)


def arrays_of(cols: BlockColumns) -> ColumnArrays:
    """``cols.arrays`` (made from ``cols``' very lists: :class:`BlockColumns` drops any other), else new arrays of ``cols``."""
    a = cols.arrays
    return a if a is not None else ColumnArrays.of(cols)


def with_arrays(cols: BlockColumns) -> BlockColumns:
    """``cols`` carrying its arrays (:func:`arrays_of`), for a run that keeps and patches them."""
    return dataclasses.replace(cols, arrays=arrays_of(cols))


#: The exclusion reasons shifting gives, by code (``ColumnShift.codes``); code 0 is kept (``None``).
SHIFT_REASONS: tuple[str | None, ...] = (
    None, "HIDDEN", "TOOL_RESULT_ORPHANED", "TOOL_PAIR_INCOMPLETE", "MANUAL_EXCLUDED", "TOOL_GROUP_DROPPED",
    "OVER_BUDGET_PROTECTED", "TOO_LARGE_FOR_BUDGET", "PRIORITY_LOWEST_FIRST", "EXAMPLES_PUSHED_OUT",
    "HISTORY_OLDEST_FIRST")
_REASON_OBJECTS = np.array(SHIFT_REASONS, dtype=object)


@dataclass(frozen=True, slots=True, eq=False)
class ColumnShift:
    """The outcome of :func:`~engine.shifting.core.shift_columns` (SPEC §3).

    Attributes
    ----------
    codes:
        Per position: the exclusion reason as a number (an index into :data:`SHIFT_REASONS`,
        ``0``: kept), an int8 array.
    error:
        ``"TOKEN_BUDGET_EXCEEDED"`` exactly when the protected units alone exceed the budget.
    protected_tokens:
        Tokens of the live protected units.
    total_tokens:
        Tokens of the kept positions (one recount).
    diagnostics:
        Protected or pinned blocks the writer excluded (not sent), in prompt order.
    """

    codes: Array
    error: str | None
    protected_tokens: int
    total_tokens: int
    diagnostics: list[str]
    _reasons: list[str | None] | None = field(default=None, repr=False)

    @property
    def reasons(self) -> list[str | None]:
        """Per position: the exclusion reason code, ``None`` when kept (made from ``codes`` on the first read)."""
        if self._reasons is None:
            object.__setattr__(self, "_reasons", _REASON_OBJECTS[self.codes].tolist())
        return self._reasons  # type: ignore[return-value]

    @property
    def kept(self) -> list[bool]:
        """Per position: kept (no exclusion reason)."""
        return (self.codes == 0).tolist()


__all__ = ["SHIFT_REASONS", "Array", "BlockColumns", "ColumnArrays", "ColumnShift", "LayoutArrays", "ToolLayout", "Units",
           "arrays_of", "removal_tier", "running_sums", "with_arrays"]
