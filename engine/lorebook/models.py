"""Frozen result models of lorebook activation and lint."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..schema.lorebook import InsertionPosition
from ..schema.trace import TraceRecord


class ActivatedEntry(BaseModel):
    """One activated (or budget-dropped) lorebook entry.

    Attributes
    ----------
    book, book_index:
        The book's name and its index in the ``books`` argument.
    uid, comment:
        The entry's id inside its book and its title.
    content:
        Text to insert (``{{char}}``/``{{user}}`` substituted, decorator lines removed).
    position, depth, role:
        Where it goes (SillyTavern ``position``; ``depth``/``role`` matter for ``AT_DEPTH``).
        ``role`` is ``"system"``, ``"user"`` or ``"assistant"``.
    order:
        SillyTavern ``order``: budget priority (higher first) and placement (lower first).
    constant:
        Constant entry: required, a protected block (SPEC §1).
    reason:
        Block reason: ``LOREBOOK_CONSTANT``, ``LOREBOOK_MATCHED``, ``LOREBOOK_STICKY``,
        ``LOREBOOK_DECORATOR_ACTIVATE`` for kept entries; ``LOREBOOK_BUDGET`` for dropped ones.
    tokens:
        ``count_tokens(content)`` in tokens of the caller's profile.
    trace:
        Why it activated, e.g. ``{"code": "LOREBOOK_KEY_MATCH", "key": "sword",
        "message_index": 12, "depth": 0, "pass": 0, "source": "chat"}``.
    """

    model_config = ConfigDict(frozen=True)

    book: str
    book_index: int
    uid: int | str
    comment: str = ""
    content: str
    position: InsertionPosition
    depth: int
    role: str
    order: float
    constant: bool
    reason: str
    tokens: int
    trace: dict[str, Any] = Field(default_factory=dict)


class ActivationResult(BaseModel):
    """The outcome of :func:`engine.lorebook.activate`.

    Attributes
    ----------
    activated:
        Kept entries in insertion order: by position bucket (``InsertionPosition`` value, then
        ``depth`` and role for ``AT_DEPTH``), then ``order`` ascending (SillyTavern places
        lower order first); equal orders reverse the priority tie-break, as SillyTavern's
        ``unshift`` does.
    budget_dropped:
        Matched entries dropped for the lorebook budget (reason ``LOREBOOK_BUDGET``), in
        priority order.
    trace:
        One record per entry of every book, in book order then entry order.
    budget, used_tokens:
        The lorebook budget and the tokens charged against it (tokens).
    diagnostics:
        Human-readable problems (invalid regex keys, ...), each naming book and uid.
    timed_effects:
        The ``chat_metadata["timedWorldInfo"]`` state after this activation (sticky and
        cooldown started by it), for the caller to store after a real generation.
    rules:
        The rule set that produced this result (``"sillytavern"`` or ``"loomscope"``).
    rule_differences:
        Under ``sillytavern`` with the comparison on: where the ``loomscope`` rules would give
        another result, one dict per difference (``uid``, ``book``, ``what``, ``message``); the
        entries' trace records carry the same note under ``detail["loomscope"]``.
    """

    model_config = ConfigDict(frozen=True)

    activated: list[ActivatedEntry] = Field(default_factory=list)
    budget_dropped: list[ActivatedEntry] = Field(default_factory=list)
    trace: list[TraceRecord] = Field(default_factory=list)
    budget: int = 0
    used_tokens: int = 0
    diagnostics: list[str] = Field(default_factory=list)
    timed_effects: dict[str, Any] = Field(default_factory=dict)
    rules: str = "loomscope"
    rule_differences: list[dict[str, Any]] = Field(default_factory=list)

    def trace_for(self, uid: int | str, book: str | None = None) -> TraceRecord | None:
        """The trace record of entry ``uid`` (in ``book`` when given), or ``None``."""
        for rec in self.trace:
            if rec.uid == uid and (book is None or rec.book == book):
                return rec
        return None

    def activated_uids(self) -> list[int | str]:
        """Uids of the kept entries, in insertion order."""
        return [a.uid for a in self.activated]


class LintFinding(BaseModel):
    """One lint finding about a lorebook entry (or the whole book when ``uid`` is ``None``)."""

    model_config = ConfigDict(frozen=True)

    code: str
    severity: Literal["error", "warning", "info"]
    uid: int | str | None = None
    comment: str = ""
    message: str
    detail: dict[str, Any] = Field(default_factory=dict)


class LintReport(BaseModel):
    """``loomscope lint-lorebook`` output: the findings for one lorebook file."""

    model_config = ConfigDict(frozen=True)

    file: str
    book: str
    entries: int
    budget: int
    findings: list[LintFinding] = Field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Findings per severity (``error``, ``warning``, ``info``)."""
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.severity] += 1
        return out
