"""The main window's presentation of previews: the document and each finished preview → the views
(split from :mod:`gui.main_window`).

A finished preview (:class:`~gui.preview.PreviewOutcome`) is shown in every view at once when it has
the same rows as the one shown: the worker already compared the two
(:func:`gui.models.preview_delta.diff_previews`, :meth:`PreviewPresenter.derive_maker`), so the
blocks table signals only the rows that moved and the chat list, budget bar and tokens chart update
only theirs. The first preview of a chat just opened fills every view from scratch, spread over two
turns of the event loop (:meth:`PreviewPresenter.apply_staged`). A preview computed for a state the
document has left is dropped: every document change schedules the right one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer

from engine.resolve import speaker_names
from engine.schema import ChatMessage, ContextPreview, PreviewBlock

from .banners import budget_message, compaction_options, token_summary
from .models.preview_delta import PreviewDelta
from .prompt_text import profile_for, token_spans_for
from .window_edits import ST_NO_PINNING

if TYPE_CHECKING:
    from .models.pending import FlagRollback
    from .preview import PreviewOutcome
    from .window_parts import PresenterWindow

#: Between the two turns of the first apply of a chat just opened (milliseconds, :meth:`PreviewPresenter.apply_staged`).
STAGE_PAUSE_MS = 1
#: How long the status bar keeps a "the preview did not confirm your click" note (milliseconds).
ROLLBACK_NOTE_MS = 12000


def newest_prose_message(messages: list[ChatMessage]) -> int:
    """The newest message a writer reads (user or assistant text), else the newest message."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role in ("user", "assistant") and m.text().strip():
            return i
    return len(messages) - 1


