"""Builders for GUI tests: previews and requests made in code."""

from __future__ import annotations

from engine.schema import ContextPreview, Explanation, PreviewBlock, TokenizerInfo


def make_block(i: int, *, kind: str = "message", status: str = "kept", reason: str = "FITS_BUDGET",
               tokens: int = 10, message_index: int | None = None, pinned: bool = False,
               protected: bool = False, manual_excluded: bool = False, group: str | None = None,
               role: str = "user", text: str | None = None, original_tokens: int | None = None) -> PreviewBlock:
    return PreviewBlock(
        id=f"b{i}", kind=kind, role=role, source=f"message:{message_index}" if message_index is not None else kind,
        position=i, tokens=tokens, status=status, reason=reason, protected=protected, pinned=pinned,
        group=group, text=text if text is not None else f"text of block {i}", message_index=message_index,
        manual_excluded=manual_excluded, original_tokens=original_tokens)


def make_preview(blocks: list[PreviewBlock], *, limit: int = 1000, reserve: int = 100,
                 approximate: bool = False, fits: list[int | None] | None = None,
                 details: list[Explanation | None] | None = None) -> ContextPreview:
    """A preview of ``blocks``; ``fits`` / ``details``: its figure columns (default: none known)."""
    kept = sum(b.tokens for b in blocks if b.status != "excluded")
    return ContextPreview(
        fit_windows=fits if fits is not None else [None] * len(blocks),
        reason_details=details if details is not None else [None] * len(blocks),
        model="gpt-4o", tokenizer=TokenizerInfo(profile="generic-approx" if approximate else "o200k_base",
                                                approximate=approximate),
        context_limit=limit, reply_reserve=reserve, budget=limit - reserve, safety_margin=0,
        headroom=limit - reserve - kept - 3, prompt_tokens=kept + 3, strategy="truncate", blocks=blocks)
