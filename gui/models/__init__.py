"""Thin read-only Qt models over frozen engine results."""

from __future__ import annotations

from .blocks_model import (
    BLOCK_ROLE,
    SORT_ROLE,
    BlockColumn,
    BlocksFilterProxy,
    BlocksTableModel,
)

__all__ = ["BLOCK_ROLE", "SORT_ROLE", "BlockColumn", "BlocksFilterProxy", "BlocksTableModel"]
