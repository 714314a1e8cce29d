"""``ContextStrategyRegistry``: named context strategies (SPEC §3, setting ``contextStrategy``).

A strategy is ``fn(blocks, count_tokens, budget, options) -> ShiftResult``. Built-ins register
through the same API as plugins; ``register`` returns a cleanup callable that unregisters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..registry import NamedRegistry
from ..schema.blocks import Block, ShiftResult
from .core import shift_context
from .recall import vector_recall_strategy
from .summarize import summarize_strategy


class Strategy(Protocol):
    """A context strategy: fits blocks into ``budget`` tokens and says why for each block."""

    def __call__(self, blocks: Sequence[Block], count_tokens: Callable[[Block], int],
                 budget: int, options: dict[str, Any]) -> ShiftResult:
        """Fit ``blocks`` into ``budget`` tokens (each block counted by ``count_tokens``) under ``options``."""
        ...


@dataclass(frozen=True)
class StrategyInfo:
    """A registered strategy with its description (shown in the settings panel).

    ``honors_manual``: the strategy promises never to send a message the writer excluded
    (``meta.manualExcluded``); the host check then rejects a result that keeps one.
    """

    name: str
    fn: Strategy
    description: str
    honors_manual: bool = False


class ContextStrategyRegistry(NamedRegistry[StrategyInfo]):
    """Named strategies; duplicate names raise ``SettingsError(DUPLICATE_REGISTRATION)``."""

    kind = "strategy"
    unknown_code = "UNKNOWN_STRATEGY"

    def register(self, name: str, fn: Strategy, description: str = "", *,
                 honors_manual: bool = False) -> Callable[[], None]:
        """Add strategy ``name``; returns a callable that removes it again.

        ``honors_manual=True`` declares that the strategy never keeps a message the writer
        excluded; the pipeline's host check holds it to that.
        """
        return self._add(name, StrategyInfo(name, fn, description, honors_manual))


def truncate_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int],
                      budget: int, options: dict[str, Any]) -> ShiftResult:
    """``truncate``: examples first, then oldest history groups, then lowest-priority lore/memory."""
    return shift_context(blocks, count_tokens, budget, honor_manual=False)


def manual_strategy(blocks: Sequence[Block], count_tokens: Callable[[Block], int],
                    budget: int, options: dict[str, Any]) -> ShiftResult:
    """``manual``: the user's exclusions (with their tool groups) first, then like ``truncate``."""
    return shift_context(blocks, count_tokens, budget, honor_manual=True)


def register_builtin_strategies(registry: ContextStrategyRegistry) -> list[Callable[[], None]]:
    """Register ``truncate``, ``manual``, ``summarize`` and ``vector-recall``.

    Returns their cleanup callables. The fifth built-in, ``compact``, belongs to the compaction
    package, a layer above the shifting rules it uses: :func:`engine.registries.default_registries`
    registers it after these (:func:`engine.compaction.strategy.register_compact_strategy`).
    """
    return [
        registry.register("truncate", truncate_strategy,
                          "drop example dialogue, then the oldest history, then low-priority lore"),
        registry.register("manual", manual_strategy,
                          "drop the messages you excluded first, then like truncate", honors_manual=True),
        registry.register("summarize", summarize_strategy,
                          "like manual, but fold the oldest history into a local extractive summary",
                          honors_manual=True),
        registry.register("vector-recall", vector_recall_strategy,
                          "drop the lorebook and memory blocks least relevant to the recent conversation "
                          "first, then the oldest history", honors_manual=True),
    ]
