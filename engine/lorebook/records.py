"""Result records shared by both activation rule sets: trace records, activated entries.

Internal to :mod:`engine.lorebook`. The trace holds one record per entry of every book, so
records are built without re-validation (:func:`engine.schema._construct.construct`), and the records of entries that were
never candidates are cached per prepared book set (:func:`_default_trace`).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..schema._construct import construct
from ..schema.lorebook import InsertionPosition
from .models import ActivatedEntry, TraceRecord
from .prepare import _Entry, _Prepared

_ROLES = {0: "system", 1: "user", 2: "assistant"}



class _Activation(Protocol):
    """An entry activated in a pass: ``_Cand`` (loomscope rules) or ``_C`` (sillytavern rules)."""

    @property
    def x(self) -> _Entry: ...

    code: str
    detail: dict[str, Any]


def _record(x: _Entry, *, activated: bool, code: str, detail: dict[str, Any],
            tokens: int | None) -> TraceRecord:
    """The trace record of entry ``x``."""
    e = x.entry
    return construct(TraceRecord, {
        "book": x.book, "book_index": x.book_index, "uid": e.uid, "comment": e.comment,
        "activated": activated, "code": code, "detail": detail, "tokens": tokens})


def _default_trace(prepared: _Prepared, global_depth: int) -> list[TraceRecord]:
    """Trace records of entries that were never candidates (cached per global scan depth)."""
    cached = prepared.default_trace.get(global_depth)
    if cached is not None:
        return cached
    out: list[TraceRecord] = []
    for x in prepared.entries:
        e = x.entry
        depth = global_depth if e.scan_depth is None else int(e.scan_depth)
        code, detail = x.default_reason or ("LOREBOOK_NOT_MATCHED", {
            "keys": [k.text for k in x.keys], "scan_depth": depth})
        out.append(_record(x, activated=False, code=code, detail=detail, tokens=None))
    if len(prepared.default_trace) > 8:
        prepared.default_trace.clear()
    prepared.default_trace[global_depth] = out
    return out


def _role_name(role: Any) -> str:
    """SillyTavern's numeric entry role (0 system, 1 user, 2 assistant) as a name."""
    if isinstance(role, str) and role in ("system", "user", "assistant"):
        return role
    try:
        return _ROLES.get(int(role), "system")
    except (TypeError, ValueError):
        return "system"


def _entry_model(c: _Activation, tokens: int, reason: str) -> ActivatedEntry:
    """The :class:`ActivatedEntry` of an activated (or budget-dropped) candidate."""
    e = c.x.entry
    return construct(ActivatedEntry, {
        "book": c.x.book, "book_index": c.x.book_index, "uid": e.uid, "comment": e.comment,
        "content": c.x.content,
        "position": e.position if type(e.position) is InsertionPosition else InsertionPosition(e.position),
        "depth": int(e.depth),
        "role": _role_name(e.role), "order": float(e.order), "constant": bool(e.constant),
        "reason": reason, "tokens": tokens, "trace": {"code": c.code, **c.detail},
    })


def _regex_timeout_diagnostic(x: _Entry, key: str, timeout: dict[str, Any]) -> str:
    """The diagnostic naming a regex key of ``x`` that ran out of its time limit."""
    return (f"{x.book}: uid {x.entry.uid}: LOREBOOK_REGEX_TIMEOUT: regex key {key!r} ran out of its "
            f"{timeout['timeout_ms']:g} ms on the {timeout['where'] or 'text'}; it does not match")
