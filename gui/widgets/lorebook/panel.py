"""The Lorebook tab: the World Info entries a chat uses, why each fired, an entry form and a test box.

One table row per entry of every lorebook the chat's World Info uses (book order, then entry
order) with its settings and, from the current preview's ``lorebook_trace``, whether it fired,
why (the trace code in words plus its evidence), its tokens and its share of the lorebook
budget. Below: an entry form and a "test text" box that runs ``engine.pipeline.activate_text`` on
a worker and marks the entries the text would trigger.

Data flows one way (STYLE.md 4): the table model is a read-only adapter; its check boxes and
the form emit :attr:`LorebookTab.entry_edited` ``(lorebook_id, old_entry, new_entry)`` and the
main window routes that through its undo stack and store, then calls :meth:`LorebookTab.set_state`
again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.errors import LoomscopeError
from engine.lorebook import TraceRecord
from engine.resolve import chat_lorebooks, lorebook_budget, model_profile_and_limit
from engine.schema import ContextPreview, Lorebook, PreviewRequest
from engine.tokenizers import TokenizerRegistry

from ...roles import ROW_ROLE
from ...theme import is_dark
from .entry_form import EntryForm
from .proxy import EntriesProxy
from .rows import EntryRow, TraceKey, build_rows, index_trace, trace_key
from .table_model import COLUMN_INDEX, LorebookEntriesModel
from .test_text import TextTestOutcome, TextTestRunner, describe_result, highlight_keys

if TYPE_CHECKING:
    from ...context import AppContext

#: Delay between the last keystroke in the test box and the test run (ms).
TEST_TEXT_DEBOUNCE_MS = 300


class LorebookTab(QWidget):
    """The lorebook inspector tab.

    Parameters
    ----------
    ctx:
        The application context (may be ``None``). ``ctx.registries.tokenizers`` resolves the
        tokenizer profile (budget, test box); the built-in profiles without a context.
    parent:
        Qt parent.

    Signals
    -------
    entry_edited(str lorebook_id, object old_entry, object new_entry)
        The user changed an entry (``new_entry = old_entry.model_copy(update=...)``). The tab
        does not store it; the owner routes it through the undo stack and calls
        :meth:`set_state` with the new request and preview.
    test_text_finished(object TextTestOutcome)
        A test-text run finished and its marks are shown (the latest run only).
    """

    entry_edited = Signal(str, object, object)
    test_text_finished = Signal(object)

    def __init__(self, ctx: AppContext | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._ctx = ctx
        self._request: PreviewRequest | None = None
        self._preview: ContextPreview | None = None
        self._ids: list[str] = []
        self._books: list[Lorebook] = []
        self._budget = 0
        self._test_trace: dict[TraceKey, TraceRecord] | None = None
        self._selected_key: TraceKey | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.summary = QLabel("No chat open.")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        layout.addLayout(self._build_filter_bar())
        self._build_table()
        self.form = EntryForm()
        form_scroll = QScrollArea()
        form_scroll.setWidgetResizable(True)
        form_scroll.setWidget(self.form)
        self.form.setTitle("")
        self.form.setFlat(True)
        # Tabs rather than side by side: the inspector panel is often under 500 px wide.
        self.bottom_tabs = QTabWidget()
        self.bottom_tabs.addTab(form_scroll, "Entry")
        self.bottom_tabs.addTab(self._build_test_box(), "Test text")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.bottom_tabs)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)

        self._test_timer = QTimer(self)
        self._test_timer.setSingleShot(True)
        self._test_timer.setInterval(TEST_TEXT_DEBOUNCE_MS)
        self._test_timer.timeout.connect(self.run_test_text)
        self.test_runner = TextTestRunner(parent=self)
        self._connect()

    def _build_filter_bar(self) -> QHBoxLayout:
        """The filter box and "Fired only"."""
        bar = QHBoxLayout()
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter entries (title, keys, book)…")
        self.filter_edit.setClearButtonEnabled(True)
        self.fired_only = QCheckBox("Fired only")
        self.fired_only.setToolTip("Show only the entries that fired in the preview (test-text hits are "
                                   "marked in the Test column)")
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.fired_only)
        return bar

    def _build_table(self) -> None:
        """The entries table over its sorting / filtering proxy."""
        self.model = LorebookEntriesModel(self)
        self.proxy = EntriesProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(-1, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        for key, width in (("book", 72), ("entry", 136), ("keys", 150), ("secondary", 100), ("logic", 70),
                           ("constant", 70), ("enabled", 64), ("order", 52), ("position", 120),
                           ("depth", 48), ("probability", 76), ("scan_depth", 72), ("fired", 86),
                           ("why", 380), ("tokens", 56), ("share", 86), ("test", 150)):
            self.table.setColumnWidth(COLUMN_INDEX[key], width)

    def _build_test_box(self) -> QWidget:
        """The "Test text" tab: a text box, Test, and what the text would trigger."""
        test_box = QWidget()
        test_layout = QVBoxLayout(test_box)
        self.test_edit = QPlainTextEdit()
        self.test_edit.setPlaceholderText("Type or paste text to see which entries it would trigger…")
        self.test_button = QPushButton("Test")
        self.test_button.setToolTip("Run World Info activation on this text (Ctrl+Return)")
        self.test_result = QLabel("")
        self.test_result.setWordWrap(True)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        test_layout.addWidget(self.test_edit, 2)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.test_button)
        test_layout.addLayout(row)
        test_layout.addWidget(self.test_result, 1)
        return test_box

    def _connect(self) -> None:
        self.filter_edit.textChanged.connect(self.proxy.setFilterFixedString)
        self.fired_only.toggled.connect(self.proxy.set_fired_only)
        self.table.selectionModel().currentRowChanged.connect(self._on_table_current_row_changed)
        self.model.edit_requested.connect(self._on_model_edit_requested)
        self.form.apply_requested.connect(self._on_form_apply_requested)
        self.test_button.clicked.connect(self.run_test_text)
        self.test_edit.textChanged.connect(self._test_timer.start)
        self.test_runner.finished.connect(self._on_test_runner_finished)
        QShortcut(QKeySequence("Ctrl+Return"), self.test_edit).activated.connect(self.run_test_text)

    # ------------------------------------------------------------------ public API
    def set_state(self, request: PreviewRequest | None, preview: ContextPreview | None,
                  lorebook_ids: list[str]) -> None:
        """Show the lorebooks of ``request`` with the activation trace of ``preview``.

        A text in the test box is tested again on the worker; its marks stay until the new
        result arrives (:attr:`test_text_finished`).

        Parameters
        ----------
        request:
            The chat's ``PreviewRequest`` (``None``: no chat open).
        preview:
            The current ``ContextPreview`` (``None``: not computed yet).
        lorebook_ids:
            Library ids parallel to ``request.lorebooks``; empty when unknown (rows are then
            read-only).
        """
        self._request = request
        self._preview = preview
        self._ids = list(lorebook_ids or [])
        self._books = chat_lorebooks(request) if request is not None else []
        self._budget = self._lorebook_budget(request, preview)
        if self.test_edit.toPlainText().strip() and request is not None:
            self._submit_test(self.test_edit.toPlainText())
        else:
            self.test_runner.cancel()
            self._test_trace = None
        self._rebuild()

    def rows(self) -> list[EntryRow]:
        """The rows shown (all books, book order), for tests and the screenshot."""
        return self.model.rows()

    def select_entry(self, book_index: int, uid: Any, *, scroll: bool = True) -> bool:
        """Select the row of entry ``uid`` in book ``book_index``; ``False`` when absent."""
        key = trace_key(book_index, uid)
        for i, row in enumerate(self.model.rows()):
            if row.key == key:
                proxy_index = self.proxy.mapFromSource(self.model.index(i, 0))
                if not proxy_index.isValid():
                    return False
                self.table.setCurrentIndex(proxy_index)
                if scroll:
                    self.table.scrollTo(proxy_index)
                return True
        return False

    def run_test_text(self) -> int | None:
        """Test the text of the test box on the worker; the marks follow with :attr:`test_text_finished`.

        Returns
        -------
        int or None
            The generation number of the run, or ``None`` when nothing was submitted (no chat
            open, or an empty box: the marks are cleared at once).
        """
        self._test_timer.stop()
        text = self.test_edit.toPlainText()
        if self._request is None:
            self.test_result.setText("Open a chat first.")
            return None
        if not text.strip():
            self.test_runner.cancel()
            self._test_trace = None
            self.test_result.setText("")
            self.test_edit.setExtraSelections([])
            self._rebuild()
            return None
        return self._submit_test(text)

    # ------------------------------------------------------------------ internals
    def _tokenizers(self) -> TokenizerRegistry | None:
        return self._ctx.registries.tokenizers if self._ctx is not None else None

    def _lorebook_budget(self, request: PreviewRequest | None, preview: ContextPreview | None) -> int:
        """The lorebook budget (tokens) of ``request``'s World Info; 0 when the settings do not resolve.

        The percentage applies to the prompt budget: the preview's own (``preview.budget``, the
        one its trace was computed with) when there is one, else what the engine resolves for
        the settings.
        """
        if request is None:
            return 0
        if preview is not None:
            return lorebook_budget(request.settings, preview.budget)
        try:
            resolved = model_profile_and_limit(request.settings, self._tokenizers())
        except LoomscopeError:  # the preview reports the same error; no budget to show
            return 0
        return lorebook_budget(request.settings, resolved.budget)

    def _submit_test(self, text: str) -> int:
        assert self._request is not None
        return self.test_runner.submit(self._request, text, self._tokenizers())

    def _on_test_runner_finished(self, outcome: TextTestOutcome) -> None:
        if self._request is None:
            return
        if outcome.error is not None or outcome.result is None:
            err = outcome.error
            self.test_result.setText(f"Test failed: {err.text} ({err.code})" if err is not None else "")
            self._test_trace = None
        else:
            self._test_trace = index_trace(outcome.result.trace)
            self.test_result.setText(describe_result(outcome.result, self._test_trace))
            if outcome.text == self.test_edit.toPlainText():
                highlight_keys(self.test_edit, outcome.result.trace)
        self._rebuild()
        self.test_text_finished.emit(outcome)

    def _build_rows(self) -> list[EntryRow]:
        request = self._request
        if request is None:
            return []
        preview = self._preview
        trace = index_trace(preview.lorebook_trace) if preview is not None else None
        return build_rows(self._books, listed=len(request.lorebooks), lorebook_ids=self._ids,
                          trace=trace, test=self._test_trace, budget=self._budget)

    def _rebuild(self) -> None:
        keep_key = self._selected_key
        form_row = self.form.row()
        dirty = self.form.is_dirty()
        rows = self._build_rows()
        vbar, hbar = self.table.verticalScrollBar(), self.table.horizontalScrollBar()
        scroll = (vbar.value(), hbar.value())
        self.model.set_rows(rows, dark=is_dark(self))
        self.proxy.refilter()
        single_book = len({r.book_index for r in rows}) <= 1
        self.table.setColumnHidden(COLUMN_INDEX["book"], single_book)
        self._update_summary(rows)
        new_row = next((r for r in rows if keep_key is not None and r.key == keep_key), None)
        if new_row is not None:
            self.table.selectionModel().blockSignals(True)
            self.select_entry(new_row.book_index, new_row.entry.uid, scroll=False)
            self.table.selectionModel().blockSignals(False)
        # A live preview refresh must not move the table under the reader.
        vbar.setValue(scroll[0])
        hbar.setValue(scroll[1])
        if new_row is None:
            self._selected_key = None
            self.form.load(None)
        elif dirty and form_row is not None and form_row.key == new_row.key:
            # Re-base the form on the new entry and keep only the edits it does not already
            # hold: an applied edit comes back clean, typing in progress survives a preview.
            pending = self.form.changes()
            self.form.load(new_row)
            remaining = {k: v for k, v in pending.items() if getattr(new_row.entry, k, None) != v}
            if remaining:
                self.form.set_values(remaining)
        else:
            self.form.load(new_row)

    def _update_summary(self, rows: list[EntryRow]) -> None:
        request = self._request
        if request is None:
            self.summary.setText("No chat open.")
            return
        books = len(self._books)
        if not books:
            self.summary.setText("No lorebook is attached to this chat.")
            return
        unknown_ids = any(not r.editable and not r.embedded for r in rows)
        read_only = "<br><i>Read-only: the library ids of these books are not known.</i>" if unknown_ids else ""
        text = f"{books} lorebook{'s' if books != 1 else ''} · {len(rows)} entries"
        if self._preview is None:
            self.summary.setText(text + " · preview pending…" + read_only)
            return
        fired = [r for r in rows if r.trace is not None and r.trace.activated]
        dropped = [r for r in rows if r.trace is not None and r.trace.code == "LOREBOOK_BUDGET"]
        used = sum(r.tokens or 0 for r in fired)
        budget = self._budget
        text += f" · <b>{len(fired)} fired</b> in the preview"
        if dropped:
            text += f" · {len(dropped)} over budget"
        if budget:
            text += f" · {used:,} / {budget:,} lorebook tokens ({used / budget * 100:.0f} %)"
        self.summary.setText(text + read_only)

    def _emit_edit(self, row: EntryRow, update: dict[str, Any]) -> None:
        if not row.editable or not update:
            return
        new_entry = row.entry.model_copy(update=update)
        self.entry_edited.emit(row.lorebook_id, row.entry, new_entry)

    def _on_model_edit_requested(self, source_row: int, update: dict) -> None:
        self._emit_edit(self.model.row_at(source_row), update)

    def _on_form_apply_requested(self) -> None:
        row = self.form.row()
        if row is None:
            return
        self._emit_edit(row, self.form.changes())

    def _on_table_current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        row = self.proxy.data(current, ROW_ROLE)
        if row is None:
            return
        self._selected_key = row.key
        self.form.load(row)
