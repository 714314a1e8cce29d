"""The text of a message's content parts, as OpenAI's accounting counts it (no tokenizer here).

Shared by :mod:`engine.tokenizers.accounting` (OpenAI profiles) and the open-weight chat templates
(:mod:`engine.tokenizers.templates`), below both: a part's text does not depend on a profile.
"""

from __future__ import annotations

import json
from typing import Any

#: Part types whose string values are all sent as text (reasoning blobs, files).
TEXT_BLOB_PART_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking", "file"})


def _string_leaves(value: Any, skip: str = "type") -> list[str]:
    """Every string inside ``value`` (nested dicts and lists), the ``skip`` keys left out."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k != skip for s in _string_leaves(v, skip)]
    if isinstance(value, list):
        return [s for v in value for s in _string_leaves(v, skip)]
    return []


def part_type(part: dict[str, Any]) -> str | None:
    """The type of one content part (``text``, ``image_url``, ...; old shapes without ``type`` guessed), or ``None``."""
    t = part.get("type")
    if t == "image_url" or ("image_url" in part and t != "text"):
        return "image_url"
    if t is None:
        if isinstance(part.get("text"), str):
            return "text"
        if "image_url" in part:
            return "image_url"
        return None
    return t if isinstance(t, str) else None


def part_texts(part: Any) -> list[str]:
    """The strings of one content part that are counted as text (see the module notes)."""
    if isinstance(part, str):
        return [part]
    if not isinstance(part, dict):
        return [json.dumps(part, ensure_ascii=False, default=str)]
    kind = part_type(part)
    if kind == "text" and isinstance(part.get("text"), str):
        return [part["text"]]
    if kind in ("image_url", "input_audio"):
        return []  # counted by their own rules in message_overhead
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return [part["refusal"]]
    if kind in TEXT_BLOB_PART_TYPES:
        return _string_leaves(part)
    return [json.dumps(part, ensure_ascii=False, sort_keys=True, default=str)]
