"""Step 10's rows on the column path: one :class:`~engine.schema.preview.PreviewBlock` per block.

A cold run builds every row from the run's columns: the block's own facts while its own thread
still counts the chat (:func:`draft_rows`, step 3), the tokens and fate in step 10
(:func:`build_rows`). A warm run reuses the previous run's rows:
a row whose block and fate (status, reason) are the previous run's is the previous row object;
a row whose block is the same but whose fate moved is the previous row's values with those two
replaced; the rows of new blocks are built from their block. The chat-wide figures (explanation,
fit window) are not in the rows but columns of the preview (:class:`~engine.schema.preview.ContextPreview`),
so a toggle that moves the fit window of every older message rebuilds none of their rows. Every
step is a C-level pass (``map`` with ``operator.setitem``), so a warm run's rows cost O(changed
rows) Python work plus O(n) list copies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, repeat
from operator import attrgetter, ne, setitem
from typing import Any

from .runstate import AssemblyColumns, Outcome, RunColumns
from .schema._construct import construct_many, model_fields_of
from .schema.blocks import Block
from .schema.preview import PreviewBlock, RowChanges, known_changes, rows_from_columns
from .shifting.columns import BlockColumns
from .step_rules import with_entry_records

_DICT_OF = attrgetter("__dict__")


def _same(column: Sequence[Any]) -> Sequence[Any]:
    return column


@dataclass(frozen=True)
class RowInputs:
    """What the rows of one run read: its blocks, columns (step 3's, for :func:`draft_rows`) and lorebook records."""

    blocks: Sequence[Block]
    columns: RunColumns | AssemblyColumns
    trace_by_source: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PriorRows:
    """The previous run's rows and what they were built from (a warm run's starting point).

    ``fresh``: the block positions whose block object is new in this run; ``edited``: those of
    them whose message changed (the others only had their pin / exclude flags set).
    """

    blocks: Sequence[Block]
    outcome: Outcome
    rows: list[PreviewBlock]
    fresh: list[int]
    edited: frozenset[int] = frozenset()


def build_rows(src: RowInputs, outcome: Outcome, prior: PriorRows | None,
               drafts: list[PreviewBlock] | None = None) -> tuple[list[PreviewBlock], RowChanges | None]:
    """The preview rows of a run on the column path, reusing ``prior``'s unchanged rows.

    A row holds the block's own facts and its fate (status, reason); the chat-wide figures
    (explanation, fit window) are the preview's columns (``outcome.detail``, ``outcome.fits``), so
    after a toggle only the toggled rows and those whose fate moved are new objects.

    Parameters
    ----------
    src:
        The run's blocks and columns.
    outcome:
        Each block's fate, explanation and fit window.
    prior:
        The previous run's rows with as many blocks (``None``: build every row).
    drafts:
        Without ``prior``: this run's rows made by :func:`draft_rows` (step 3), which get their
        tokens and fate here, in place; they are the rows returned.

    Returns
    -------
    tuple
        One row per block, in prompt order (a plain list; rows are frozen models), and with a
        ``prior`` where the rows changed (:func:`engine.schema.preview.known_changes`: what
        :func:`engine.schema.preview.preview_changes` would find), else ``None``.
    """
    n = len(src.blocks)
    fields = set(model_fields_of(PreviewBlock))
    if prior is None or len(prior.rows) != n:
        if drafts is not None and len(drafts) == n:
            dicts = list(map(_DICT_OF, drafts))
            for key, column in _fate_columns(src, range(n), outcome).items():
                deque(map(setitem, dicts, repeat(key), column), maxlen=0)
            return drafts, None
        return rows_from_columns(_row_columns(src, range(n), outcome), n), None
    po = prior.outcome
    status, reason = _moved(outcome.status, po.status, outcome.moved), _moved(outcome.reason, po.reason, outcome.moved)
    fresh = set(prior.fresh)
    refate = sorted({*status, *reason} - fresh)  # the fresh ones are rebuilt whole
    rows = list(prior.rows)
    if refate:
        deque(map(setitem, repeat(rows), refate, _refated_rows(prior.rows, refate, outcome, fields)), maxlen=0)
    # a toggled block's row is its old row with its flags and fate set; an edited block's is built anew
    flags_only = [p for p in prior.fresh if p not in prior.edited]
    if flags_only:
        deque(map(setitem, repeat(rows), flags_only, _refated_rows(
            prior.rows, flags_only, outcome, fields, _flag_columns(src.columns.cols))), maxlen=0)
    rebuilt = [p for p in prior.fresh if p in prior.edited]
    if rebuilt:
        built = rows_from_columns(_row_columns(src, rebuilt, outcome), len(rebuilt))
        deque(map(setitem, repeat(rows), rebuilt, built), maxlen=0)
    # a refated row is a copy of its old row with only its fate set: only new blocks' rows can
    # differ in the other fields
    changes = known_changes(prior.rows, rows, rows=sorted({*refate, *fresh}), block=list(prior.fresh),
                            status=status, reason=reason)
    return rows, changes


def draft_rows(src: RowInputs) -> list[PreviewBlock]:
    """Every row of a cold run with its block's own facts, before any count (step 3, beside the count).

    The rows :func:`build_rows` returns for ``src``'s blocks without a prior run, but for their
    ``tokens``, ``status`` and ``reason`` (the fields' defaults): :func:`build_rows` given them as
    ``drafts`` sets those three in each row's ``__dict__`` (in place: nothing has seen the rows
    yet) and returns them. ``src.columns`` may be step 3's :class:`~engine.runstate.AssemblyColumns`:
    no count is read.
    """
    n = len(src.blocks)
    return rows_from_columns(_block_columns(src, range(n)), n)


def _moved(new: Sequence[str], old: Sequence[str], maybe: list[int] | None) -> list[int]:
    """The positions where ``new`` differs from ``old`` (ascending).

    ``maybe``: the only positions where they can differ (``Outcome.moved``, ascending), or
    ``None`` (then every position is compared, one C-level pass).
    """
    if new is old:
        return []
    if maybe is not None:
        return list(compress(maybe, map(ne, map(new.__getitem__, maybe), map(old.__getitem__, maybe))))
    return list(compress(range(len(new)), map(ne, new, old)))


def _row_columns(src: RowInputs, positions: Sequence[int], outcome: Outcome
                 ) -> dict[str, Sequence[Any] | Iterator[Any]]:
    """The ``PreviewBlock`` columns of the blocks at ``positions`` (a ``range`` for every block)."""
    return {**_block_columns(src, positions), **_fate_columns(src, positions, outcome)}


def _pick(src: RowInputs, positions: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """``column → its values at positions`` (the column itself when ``positions`` are every block)."""
    if isinstance(positions, range) and len(positions) == len(src.blocks):
        return _same
    return partial(_values_at, positions)


def _values_at(positions: Sequence[int], column: Sequence[Any]) -> list[Any]:
    return list(map(column.__getitem__, positions))


def _block_columns(src: RowInputs, positions: Sequence[int]) -> dict[str, Sequence[Any] | Iterator[Any]]:
    """The row columns of the blocks at ``positions`` that no count or fate changes (the block's own facts).

    A lorebook block's trace gets the activation record of its entry (``trace_by_source``).
    """
    pick = _pick(src, positions)
    blocks, c, cols = pick(src.blocks), src.columns, src.columns.cols
    kinds, sources = pick(cols.kinds), pick(cols.sources)
    traces = with_entry_records(list(map(attrgetter("trace"), blocks)), kinds, sources, src.trace_by_source)
    messages = map(attrgetter("message"), blocks)
    return {
        "id": pick(cols.ids), "kind": kinds, "role": map(attrgetter("role"), blocks), "source": sources,
        "position": positions, "protected": pick(cols.protected), "group": pick(cols.layout.group_of),
        "text": pick(c.text), "name": map(getattr, messages, repeat("name"), repeat(None)),
        "message_index": pick(cols.message_index), "trace": traces,
        **{field: pick(column) for field, column in _flag_columns(cols)}}


def _flag_columns(cols: BlockColumns) -> tuple[tuple[str, Sequence[bool]], ...]:
    """The row fields a block's pin / exclude flags set, each with its column: the only fields a toggle changes besides the fate.

    :func:`_block_columns` builds every row's from these; :func:`build_rows` sets only these (and
    the fate) on a toggled block's old row. A row field that reads a flag belongs here.
    """
    return ("pinned", cols.pinned), ("manual_excluded", cols.manual)


def _fate_columns(src: RowInputs, positions: Sequence[int], outcome: Outcome) -> dict[str, Sequence[Any]]:
    """The row columns of the blocks at ``positions`` that steps 4–6 work out: tokens, status, reason."""
    pick = _pick(src, positions)
    return {"tokens": pick(src.columns.cols.tokens), "status": pick(outcome.status), "reason": pick(outcome.reason)}


def _refated_rows(old_rows: Sequence[PreviewBlock], idx: list[int], outcome: Outcome, fields: set[str],
                  more: tuple[tuple[str, Sequence[Any]], ...] = ()) -> list[PreviewBlock]:
    """Copies of ``old_rows[i]`` (``i`` in ``idx``) with their status and reason set from ``outcome``.

    ``more``: other fields to set, each with its column over every position.
    """
    dicts = list(map(dict.copy, map(_DICT_OF, map(old_rows.__getitem__, idx))))
    for key, values in (("status", outcome.status), ("reason", outcome.reason), *more):
        deque(map(setitem, dicts, repeat(key), map(values.__getitem__, idx)), maxlen=0)
    return construct_many(PreviewBlock, dicts, fields)


__all__ = ["PriorRows", "RowInputs", "build_rows", "draft_rows"]
