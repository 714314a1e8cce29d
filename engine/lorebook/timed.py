"""Timed effects (sticky, cooldown, delay), read from ``chat_metadata["timedWorldInfo"]``.

Internal to :mod:`engine.lorebook`. Rules from SillyTavern ``WorldInfoTimedEffects``
(FORMATS.md b3 item 8): an effect ``{start, end, protected}`` counts in messages; it is
dropped when the chat did not advance past ``start`` (swipe, regenerate) unless protected,
and ends when the chat length reaches ``end``; an ending sticky effect starts the cooldown.
Activation never writes the state: :func:`next_timed_state` returns the new one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ..schema.lorebook import LorebookEntry
from .prepare import _Entry, _Prepared
from .records import _Activation


class _Timed:
    """Sticky / cooldown / delay state (SillyTavern ``WorldInfoTimedEffects``), read-only."""

    def __init__(self, metadata: dict[str, Any] | None, chat_len: int) -> None:
        tw = (metadata or {}).get("timedWorldInfo") or {}
        self.chat_len = chat_len
        self.sticky: dict[str, dict[str, Any]] = dict(tw.get("sticky") or {}) if isinstance(tw, dict) else {}
        self.cooldown: dict[str, dict[str, Any]] = dict(tw.get("cooldown") or {}) if isinstance(tw, dict) else {}

    @staticmethod
    def _num(v: Any) -> float | None:
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    def _live(self, eff: Any, enabled: Any) -> dict[str, Any] | None:
        if not isinstance(eff, dict) or not enabled:
            return None
        start, end = self._num(eff.get("start")), self._num(eff.get("end"))
        if start is None or end is None:
            return None
        if self.chat_len <= start and not eff.get("protected"):
            return None  # the chat did not advance (swipe / regenerate): SillyTavern drops it
        if self.chat_len >= end:
            return None
        return eff

    def sticky_of(self, x: _Entry) -> dict[str, Any] | None:
        return self._live(self.sticky.get(x.label), x.entry.sticky)

    def cooldown_of(self, x: _Entry) -> dict[str, Any] | None:
        live = self._live(self.cooldown.get(x.label), x.entry.cooldown)
        if live is not None:
            return live
        # A sticky effect that ended now starts the cooldown (SillyTavern ``onStickyEnded``).
        st = self.sticky.get(x.label)
        if isinstance(st, dict) and x.entry.cooldown and self._num(st.get("end")) is not None:
            end = self._num(st.get("end"))
            assert end is not None
            if self.chat_len >= end and self.chat_len < end + x.entry.cooldown:
                return {"start": end, "end": end + x.entry.cooldown, "protected": True}
        return None

    def delayed(self, x: _Entry) -> bool:
        return bool(x.entry.delay) and self.chat_len < int(x.entry.delay or 0)


def _entry_hash(e: LorebookEntry) -> str:
    return hashlib.blake2b(e.model_dump_json().encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def next_timed_state(timed: _Timed, accepted: Mapping[int, _Activation], prepared: _Prepared,
                      chat_len: int) -> dict[str, Any]:
    """``timedWorldInfo`` after this activation: live effects kept, new ones for activated entries."""
    if not timed.sticky and not timed.cooldown and not any(
            c.x.entry.sticky or c.x.entry.cooldown for c in accepted.values()):
        return {"sticky": {}, "cooldown": {}}
    by_label = {x.label: x for x in prepared.entries}
    sticky: dict[str, Any] = {}
    cooldown: dict[str, Any] = {}
    for label, eff in timed.sticky.items():
        x = by_label.get(label)
        if x is not None and timed.sticky_of(x) is not None:
            sticky[label] = eff
    for label, eff in timed.cooldown.items():
        x = by_label.get(label)
        if x is not None and timed.cooldown_of(x) is not None:
            cooldown[label] = eff
    for x in prepared.entries:  # cooldowns started because a sticky effect ended now
        if x.label not in cooldown and x.label not in sticky and x.label in timed.sticky:
            cool = timed.cooldown_of(x)
            if cool is not None:
                cooldown[x.label] = {"hash": _entry_hash(x.entry), **cool}
    for c in accepted.values():
        e = c.x.entry
        if e.sticky and c.x.label not in sticky:
            sticky[c.x.label] = {"hash": _entry_hash(e), "start": chat_len, "end": chat_len + int(e.sticky),
                                 "protected": False}
        if e.cooldown and c.x.label not in cooldown:
            cooldown[c.x.label] = {"hash": _entry_hash(e), "start": chat_len,
                                   "end": chat_len + int(e.cooldown), "protected": False}
    return {"sticky": sticky, "cooldown": cooldown}
