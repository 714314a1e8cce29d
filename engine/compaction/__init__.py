"""Compaction: an LLM summary of old history when a chat nears its context limit (SPEC §4)."""

from __future__ import annotations

from .options import CHAT_KEY, MAX_FAILURES, CompactionOptions, strategy_host_options, thresholds

__all__ = ["CHAT_KEY", "MAX_FAILURES", "CompactionOptions", "strategy_host_options", "thresholds"]
