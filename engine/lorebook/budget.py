"""The World Info token budget: its size, and SillyTavern's budget step (one implementation).

Internal to :mod:`engine.lorebook` and :mod:`engine.assembly.sillytavern`, which both run
SillyTavern 1.12.6 ``checkWorldInfo``'s budget step through :func:`fill_budget`: the
``sillytavern`` activation rules count entries' contents with the caller's counter, the
SillyTavern assembly counts them as SillyTavern's Chat Completion path does (a whole
``{role: system}`` message). The ``loomscope`` rules' budget (constants first, smaller entries
still tried after an overflow) lives in :mod:`engine.lorebook.loomscope`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..schema.settings import WorldInfoSettings

__all__ = ["BudgetFill", "compute_budget", "fill_budget"]

T = TypeVar("T")


def compute_budget(settings: WorldInfoSettings, context_limit: int) -> int:
    """The lorebook token budget (SillyTavern: ``round(pct × maxContext / 100)``, ≥ 1, then capped).

    Parameters
    ----------
    settings:
        ``budget_percent`` (0–100) and ``budget_cap`` (tokens, 0 = none).
    context_limit:
        The context the percentage applies to, in tokens.

    Returns
    -------
    int
        The budget in tokens, at least 1 (``checkWorldInfo``, world-info.js 3730–3735).
    """
    budget = max(1, math.floor(settings.budget_percent * max(0, context_limit) / 100 + 0.5))
    if settings.budget_cap > 0:
        budget = min(budget, settings.budget_cap)
    return budget


@dataclass
class BudgetFill(Generic[T]):
    """What :func:`fill_budget` let through.

    Attributes
    ----------
    kept:
        ``(item, its text)`` for each item that fit, in order.
    used:
        The running total (tokens) after the last kept item; ``None`` when none fit.
    overflow_at:
        Index in ``items`` of the item whose running total reached the budget (it and every
        later item are out), or ``None`` when the loop ran to the end.
    overflow_total:
        The running total (tokens) that reached the budget; 0 without an overflow.
    """

    kept: list[tuple[T, str]] = field(default_factory=list)
    used: int | None = None
    overflow_at: int | None = None
    overflow_total: int = 0


def fill_budget(
    items: Sequence[T],
    *,
    content: Callable[[T], str | None],
    scanned_tokens: int,
    budget: int,
    count: Callable[[str], int],
) -> BudgetFill[T]:
    r"""SillyTavern's budget step for one scan pass (``checkWorldInfo``, world-info.js 3996–4043).

    Each item's text is appended to the pass's ``newContent`` followed by ``"\n"``; the
    running total is ``scanned_tokens + count(newContent)``; the first item whose total reaches
    the budget (``>=``) stops the loop, so it and every later item of the pass are out.

    Parameters
    ----------
    items:
        The pass's activated entries in SillyTavern's order (sticky first, then sorted order).
    content:
        An item's text, or ``None`` to skip it without counting (a failed probability roll,
        ``verifyProbability``). Called lazily in order, up to the overflowing item, as
        SillyTavern substitutes and rolls inside the loop.
    scanned_tokens:
        Tokens of the text earlier passes handed to recursion (``textToScanTokens``).
    budget:
        The World Info budget in tokens.
    count:
        Tokens of a text (``getTokenCountAsync``).

    Returns
    -------
    BudgetFill
        The items that fit with their texts, the running total, and where the loop stopped.
    """
    fill: BudgetFill[T] = BudgetFill()
    new_content = ""
    for i, item in enumerate(items):
        text = content(item)
        if text is None:
            continue
        new_content += text + "\n"
        total = scanned_tokens + int(count(new_content))
        if total >= budget:
            fill.overflow_at, fill.overflow_total = i, total
            break
        fill.kept.append((item, text))
        fill.used = total
    return fill
