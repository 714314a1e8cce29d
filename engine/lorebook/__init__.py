"""Lorebook (World Info) activation with a per-entry trace, and lorebook lint.

Public surface: :func:`activate`, :func:`test_text`, :func:`lint_lorebook`,
:func:`compute_budget`, the result models and :data:`TRACE_CODES`. SillyTavern semantics
(FORMATS.md b1–b3) with SPEC §5's deliberate differences; see :mod:`.activation`.
"""

from __future__ import annotations

from .activation import activate, compute_budget, test_text
from .codes import ACTIVATED_CODES, BLOCK_REASONS, TRACE_CODES
from .models import ActivatedEntry, ActivationResult, LintFinding, TraceRecord

__all__ = [
    "activate", "compute_budget", "test_text",
    "ACTIVATED_CODES", "BLOCK_REASONS", "TRACE_CODES",
    "ActivatedEntry", "ActivationResult", "LintFinding", "TraceRecord",
]
