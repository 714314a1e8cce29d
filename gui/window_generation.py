"""The main window's generation: provider settings, Generate, its progress and outcome, the
compaction summary's undo step, and the lorebook report (split from :mod:`gui.main_window`).

:class:`GenerationController` is built by :class:`~gui.main_window.MainWindow` with the window
(as a :class:`~gui.window_parts.GenerationWindow`) and its :class:`~gui.generation.GenerationRunner`;
it connects the runner's signals to its own slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt

from engine.generation import GenerationResult, ProviderConfig
from engine.schema import ProgressEvent
from engine.schema.audit import PromptContextAudit

from .banners import budget_message
from .errors import UserError, message_for
from .undo import CompactionSummaryCommand
from .widgets.lorebook_report_dialog import LorebookReportDialog
from .widgets.provider_dialog import ProviderDialog, load_provider_settings, resolve_key

if TYPE_CHECKING:
    from .generation import GenerationRunner
    from .window_parts import GenerationWindow

#: The model asked for when no chat is open (provider settings are per model).
DEFAULT_MODEL = "gpt-4o"
#: How long the status bar keeps a generation's outcome (milliseconds).
OUTCOME_STATUS_MS = 8000
#: What a cancelled generation leaves in the status bar.
CANCELLED_TEXT = "Generation cancelled; nothing was appended"


class GenerationController:
    """Generate, cancel, provider settings and what a generation leaves behind.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.GenerationWindow`).
    runner:
        The window's generation runner (one generation at a time); its ``progress``,
        ``finished``, ``failed`` and ``running_changed`` signals are connected here.
    """

    def __init__(self, window: GenerationWindow, runner: GenerationRunner) -> None:
        self._window = window
        self._runner = runner
        runner.progress.connect(self._on_runner_progress)
        runner.finished.connect(self._on_runner_finished)
        runner.failed.connect(self._on_runner_failed)
        runner.running_changed.connect(self._on_runner_running_changed)

    def _model(self) -> str:
        request = self._window.ctx.document.request
        return request.settings.model if request is not None else DEFAULT_MODEL

    def show_lorebook_report(self) -> LorebookReportDialog:
        """Open *Lorebook → Report* on the open chat (non-modal); returns the dialog."""
        dialog = LorebookReportDialog(self._window.ctx.document.snapshot(), self._window.window())
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.show()
        return dialog

    def edit_provider(self) -> bool:
        """Open the provider settings dialog; returns ``True`` when saved."""
        dialog = ProviderDialog(self._window.ctx.settings, self._model(), self._window.window(),
                                default_base_url=self.setup_server_url())
        return dialog.exec() == ProviderDialog.DialogCode.Accepted

    def setup_server_url(self) -> str | None:
        """A Text Completion chat's server URL from its SillyTavern settings (KoboldCpp, llama.cpp, …),
        offered as the base URL until one is saved; ``None`` for other chats."""
        request = self._window.ctx.document.request
        st = request.sillytavern if request is not None else None
        tc = st.text_completion if st is not None else None
        if tc is None or tc.main_api == "koboldhorde" or not tc.server_url.strip():
            return None
        return tc.server_url.strip()

    def provider_config(self) -> ProviderConfig:
        """The provider configuration from the saved settings and the resolved key."""
        ps = load_provider_settings(self._window.ctx.settings, self._model())
        return ProviderConfig(base_url=ps.base_url, model=ps.model, api_key=resolve_key(),
                              timeout_s=ps.timeout_s, stream=ps.stream, extra_body=dict(ps.extra_body) or None)

    def generate(self) -> bool:
        """Generate a reply for the open chat; returns ``False`` when nothing was started."""
        w = self._window
        ctx, doc = w.ctx, w.ctx.document
        if self._runner.running:
            return False  # one at a time; Generate is disabled meanwhile
        request = doc.snapshot()
        if ctx.store is None or doc.chat_id is None or request is None:
            w.show_error(UserError("CHAT_NOT_FOUND", "Open a chat from the library to generate."), "Generate")
            return False
        preview = w.preview
        if preview is not None and preview.error is not None and preview.error.code == "TOKEN_BUDGET_EXCEEDED":
            w.show_error(UserError("TOKEN_BUDGET_EXCEEDED", budget_message(preview)), "Generate")
            return False
        if not ctx.settings.contains("provider/base_url") and not self.edit_provider():
            return False  # first generation: ask where to send it
        w.chat_view.model.clear_finished_progress()  # the last run's compaction row
        return self._runner.start(ctx.store, request, self.provider_config(), doc.chat_id, ctx.registries)

    def remove_compaction_summary(self) -> bool:
        """Remove the open chat's compaction summary (undoable); returns ``False`` when it has none."""
        doc = self._window.ctx.document
        summary = doc.compaction_summary()
        if summary is None:
            return False
        self._window.commands.push("Compaction summary", CompactionSummaryCommand(doc, summary, present=False))
        self._window.statusBar().showMessage(
            f"Compaction summary removed: messages #{summary.first}–#{summary.last} are sent verbatim again "
            "(Ctrl+Z restores it)", OUTCOME_STATUS_MS)
        return True

    def _on_runner_progress(self, event: ProgressEvent) -> None:
        self._window.chat_view.update_progress(event)

    def _on_runner_running_changed(self, running: bool) -> None:
        w = self._window
        w.generate_action.setEnabled(not running)
        w.chat_view.set_generating(running)
        w.cancel_action.setEnabled(running)
        w.statusBar().showMessage("Generating…" if running else "Ready")

    def _on_runner_finished(self, result: GenerationResult) -> None:
        audit = result.audit  # stored with the reply by engine.generation.generate_and_store
        if self._window.ctx.document.chat_id == audit.chat_id:
            self._take_audit(audit)
        self._window.refresh_library()
        self._report(audit)

    def _take_audit(self, audit: PromptContextAudit) -> None:
        """The open chat got a reply: re-read it, show ``audit``, and make a new compaction summary undoable."""
        w = self._window
        doc = w.ctx.document
        before = doc.compaction_summary()
        w.audit = audit
        doc.reload()
        # the compaction row stays until the next generation: it says "done" or "fell back"
        w.chat_view.model.clear_finished_progress(keep_steps=("compaction",))
        after = doc.compaction_summary()
        if after is not None and (before is None or before.id != after.id):
            w.commands.push("Compaction summary", CompactionSummaryCommand(doc, after, present=True))
        w.audit_tab.set_state(w.audit, w.preview)

    def _report(self, audit: PromptContextAudit) -> None:
        """Say how the generation ended: cancelled, failed (an error box) or appended."""
        w = self._window
        if audit.error_code == "CANCELLED":  # the writer's own Cancel: no warning, just say so
            w.statusBar().showMessage(CANCELLED_TEXT, OUTCOME_STATUS_MS)
        elif audit.error_code:
            preview = w.preview
            if audit.error_code == "TOKEN_BUDGET_EXCEEDED" and preview is not None and preview.error is not None:
                err = UserError(audit.error_code, budget_message(preview))
            else:
                err = UserError(audit.error_code, message_for(audit.error_code))
            w.show_error(err, "Generation " + audit.status)
        else:
            w.statusBar().showMessage(f"Reply appended · audit {audit.generation_id[:8]} stored", OUTCOME_STATUS_MS)

    def _on_runner_failed(self, error: UserError) -> None:
        if error.code == "CANCELLED":
            self._window.statusBar().showMessage(CANCELLED_TEXT, OUTCOME_STATUS_MS)
            return
        self._window.show_error(error, "Generation failed")
