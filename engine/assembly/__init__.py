"""Prompt assembly: macros and the stage registry."""

from __future__ import annotations

from .macros import MacroContext, expand_macros
from .stages import (
    BUILTIN_STAGES,
    AssemblyContext,
    DepthInsert,
    StageRegistry,
    assemble,
    register_builtin_stages,
)

__all__ = [
    "BUILTIN_STAGES",
    "AssemblyContext",
    "DepthInsert",
    "MacroContext",
    "StageRegistry",
    "assemble",
    "expand_macros",
    "register_builtin_stages",
]
