"""Test helper: a Text Completion preview built by hand from a real Chat Completion preview.

Until the engine builds SillyTavern's prompt string itself, generation and GUI tests need a
``ContextPreview`` with ``api="text_completion"``, a ``prompt`` and a ``span`` per kept block.
:func:`as_text_completion` lays the kept blocks out in an Alpaca-style instruct string (the
shape SillyTavern's Alpaca preset gives: ``### Instruction:`` / ``### Response:`` sequences,
blank-line separators) and records each block's character range, so that
``prompt[span[0]:span[1]] == block.text`` holds for every kept block. It is a test fixture, not
SillyTavern's assembly (that lives in the engine).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.schema import ContextPreview, PreviewBlock

#: Alpaca's sequences (SillyTavern ``default/content/presets/instruct/Alpaca.json``).
INPUT_SEQ = "### Instruction:\n"
OUTPUT_SEQ = "### Response:\n"
STOP = ["\n### Instruction:", "\n### Response:"]


def as_text_completion(pv: ContextPreview, *, stop: list[str] | None = None) -> ContextPreview:
    """``pv`` as a Text Completion preview: the kept blocks in one string, with spans."""
    parts: list[str] = []
    pos = 0
    blocks: list[PreviewBlock] = []
    for b in pv.blocks:
        if b.status == "excluded" or not b.text:
            blocks.append(b.model_copy(update={"span": None}))
            continue
        prefix = (INPUT_SEQ if b.role == "user" else OUTPUT_SEQ) if b.kind == "message" else ""
        parts.append(prefix)
        pos += len(prefix)
        start = pos
        parts.append(b.text)
        pos += len(b.text)
        blocks.append(b.model_copy(update={"span": (start, pos)}))
        parts.append("\n\n")
        pos += 2
    parts.append(OUTPUT_SEQ)
    prompt = "".join(parts)
    return pv.model_copy(update={"api": "text_completion", "prompt": prompt,
                                 "stop": list(STOP if stop is None else stop), "blocks": blocks})


def prepared_as_text_completion(prepared: Any, **kw: Any) -> Any:
    """A ``PreparedPrompt`` whose preview is :func:`as_text_completion` of its own."""
    return replace(prepared, preview=as_text_completion(prepared.preview, **kw))
