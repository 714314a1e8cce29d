"""Timed effects (sticky, cooldown, delay), read from ``chat_metadata["timedWorldInfo"]``.

Internal to :mod:`engine.lorebook`. A literal reading of SillyTavern 1.12.6
``WorldInfoTimedEffects`` (``public/scripts/world-info.js`` 387–688):

* ``checkTimedEffects`` (519–587), done when :class:`_Timed` is built: each stored sticky, then
  each stored cooldown effect ``{hash, start, end, protected}`` (keyed ``"<world>.<uid>"``) is
  matched to the entry whose hash equals ``hash`` (:mod:`engine.lorebook.st_hash`; an edited
  entry no longer matches). It is dropped when the chat did not advance past ``start`` and it is
  not protected (swipe, regenerate); kept but inert when no entry matches, until the chat reaches
  ``end``; dropped when the entry lost that effect; dropped when the chat reached ``end`` — an
  ending sticky effect of an entry with a cooldown then starts a *protected* cooldown counted
  from the current chat length (``onEnded.sticky``, 420–431), which blocks the entry at once.
* ``isEffectActive`` compares hashes; ``delay`` holds while the chat is shorter than it.
* ``setTimedEffects`` (609–634): each activated entry with a sticky / cooldown gets a new effect
  ``{hash, start: len, end: len + n, protected: false}`` unless its key already holds one.

Activation never writes the state: :func:`next_timed_state` returns the new
``timedWorldInfo``. Under the ``loomscope`` rules effects are matched by their key instead of
the hash, so editing an entry keeps its timers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..schema.lorebook import Lorebook
from .prepare import _Entry, _Prepared
from .records import _Activation
from .st_hash import HASHES_FIELD, NO_POSITION_FIELD, entry_hash, js_number, js_number_string

_TYPES = ("sticky", "cooldown")


def _js_truthy(v: Any) -> bool:
    if isinstance(v, float) and math.isnan(v):
        return False
    return bool(v) or isinstance(v, (dict, list))


def _js_str(v: Any) -> str:
    """JavaScript ``String(v)`` for the stored ``hash`` values."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return js_number_string(v)
    return str(v)


def _count(v: int | None) -> float:
    return js_number(v)


