"""Sorting and filtering of the Lorebook tab's table."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt

from ...roles import SORT_ROLE
from .table_model import LorebookEntriesModel


class EntriesProxy(QSortFilterProxyModel):
    """Sorts by :data:`gui.roles.SORT_ROLE`; filters by text and by "fired only".

    The source model is a :class:`~.table_model.LorebookEntriesModel`. "Fired only" keeps the
    entries that fired in the preview; test-text hits are not the preview and do not count.
    """

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)
        # rows keep their place when a preview updates them in place (a budget change must not
        # re-sort the table under the reader); the user's own sort click still sorts
        self.setDynamicSortFilter(False)
        self.fired_only = False

    def set_fired_only(self, value: bool) -> None:
        """Show only the entries that fired in the preview (``True``) or all (``False``)."""
        if hasattr(self, "beginFilterChange"):  # Qt ≥ 6.9; invalidateFilter is deprecated there
            self.beginFilterChange()
            self.fired_only = value
            self.endFilterChange()
        else:  # pragma: no cover - older Qt
            self.fired_only = value
            self.invalidateFilter()

    def refilter(self) -> None:
        """Apply "fired only" again after the rows were updated in place (a new preview, issue 31).

        The proxy does not re-filter on ``dataChanged`` (rows keep their place), so an entry
        that stopped or started firing would otherwise stay shown or hidden until a click.
        """
        if self.fired_only:
            self.set_fired_only(True)

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        if self.fired_only:
            source = self.sourceModel()
            assert isinstance(source, LorebookEntriesModel)
            trace = source.row_at(source_row).trace
            if trace is None or not trace.activated:
                return False
        return super().filterAcceptsRow(source_row, source_parent)
