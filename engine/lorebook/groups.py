"""Inclusion groups (SillyTavern ``filterByInclusionGroups``): one winner per group and pass.

Internal to :mod:`engine.lorebook`. Order of the rules (FORMATS.md b3 item 4): sticky members
win; group scoring keeps the members with the most key matches; a group that already has an
active entry drops all its new candidates; ``group_override`` picks the highest ``order``;
otherwise a weighted choice by ``group_weight``, seeded from ``settings.seed``, the group name,
the chat length and the pass, so it is reproducible.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ..schema.settings import WorldInfoSettings
from .prepare import _Entry

if TYPE_CHECKING:
    from .activation import _Cand, _Run

def filter_groups(cands: list[_Cand], run: _Run, state: str, settings: WorldInfoSettings,
                   active_groups: dict[str, _Entry], reasons: dict[int, tuple[str, dict[str, Any]]],
                   final: set[int], seed: int, chat_len: int, pass_no: int) -> list[_Cand]:
    """Inclusion groups (SillyTavern ``filterByInclusionGroups``): one winner per group."""
    grouped: dict[str, list[_Cand]] = {}
    for c in cands:
        for g in c.x.groups:
            grouped.setdefault(g, []).append(c)
    if not grouped:
        return cands
    removed: set[int] = set()

    def lose(c: _Cand, winner: _Entry | None, group: str, mode: str, code: str = "LOREBOOK_GROUP_LOST",
             **extra: Any) -> None:
        if c.x.gid in removed:
            return
        removed.add(c.x.gid)
        detail: dict[str, Any] = {"group": group, "mode": mode, "pass": pass_no, **extra}
        if winner is not None:
            detail["winner"] = {"book": winner.book, "uid": winner.entry.uid, "comment": winner.entry.comment}
        reasons[c.x.gid] = (code, detail)
        final.add(c.x.gid)

    has_sticky: set[str] = set()
    for g, members in grouped.items():
        stickies = [c for c in members if c.sticky]
        if stickies:
            has_sticky.add(g)
            for c in members:
                if not c.sticky:
                    lose(c, stickies[0].x, g, "sticky")

    for g, members in grouped.items():
        if g in has_sticky:
            continue
        scored = [c for c in members if (c.x.entry.use_group_scoring if c.x.entry.use_group_scoring
                                          is not None else settings.use_group_scoring)]
        if not scored:
            continue
        alive = [c for c in members if c.x.gid not in removed]
        if not alive:
            continue
        scores = {c.x.gid: run.score(c.x, state) for c in alive}
        best = max(scores.values())
        top = next(c for c in alive if scores[c.x.gid] == best)
        for c in scored:
            if c.x.gid in scores and scores[c.x.gid] < best:
                lose(c, top.x, g, "score", score=scores[c.x.gid], best_score=best)

    for g, members in grouped.items():
        if g in has_sticky:
            continue
        alive = [c for c in members if c.x.gid not in removed]
        if g in active_groups:
            for c in alive:
                lose(c, active_groups[g], g, "already_active", code="LOREBOOK_GROUP_ALREADY_SATISFIED")
            continue
        if len(alive) <= 1:
            continue
        prios = [c for c in alive if c.x.entry.group_override]
        if prios:
            winner = max(prios, key=lambda c: (float(c.x.entry.order), -c.x.rank))
            for c in alive:
                if c is not winner:
                    lose(c, winner.x, g, "override")
            continue
        weights = [max(0.0, float(c.x.entry.group_weight)) for c in alive]
        total = sum(weights)
        seed_text = f"{seed}:group:{g}:{chat_len}:{pass_no}"
        roll = random.Random(seed_text).random() * total
        winner = alive[0]
        acc = 0.0
        for c, w in zip(alive, weights):
            acc += w
            if roll < acc:
                winner = c
                break
        for c in alive:
            if c is not winner:
                lose(c, winner.x, g, "weight", roll=round(roll, 4), total_weight=total, seed=seed_text)
    return [c for c in cands if c.x.gid not in removed]
