"""Step 10's rows on the column path: one :class:`~engine.schema.preview.PreviewBlock` per block.

A cold run builds every row from the run's columns. A warm run reuses the previous run's rows:
a row whose block, fate (status, reason), explanation and fit window are the previous run's is
the previous row object; a row whose block is the same but whose fate, explanation or window
moved (after a toggle: every older message's window, every dropped message's free tokens) is
the previous row's values with those fields replaced; the rows of new blocks are built from
their block. Every step is a C-level pass (``map`` with ``operator.setitem``), so a warm run's
rows cost O(changed rows) Python work plus O(n) list copies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_not, ne, or_, setitem
from typing import Any

from .runstate import Outcome, RunColumns
from .schema._construct import construct_many, model_fields_of
from .schema.blocks import Block
from .schema.preview import PreviewBlock, PreviewChanges, known_changes
from .step_rules import with_entry_records

_DICT_OF = attrgetter("__dict__")


@dataclass(frozen=True)
class RowInputs:
    """What the rows of one run read: its blocks, columns and lorebook records."""

    blocks: list[Block]
    columns: RunColumns
    trace_by_source: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PriorRows:
    """The previous run's rows and what they were built from (a warm run's starting point).

    ``fresh``: the block positions whose block object is new in this run.
    """

    blocks: list[Block]
    outcome: Outcome
    rows: list[PreviewBlock]
    fresh: list[int]


def build_rows(src: RowInputs, outcome: Outcome, prior: PriorRows | None
               ) -> tuple[list[PreviewBlock], PreviewChanges | None]:
    """The preview rows of a run on the column path, reusing ``prior``'s unchanged rows.

    Parameters
    ----------
    src:
        The run's blocks and columns.
    outcome:
        Each block's fate, explanation and fit window.
    prior:
        The previous run's rows with as many blocks (``None``: build every row).

    Returns
    -------
    tuple
        One row per block, in prompt order (a plain list; rows are frozen models), and with a
        ``prior`` the change set from its rows (:func:`engine.schema.preview.known_changes`:
        what :func:`engine.schema.preview.preview_changes` would find), else ``None``.
    """
    n = len(src.blocks)
    fields = set(model_fields_of(PreviewBlock))
    if prior is None or len(prior.rows) != n:
        return construct_many(PreviewBlock, _row_dicts(src, range(n), outcome), fields), None
    moved = _moved(outcome, prior.outcome, n)
    redo = list(map(or_, map(or_, moved["status"], moved["fit_window"]), map(or_, moved["detail"], moved["reason"])))
    deque(map(setitem, repeat(redo), prior.fresh, repeat(False)), maxlen=0)  # rebuilt whole
    refate = list(compress(range(n), redo))
    rows = list(prior.rows)
    if refate:
        deque(map(setitem, repeat(rows), refate, _refated_rows(prior.rows, refate, outcome, fields)), maxlen=0)
    if prior.fresh:
        built = construct_many(PreviewBlock, _row_dicts(src, prior.fresh, outcome), fields)
        deque(map(setitem, repeat(rows), prior.fresh, built), maxlen=0)
    at = {k: list(compress(range(n), m)) for k, m in moved.items()}
    # a refated row is a copy of its old row with only fate fields set: only new blocks' rows can
    # differ in the others
    changes = known_changes(prior.rows, rows, block=list(prior.fresh), status=at["status"], reason=at["reason"],
                            detail=at["detail"], fit_window=at["fit_window"])
    return rows, changes


def _moved(outcome: Outcome, po: Outcome, n: int) -> dict[str, list[bool]]:
    """Per fate field, per position: whether it moved since ``po`` (explanations: by identity, a superset).

    Explanations are shared objects (:func:`engine.shifting.explain.explain_columns` hands back the
    previous run's object for equal figures), so identity finds every moved one.
    """
    return {"status": list(map(ne, outcome.status, po.status)), "reason": list(map(ne, outcome.reason, po.reason)),
            "detail": list(map(is_not, outcome.detail, po.detail)), "fit_window": list(map(ne, outcome.fits, po.fits))}


def _row_dicts(src: RowInputs, positions: Sequence[int], outcome: Outcome) -> list[dict[str, Any]]:
    """The ``PreviewBlock`` values of the blocks at ``positions`` (a ``range`` for every block).

    One C-level pass per field over the chosen positions (``operator.setitem`` into copies of one
    split-key template, :func:`_row_template`); a lorebook block's trace gets the activation
    record of its entry (``trace_by_source``).
    """
    every = isinstance(positions, range) and len(positions) == len(src.blocks)

    def pick(column: Sequence[Any]) -> Sequence[Any]:
        return column if every else list(map(column.__getitem__, positions))

    blocks, c, cols = pick(src.blocks), src.columns, src.columns.cols
    kinds, sources = pick(cols.kinds), pick(cols.sources)
    traces = with_entry_records(list(map(attrgetter("trace"), blocks)), kinds, sources, src.trace_by_source)
    dicts = list(map(dict.copy, repeat(_row_template(), len(blocks))))
    messages = map(attrgetter("message"), blocks)
    explanations = pick(outcome.detail)
    columns: dict[str, Sequence[Any] | Iterator[Any]] = {
        "id": pick(cols.ids), "kind": kinds, "role": map(attrgetter("role"), blocks), "source": sources,
        "position": positions, "tokens": pick(cols.tokens), "status": pick(outcome.status),
        "reason": pick(outcome.reason), "protected": pick(cols.protected), "pinned": pick(cols.pinned),
        "group": pick(cols.layout.group_of), "text": pick(c.text), "name": map(getattr, messages, repeat("name"), repeat(None)),
        "manual_excluded": pick(cols.manual), "message_index": pick(cols.message_index), "trace": traces,
        "reason_detail": map(getattr, explanations, repeat("text"), repeat(None)),
        "reason_data": map(getattr, explanations, repeat("data"), repeat(None)), "fit_window": pick(outcome.fits)}
    for key, column in columns.items():
        deque(map(setitem, dicts, repeat(key), column), maxlen=0)
    return dicts


def _refated_rows(old_rows: Sequence[PreviewBlock], idx: list[int], outcome: Outcome,
                  fields: set[str]) -> list[PreviewBlock]:
    """Copies of ``old_rows[i]`` (``i`` in ``idx``) with the five fate fields set from ``outcome``.

    Every fate field is set in every copy (one C-level pass per field): cheaper than finding, per
    field, the rows where it moved, and the same rows.
    """
    dicts = list(map(dict.copy, map(_DICT_OF, map(old_rows.__getitem__, idx))))
    explanations = list(map(outcome.detail.__getitem__, idx))
    columns: tuple[tuple[str, Iterator[Any]], ...] = (
        ("status", map(outcome.status.__getitem__, idx)), ("reason", map(outcome.reason.__getitem__, idx)),
        ("reason_detail", map(getattr, explanations, repeat("text"), repeat(None))),
        ("reason_data", map(getattr, explanations, repeat("data"), repeat(None))),
        ("fit_window", map(outcome.fits.__getitem__, idx)))
    for key, values in columns:
        deque(map(setitem, dicts, repeat(key), values), maxlen=0)
    return construct_many(PreviewBlock, dicts, fields)


class _RowDict:
    """Holder whose instance dicts share one key table (CPython's split dicts): a row's ``__dict__``.

    A preview row's field values in a split dict take about a third of the memory of an ordinary
    dict, and ``dict.copy()`` of one copies the value pointers instead of a 64-slot key table.
    Any dict would be correct: this is only the cheaper kind.
    """


def _make_template() -> dict[str, Any]:
    """A split-key dict of every ``PreviewBlock`` field (in field order), each set to ``None``.

    Attribute assignment builds the shared key table once (``dict.update`` on an empty split dict
    would turn it into an ordinary one).
    """
    holder = _RowDict()
    for key in PreviewBlock.model_fields:
        setattr(holder, key, None)
    return holder.__dict__


_ROW_TEMPLATE = _make_template()


def _row_template() -> dict[str, Any]:
    return _ROW_TEMPLATE


__all__ = ["PriorRows", "RowInputs", "build_rows"]
