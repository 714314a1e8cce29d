"""Stable codes in words for the GUI, read from the engine's one table (``engine.vocabulary``).

Every panel names a reason, trace or lint code through this module, so the blocks table, the
chat view, the Block and Audit inspectors and the lorebook editor say the same thing:
:func:`reason_in_words` (the words, sentence case: labels and inspectors), :func:`reason_meaning`
(the full meaning: tooltips), :func:`reason_cell` (the blocks table's Reason cell, made
specific by the block's ``reason_data``), :func:`display_status` (the status a block is
coloured by) and :func:`describe_detail` (a trace record's evidence in a phrase).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.vocabulary import Scope, meaning, term, words

from .labels import plain


def reason_in_words(code: str | None) -> str:
    """The writer-facing words of ``code``, sentence case (never empty for a non-empty code).

    ``"HISTORY_OLDEST_FIRST"`` → ``"Oldest history first"``; a code the engine does not list
    is humanized (``"SOME_NEW_CODE"`` → ``"Some new code"``); ``None`` or ``""`` → ``""``.

    Parameters
    ----------
    code:
        A stable UPPER_SNAKE reason, trace or lint code (``engine.vocabulary``), or ``None``.
    """
    if not code:
        return ""
    text = words(code)
    return text[:1].upper() + text[1:]


def reason_meaning(code: str, scope: Scope = "block") -> str:
    """The full meaning of ``code`` (``engine.vocabulary.meaning``); the code itself when unknown."""
    return meaning(code, scope)


def reason_cell(code: str, data: dict[str, Any] | None = None) -> str:
    """The blocks table's Reason cell: a few words, made specific by the block's ``reason_data``.

    ``newer message 55 did not fit`` (history kept contiguous), ``kept for pinned message 7``
    (tool group), ``over lorebook budget: 480 + 60 > 512``; else the code's words.
    """
    if data:
        if data.get("blocked_by_tokens") is not None:
            who = (f"message {data['blocked_by_message']}" if data.get("blocked_by_message") is not None
                   else str(data.get("blocked_by")))
            return f"newer {who} did not fit"
        if data.get("held_by") is not None:
            who = (f"message {data['held_by_message']}" if data.get("held_by_message") is not None
                   else str(data["held_by"]))
            return f"kept for {data.get('held_because', 'pinned')} {who}"
        if code == "LOREBOOK_BUDGET" and {"budget", "used", "tokens"} <= set(data):
            return f"over lorebook budget: {data['used']:,} + {data['tokens']:,} > {data['budget']:,}"
    return words(code)


def display_status(status: str, reason: str) -> str:
    """The status a block is shown and coloured with: ``summarized`` for a truncated block whose
    reason folds it into a summary (``engine.vocabulary`` gives ``SUMMARIZED`` that colour), else
    ``status`` itself."""
    t = term(reason)
    if status == "truncated" and t is not None and t.status == "summarized":
        return "summarized"
    return status


def describe_detail(detail: Mapping[str, Any] | None) -> str:
    """A trace record's ``detail`` (dict of evidence) in a short phrase.

    ``{"key": "sword", "message_index": 12, "depth": 0, "pass": 1}`` →
    ``'key "sword" in message 12 (depth 0), recursion pass 1'``.
    """
    if not detail:
        return ""
    parts: list[str] = []
    rest = dict(detail)
    key = rest.pop("key", None)
    msg = rest.pop("message_index", None)
    depth = rest.pop("depth", None)
    rpass = rest.pop("pass", None)
    source = rest.pop("source", None)
    # World Info under the sillytavern rules: where the loomscope rules differ, say it in words
    other_rules = rest.pop("loomscope", None)
    rest.pop("order_of_activation", None)
    if key is not None:
        phrase = f'key "{key}"'
        if msg is not None:
            phrase += f" in message {msg}"
        elif source:
            phrase += f" in {source}"
        if depth is not None:
            phrase += f" (depth {depth})"
        parts.append(phrase)
    else:
        if msg is not None:
            parts.append(f"message {msg}")
        if depth is not None:
            parts.append(f"depth {depth}")
        if source:
            parts.append(f"in {source}")
    if rpass:
        parts.append(f"recursion pass {rpass}")
    for name, value in rest.items():
        if value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = describe_detail(value) or plain(value)
        parts.append(f"{name.replace('_', ' ')} {plain(value)}")  # never a Python repr
    if isinstance(other_rules, dict) and other_rules.get("message"):
        parts.append(str(other_rules["message"]))
    return ", ".join(parts)
