"""Token shading: alternate backgrounds over token spans in a ``QTextDocument``, in one pass.

Shading sets each paragraph's layout format ranges from precomputed token spans (bisect per
paragraph, no per-token document edits), so a 32,000-character block formats in well under
100 ms. Used by the Block inspector and the lorebook editor's entry text.
"""

from __future__ import annotations

import bisect
from typing import Any

from PySide6.QtGui import QTextCharFormat, QTextLayout


def utf16_offsets(text: str) -> list[int] | None:
    """Map code-point offsets of ``text`` to UTF-16 offsets (Qt positions).

    Returns ``None`` when the text has no character outside the BMP (offsets are equal);
    otherwise a list of length ``len(text) + 1``.
    """
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        return None
    out = [0] * (len(text) + 1)
    pos = 0
    for i, c in enumerate(text):
        out[i] = pos
        pos += 2 if ord(c) >= 0x10000 else 1
    out[len(text)] = pos
    return out


def apply_token_shading(document: Any, spans: list[tuple[int, int]], formats: list[QTextCharFormat]) -> int:
    """Shade token ``spans`` (UTF-16 document positions, sorted) alternately in ``document``.

    Sets each paragraph's layout format ranges once (no document edits, no highlighter: the
    PySide6 ``QSyntaxHighlighter.setFormat`` binding leaks a reference to ``None`` per call and
    aborts CPython 3.11 after a few thousand tokens). Returns the number of format ranges set.
    Passing ``formats=[]`` clears the shading.
    """
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    n = len(spans)
    total = 0
    block = document.firstBlock()
    while block.isValid():
        ranges = []
        if formats:
            block_start = block.position()
            block_end = block_start + block.length() - 1  # without the paragraph separator
            i = bisect.bisect_right(ends, block_start)
            while i < n and starts[i] < block_end:
                start = max(starts[i], block_start)
                end = min(ends[i], block_end)
                if end > start:
                    rng = QTextLayout.FormatRange()
                    rng.start = start - block_start
                    rng.length = end - start
                    rng.format = formats[i % len(formats)]
                    ranges.append(rng)
                i += 1
        block.layout().setFormats(ranges)
        total += len(ranges)
        block = block.next()
    document.markContentsDirty(0, document.characterCount())
    return total