class _Timed:
    """The timed effects of one activation, after SillyTavern's ``checkTimedEffects``.

    ``entries`` are all entries (disabled ones too: ``getSortedEntries`` keeps them) in
    SillyTavern's sorted order; ``hash_of`` gives an entry's hash (``None``: match effects by key,
    the ``loomscope`` rules). ``state`` is the processed ``timedWorldInfo`` (a copy).
    """

    def __init__(self, metadata: Mapping[str, Any] | None, chat_len: int, entries: Sequence[_Entry] = (),
                 hash_of: Callable[[_Entry], int] | None = None, *, by_hash: bool = True) -> None:
        tw = (metadata or {}).get("timedWorldInfo")
        state: dict[str, Any] = copy.deepcopy(dict(tw)) if isinstance(tw, Mapping) else {}
        for t in _TYPES:  # #ensureChatMetadata (459–477)
            if not isinstance(state.get(t), dict):
                state[t] = {}
            state[t] = {k: v for k, v in state[t].items() if isinstance(v, (dict, list)) and v}
        self.state = state
        self.chat_len = chat_len
        self.entries = entries
        self._by_label: dict[str, _Entry] | None = None  # built only when there are stored effects
        self._hash_of = hash_of
        self.by_hash = by_hash and hash_of is not None
        self._hash_index: dict[str, _Entry] | None = None
        self.active: dict[str, dict[int, dict[str, Any]]] = {"sticky": {}, "cooldown": {}}
        self.sticky: dict[str, Any] = {}
        self.cooldown: dict[str, Any] = {}
        if state["sticky"] or state["cooldown"]:
            self._check("sticky")
            self._check("cooldown")
        self.sticky, self.cooldown = state["sticky"], state["cooldown"]
        self.has_active = bool(self.active["sticky"] or self.active["cooldown"])

    def by_label(self) -> dict[str, _Entry]:
        """Entries by their key ``"<world>.<uid>"`` (the first of a repeated key)."""
        if self._by_label is None:
            self._by_label = {}
            for x in self.entries:
                self._by_label.setdefault(x.label, x)
        return self._by_label

    def hash_of(self, x: _Entry) -> int:
        """The entry's SillyTavern hash (0 without a hash function)."""
        return self._hash_of(x) if self._hash_of is not None else 0

    def _find(self, key: str, value: dict[str, Any]) -> _Entry | None:
        """``this.#entries.find(x => String(hash(x)) === String(value.hash))`` (524)."""
        if not self.by_hash:
            return self.by_label().get(key)
        want = _js_str(value.get("hash")) if "hash" in value else "undefined"
        guess = self.by_label().get(key)
        # entries of one world never share a hash (it holds the uid): the keyed entry is the first
        if guess is not None and str(self.hash_of(guess)) == want:
            return guess
        if self._hash_index is None:
            self._hash_index = {}
            for x in self.entries:
                self._hash_index.setdefault(str(self.hash_of(x)), x)
        return self._hash_index.get(want)

    def _check(self, kind: str) -> None:
        """``#checkTimedEffectOfType`` (519–560) for ``kind``, on ``self.state``."""
        store = self.state[kind]
        n = self.chat_len
        for key, value in list(store.items()):
            if not isinstance(value, dict):
                value = {}
            x = self._find(key, value)
            if n <= js_number(value.get("start")) and not _js_truthy(value.get("protected")):
                del store[key]  # the chat did not advance (swipe / regenerate)
                continue
            if x is None:
                if n >= js_number(value.get("end")):
                    del store[key]
                continue
            if not getattr(x.entry, kind):
                del store[key]
                continue
            if n >= js_number(value.get("end")):
                del store[key]
                if kind == "sticky" and x.entry.cooldown:
                    # onEnded.sticky (420–431): a protected cooldown from now, applied at once
                    effect = self._effect("cooldown", x, protected=True)
                    self.state["cooldown"][x.label] = effect
                    self.active["cooldown"][x.gid] = effect
                continue
            self.active[kind].setdefault(x.gid, value)

    def _effect(self, kind: str, x: _Entry, *, protected: bool) -> dict[str, Any]:
        """``#getEntryTimedEffect`` (504–511)."""
        end = self.chat_len + _count(getattr(x.entry, kind))
        return {"hash": self.hash_of(x), "start": self.chat_len,
                "end": int(end) if float(end).is_integer() else end, "protected": protected}

    def _is_active(self, kind: str, x: _Entry) -> dict[str, Any] | None:
        """``isEffectActive`` (672–678): was ``x`` found by a live effect's hash (unique per entry)."""
        return self.active[kind].get(x.gid)

    def sticky_of(self, x: _Entry) -> dict[str, Any] | None:
        """The live sticky effect of ``x`` (``isEffectActive('sticky')``), or ``None``."""
        return self._is_active("sticky", x)

    def cooldown_of(self, x: _Entry) -> dict[str, Any] | None:
        """The live cooldown of ``x`` (``isEffectActive('cooldown')``), or ``None``."""
        return self._is_active("cooldown", x)

    def delayed(self, x: _Entry) -> bool:
        """``#checkDelayEffect`` (566–578): the chat is shorter than the entry's ``delay``."""
        return bool(x.entry.delay) and self.chat_len < _count(x.entry.delay)

    def timed_gids(self) -> set[int]:
        """Entries under a live sticky or cooldown effect (they must be visited in the scan)."""
        return set(self.active["sticky"]) | set(self.active["cooldown"])


def books_fingerprint(books: Sequence[Lorebook]) -> tuple[Any, ...]:
    """What SillyTavern's hashes depend on besides the entries: names and recorded import data."""
    out: list[Any] = []
    for b in books:
        extra = b.model_extra or {}
        rec = extra.get(HASHES_FIELD)
        nop = extra.get(NO_POSITION_FIELD)
        out.append((b.name, hash(frozenset(rec.items())) if isinstance(rec, dict) else None,
                    tuple(nop) if isinstance(nop, list) else None))
    return tuple(out)


