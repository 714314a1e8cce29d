"""Tables that fit the terminal: one console and one table style for every command.

Rich measures the terminal (``COLUMNS`` when set, else the tty; 80 when neither is known) and
shrinks wrappable columns first to fit it. Each command says which columns are *text* (they
shrink and wrap inside their cell) and which are *keys* (ids, numbers, codes: never wrapped),
so a row never runs past the right edge and onto a second terminal line.
"""

from __future__ import annotations

from typing import Any


def console() -> Any:
    """A rich ``Console`` on stdout at the terminal's width (``COLUMNS`` wins; 80 when unknown)."""
    from rich.console import Console

    return Console(soft_wrap=False)


def table(title: str | None = None, *, narrow: bool = False, **kw: Any) -> Any:
    """A rich ``Table`` in the commands' style.

    ``narrow`` (a terminal under 100 columns) drops the outer border and the cell padding to
    one space, which gives the text columns about a fifth more room.
    """
    from rich import box
    from rich.table import Table

    if narrow:
        kw.setdefault("box", box.SIMPLE_HEAD)
        kw.setdefault("padding", (0, 1))
        kw.setdefault("pad_edge", False)
    return Table(title=title, **kw)


def key_column(t: Any, name: str, **kw: Any) -> None:
    """A column that is never wrapped (ids, numbers, codes); rich shrinks the text columns first."""
    t.add_column(name, no_wrap=True, overflow="ellipsis", **kw)


def text_column(t: Any, name: str, **kw: Any) -> None:
    """A column that gives up width first and wraps inside its cell (words longer than it fold)."""
    t.add_column(name, overflow="fold", **kw)


def fits(con: Any, t: Any) -> bool:
    """Whether table ``t`` fits ``con``'s width at its minimum (rich's own measurement, in cells).

    When it does not, rich crops the right edge instead of wrapping.
    """
    from rich.measure import Measurement

    # measured at an unbounded width: rich clamps a measurement to the width it is given
    return Measurement.get(con, con.options.update_width(100_000), t).minimum <= int(con.width)


def is_narrow(con: Any) -> bool:
    """Whether ``con`` is under 100 columns wide."""
    return int(con.width) < 100


def shrink_to_fit(con: Any, t: Any) -> None:
    """Narrow the text columns of ``t`` until rich lays it out within ``con``'s width.

    Rich collapses wrappable columns only down to their longest word; when that is not enough
    it reduces every column by ratio and the console crops the right edge, so the text column
    loses the letters at the end of each wrapped line. This takes the excess off the widest
    text (wrappable) columns, down to their ``min_width`` (words longer than the column fold),
    measured with rich's own layout, so every wrapped line is printed whole (issue 31).
    """
    try:
        for _ in range(len(t.columns) * 2):
            widths = t._calculate_column_widths(con, con.options)
            excess = sum(widths) + t._extra_width - int(con.width)
            if excess <= 0:
                return
            room = []
            for k, col in enumerate(t.columns):
                pad = t._get_padding_width(k)
                floor = (col.min_width or 4) + pad
                if not col.no_wrap and widths[k] > floor:
                    room.append((widths[k], k, floor, pad))
            if not room:
                return
            width, k, floor, pad = max(room)
            t.columns[k].max_width = max(floor, width - excess) - pad
    except (AttributeError, TypeError, IndexError):  # another rich version: print as rich lays it out
        return
