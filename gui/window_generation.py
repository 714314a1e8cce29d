"""The main window's generation: provider settings, Generate, its progress and outcome, the
compaction summary's undo step, and the lorebook report (split from :mod:`gui.main_window`).

:class:`GenerationMixin` is mixed into :class:`~gui.main_window.MainWindow`; it reads the
window's ``ctx``, ``generation`` runner, ``commands``, views and actions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt

from engine.schema import ProgressEvent

from .errors import UserError, message_for
from .undo import CompactionSummaryCommand
from .widgets.provider_dialog import ProviderDialog, load_provider_settings, resolve_key

if TYPE_CHECKING:  # loaded on first use (window start-up time)
    from engine.generation import GenerationResult, ProviderConfig

    from .widgets.lorebook_report_dialog import LorebookReportDialog


class GenerationMixin:
    """Generate, cancel, provider settings and what a generation leaves behind."""

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
        dialog = ProviderDialog(self.ctx.settings, model, self, default_base_url=self._setup_server_url())
        return dialog.exec() == ProviderDialog.DialogCode.Accepted

    def _setup_server_url(self) -> str | None:
        """A Text Completion chat's server URL from its SillyTavern settings (KoboldCpp, llama.cpp, …),
        offered as the base URL until one is saved; ``None`` for other chats."""
        request = self.ctx.document.request
        st = request.sillytavern if request is not None else None
        tc = st.text_completion if st is not None else None
        if tc is None or tc.main_api == "koboldhorde" or not tc.server_url.strip():
            return None
        return tc.server_url.strip()

    def provider_config(self) -> ProviderConfig:
        """The provider configuration from the saved settings and the resolved key."""
        from engine.generation import ProviderConfig  # the provider client loads on first use

        model = self.ctx.document.request.settings.model if self.ctx.document.request else "gpt-4o"
        ps = load_provider_settings(self.ctx.settings, model)
        return ProviderConfig(base_url=ps.base_url, model=ps.model, api_key=resolve_key(),
                              timeout_s=ps.timeout_s, stream=ps.stream, extra_body=dict(ps.extra_body) or None)

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