def hash_function(prepared: _Prepared, books: Sequence[Lorebook]) -> Callable[[_Entry], int]:
    """``x -> entry hash`` for the prepared ``books`` (:func:`engine.lorebook.st_hash.entry_hash`).

    Hashes are cached on ``prepared`` (built per book content, so a cached hash stays right).
    """
    # the prepared-books cache keys entries, not book extras: hashes recorded at import and book
    # names are part of this cache's key
    key = books_fingerprint(books)
    caches: dict[Any, dict[int, int]] = prepared.__dict__.setdefault("_st_hashes", {})
    cache = caches.get(key)
    if cache is None:
        if len(caches) > 8:
            caches.clear()
        cache = caches[key] = {}

    def hash_of(x: _Entry) -> int:
        h = cache.get(x.gid)
        if h is None:
            book = books[x.book_index] if x.book_index < len(books) else Lorebook(name=x.book)
            h = cache[x.gid] = entry_hash(x.entry, book)
        return h

    return hash_of


def next_timed_state(timed: _Timed, accepted: Mapping[int, _Activation], prepared: _Prepared,
                     chat_len: int) -> dict[str, Any]:
    """``timedWorldInfo`` after this activation: ``setTimedEffects`` (629–634) on the checked state.

    ``accepted`` holds the activated entries in activation order (``allActivatedEntries``).
    """
    del prepared, chat_len  # the state and chat length are the ones ``timed`` was built with
    state = copy.deepcopy(timed.state)
    for c in accepted.values():
        for kind in _TYPES:
            if not getattr(c.x.entry, kind):
                continue
            if not _js_truthy(state[kind].get(c.x.label)):
                state[kind][c.x.label] = timed._effect(kind, c.x, protected=False)
    return state


def running_timers(metadata: Mapping[str, Any] | None, book_name: str, uid: int | str) -> list[str]:
    """The stored sticky / cooldown effects of entry ``uid`` of ``book_name``, in words.

    Read from ``metadata["timedWorldInfo"]`` by SillyTavern's key ``"<world>.<uid>"``
    (``#getEntryKey``, world-info.js 493–495), e.g. ``["sticky until message 13"]``. The GUI shows
    them where the entry is edited: under the ``sillytavern`` rules an edit changes the entry's
    hash, and SillyTavern then no longer applies the stored effect (it is orphaned).
    """
    tw = (metadata or {}).get("timedWorldInfo")
    if not isinstance(tw, Mapping):
        return []
    out: list[str] = []
    for kind in _TYPES:
        effects = tw.get(kind)
        effect = effects.get(f"{book_name}.{uid}") if isinstance(effects, Mapping) else None
        if isinstance(effect, Mapping):
            end = effect.get("end")
            out.append(f"{kind} until message {end}" if end is not None else kind)
    return out


def without_new_timers(state: Mapping[str, Any], labels: Sequence[str], chat_len: int) -> dict[str, Any]:
    """``state`` without the effects this generation started for the entries ``labels``.

    For callers that drop activated entries afterwards (the Chat Completion path's own budget
    loop): SillyTavern's ``setTimedEffects`` runs only on ``allActivatedEntries``, which holds
    no entry the budget stopped. A new effect is unprotected and starts at ``chat_len`` (older
    unprotected ones that start there were dropped by ``checkTimedEffects``).
    """
    out = copy.deepcopy(dict(state))
    drop = set(labels)
    for kind in _TYPES:
        effects = out.get(kind)
        if not isinstance(effects, dict):
            continue
        for key in [k for k in effects if k in drop]:
            eff = effects[key]
            if isinstance(eff, dict) and not _js_truthy(eff.get("protected")) \
                    and js_number(eff.get("start")) == chat_len:
                del effects[key]
    return out
