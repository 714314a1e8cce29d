"""Words of the compaction progress row in the chat (issue 28 item 5, seed 003).

"A progress indicator for context compaction appears in the chat, like a tool call": while the
summary is requested the row says what is being summarized; when it ends it says the outcome —
``Compacted 24 messages`` with what it covers and the verbatim artifacts it kept, or ``Fell back
to truncation`` with why. The words come from the engine's :class:`ProgressEvent` (``label``,
``text``, ``detail``); this module only picks the headline and the detail line for
:class:`gui.widgets.chat_view.ChatDelegate`.
"""

from __future__ import annotations

from engine.schema import ProgressEvent

#: The step name of compaction events (``engine.compaction.run``).
COMPACTION_STEP = "compaction"


def is_compaction(event: ProgressEvent) -> bool:
    """``True`` for the compaction step's events."""
    return event.step == COMPACTION_STEP


def compaction_row_text(event: ProgressEvent) -> tuple[str, str]:
    """``(headline, detail)`` of a compaction row.

    Running: ``Compacting context… summarizing 24 older messages`` and what the prompt was;
    done: ``Compacted 24 messages`` and the engine's outcome sentence; failed: ``Fell back to
    truncation: <why>`` and the error code; cancelled: the label.
    """
    d = event.detail or {}
    text = " ".join((event.text or "").split())
    if event.state == "running":
        n = d.get("messages")
        head = f"Compacting context… summarizing {n} older messages" if n else event.label
        model = d.get("model")
        tokens, trigger = d.get("prompt_tokens"), d.get("trigger")
        detail = (f"asking {model} for a summary" if model else "asking for a summary")
        if tokens is not None and trigger is not None:
            detail += f": the prompt is {tokens:,} tokens, at or above the trigger of {trigger:,}"
        return head, detail
    if event.state == "done":
        n = d.get("messages")
        head = f"Compacted {n} message{'s' if n != 1 else ''}" if n else event.label
        return head, text
    if event.state == "failed":
        why, code = d.get("reason"), d.get("error_code")
        if not why:
            return "Fell back to truncation", text
        detail = (f"{code} · " if code else "") + "the oldest history was truncated instead; the chat is unchanged"
        return f"Fell back to truncation: {why}", detail
    return event.label, text
