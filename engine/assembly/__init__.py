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

__all__ = ["MacroContext", "expand_macros", "BUILTIN_STAGES", "AssemblyContext", "DepthInsert",
           "StageRegistry", "assemble", "register_builtin_stages"]
