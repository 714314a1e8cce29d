"""Inclusion groups (SillyTavern ``filterByInclusionGroups``): one winner per group and pass.

Internal to :mod:`engine.lorebook`, for the ``loomscope`` rules (the ``sillytavern`` rules keep
SillyTavern's quirks in :mod:`engine.lorebook.st_rules`). Order of the rules (FORMATS.md b3
item 4, world-info.js 4299–4386): sticky members win (``filterGroupsByTimedEffects``); group
scoring keeps the members with the most key matches (``filterGroupsByScoring``); a group that
already has an active entry drops all its new candidates; ``group_override`` picks the highest
``order``; otherwise a weighted choice by ``group_weight``, seeded from ``settings.seed``, the
group name, the chat length and the pass, so it is reproducible.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from ..schema.settings import WorldInfoSettings
from .prepare import _Cand, _Entry


class _Scorer(Protocol):
    """Key-match scoring of one activation (:class:`.loomscope._Run`)."""

    def score(self, x: _Entry, state: str) -> int:
        """The key-match score of ``x`` in pass ``state``."""


class GroupScan(Protocol):
    """What the group filter reads of one activation and the one step it calls (:class:`.loomscope._LoomscopeScan`)."""

    settings: WorldInfoSettings
    state: str
    pass_no: int
    seed: int
    chat_len: int
    active_groups: dict[str, _Entry]

    @property
    def run(self) -> _Scorer:
        """The activation's key matching."""

    def settle(self, gid: int, code: str, detail: dict[str, Any]) -> None:
        """Record the final reason ``code`` (with ``detail``) of entry ``gid``."""


def filter_groups(cands: list[_Cand], scan: GroupScan) -> list[_Cand]:
    """Inclusion groups (SillyTavern ``filterByInclusionGroups``): one winner per group.

    Parameters
    ----------
    cands:
        This pass's candidates, sticky first then by priority.
    scan:
        The activation: its settings, pass, active groups; losers' reasons are recorded there.

    Returns
    -------
    list[_Cand]
        ``cands`` without the losers, in the same order.
    """
    grouped: dict[str, list[_Cand]] = {}
    for c in cands:
        for g in c.x.groups:
            grouped.setdefault(g, []).append(c)
    if not grouped:
        return cands
    groups = _Groups(grouped, scan)
    groups.by_sticky()
    groups.by_score()
    groups.pick_winners()
    return [c for c in cands if c.x.gid not in groups.removed]


class _Groups:
    """One pass's inclusion groups and the candidates removed from them."""

    def __init__(self, grouped: dict[str, list[_Cand]], scan: GroupScan) -> None:
        self.grouped = grouped
        self.scan = scan
        self.removed: set[int] = set()
        self.has_sticky: set[str] = set()

    def lose(self, c: _Cand, winner: _Entry | None, group: str, mode: str, code: str = "LOREBOOK_GROUP_LOST",
             **extra: Any) -> None:
        """Remove ``c`` (once) and record why, naming the winner."""
        if c.x.gid in self.removed:
            return
        self.removed.add(c.x.gid)
        detail: dict[str, Any] = {"group": group, "mode": mode, "pass": self.scan.pass_no, **extra}
        if winner is not None:
            detail["winner"] = {"book": winner.book, "uid": winner.entry.uid, "comment": winner.entry.comment}
        self.scan.settle(c.x.gid, code, detail)

    def by_sticky(self) -> None:
        """A group with a sticky member keeps only its sticky members (``filterGroupsByTimedEffects``)."""
        for g, members in self.grouped.items():
            stickies = [c for c in members if c.sticky]
            if stickies:
                self.has_sticky.add(g)
                for c in members:
                    if not c.sticky:
                        self.lose(c, stickies[0].x, g, "sticky")

    def by_score(self) -> None:
        """Scored members below the group's best key-match score lose (``filterGroupsByScoring``)."""
        default = self.scan.settings.use_group_scoring
        for g, members in self.grouped.items():
            if g in self.has_sticky:
                continue
            scored = [c for c in members if (c.x.entry.use_group_scoring if c.x.entry.use_group_scoring
                                              is not None else default)]
            if not scored:
                continue
            alive = [c for c in members if c.x.gid not in self.removed]
            if not alive:
                continue
            scores = {c.x.gid: self.scan.run.score(c.x, self.scan.state) for c in alive}
            best = max(scores.values())
            top = next(c for c in alive if scores[c.x.gid] == best)
            for c in scored:
                if c.x.gid in scores and scores[c.x.gid] < best:
                    self.lose(c, top.x, g, "score", score=scores[c.x.gid], best_score=best)

    def pick_winners(self) -> None:
        """Already-active groups drop their candidates; else an override or a weighted roll picks one."""
        active_groups = self.scan.active_groups
        for g, members in self.grouped.items():
            if g in self.has_sticky:
                continue
            alive = [c for c in members if c.x.gid not in self.removed]
            if g in active_groups:
                for c in alive:
                    self.lose(c, active_groups[g], g, "already_active", code="LOREBOOK_GROUP_ALREADY_SATISFIED")
                continue
            if len(alive) <= 1:
                continue
            prios = [c for c in alive if c.x.entry.group_override]
            if prios:
                winner = max(prios, key=lambda c: (float(c.x.entry.order), -c.x.rank))
                for c in alive:
                    if c is not winner:
                        self.lose(c, winner.x, g, "override")
                continue
            self.weighted_choice(g, alive)

    def weighted_choice(self, g: str, alive: list[_Cand]) -> None:
        """A seeded roll over ``group_weight`` picks the winner of group ``g``."""
        weights = [max(0.0, float(c.x.entry.group_weight)) for c in alive]
        total = sum(weights)
        seed_text = f"{self.scan.seed}:group:{g}:{self.scan.chat_len}:{self.scan.pass_no}"
        roll = random.Random(seed_text).random() * total
        winner = alive[0]
        acc = 0.0
        for c, w in zip(alive, weights, strict=True):
            acc += w
            if roll < acc:
                winner = c
                break
        for c in alive:
            if c is not winner:
                self.lose(c, winner.x, g, "weight", roll=round(roll, 4), total_weight=total, seed=seed_text)
