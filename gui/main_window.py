"""The main window: library | prompt blocks & chat | inspectors, with the budget bar on top.

Data flows one way (STYLE.md 4): widgets emit intents; the window turns pin / exclude /
lorebook edits into undo commands on the document; the document saves to the library and
asks for a debounced preview; the frozen result resets the views.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine.compaction.options import CompactionOptions
from engine.errors import LoomscopeError
from engine.resolve import honours_exclusions, speaker_names
from engine.schema import ChatMessage, ContextPreview, ContextSettings, LorebookEntry, PreviewBlock, ProgressEvent
from engine.schema.audit import PromptContextAudit

from .commands import CommandRunner
from .context import AppContext
from .document import LoadedChat
from .errors import UserError, message_for, user_error
from .generation import GenerationRunner
from .models.pending import FlagRollback
from .preview import PreviewOutcome
from .preview.loader import ChatLoader
from .tabs import CENTRE_TABS, INSPECTOR_TABS
from .undo import (
    CompactionSummaryCommand,
    DeleteMessageCommand,
    EditLorebookEntryCommand,
    EditMessageCommand,
    SetMessageFlagCommand,
    SetSettingsCommand,
)
from .widgets.audit_inspector import AuditTab
from .widgets.block_inspector import BlockInspector
from .widgets.blocks_panel import BlocksPanel
from .widgets.budget_bar import BudgetBar
from .widgets.chat_view import ChatView
from .widgets.elided_label import ElidedLabel
from .widgets.library_panel import DEFAULT_WIDTH as LIBRARY_WIDTH
from .widgets.library_panel import LibraryPanel
from .widgets.lorebook import LorebookTab
from .widgets.provider_dialog import ProviderDialog, load_provider_settings, resolve_key
from .widgets.settings_panel import SettingsPanel
from .widgets.tokens_chart import TokensChart

if TYPE_CHECKING:  # loaded on first use (window start-up time)
    from engine.generation import GenerationResult, ProviderConfig
    from engine.storage import ImportRef

    from .widgets.lorebook_report_dialog import LorebookReportDialog

log = logging.getLogger(__name__)

#: The strategy that honours hand exclusions (SPEC §3).
MANUAL_STRATEGY = "manual"
#: The inspector column's default (widest) and smallest width (px); it yields first when the
#: window is narrow, so the prompt blocks keep :data:`CENTRE_PREFERRED_W`.
INSPECTOR_WIDTH, INSPECTOR_MIN_W = 460, 300
#: The width (px) the centre column (prompt blocks, chat) should get before the inspector grows.
CENTRE_PREFERRED_W = 780
#: The library column on narrow windows (px; :data:`LIBRARY_WIDTH` from 1400 px on).
LIBRARY_NARROW_W = 210
#: Every format the importer reads (engine.importers.detect sniffs the content): cards (PNG, JSON),
#: worlds and NovelAI lorebooks, SillyTavern JSONL chats, OpenAI message arrays and agent
#: transcripts (tau-bench JSON, SWE-agent ``.traj``).
IMPORT_FILTER = ("Cards, worlds and chats (*.png *.json *.jsonl *.lorebook *.traj);;"
                 "Character cards (*.png *.json);;Worlds and lorebooks (*.json *.lorebook);;"
                 "Chats and transcripts (*.jsonl *.json *.traj);;All files (*)")


def token_summary(preview: ContextPreview, elapsed_s: float = 0.0) -> str:
    """The header's one-line summary: prompt vs budget, headroom, context window, strategy, tokenizer.

    ``"prompt 1,520 / budget 1,536 tokens · headroom 16 · context window 2,048 · manual · o200k_base · 12 ms"``
    (all figures in tokens; the budget is the context window minus the reply reserve, and the
    headroom is the budget minus the safety margin and the prompt, as in :class:`ContextPreview`).
    """
    approx = " ≈ approximate" if preview.tokenizer.approximate else ""
    return (f"prompt {preview.prompt_tokens:,} / budget {preview.budget:,} tokens · "
            f"headroom {preview.headroom:,} · context window {preview.context_limit:,} · "
            f"{preview.strategy} · {preview.tokenizer.profile}{approx} · {1000 * elapsed_s:.0f} ms")


def compaction_options(settings: ContextSettings) -> CompactionOptions | None:
    """The chat's compaction options, as the ``compact`` strategy reads them (``None`` when they
    are invalid: the preview then reports ``INVALID_SETTINGS`` itself)."""
    try:
        return CompactionOptions.from_options(settings.strategy_options)
    except LoomscopeError:
        return None


def dedupe_lines(text: str) -> str:
    """``text`` without repeated lines or sentences (a banner says each thing once)."""
    seen: set[str] = set()
    out: list[str] = []
    for line in text.splitlines():
        key = " ".join(line.split()).rstrip(".").lower()
        if key and key in seen:
            continue
        seen.add(key)
        out.append(line)
    return "\n".join(out)


class MainWindow(QMainWindow):
    """Loomscope's window.

    Signals
    -------
    preview_applied(object ContextPreview | None)   # views updated with a new preview
    error_shown(object UserError)                   # an error was shown to the user
    """

    preview_applied = Signal(object)
    error_shown = Signal(object)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setObjectName("mainWindow")
        self.setWindowTitle("Loomscope")
        self.setAcceptDrops(True)
        self.preview: ContextPreview | None = None
        self.audit: PromptContextAudit | None = None
        self._select_on_next_preview = False
        self._scroll_chat_on_messages = False
        self._preview_chat: str | None = None
        #: Chat titles by id from the library list (a chat being opened shows its title at once).
        self._chat_titles: dict[str, str] = {}
        #: Reads chats on a worker so that opening a big chat never blocks the window.
        self.chat_loader = ChatLoader(ctx.store, parent=self) if ctx.store is not None else None
        self._loaded_audit: tuple[str, Any] | None = None
        #: The last "the preview did not confirm your click" note (also in the status bar).
        self.rollback_note = ""
        #: Asks the user yes/no; replaced in tests.
        self.confirm = self._confirm_dialog
        #: Asks for a text (title, current text) → new text or ``None``; replaced in tests.
        self.ask_text = self._ask_text_dialog

        # -- panels ----------------------------------------------------------------------
        self.library = LibraryPanel(self)
        self.budget_bar = BudgetBar(self)
        self.tokens_chart = TokensChart(self)
        self.banner = QLabel(self)
        self.banner.setObjectName("errorBanner")
        self.banner.setWordWrap(True)
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.setStyleSheet("QLabel#errorBanner { background: #fdecea; color: #8a1f1c; "
                                  "border: 1px solid #e6a19c; border-radius: 4px; padding: 6px; }")
        self.banner.hide()
        self.blocks_panel = BlocksPanel(self)
        self.chat_view = ChatView(self)
        self.centre_tabs = QTabWidget(self)
        self.centre_tabs.setObjectName("centreTabs")
        self.centre_tabs.addTab(self.blocks_panel, "Prompt blocks")
        self.centre_tabs.addTab(self.chat_view, "Chat")
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
        head.addWidget(self.title_label, 1)
        head.addWidget(self.approx_badge)
        cl.addLayout(head)
        cl.addWidget(self.status_label)
        cl.addWidget(self.budget_bar)
        cl.addWidget(self.tokens_chart)
        cl.addWidget(self.banner)
        cl.addWidget(self.centre_tabs, 1)

        self.block_inspector = BlockInspector(ctx, self)
        self.lorebook_tab = LorebookTab(ctx, self)
        self.audit_tab = AuditTab(ctx, self)
        self.settings_panel = SettingsPanel(ctx.registries, self)
        self.inspector_tabs = QTabWidget(self)
        self.inspector_tabs.setObjectName("inspectorTabs")
        self.inspector_tabs.addTab(self.block_inspector, "Block")
        self.inspector_tabs.addTab(self.lorebook_tab, "Lorebook")
        self.inspector_tabs.addTab(self.audit_tab, "Audit")
        self.inspector_tabs.addTab(self.settings_panel, "Settings")

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.library)
        self.splitter.addWidget(centre)
        self.splitter.addWidget(self.inspector_tabs)
        self.splitter.setStretchFactor(1, 1)
        # the inspector keeps its width when another tab (a wider form) is shown: its pages scroll
        # or elide instead of squeezing the prompt blocks
        self.inspector_tabs.setMinimumWidth(INSPECTOR_MIN_W)
        self.splitter.setCollapsible(0, False)
        self._default_splitter_sizes()
        self._splitter_restored = False
        self._splitter_shown = False
        self.setCentralWidget(self.splitter)

        #: Every user action that can fail runs through it (one error handler, git-cola ``cmds.do``).
        self.commands = CommandRunner(ctx.undo_stack, self.show_error)
        self.generation = GenerationRunner(self)
        self._build_actions()
        self._wire()
        from .library_setup import LibrarySetup  # issue 18: library panels, setup and entry editors

        self.library_setup = LibrarySetup(self)
        self.statusBar().showMessage("Ready")

    # ================================================================ setup
    def _build_actions(self) -> None:
        stack = self.ctx.undo_stack
        # fixed texts: the toolbar must not jump as the command names change; the tooltip and
        # the status tip name what Ctrl+Z would undo
        self.undo_action = QAction("Undo", self)
        self.undo_action.setObjectName("undoAction")
        self.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
        self.undo_action.triggered.connect(stack.undo)
        self.redo_action = QAction("Redo", self)
        self.redo_action.setObjectName("redoAction")
        self.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        self.redo_action.triggered.connect(stack.redo)
        stack.canUndoChanged.connect(self.undo_action.setEnabled)
        stack.canRedoChanged.connect(self.redo_action.setEnabled)
        stack.undoTextChanged.connect(self._on_undo_stack_undo_text_changed)
        stack.redoTextChanged.connect(self._on_undo_stack_redo_text_changed)
        self._describe_undo(self.undo_action, "Undo", stack.undoText(), "Ctrl+Z")
        self._describe_undo(self.redo_action, "Redo", stack.redoText(), "Ctrl+Shift+Z")
        self.undo_action.setEnabled(stack.canUndo())
        self.redo_action.setEnabled(stack.canRedo())
        self.import_action = QAction("&Import…", self)
        self.import_action.setToolTip("Import character cards, worlds / lorebooks and chats (Ctrl+O); "
                                      "you can also drop files on the window")
        self.import_action.setShortcut(QKeySequence("Ctrl+O"))
        self.import_action.triggered.connect(self._on_import_action_triggered)
        self.delete_action = QAction("&Delete chat…", self)
        self.delete_action.setEnabled(False)  # nothing selected yet
        self.delete_action.triggered.connect(lambda: self.delete_chat(self.library.current_chat_id()))
        self.quit_action = QAction("&Quit", self)
        self.quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        self.quit_action.triggered.connect(self.close)
        self.generate_action = QAction("▶ Generate", self)
        self.generate_action.setObjectName("generateAction")
        self.generate_action.setShortcut(QKeySequence("Ctrl+G"))
        self.generate_action.setToolTip("Send the previewed prompt to the provider and append the reply (Ctrl+G)")
        self.generate_action.triggered.connect(self.generate)
        self.cancel_action = QAction("■ Cancel", self)
        self.cancel_action.setEnabled(False)
        self.cancel_action.triggered.connect(self.generation.cancel)
        self.provider_action = QAction("Provider…", self)
        self.provider_action.triggered.connect(self.edit_provider)
        self.refresh_action = QAction("Refresh preview", self)
        self.refresh_action.setShortcut(QKeySequence("F5"))
        self.refresh_action.triggered.connect(self.ctx.preview.schedule)

        file_menu = self.menuBar().addMenu("&File")
        file_menu.addAction(self.import_action)
        file_menu.addAction(self.delete_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        edit_menu = self.menuBar().addMenu("&Edit")
        edit_menu.addAction(self.undo_action)
        edit_menu.addAction(self.redo_action)
        gen_menu = self.menuBar().addMenu("&Generate")
        gen_menu.addAction(self.generate_action)
        gen_menu.addAction(self.cancel_action)
        gen_menu.addAction(self.provider_action)
        gen_menu.addAction(self.refresh_action)
        self.lorebook_report_action = QAction("&Report…", self)
        self.lorebook_report_action.setObjectName("lorebookReportAction")
        self.lorebook_report_action.setToolTip("Replay World Info over this chat: what fired, when, what it cost")
        self.lorebook_report_action.triggered.connect(self.show_lorebook_report)
        lore_menu = self.menuBar().addMenu("&Lorebook")
        lore_menu.addAction(self.lorebook_report_action)
        bar = QToolBar("Main", self)
        bar.setObjectName("mainToolbar")
        bar.setMovable(False)
        for a in (self.import_action, self.undo_action, self.redo_action, self.generate_action,
                  self.cancel_action, self.provider_action):
            bar.addAction(a)
        self.addToolBar(bar)

    def _on_undo_stack_undo_text_changed(self, text: str) -> None:
        self._describe_undo(self.undo_action, "Undo", text, "Ctrl+Z")

    def _on_undo_stack_redo_text_changed(self, text: str) -> None:
        self._describe_undo(self.redo_action, "Redo", text, "Ctrl+Shift+Z")

    @staticmethod
    def _describe_undo(action: QAction, verb: str, text: str, keys: str) -> None:
        tip = f"{verb} {text[:1].lower() + text[1:]} ({keys})" if text else f"Nothing to {verb.lower()}"
        action.setToolTip(tip)
        action.setStatusTip(tip)

    def _wire(self) -> None:
        ctx = self.ctx
        doc = ctx.document
        ctx.preview.set_snapshot_provider(doc.snapshot)
        ctx.preview.preview_ready.connect(self._on_preview_ready)
        ctx.preview.preview_started.connect(lambda _g: self.status_label.setText("computing preview…"))
        doc.flags_changed.connect(lambda _i: ctx.preview.schedule(immediate=True))  # a click: no debounce
        doc.request_changed.connect(ctx.preview.schedule)
        doc.request_changed.connect(self._on_document_request_changed)
        doc.messages_changed.connect(self._on_document_messages_changed)
        doc.message_changed.connect(self._on_document_message_changed)
        doc.chat_loaded.connect(self._on_document_chat_loaded)
        if self.chat_loader is not None:
            self.chat_loader.loaded.connect(self._on_chat_loader_loaded)
            self.chat_loader.failed.connect(self._on_chat_loader_failed)
        self.blocks_panel.model.pin_toggled.connect(self.set_pinned)
        self.blocks_panel.model.exclude_toggled.connect(self.set_excluded)
        self.blocks_panel.model.flags_rolled_back.connect(self._on_blocks_model_flags_rolled_back)
        self.blocks_panel.block_selected.connect(self._on_blocks_panel_block_selected)
        self.chat_view.pin_toggled.connect(self.set_pinned)
        self.chat_view.exclude_toggled.connect(self.set_excluded)
        self.chat_view.branch_requested.connect(self.branch_chat)
        self.chat_view.message_submitted.connect(self.append_user_message)
        self.chat_view.generate_requested.connect(self.generate)
        self.chat_view.summary_remove_requested.connect(self.remove_compaction_summary)
        self.chat_view.compaction_reset_requested.connect(self.ctx.document.reset_compaction_failures)
        self.chat_view.message_selected.connect(self.blocks_panel.select_message)
        self.chat_view.edit_requested.connect(self.edit_message)
        self.chat_view.delete_requested.connect(self.delete_message)
        self.chat_view.hide_toggled.connect(self.set_hidden)
        self.tokens_chart.message_clicked.connect(self._on_tokens_chart_message_clicked)
        self.lorebook_tab.entry_edited.connect(self.edit_lorebook_entry)
        self.settings_panel.settings_edited.connect(self._on_settings_panel_settings_edited)
        self.library.chat_selected.connect(self.open_chat)
        self.library.import_requested.connect(self._on_import_action_triggered)
        self.library.delete_requested.connect(self.delete_chat)
        self.library.selection_changed.connect(lambda cid: self.delete_action.setEnabled(bool(cid)))
        self.generation.progress.connect(self._on_generation_progress)
        self.generation.finished.connect(self._on_generation_finished)
        self.generation.failed.connect(self._on_generation_failed)
        self.generation.running_changed.connect(self._on_generation_running_changed)

    # ================================================================ library
    def refresh_library(self) -> None:
        """Re-read the chat list from the store."""
        if self.ctx.store is None:
            return
        chats = self.commands.do("Library", self.ctx.store.list_chats)
        if not chats.ok:
            return
        self._chat_titles = {c.id: c.title for c in chats.value}
        opening = self.chat_loader.pending_chat() if self.chat_loader is not None else None
        self.library.set_chats(chats.value, current=opening or self.ctx.document.chat_id)
        if getattr(self, "library_setup", None) is not None:
            self.library_setup.refresh_library()

    def open_chat(self, chat_id: str | None) -> None:
        """Open ``chat_id`` (from the store); the preview follows.

        The chat is read on a worker (:class:`~gui.preview.loader.ChatLoader`): the window
        closes the current chat at once, shows the new title, and stays responsive while the
        messages load; the document takes the chat when it arrives (only the latest request
        counts). ``None`` closes the chat.
        """
        doc = self.ctx.document
        opening = self.chat_loader.pending_chat() if self.chat_loader is not None else None
        if chat_id is not None and chat_id == (opening or doc.chat_id):
            return
        # the undo stack survives: its commands reopen their own chat when undone (gui/undo.py)
        if chat_id is None or self.chat_loader is None:
            if self.chat_loader is not None:
                self.chat_loader.cancel()
            self.commands.do("Open chat", doc.load_chat, chat_id)
            return
        if doc.chat_id is not None:
            doc.load_chat(None)  # nothing can be edited in the old chat while the new one loads
        self.chat_loader.load(chat_id)
        title = self._chat_titles.get(chat_id, "")
        self.title_label.setText(title or "(opening…)")
        self.setWindowTitle(f"Loomscope — {title}" if title else "Loomscope")
        self.status_label.setText("opening chat…")
        self.library.select_chat(chat_id, emit=False)

    def is_loading(self) -> bool:
        """``True`` while a chat is being read on the worker."""
        return self.chat_loader is not None and self.chat_loader.is_busy()

    def _on_chat_loader_loaded(self, loaded: LoadedChat) -> None:
        if loaded.audit_read:
            self._loaded_audit = (loaded.chat_id, loaded.audit)
        try:
            self.ctx.document.apply_loaded(loaded)
        finally:
            self._loaded_audit = None
        self.library.select_chat(loaded.chat_id, emit=False)
        self.ctx.settings.setValue("library/last_chat", loaded.chat_id)

    def _on_chat_loader_failed(self, chat_id: str, error: UserError) -> None:
        if self.ctx.document.chat_id is None:
            self.title_label.setText("(no chat)")
            self.setWindowTitle("Loomscope")
            self.status_label.clear()
        self.show_error(error, "Open chat")

    def import_files(self, paths: list[str]) -> list[ImportRef]:
        """Import ``paths`` in one transaction; a bad file imports nothing and says which and why."""
        if self.ctx.store is None or not paths:
            return []
        def describe(exc: LoomscopeError) -> UserError:
            err = user_error(exc)
            name = Path(exc.file).name if exc.file else ", ".join(Path(p).name for p in paths)
            return UserError(err.code, f"Could not import {name}: {err.text}\nNothing was imported.",
                             exc.file, exc.place)

        imported = self.commands.do("Import failed", self.ctx.store.import_files, paths, describe=describe)
        if not imported.ok or imported.value is None:
            return []
        refs = imported.value
        self.refresh_library()
        chats = [r for r in refs if r.kind == "chat"]
        self.statusBar().showMessage(
            "Imported " + ", ".join(f"{r.kind} “{r.name}”" for r in refs), 8000)
        if chats:
            self.open_chat(chats[-1].id)
        self.library_setup.after_import(refs)
        return refs

    def delete_chat(self, chat_id: str | None) -> bool:
        """Delete ``chat_id`` after confirmation (its audit goes with it)."""
        if self.ctx.store is None or not chat_id:
            return False
        title = next((c.title for c in self.ctx.store.list_chats() if c.id == chat_id), chat_id)
        if not self.confirm("Delete chat", f"Delete “{title}” and its audit? This cannot be undone."):
            return False
        if not self.commands.do("Delete chat", self.ctx.store.delete_chat, chat_id).ok:
            return False
        # a deleted chat cannot come back (the dialog said so): its commands go with it
        self.commands.forget_history()
        if self.ctx.document.chat_id == chat_id:
            self.ctx.document.load_chat(None)
        self.refresh_library()
        ids = self.library.chat_ids()
        if ids and self.ctx.document.chat_id is None:
            self.open_chat(ids[0])
        return True

    def branch_chat(self, message_index: int) -> str | None:
        """Fork the open chat at ``message_index`` and open the branch."""
        doc = self.ctx.document
        if self.ctx.store is None or doc.chat_id is None:
            return None
        branched = self.commands.do("Branch", self.ctx.store.branch_chat, doc.chat_id, message_index)
        if not branched.ok or branched.value is None:
            return None
        new_id = branched.value
        self.refresh_library()
        self.open_chat(new_id)
        self.statusBar().showMessage(f"Branched at message {message_index}", 6000)
        return new_id

    # ================================================================ edits
    def set_pinned(self, message_index: int, value: bool) -> None:
        """Pin / unpin a message (undoable, saved)."""
        self._push_flag(message_index, "pinned", value)

    def set_excluded(self, message_index: int, value: bool) -> None:
        """Exclude / include a message by hand (undoable, saved).

        Hand exclusions take effect under every strategy whose registry entry says it honours
        them (``StrategyInfo.honors_manual``: manual, summarize, vector-recall, compact); excluding
        a message while a strategy that ignores them (truncate, or a plugin's) is active switches
        the chat to ``manual`` in the same undo step, so the writer sees the exclusion at once.
        """
        doc = self.ctx.document
        req = doc.request
        strategies = self.ctx.registries.strategies
        # the pipeline's own rule (registry flag and the honor_manual option); an unknown strategy
        # (the preview reports UNKNOWN_STRATEGY) is treated as not honouring exclusions
        switch = (value and req is not None and MANUAL_STRATEGY in strategies
                  and not ((req.sillytavern is not None or req.settings.strategy in strategies)
                           and honours_exclusions(req.settings, strategies, sillytavern=req.sillytavern is not None)))
        if not switch:
            self._push_flag(message_index, "manual_excluded", value)
            return
        assert req is not None
        if not 0 <= message_index < len(doc.messages()):
            return
        self.commands.push(
            "Save",
            SetSettingsCommand(doc, req.settings.model_copy(update={"strategy": MANUAL_STRATEGY}),
                               "Switch to the manual strategy"),
            lambda: SetMessageFlagCommand(doc, message_index, "manual_excluded", value),
            macro=f"Exclude message {message_index}")
        self.settings_panel.set_settings(doc.request.settings)
        self.statusBar().showMessage(
            f"Strategy switched to “{MANUAL_STRATEGY}” so hand exclusions apply (Ctrl+Z undoes both)", 8000)

    def _push_flag(self, message_index: int, flag: str, value: bool) -> None:
        doc = self.ctx.document
        if doc.request is None or not 0 <= message_index < len(doc.messages()):
            return
        self.commands.push("Save", SetMessageFlagCommand(doc, message_index, flag, value))

    def set_hidden(self, message_index: int, value: bool) -> None:
        """Hide / unhide a message (never sent while hidden, SillyTavern ``is_system``; undoable)."""
        self._push_flag(message_index, "hidden", value)

    def edit_message(self, message_index: int, text: str | None = None) -> bool:
        """Replace a message's text (undoable, saved). ``text`` ``None`` asks in a dialog."""
        doc = self.ctx.document
        if doc.request is None or not 0 <= message_index < len(doc.messages()):
            return False
        old = doc.messages()[message_index]
        if text is None:
            text = self.ask_text(f"Edit message {message_index}", old.text())
            if text is None:
                return False
        if text == old.text():
            return False
        new = old.model_copy(update={"content": text})
        return self.commands.push("Edit message", EditMessageCommand(doc, message_index, new)).ok

    def delete_message(self, message_index: int) -> bool:
        """Delete one message (undoable with Ctrl+Z, saved)."""
        doc = self.ctx.document
        if doc.request is None or not 0 <= message_index < len(doc.messages()):
            return False
        if not self.commands.push("Delete message", DeleteMessageCommand(doc, message_index)).ok:
            return False
        self.refresh_library()
        self.statusBar().showMessage(f"Deleted message {message_index} (Ctrl+Z brings it back)", 8000)
        return True

    def _ask_text_dialog(self, title: str, text: str) -> str | None:
        from PySide6.QtWidgets import QInputDialog

        value, ok = QInputDialog.getMultiLineText(self, title, "Message text:", text)
        return value if ok else None

    def edit_lorebook_entry(self, lorebook_id: str, old: LorebookEntry, new: LorebookEntry) -> None:
        """A lorebook entry edit from the Lorebook tab (undoable, saved)."""
        self.commands.push("Lorebook", EditLorebookEntryCommand(self.ctx.document, lorebook_id, old, new))

    def append_user_message(self, text: str) -> None:
        """The composer's Send: append a user message."""
        if self.ctx.document.request is None:
            return
        if not self.commands.do("Send", self.ctx.document.append_message, ChatMessage(role="user", content=text)).ok:
            return
        self.refresh_library()
        self.chat_view.list.scrollToBottom()

    def _on_settings_panel_settings_edited(self, settings: ContextSettings) -> None:
        doc = self.ctx.document
        if doc.request is None or settings == doc.request.settings:
            return
        # undoable; a burst of edits (a spin box's steps) is one undo step
        self.commands.push("Settings", SetSettingsCommand(doc, settings, "Change settings", merge=True))

    # ================================================================ document → views
    def _on_document_chat_loaded(self, chat_id: str) -> None:
        doc = self.ctx.document
        if self.preview is not None and self._preview_chat != (chat_id or None):
            # never show one chat's title over another chat's blocks while the preview computes
            self.apply_preview(None, emit=False)
            self.status_label.setText("computing preview…")
        if chat_id:
            self.library.select_chat(chat_id, emit=False)
        self.blocks_panel.table.clearSelection()
        self.blocks_panel.table.setCurrentIndex(self.blocks_panel.proxy.index(-1, -1))
        self._scroll_chat_on_messages = True
        self.title_label.setText(doc.title or "(no chat)")
        self.setWindowTitle(f"Loomscope — {doc.title}" if doc.title else "Loomscope")
        self.audit = None
        if doc.request is not None:
            self.settings_panel.set_settings(doc.request.settings)
        if self._loaded_audit is not None and self._loaded_audit[0] == chat_id:
            self.audit = self._loaded_audit[1]  # read with the chat, on the loader's worker
        elif self.ctx.store is not None and chat_id:
            self.audit = self.commands.do("Audit", self.ctx.store.get_audit, chat_id).value
        self.chat_view.model.clear_finished_progress()
        self.audit_tab.set_state(self.audit, self.preview)
        self._select_on_next_preview = True

    def _on_document_request_changed(self) -> None:
        req = self.ctx.document.request
        if req is not None and req.settings != self.settings_panel.settings():
            self.settings_panel.set_settings(req.settings)

    def _on_document_messages_changed(self) -> None:
        doc = self.ctx.document
        req = doc.request
        if req is None:
            self.chat_view.set_messages([], "User", "Assistant")
            return
        names = speaker_names(req)  # the names the preview substitutes for {{user}} and {{char}}
        self.chat_view.set_messages(list(req.chat.messages), names.user, names.char or "Assistant")
        if self._scroll_chat_on_messages:
            # a chat opens at its end, where the next message goes
            self._scroll_chat_on_messages = False
            self.chat_view.list.scrollToBottom()
            QTimer.singleShot(0, self.chat_view.list.scrollToBottom)

    def _on_document_message_changed(self, index: int) -> None:
        """One message's flags or text changed: repaint its rows now, ahead of the preview."""
        msg = self.ctx.document.messages()[index]
        self.chat_view.update_message(index, msg)
        self.blocks_panel.model.expect_flags(index, pinned=bool(msg.meta.pinned),
                                             manual_excluded=bool(msg.meta.manualExcluded))

    def _on_blocks_model_flags_rolled_back(self, rollbacks: list[FlagRollback]) -> None:
        strategy = self.preview.strategy if self.preview is not None else ""
        note = "; ".join(r.describe(strategy) for r in rollbacks[:3])
        if len(rollbacks) > 3:
            note += f" (and {len(rollbacks) - 3} more)"
        self.rollback_note = note
        self.statusBar().showMessage(note, 12000)

    def _on_preview_ready(self, outcome: PreviewOutcome) -> None:
        if outcome.request is not self.ctx.document.request:
            # computed for a state the document has left (another chat, a newer edit); every
            # document change schedules a preview, so the right one is on its way
            return
        if outcome.error is not None:
            doc = self.ctx.document
            if self.preview is not None and self._preview_chat != doc.chat_id:
                self.apply_preview(None, emit=False)  # never show another chat's blocks
            # the entries stay editable without a preview: a bad entry can be fixed right here
            self.lorebook_tab.set_state(doc.request, self.preview, list(doc.lorebook_ids))
            self._show_banner("The preview could not be computed. " + outcome.error.full_text())
            self.status_label.setText("preview failed")
            self.preview_applied.emit(None)
            return
        preview = outcome.preview
        self.apply_preview(preview, outcome.elapsed_s)

    def apply_preview(self, preview: ContextPreview | None, elapsed_s: float = 0.0, *,
                      emit: bool = True) -> None:
        """Show ``preview`` in every view (``preview_applied`` follows unless ``emit`` is false)."""
        self.preview = preview
        doc = self.ctx.document
        self._preview_chat = doc.chat_id
        self.blocks_panel.set_preview(preview)
        self.chat_view.set_preview(preview)
        self.budget_bar.set_preview(preview, compaction_options(doc.request.settings) if doc.request else None)
        self.tokens_chart.set_preview(preview)
        self.settings_panel.set_preview(preview)
        self.lorebook_tab.set_state(doc.request, preview, list(doc.lorebook_ids))
        self.audit_tab.set_state(self.audit, preview)
        if preview is None:
            self._hide_banner()
            self.status_label.clear()
        else:
            if preview.error is not None:
                self._show_banner(self.budget_message(preview))
            else:
                self._hide_banner()
            self.approx_badge.setVisible(preview.tokenizer.approximate)
            self.approx_badge.setToolTip(
                f"Profile {preview.tokenizer.profile} estimates this model's tokenizer; "
                f"{preview.safety_margin:,} tokens are held back as a safety margin.")
            self.status_label.setText(token_summary(preview, elapsed_s))
        if self._select_on_next_preview and preview is not None:
            self._select_on_next_preview = False
            if self.ctx.document.messages():
                # a freshly opened chat selects its newest message, the one the reply answers
                self.blocks_panel.select_message(len(self.ctx.document.messages()) - 1)
        block = self.blocks_panel.current_block()
        self._on_blocks_panel_block_selected(block)
        if emit:
            self.preview_applied.emit(preview)

    def budget_message(self, preview: ContextPreview) -> str:
        """The message for a preview error; for ``TOKEN_BUDGET_EXCEEDED`` it names the protected blocks.

        The figures are the engine's own (``preview.error.message`` and ``details``: the
        protected tokens, the budget after the safety margin, the protected block ids); the
        GUI only looks the blocks up for their source and reason.
        """
        assert preview.error is not None
        error = preview.error
        text = message_for(error.code)
        if error.code == "TOKEN_BUDGET_EXCEEDED":
            by_id = {b.id: b for b in preview.blocks}
            ids = error.details.get("protected_blocks", [])
            protected = sorted((by_id[i] for i in ids if i in by_id), key=lambda b: -b.tokens)
            lines = [f"{text}", f"{error.message[:1].upper()}{error.message[1:]}.", "Protected blocks:"]
            for b in protected[:6]:
                lines.append(f"  • {b.source} — {b.tokens:,} tokens ({b.reason})")
            if len(protected) > 6:
                lines.append(f"  • … and {len(protected) - 6} more")
            lines.append("No request will be sent until this fits.")
            return "\n".join(lines)
        return f"{text} ({error.code})"

    def _show_banner(self, text: str) -> None:
        self.banner.setText(dedupe_lines(text))
        self.banner.show()

    def _hide_banner(self) -> None:
        self.banner.hide()
        self.banner.clear()

    def _on_blocks_panel_block_selected(self, block: PreviewBlock | None) -> None:
        profile = self.preview.tokenizer.profile if self.preview is not None else "o200k_base"
        self.block_inspector.set_block(block, profile)

    def _on_tokens_chart_message_clicked(self, message_index: int) -> None:
        self.chat_view.scroll_to_message(message_index)
        self.blocks_panel.select_message(message_index)

    # ================================================================ generation
    def show_lorebook_report(self) -> LorebookReportDialog:
        """Open *Lorebook → Report* on the open chat (non-modal); returns the dialog."""
        from .widgets.lorebook_report_dialog import LorebookReportDialog  # loaded when first asked for

        dialog = LorebookReportDialog(self.ctx.document.snapshot(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def edit_provider(self) -> bool:
        """Open the provider settings dialog; returns ``True`` when saved."""
        model = self.ctx.document.request.settings.model if self.ctx.document.request else "gpt-4o"
        dialog = ProviderDialog(self.ctx.settings, model, self)
        return dialog.exec() == ProviderDialog.DialogCode.Accepted

    def provider_config(self) -> ProviderConfig:
        """The provider configuration from the saved settings and the resolved key."""
        from engine.generation import ProviderConfig  # the provider client loads on first use

        model = self.ctx.document.request.settings.model if self.ctx.document.request else "gpt-4o"
        ps = load_provider_settings(self.ctx.settings, model)
        return ProviderConfig(base_url=ps.base_url, model=ps.model, api_key=resolve_key(),
                              timeout_s=ps.timeout_s, stream=ps.stream)

    def generate(self) -> bool:
        """Generate a reply for the open chat; returns ``False`` when nothing was started."""
        doc = self.ctx.document
        if self.generation.running:
            return False  # one at a time; Generate is disabled meanwhile
        if self.ctx.store is None or doc.chat_id is None or doc.request is None:
            self.show_error(UserError("CHAT_NOT_FOUND", "Open a chat from the library to generate."), "Generate")
            return False
        if self.preview is not None and self.preview.error is not None \
                and self.preview.error.code == "TOKEN_BUDGET_EXCEEDED":
            self.show_error(UserError("TOKEN_BUDGET_EXCEEDED", self.budget_message(self.preview)), "Generate")
            return False
        if not self.ctx.settings.contains("provider/base_url") and not self.edit_provider():
            return False  # first generation: ask where to send it
        self.chat_view.model.clear_finished_progress()  # the last run's compaction row
        return self.generation.start(self.ctx.store, doc.snapshot(), self.provider_config(), doc.chat_id,
                                     self.ctx.registries)

    def remove_compaction_summary(self) -> bool:
        """Remove the open chat's compaction summary (undoable); returns ``False`` when it has none."""
        summary = self.ctx.document.compaction_summary()
        if summary is None:
            return False
        self.commands.push("Compaction summary", CompactionSummaryCommand(self.ctx.document, summary, present=False))
        self.statusBar().showMessage(
            f"Compaction summary removed: messages #{summary.first}–#{summary.last} are sent verbatim again "
            "(Ctrl+Z restores it)", 8000)
        return True

    def _on_generation_progress(self, event: ProgressEvent) -> None:
        self.chat_view.update_progress(event)

    def _on_generation_running_changed(self, running: bool) -> None:
        self.generate_action.setEnabled(not running)
        self.chat_view.set_generating(running)
        self.cancel_action.setEnabled(running)
        self.statusBar().showMessage("Generating…" if running else "Ready")

    def _on_generation_finished(self, result: GenerationResult) -> None:
        audit = result.audit  # stored with the reply by engine.generation.generate_and_store
        if self.ctx.document.chat_id == audit.chat_id:
            before = self.ctx.document.compaction_summary()
            self.audit = audit
            self.ctx.document.reload()
            # the compaction row stays until the next generation: it says "done" or "fell back"
            self.chat_view.model.clear_finished_progress(keep_steps=("compaction",))
            after = self.ctx.document.compaction_summary()
            if after is not None and (before is None or before.id != after.id):
                self.commands.push("Compaction summary", CompactionSummaryCommand(self.ctx.document, after, present=True))
            self.audit_tab.set_state(self.audit, self.preview)
        self.refresh_library()
        if audit.error_code == "CANCELLED":  # the writer's own Cancel: no warning, just say so
            self.statusBar().showMessage("Generation cancelled; nothing was appended", 8000)
        elif audit.error_code:
            if audit.error_code == "TOKEN_BUDGET_EXCEEDED" and self.preview is not None \
                    and self.preview.error is not None:
                err = UserError(audit.error_code, self.budget_message(self.preview))
            else:
                err = UserError(audit.error_code, message_for(audit.error_code))
            self.show_error(err, "Generation " + audit.status)
        else:
            self.statusBar().showMessage(f"Reply appended · audit {audit.generation_id[:8]} stored", 8000)

    def _on_generation_failed(self, error: UserError) -> None:
        if error.code == "CANCELLED":
            self.statusBar().showMessage("Generation cancelled; nothing was appended", 8000)
            return
        self.show_error(error, "Generation failed")

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

    def _on_import_action_triggered(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Import cards, worlds and chats", "", IMPORT_FILTER)
        if paths:
            self.import_files(paths)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            QTimer.singleShot(0, lambda: self.library_setup.import_dropped(paths))

    # ================================================================ state
    def select_tab(self, name: str) -> bool:
        """Show tab ``name`` (``blocks``, ``chat``, ``block``, ``lorebook``, ``audit``, ``settings``)."""
        key = name.strip().lower()
        if key == "setup":
            self.inspector_tabs.setCurrentWidget(self.library_setup.setup_panel)
            return True
        if key in ("characters", "lorebooks", "personas", "chats"):
            self.library_setup.tabs.show_kind(key[:-1])
            return True
        if key == "entry":
            self.inspector_tabs.setCurrentIndex(INSPECTOR_TABS.index("lorebook"))
            self.lorebook_tab.bottom_tabs.setCurrentWidget(self.library_setup.entry_editor)
            return True
        if key in CENTRE_TABS:
            self.centre_tabs.setCurrentIndex(CENTRE_TABS.index(key))
            return True
        if key in INSPECTOR_TABS:
            self.inspector_tabs.setCurrentIndex(INSPECTOR_TABS.index(key))
            return True
        return False

    def restore_state(self) -> None:
        """Window geometry, layout, splitter sizes and tabs from ``QSettings``."""
        s = self.ctx.settings
        geometry = s.value("window/geometry")
        if isinstance(geometry, QByteArray | bytes):
            self.restoreGeometry(geometry)
        state = s.value("window/state")
        if isinstance(state, QByteArray | bytes):
            self.restoreState(state)
        splitter = s.value("window/splitter")
        if isinstance(splitter, QByteArray | bytes):
            self._splitter_restored = self.splitter.restoreState(splitter)
        for key, tabs in (("window/centre_tab", self.centre_tabs), ("window/inspector_tab", self.inspector_tabs)):
            with contextlib.suppress(TypeError, ValueError):
                tabs.setCurrentIndex(int(s.value(key, 0)))

    def default_splitter_sizes(self, width: int | None = None) -> list[int]:
        """``[library, centre, inspector]`` for a splitter ``width`` px wide.

        The centre gets :data:`CENTRE_PREFERRED_W` first; the inspector yields first (down to
        :data:`INSPECTOR_MIN_W`), then the library (down to :data:`LIBRARY_NARROW_W`).
        """
        width = int(width if width is not None else self.splitter.width()) - 2 * self.splitter.handleWidth()
        library = LIBRARY_WIDTH if width >= 1400 else LIBRARY_NARROW_W
        inspector = max(INSPECTOR_MIN_W, min(INSPECTOR_WIDTH, width - library - CENTRE_PREFERRED_W))
        centre = max(200, width - library - inspector)
        return [library, centre, inspector]

    def _default_splitter_sizes(self) -> None:
        """Library and inspector at their default widths, the centre gets the rest."""
        self.splitter.setSizes(self.default_splitter_sizes())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # a narrower window takes from the inspector first, then the library, not from the blocks
        sizes = self.splitter.sizes()
        if len(sizes) == 3 and self.isVisible() and sizes[1] < CENTRE_PREFERRED_W and sizes[2] > INSPECTOR_MIN_W:
            give = min(CENTRE_PREFERRED_W - sizes[1], sizes[2] - INSPECTOR_MIN_W)
            self.splitter.setSizes([sizes[0], sizes[1] + give, sizes[2] - give])

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._splitter_restored and not self._splitter_shown:
            # the first show is the first time the real width is known (no saved layout)
            self._splitter_shown = True
            self._default_splitter_sizes()

    def save_state(self) -> None:
        """Persist geometry, layout, splitter sizes, tabs and the open chat."""
        s = self.ctx.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/splitter", self.splitter.saveState())
        s.setValue("window/centre_tab", self.centre_tabs.currentIndex())
        s.setValue("window/inspector_tab", self.inspector_tabs.currentIndex())
        if self.ctx.document.chat_id:
            s.setValue("library/last_chat", self.ctx.document.chat_id)
        s.sync()

    def start(self, chat_id: str | None = None) -> None:
        """Fill the library and open ``chat_id`` (else the last chat, else the most recent)."""
        self.refresh_library()
        ids = self.library.chat_ids()
        wanted = chat_id or str(self.ctx.settings.value("library/last_chat", "") or "")
        if wanted and wanted in ids:
            self.open_chat(wanted)
        elif chat_id:
            self.open_chat(chat_id)  # not listed: shows CHAT_NOT_FOUND
        elif ids:
            self.open_chat(ids[0])

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_state()
        self.generation.wait(3000)
        if self.chat_loader is not None:
            self.chat_loader.shutdown()
        self.ctx.preview.shutdown()
        super().closeEvent(event)
