"""Lorebook (World Info) activation with a per-entry trace, and lorebook lint.

Public surface: :func:`activate`, :func:`test_text`, :func:`lint_lorebook`,
:func:`compute_budget`, :func:`clear_cache`, the result models, :data:`TRACE_CODES` and
:data:`LINT_CODES`. SillyTavern semantics (FORMATS.md b1–b3) with SPEC §5's deliberate
differences; see :mod:`engine.lorebook.activation`.

Modules: ``activation`` (the pass loop, budget, result), ``prepare`` (keys, contents, indexes,
cache), ``scan`` (multi-key scanning of chat, extra texts and recursion buffer), ``keys``
(macros, JS regex keys, Unicode-aware whole words, the multi-key matcher), ``groups``
(inclusion groups), ``timed`` (sticky/cooldown/delay), ``lint``, ``codes``, ``models``.
"""

from __future__ import annotations

from .activation import activate, clear_cache, compute_budget, test_text
from .codes import ACTIVATED_CODES, BLOCK_REASONS, TRACE_CODES
from .lint import LINT_CODES, lint_lorebook
from .models import ActivatedEntry, ActivationResult, LintFinding, LintReport, TraceRecord
from .timed import running_timers, without_new_timers

__all__ = [
    "ACTIVATED_CODES",
    "BLOCK_REASONS",
    "LINT_CODES",
    "TRACE_CODES",
    "ActivatedEntry",
    "ActivationResult",
    "LintFinding",
    "LintReport",
    "TraceRecord",
    "activate",
    "clear_cache",
    "compute_budget",
    "lint_lorebook",
    "running_timers",
    "test_text",
    "without_new_timers",
]
