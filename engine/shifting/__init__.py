"""Context shifting: each rule once over columns, its object view, tool groups, the strategy registry.

The rules: ``shift_columns``, ``explain_columns``, ``fit_columns`` over a ``BlockColumns``; their views over
block objects: ``shift_context``, ``explain_blocks``, ``fit_windows``.
"""

from __future__ import annotations

from .columns import BlockColumns, ColumnShift, ToolLayout, removal_tier
from .core import (
    TOKEN_BUDGET_EXCEEDED,
    TOOL_PAIR_INCOMPLETE,
    UNSENDABLE_REASONS,
    check_shift_result,
    shift_columns,
    shift_context,
    unsendable_positions,
)
from .explain import Explanation, explain_blocks, explain_columns
from .fitmap import fit_columns, fit_windows
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
    "BlockColumns",
    "ColumnShift",
    "ContextStrategyRegistry",
    "Explanation",
    "StrategyInfo",
    "ToolGroups",
    "ToolLayout",
    "check_shift_result",
    "explain_blocks",
    "explain_columns",
    "find_tool_groups",
    "fit_columns",
    "fit_windows",
    "manual_strategy",
    "register_builtin_strategies",
    "removal_tier",
    "shift_columns",
    "shift_context",
    "summarize_strategy",
    "tool_sequence_problems",
    "truncate_strategy",
    "unsendable_positions",
    "vector_recall_strategy",
]
