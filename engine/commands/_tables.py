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
