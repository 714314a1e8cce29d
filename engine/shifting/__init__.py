"""Context shifting: ``shift_context``, tool groups, the strategy registry."""

from __future__ import annotations

from .core import (
    TOKEN_BUDGET_EXCEEDED,
    TOOL_PAIR_INCOMPLETE,
    UNSENDABLE_REASONS,
    check_shift_result,
    shift_context,
    unsendable_positions,
)
from .groups import ToolGroups, find_tool_groups, tool_sequence_problems
from .recall import vector_recall_strategy
from .registry import (
    ContextStrategyRegistry,
    StrategyInfo,
    manual_strategy,
    register_builtin_strategies,
    truncate_strategy,
)
from .summarize import summarize_strategy

__all__ = [
    "TOKEN_BUDGET_EXCEEDED",
    "TOOL_PAIR_INCOMPLETE",
    "UNSENDABLE_REASONS",
    "ContextStrategyRegistry",
    "StrategyInfo",
    "ToolGroups",
    "check_shift_result",
    "find_tool_groups",
    "manual_strategy",
    "register_builtin_strategies",
    "shift_context",
    "summarize_strategy",
    "tool_sequence_problems",
    "truncate_strategy",
    "unsendable_positions",
    "vector_recall_strategy",
]
