"""The main window: library | prompt blocks & chat | inspectors, with the budget bar on top.

Data flows one way (STYLE.md 4): widgets emit intents; the window turns pin / exclude /
lorebook edits into undo commands on the document; the document saves to the library and
asks for a debounced preview; the frozen result resets the views.

The window is the coordinator; its concerns live beside it: :mod:`gui.actions` (actions, menus,
toolbar), :mod:`gui.banners` (token summary, budget message, error banner), :mod:`gui.drop`
(import dialog, drag-and-drop), :mod:`gui.window_library` (import, delete, branch),
:mod:`gui.window_edits` (pin, exclude, edit, delete, send), :mod:`gui.window_generation`
(Generate and its outcome), :mod:`gui.window_state` (tabs, splitter, saved layout),
:mod:`gui.window_chat` (the library list, opening chats) and :mod:`gui.window_preview` (the
document and each preview → the views). The last seven are objects the window composes
(``drop``, ``library_actions``, ``edits``, ``generation_controller``, ``window_state``,
``opener``, ``presenter``), each given the window as the typed protocol of
:mod:`gui.window_parts` that names exactly what it uses.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.schema import ContextPreview, ContextSettings, LorebookEntry
from engine.schema.audit import PromptContextAudit

from .actions import build_actions
from .banners import Banner, budget_message, compaction_options, dedupe_lines, token_summary
from .commands import CommandRunner
from .context import AppContext
from .drop import IMPORT_FILTER, DropHandler
from .errors import UserError
from .generation import GenerationRunner
from .keyboard import install_keyboard
from .library_setup import LibrarySetup
from .preview.loader import ChatLoader
from .widgets.audit_inspector import AuditTab
from .widgets.block_inspector import BlockInspector
from .widgets.blocks_panel import BlocksPanel
from .widgets.budget_bar import BudgetBar
from .widgets.chat_view import ChatView
from .widgets.elided_label import ElidedLabel
from .widgets.library_panel import LibraryPanel
from .widgets.lorebook import LorebookTab
from .widgets.prompt_text_view import PromptTextView
from .widgets.settings_panel import SettingsPanel
from .widgets.speaker_picker import SpeakerPicker
from .widgets.tokens_chart import TokensChart
from .window_chat import ChatOpener
from .window_edits import MANUAL_STRATEGY, ST_NO_PINNING, ChatEdits
from .window_generation import GenerationController
from .window_library import LibraryActions
from .window_preview import PreviewPresenter, newest_prose_message
from .window_state import CENTRE_PREFERRED_W, INSPECTOR_MIN_W, INSPECTOR_WIDTH, LIBRARY_NARROW_W, WindowState

if TYPE_CHECKING:
    from engine.generation import ProviderConfig
    from engine.storage import ImportRef

    from .widgets.lorebook_report_dialog import LorebookReportDialog


log = logging.getLogger(__name__)

#: Re-exported: the names other modules and tests read from here.
__all__ = ["CENTRE_PREFERRED_W", "IMPORT_FILTER", "INSPECTOR_MIN_W", "INSPECTOR_WIDTH", "LIBRARY_NARROW_W",
           "MANUAL_STRATEGY", "ST_NO_PINNING", "MainWindow", "budget_message", "compaction_options", "dedupe_lines",
           "newest_prose_message", "token_summary"]

class MainWindow(QMainWindow):
    """Loomscope's window.

    Parts it composes (:mod:`gui.window_parts`): ``window_state`` (:class:`WindowState`),
    ``drop`` (:class:`DropHandler`), ``library_actions`` (:class:`LibraryActions`), ``edits``
    (:class:`ChatEdits`), ``generation_controller`` (:class:`GenerationController`), ``opener``
    (:class:`ChatOpener`) and ``presenter`` (:class:`PreviewPresenter`); the methods of theirs that
    menus, tests and other modules call are forwarded one line each.

    Signals
    -------
    preview_applied(object ContextPreview | None)   # views updated with a new preview
    error_shown(object UserError)                   # an error was shown to the user
    """

    preview_applied = Signal(object)
    error_shown = Signal(object)

    # built by gui.actions.build_actions
    undo_action: QAction
    redo_action: QAction
    undo_menu_action: QAction
    redo_menu_action: QAction
    import_action: QAction
    delete_action: QAction
    quit_action: QAction
    generate_action: QAction
    cancel_action: QAction
    provider_action: QAction
    refresh_action: QAction
    lorebook_report_action: QAction

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("mainWindow")
        self.setWindowTitle("Loomscope")
        self.setAcceptDrops(True)
        #: The audit the Audit tab shows (the open chat's last one, read with the chat).
        self.audit: PromptContextAudit | None = None
        #: Reads chats on a worker so that opening a big chat never blocks the window.
        self.chat_loader = ChatLoader(ctx.store, parent=self) if ctx.store is not None else None
        #: The document and each finished preview → the views (:mod:`gui.window_preview`).
        self.presenter = PreviewPresenter(self)
        #: Asks the user yes/no; replaced in tests.
        self.confirm = self._confirm_dialog
        #: Asks for a text (title, current text) → new text or ``None``; replaced in tests.
        self.ask_text = self._ask_text_dialog

        self.library = LibraryPanel(self)
        centre = self._build_centre()
        self._build_inspector()
        self.window_state = WindowState(self)
        self._build_splitter(centre)

        #: Every user action that can fail runs through it (one error handler, git-cola ``cmds.do``).
        self.commands = CommandRunner(ctx.undo_stack, self.show_error)
        self.opener = ChatOpener(self, self.chat_loader)
        self.generation = GenerationRunner(self)
        self.drop = DropHandler(self)
        self.library_actions = LibraryActions(self)
        self.edits = ChatEdits(self)
        self.generation_controller = GenerationController(self, self.generation)
        build_actions(self)
        self._wire()
        self.library_setup = LibrarySetup(self)  # issue 18: library panels, setup and entry editors
        self.library_setup.export_action.setEnabled(False)  # until a chat is open (issue 31)
        self.shortcuts = install_keyboard(self)  # Alt+1…5, Ctrl+Tab, Tab passes on, focus ring (issue 31)
        self.statusBar().showMessage("Ready")

    # ================================================================ building
    def _build_centre(self) -> QWidget:
        """The centre column: title and badge, token summary, budget bar, tokens chart, banner, tabs."""
        self.budget_bar = BudgetBar(self)
        self.tokens_chart = TokensChart(self)
        self.banner = Banner(self)
        self.blocks_panel = BlocksPanel(self)
        self.chat_view = ChatView(self)
        self.centre_tabs = QTabWidget(self)
        self.centre_tabs.setObjectName("centreTabs")
        self.centre_tabs.addTab(self.blocks_panel, "Prompt blocks")
        self.centre_tabs.addTab(self.chat_view, "Chat")
        self.prompt_text_view = PromptTextView(self)  # issue 26: the exact string sent, blocks shaded
        self.centre_tabs.addTab(self.prompt_text_view, "Prompt text")
        centre = QWidget(self)
        cl = QVBoxLayout(centre)
        cl.setContentsMargins(4, 4, 4, 4)
        # the title elides (full title as tooltip); the token summary gets a row of its own so a
        # long title or a wide inspector never cuts it
        self.title_label = ElidedLabel("", self, always_tooltip=True)
        self.title_label.setObjectName("chatTitle")
        self.title_label.setStyleSheet("font-weight: bold; font-size: 13pt;")
        self.status_label = ElidedLabel("", self)
        self.status_label.setObjectName("tokenSummary")
        self.status_label.setStyleSheet("color: #444;")
        head = QHBoxLayout()
        self.approx_badge = QLabel("≈ approximate counts", self)
        self.approx_badge.setObjectName("headerApproxBadge")
        self.approx_badge.setStyleSheet("QLabel#headerApproxBadge { background: #fff3cd; color: #7a5a00; "
                                        "border: 1px solid #e0c060; border-radius: 3px; padding: 1px 5px; }")
        self.approx_badge.hide()
        self.speaker_picker = SpeakerPicker(self)  # a group chat's next speaker (issue 27 item 7)
        head.addWidget(self.title_label, 1)
        head.addWidget(self.speaker_picker)
        head.addWidget(self.approx_badge)
        cl.addLayout(head)
        cl.addWidget(self.status_label)
        cl.addWidget(self.budget_bar)
        cl.addWidget(self.tokens_chart)
        cl.addWidget(self.banner)
        cl.addWidget(self.centre_tabs, 1)
        return centre

    def _build_inspector(self) -> None:
        """The inspector column's tabs: Block, Lorebook, Audit, Settings."""
        self.block_inspector = BlockInspector(self.ctx, self)
        self.block_inspector.profile_resolver = self.presenter.preview_profile
        self.lorebook_tab = LorebookTab(self.ctx, self)
        self.audit_tab = AuditTab(self.ctx, self)
        self.settings_panel = SettingsPanel(self.ctx.registries, self)
        self.inspector_tabs = QTabWidget(self)
        self.inspector_tabs.setObjectName("inspectorTabs")
        self.inspector_tabs.addTab(self.block_inspector, "Block")
        self.inspector_tabs.addTab(self.lorebook_tab, "Lorebook")
        self.inspector_tabs.addTab(self.audit_tab, "Audit")
        self.inspector_tabs.addTab(self.settings_panel, "Settings")

    def _build_splitter(self, centre: QWidget) -> None:
        """Library | centre | inspector, with the default widths until a saved layout is restored."""
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.library)
        self.splitter.addWidget(centre)
        self.splitter.addWidget(self.inspector_tabs)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setStretchFactor(2, 1)  # the inspector grows with the window too (issue 31)
        # the inspector keeps its width when another tab (a wider form) is shown: its pages scroll
        # or elide instead of squeezing the prompt blocks
        self.inspector_tabs.setMinimumWidth(INSPECTOR_MIN_W)
        self.splitter.setCollapsible(0, False)
        self.window_state.apply_default_sizes()
        self.setCentralWidget(self.splitter)

    # ================================================================ setup
    def _wire(self) -> None:
        ctx = self.ctx
        doc = ctx.document
        ctx.preview.set_snapshot_provider(doc.snapshot)
        # the worker compares each new preview with the one the table shows, while the UI thread waits
        ctx.preview.set_derive(self.presenter.derive_maker)
        ctx.preview.preview_ready.connect(self.presenter.on_preview_ready)
        ctx.preview.preview_started.connect(lambda _g: self.status_label.setText("computing preview…"))
        doc.flags_changed.connect(lambda _i: ctx.preview.schedule(immediate=True))  # a click: no debounce
        doc.request_changed.connect(ctx.preview.schedule)
        doc.request_changed.connect(self._on_document_request_changed)
        doc.messages_changed.connect(self.presenter.messages_changed)
        doc.message_changed.connect(self.presenter.message_changed)
        doc.chat_loaded.connect(self.opener.chat_loaded)
        doc.setup_changed.connect(lambda: self.speaker_picker.set_group(doc.group(), doc.group_speaker))
        self.speaker_picker.speaker_chosen.connect(doc.set_group_speaker)
        # a chat just opened has nothing to wait for: its preview starts at once (the edits'
        # debounce that request_changed asks for joins it)
        doc.chat_loaded.connect(lambda _c: ctx.preview.schedule(immediate=True))
        self.blocks_panel.model.pin_toggled.connect(self.edits.set_pinned)
        self.blocks_panel.model.exclude_toggled.connect(self.edits.set_excluded)
        self.blocks_panel.model.flags_rolled_back.connect(self.presenter.flags_rolled_back)
        self.blocks_panel.block_selected.connect(self.presenter.block_selected)
        self.prompt_text_view.block_clicked.connect(self._on_prompt_text_view_block_clicked)
        self.chat_view.pin_toggled.connect(self.edits.set_pinned)
        self.chat_view.exclude_toggled.connect(self.edits.set_excluded)
        self.chat_view.branch_requested.connect(self.library_actions.branch_chat)
        self.chat_view.message_submitted.connect(self.edits.append_user_message)
        self.chat_view.generate_requested.connect(self.generation_controller.generate)
        self.chat_view.summary_remove_requested.connect(self.generation_controller.remove_compaction_summary)
        self.chat_view.compaction_reset_requested.connect(self.ctx.document.reset_compaction_failures)
        self.chat_view.message_selected.connect(self.blocks_panel.select_message)
        self.chat_view.edit_requested.connect(self.edits.edit_message)
        self.chat_view.delete_requested.connect(self.edits.delete_message)
        self.chat_view.hide_toggled.connect(self.edits.set_hidden)
        self.tokens_chart.message_clicked.connect(self._on_tokens_chart_message_clicked)
        self.lorebook_tab.entry_edited.connect(self.edits.edit_lorebook_entry)
        self.settings_panel.settings_edited.connect(self.edits.edit_settings)
        self.library.chat_selected.connect(self.open_chat)
        self.library.import_requested.connect(self.drop.ask_import_files)
        self.library.delete_requested.connect(self.library_actions.delete_chat)
        self.library.selection_changed.connect(lambda cid: self.delete_action.setEnabled(bool(cid)))

    # ================================================================ parts (forwarded)
    def select_tab(self, name: str) -> bool:
        """Show tab ``name`` (:meth:`WindowState.select_tab`)."""
        return self.window_state.select_tab(name)

    def restore_state(self) -> None:
        """Window geometry, layout, splitter sizes and tabs from ``QSettings`` (:meth:`WindowState.restore`)."""
        self.window_state.restore()

    def save_state(self) -> None:
        """Persist geometry, layout, splitter sizes, tabs and the open chat (:meth:`WindowState.save`)."""
        self.window_state.save()

    def default_splitter_sizes(self, width: int | None = None) -> list[int]:
        """``[library, centre, inspector]`` in px (:meth:`WindowState.default_splitter_sizes`)."""
        return self.window_state.default_splitter_sizes(width)

    def ask_import_files(self) -> None:
        """*File → Import…* (:meth:`DropHandler.ask_import_files`)."""
        self.drop.ask_import_files()

    def import_files(self, paths: list[str]) -> list[ImportRef]:
        """Import ``paths`` in one transaction (:meth:`LibraryActions.import_files`)."""
        return self.library_actions.import_files(paths)

    def delete_chat(self, chat_id: str | None) -> bool:
        """Delete ``chat_id`` after confirmation (:meth:`LibraryActions.delete_chat`)."""
        return self.library_actions.delete_chat(chat_id)

    def branch_chat(self, message_index: int) -> str | None:
        """Fork the open chat at ``message_index`` (:meth:`LibraryActions.branch_chat`)."""
        return self.library_actions.branch_chat(message_index)

    def generate(self) -> bool:
        """Generate a reply for the open chat (:meth:`GenerationController.generate`)."""
        return self.generation_controller.generate()

    def edit_provider(self) -> bool:
        """The provider settings dialog (:meth:`GenerationController.edit_provider`)."""
        return self.generation_controller.edit_provider()

    def provider_config(self) -> ProviderConfig:
        """The provider configuration (:meth:`GenerationController.provider_config`)."""
        return self.generation_controller.provider_config()

    def _setup_server_url(self) -> str | None:
        """A Text Completion chat's server URL (:meth:`GenerationController.setup_server_url`)."""
        return self.generation_controller.setup_server_url()

    def show_lorebook_report(self) -> LorebookReportDialog:
        """*Lorebook → Report* (:meth:`GenerationController.show_lorebook_report`)."""
        return self.generation_controller.show_lorebook_report()

    def remove_compaction_summary(self) -> bool:
        """Remove the compaction summary (:meth:`GenerationController.remove_compaction_summary`)."""
        return self.generation_controller.remove_compaction_summary()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        self.drop.drag_entered(event)

    def dropEvent(self, event: QDropEvent) -> None:
        self.drop.dropped(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.window_state.on_resized()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.window_state.on_shown()

    # ================================================================ library (forwarded)
    def refresh_library(self) -> None:
        """Re-read the chat list from the store (:meth:`ChatOpener.refresh_library`)."""
        self.opener.refresh_library()

    def open_chat(self, chat_id: str | None) -> None:
        """Open ``chat_id`` from the store, the preview follows; ``None`` closes the chat
        (:meth:`ChatOpener.open_chat`)."""
        self.opener.open_chat(chat_id)

    def is_loading(self) -> bool:
        """``True`` while a chat is being read on the worker (:meth:`ChatOpener.is_loading`)."""
        return self.opener.is_loading()

    def start(self, chat_id: str | None = None) -> None:
        """Fill the library and open ``chat_id``, else the last chat, else the most recent
        (:meth:`ChatOpener.start`)."""
        self.opener.start(chat_id)

    # ================================================================ edits (forwarded)
    def set_pinned(self, message_index: int, value: bool) -> None:
        """Pin / unpin a message (:meth:`ChatEdits.set_pinned`)."""
        self.edits.set_pinned(message_index, value)

    def set_excluded(self, message_index: int, value: bool) -> None:
        """Exclude / include a message by hand (:meth:`ChatEdits.set_excluded`)."""
        self.edits.set_excluded(message_index, value)

    def set_hidden(self, message_index: int, value: bool) -> None:
        """Hide / unhide a message (:meth:`ChatEdits.set_hidden`)."""
        self.edits.set_hidden(message_index, value)

    def edit_message(self, message_index: int, text: str | None = None) -> bool:
        """Replace a message's text (:meth:`ChatEdits.edit_message`)."""
        return self.edits.edit_message(message_index, text)

    def delete_message(self, message_index: int) -> bool:
        """Delete one message (:meth:`ChatEdits.delete_message`)."""
        return self.edits.delete_message(message_index)

    def edit_lorebook_entry(self, lorebook_id: str, old: LorebookEntry, new: LorebookEntry) -> None:
        """A lorebook entry edit (:meth:`ChatEdits.edit_lorebook_entry`)."""
        self.edits.edit_lorebook_entry(lorebook_id, old, new)

    def _on_settings_panel_settings_edited(self, settings: ContextSettings) -> None:
        self.edits.edit_settings(settings)

    def _ask_text_dialog(self, title: str, text: str) -> str | None:
        value, ok = QInputDialog.getMultiLineText(self, title, "Message text:", text)
        return value if ok else None

    # ================================================================ previews (forwarded)
    @property
    def preview(self) -> ContextPreview | None:
        """The preview the views show (:attr:`PreviewPresenter.preview`)."""
        return self.presenter.preview

    @property
    def rollback_note(self) -> str:
        """The last "the preview did not confirm your click" note (:attr:`PreviewPresenter.rollback_note`)."""
        return self.presenter.rollback_note

    def apply_preview(self, preview: ContextPreview | None, elapsed_s: float = 0.0, *, emit: bool = True) -> None:
        """Show ``preview`` in every view (:meth:`PreviewPresenter.apply_preview`)."""
        self.presenter.apply_preview(preview, elapsed_s, emit=emit)

    def _on_document_request_changed(self) -> None:
        req = self.ctx.document.request
        if req is not None and req.settings != self.settings_panel.settings():
            self.settings_panel.set_settings(req.settings)

    def _on_prompt_text_view_block_clicked(self, index: int) -> None:
        """A block clicked in the Prompt text view: select its row in the blocks table."""
        idx = self.blocks_panel.proxy.mapFromSource(self.blocks_panel.model.index(index, 0))
        if idx.isValid():
            self.blocks_panel.table.setCurrentIndex(idx)

    def _on_tokens_chart_message_clicked(self, message_index: int) -> None:
        self.chat_view.scroll_to_message(message_index)
        self.blocks_panel.select_message(message_index)

    # ================================================================ errors & dialogs
    def show_error(self, error: UserError, title: str = "Error") -> None:
        """Show ``error`` (mapped from its stable code) without blocking."""
        log.info("%s: %s", error.code, error.text)
        self.error_shown.emit(error)
        box = QMessageBox(QMessageBox.Icon.Warning, title, error.text, QMessageBox.StandardButton.Ok, self)
        details = [f"Code: {error.code}"]
        if error.file:
            details.append(f"File: {error.file}")
        if error.place:
            details.append(f"Where: {error.place}")
        box.setInformativeText("\n".join(details))
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    def _confirm_dialog(self, title: str, text: str) -> bool:
        return QMessageBox.question(self, title, text) == QMessageBox.StandardButton.Yes

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_state()
        self.generation.wait(3000)
        if self.chat_loader is not None:
            self.chat_loader.shutdown()
        self.ctx.preview.shutdown()
        super().closeEvent(event)
