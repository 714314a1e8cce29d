"""What changed between a stored audit (what one generation sent) and the current preview.

The Audit inspector shows this comparison; the rule — how blocks of the two sides match, what
counts as a change, how the token delta of the sent prompt adds up — is the engine's, so the
API or a script answers the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .schema import PreviewBlock

__all__ = [
    "CHANGE_STATUS",
    "CHANGE_WORDS",
    "Change",
    "CompareRow",
    "ComparisonSummary",
    "compare_audit_with_preview",
    "summarize_comparison",
]

#: How a block differs between the audit and the preview.
Change = Literal["added", "dropped", "now_excluded", "now_included", "changed", "same"]

#: Change → writer-facing words.
CHANGE_WORDS: dict[Change, str] = {
    "added": "added",
    "dropped": "dropped",
    "now_excluded": "now excluded",
    "now_included": "now included",
    "changed": "changed",
    "same": "unchanged",
}

#: Change → the status whose colours it is shown in (``engine.vocabulary.STATUS_COLOURS``);
#: ``same`` is not coloured.
CHANGE_STATUS: dict[Change, str] = {
    "added": "kept",
    "now_included": "kept",
    "dropped": "excluded",
    "now_excluded": "excluded",
    "changed": "truncated",
}

_SENT = ("kept", "truncated")


class CompareRow(BaseModel):
    """One block in the comparison of an audit with the current preview.

    Attributes
    ----------
    source, kind:
        The block's stable origin (``message:12``, ``lorebook:Book:3``, ...) and kind.
    change:
        ``added`` (only in the preview), ``dropped`` (only in the audit), ``now_excluded``
        (sent then, excluded now), ``now_included`` (excluded then, sent now), ``changed``
        (tokens, status or reason differ otherwise) or ``same``.
    audit_tokens, preview_tokens:
        The block's tokens then and now (``None`` where the block is absent).
    delta:
        ``preview_tokens − audit_tokens`` with absent counted as 0 (tokens).
    audit_status, preview_status, audit_reason, preview_reason:
        Status and stable reason code then and now (``None`` where absent).
    """

    model_config = ConfigDict(frozen=True)

    source: str
    kind: str
    change: Change
    audit_tokens: int | None
    preview_tokens: int | None
    delta: int
    audit_status: str | None
    preview_status: str | None
    audit_reason: str | None
    preview_reason: str | None


class ComparisonSummary(BaseModel):
    """Rows per change, and the change of the sent prompt's block tokens.

    Attributes
    ----------
    added, dropped, now_excluded, now_included, changed, same:
        Number of rows of each :data:`Change`.
    delta:
        Sum over rows of the tokens sent now minus the tokens sent then, a block counting only
        on the side(s) where it was sent (kept or truncated): the change of the prompt's block
        tokens (tokens).
    """

    model_config = ConfigDict(frozen=True)

    added: int = 0
    dropped: int = 0
    now_excluded: int = 0
    now_included: int = 0
    changed: int = 0
    same: int = 0
    delta: int = 0

    def count(self, change: Change) -> int:
        """Rows of ``change``."""
        return int(getattr(self, change))


def _keyed(blocks: Sequence[PreviewBlock]) -> list[tuple[tuple[str, int], PreviewBlock]]:
    """Blocks keyed by ``(source, occurrence)`` so repeated sources match in order."""
    seen: Counter[str] = Counter()
    out = []
    for block in blocks:
        out.append(((block.source, seen[block.source]), block))
        seen[block.source] += 1
    return out


def _change(audit_block: PreviewBlock | None, preview_block: PreviewBlock | None) -> Change:
    if audit_block is None:
        return "added"
    if preview_block is None:
        return "dropped"
    a_status, p_status = audit_block.status, preview_block.status
    if a_status in _SENT and p_status == "excluded":
        return "now_excluded"
    if a_status == "excluded" and p_status in _SENT:
        return "now_included"
    if a_status != p_status or audit_block.tokens != preview_block.tokens or audit_block.reason != preview_block.reason:
        return "changed"
    return "same"


def _row(audit_block: PreviewBlock | None, preview_block: PreviewBlock | None) -> CompareRow:
    ref = preview_block if preview_block is not None else audit_block
    assert ref is not None  # a row has at least one side
    a_tokens = audit_block.tokens if audit_block is not None else None
    p_tokens = preview_block.tokens if preview_block is not None else None
    return CompareRow(
        source=ref.source,
        kind=ref.kind,
        change=_change(audit_block, preview_block),
        audit_tokens=a_tokens,
        preview_tokens=p_tokens,
        delta=(p_tokens or 0) - (a_tokens or 0),
        audit_status=audit_block.status if audit_block is not None else None,
        preview_status=preview_block.status if preview_block is not None else None,
        audit_reason=audit_block.reason if audit_block is not None else None,
        preview_reason=preview_block.reason if preview_block is not None else None,
    )


def compare_audit_with_preview(audit_blocks: Sequence[PreviewBlock] | None,
                               preview_blocks: Sequence[PreviewBlock] | None) -> list[CompareRow]:
    """What changed between the blocks of a stored audit and those of the current preview.

    Blocks are matched by ``source`` (the n-th block with a given source in the audit matches
    the n-th one in the preview). The result follows the preview's prompt order; a block only
    in the audit is placed after the row of the audit block that preceded it.

    Parameters
    ----------
    audit_blocks, preview_blocks:
        ``PromptContextAudit.blocks`` and ``ContextPreview.blocks``, in prompt order. ``None``
        is treated as empty.

    Returns
    -------
    list[CompareRow]
        One row per distinct block of either side (``len`` = matched + added + dropped).
    """
    audit = _keyed(audit_blocks or ())
    preview = _keyed(preview_blocks or ())
    audit_pos = {key: i for i, (key, _) in enumerate(audit)}
    preview_keys = {key for key, _ in preview}
    rows: list[CompareRow] = []
    ai = 0

    def flush_until(limit: int) -> None:
        nonlocal ai
        while ai < limit:
            key, block = audit[ai]
            if key not in preview_keys:
                rows.append(_row(block, None))
            ai += 1

    for key, p_block in preview:
        j = audit_pos.get(key)
        if j is None:
            rows.append(_row(None, p_block))
            continue
        flush_until(j)
        ai = max(ai, j + 1)
        rows.append(_row(audit[j][1], p_block))
    flush_until(len(audit))
    return rows


def summarize_comparison(rows: Sequence[CompareRow]) -> ComparisonSummary:
    """Counts per change kind plus the ``delta`` of the sent blocks' tokens (:class:`ComparisonSummary`)."""
    counts: Counter[str] = Counter(r.change for r in rows)
    delta = 0
    for r in rows:
        before = r.audit_tokens if r.audit_status in _SENT else 0
        after = r.preview_tokens if r.preview_status in _SENT else 0
        delta += (after or 0) - (before or 0)
    return ComparisonSummary(**{k: counts.get(k, 0) for k in CHANGE_WORDS}, delta=delta)