class PreviewPresenter:
    """Shows the document and its previews in the window's views.

    Parameters
    ----------
    window:
        The window (:class:`~gui.window_parts.PresenterWindow`): its context, its views, the
        header labels and banner, the audit it shows, ``preview_applied`` and the status bar.

    Attributes
    ----------
    preview:
        The preview the views show (``None``: none).
    preview_chat:
        The chat that preview is of.
    rollback_note:
        The last "the preview did not confirm your click" note (also in the status bar).
    """

    def __init__(self, window: PresenterWindow) -> None:
        self._window = window
        self.preview: ContextPreview | None = None
        self.preview_chat: str | None = None
        self.rollback_note = ""
        #: The preview whose blocks table is still to be filled (:meth:`apply_staged`).
        self._staged: ContextPreview | None = None
        #: The next preview selects the newest message (a chat was just opened).
        self._select_on_next_preview = False
        #: The next message list scrolls to its end (a chat was just opened).
        self._scroll_chat_on_messages = False

    # -- the document ----------------------------------------------------------------------
    def chat_opened(self, chat_id: str) -> None:
        """A chat was loaded into the document: drop another chat's preview, and have the next
        preview select the newest message and the chat list scroll to its end."""
        if self.preview is not None and self.preview_chat != (chat_id or None):
            # never show one chat's title over another chat's blocks while the preview computes
            self.apply_preview(None, emit=False)
            self._window.status_label.setText("computing preview…")
        self._scroll_chat_on_messages = True
        self._select_on_next_preview = True

    def messages_changed(self) -> None:
        """The document's messages changed as a whole: fill the chat list again."""
        w = self._window
        req = w.ctx.document.request
        if req is None:
            w.chat_view.set_messages([], "User", "Assistant")
            return
        names = speaker_names(req)  # the names the preview substitutes for {{user}} and {{char}}
        w.chat_view.set_messages(list(req.chat.messages), names.user, names.char or "Assistant")
        if self._scroll_chat_on_messages:
            # a chat opens at its end, where the next message goes
            self._scroll_chat_on_messages = False
            w.chat_view.list.scrollToBottom()
            QTimer.singleShot(0, w.chat_view.list.scrollToBottom)

    def message_changed(self, index: int) -> None:
        """One message's flags or text changed: repaint its rows now, ahead of the preview."""
        w = self._window
        msg = w.ctx.document.messages()[index]
        w.chat_view.update_message(index, msg)
        w.blocks_panel.model.expect_flags(index, pinned=bool(msg.meta.pinned),
                                          manual_excluded=bool(msg.meta.manualExcluded))

    def flags_rolled_back(self, rollbacks: list[FlagRollback]) -> None:
        """Say which optimistic ticks the preview did not confirm (:attr:`rollback_note`)."""
        strategy = self.preview.strategy if self.preview is not None else ""
        note = "; ".join(r.describe(strategy) for r in rollbacks[:3])
        if len(rollbacks) > 3:
            note += f" (and {len(rollbacks) - 3} more)"
        self.rollback_note = note
        self._window.statusBar().showMessage(note, ROLLBACK_NOTE_MS)

    # -- finished previews -----------------------------------------------------------------
    def on_preview_ready(self, outcome: PreviewOutcome) -> None:
        """A preview finished (:attr:`PreviewController.preview_ready`): show it, or its error."""
        w = self._window
        doc = w.ctx.document
        if outcome.request is not doc.request:
            # computed for a state the document has left (another chat, a newer edit); every
            # document change schedules a preview, so the right one is on its way
            return
        if outcome.error is not None:
            if self.preview is not None and self.preview_chat != doc.chat_id:
                self.apply_preview(None, emit=False)  # never show another chat's blocks
            # the entries stay editable without a preview: a bad entry can be fixed right here
            w.lorebook_tab.set_state(doc.request, self.preview, list(doc.lorebook_ids))
            w.banner.show_text("The preview could not be computed. " + outcome.error.full_text())
            w.status_label.setText("preview failed")
            w.preview_applied.emit(None)
            return
        preview = outcome.preview
        if preview is not None and (self.preview is None or self.preview_chat != doc.chat_id):
            # the first preview of a chat just opened: every view is filled from scratch, which
            # on a 5,000-message chat keeps the window busy too long in one go
            self.apply_staged(preview, outcome.elapsed_s)
            return
        delta = outcome.derived if isinstance(outcome.derived, PreviewDelta) else None
        self.apply_preview(preview, outcome.elapsed_s, delta=delta)

    def apply_staged(self, preview: ContextPreview, elapsed_s: float) -> None:
        """:meth:`apply_preview` in two turns of the event loop: the chat list, the bar, the chart
        and the inspectors now, the blocks table (a model reset and its column widths) at the
        next turn, after they have painted; then ``preview_applied``. Anything applied in
        between (another preview, a closed chat) supersedes the second turn."""
        self._staged = preview
        self._apply_views(preview, None)
        widths = self._window.blocks_panel.measure(preview)
        # a timer, not a zero-delay call (Qt delivers those with the queued events, before the
        # views just updated have painted and before anything else waiting)
        QTimer.singleShot(STAGE_PAUSE_MS, lambda: self._finish_staged(preview, elapsed_s, widths))

    def _finish_staged(self, preview: ContextPreview, elapsed_s: float, widths: dict[int, int]) -> None:
        if self._staged is not preview:
            return
        self.apply_preview(preview, elapsed_s, views_done=True, widths=widths)

    def apply_preview(self, preview: ContextPreview | None, elapsed_s: float = 0.0, *,
                      emit: bool = True, views_done: bool = False, widths: dict[int, int] | None = None,
                      delta: PreviewDelta | None = None) -> None:
        """Show ``preview`` in every view (``preview_applied`` follows unless ``emit`` is false).

        ``views_done``: every view but the blocks table already shows it, and ``widths`` are its
        column widths (:meth:`apply_staged`). ``delta``: how it differs from the preview shown,
        when the worker found it (used only if it is from that preview).
        """
        w = self._window
        self._staged = None
        self.preview = preview
        self.preview_chat = w.ctx.document.chat_id
        w.blocks_panel.set_preview(preview, widths, delta)
        if not views_done:
            # the rows that changed, found once by the blocks table: the other views update only those
            self._apply_views(preview, w.blocks_panel.model.last_delta)
        self._show_header(preview, elapsed_s)
        if self._select_on_next_preview and preview is not None:
            self._select_on_next_preview = False
            messages = w.ctx.document.messages()
            if messages:
                # a freshly opened chat selects its newest message, the one the reply answers
                # (a writer's message, not a tool result or an empty tool call)
                w.blocks_panel.select_message(newest_prose_message(messages))
        self.block_selected(w.blocks_panel.current_block())
        if emit:
            w.preview_applied.emit(preview)

    def _show_header(self, preview: ContextPreview | None, elapsed_s: float) -> None:
        """The banner, the approximate-counts badge and the token summary of ``preview``."""
        w = self._window
        if preview is None:
            w.banner.dismiss()
            w.status_label.clear()
            return
        if preview.error is not None:
            w.banner.show_text(budget_message(preview))
        else:
            w.banner.dismiss()
        w.approx_badge.setVisible(preview.tokenizer.approximate)
        w.approx_badge.setToolTip(
            f"Profile {preview.tokenizer.profile} estimates this model's tokenizer; "
            f"{preview.safety_margin:,} tokens are held back as a safety margin.")
        w.status_label.setText(token_summary(preview, elapsed_s))

    def derive_maker(self) -> Callable[[ContextPreview], PreviewDelta | None] | None:
        """The worker's work on each new preview (:meth:`PreviewController.set_derive`), captured now:
        the changed rows (:meth:`BlocksTableModel.delta_maker`)."""
        diff = self._window.blocks_panel.model.delta_maker()

        def derive(preview: ContextPreview) -> PreviewDelta | None:
            return diff(preview) if diff is not None else None

        return derive

    def _apply_views(self, preview: ContextPreview | None, delta: PreviewDelta | None) -> None:
        """Every view of ``preview`` but the blocks table and the header labels."""
        w = self._window
        doc = w.ctx.document
        sillytavern = doc.request is not None and doc.request.sillytavern is not None
        setup = getattr(w, "library_setup", None)  # built after the window's parts
        if setup is not None:
            setup.export_action.setEnabled(doc.chat_id is not None)
        w.blocks_panel.model.set_pin_off_reason(ST_NO_PINNING if sillytavern else "")
        w.chat_view.delegate.pin_available = not sillytavern
        w.chat_view.set_preview(preview, delta)
        w.budget_bar.set_preview(preview, compaction_options(doc.request.settings) if doc.request else None, delta)
        w.tokens_chart.set_preview(preview, delta)
        w.settings_panel.set_preview(preview)
        w.lorebook_tab.set_state(doc.request, preview, list(doc.lorebook_ids))
        w.audit_tab.set_state(w.audit, preview)
        w.prompt_text_view.set_preview(preview, doc.request,
                                       token_spans_for(preview, doc.request, w.ctx.registries.tokenizers))

    # -- selection -------------------------------------------------------------------------
    def block_selected(self, block: PreviewBlock | None) -> None:
        """Show ``block`` (the blocks table's selection) in the block inspector and the prompt text."""
        w = self._window
        profile = self.preview.tokenizer.profile if self.preview is not None else "o200k_base"
        doc = w.ctx.document
        w.block_inspector.set_block(block, profile, self.preview,
                                    len(doc.messages()) if doc.request is not None else None)
        w.prompt_text_view.select_block(block.position if block is not None else None)

    def preview_profile(self, name: str) -> Any:
        """The tokenizer profile the shown preview counted with, when it is named ``name``."""
        preview = self.preview
        if preview is None or preview.tokenizer.profile != name:
            return None
        w = self._window
        return profile_for(preview, w.ctx.document.request, w.ctx.registries.tokenizers)
