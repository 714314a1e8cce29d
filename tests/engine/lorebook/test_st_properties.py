"""Property test: the indexed ``sillytavern`` engine agrees with a naive, literal transcription
of SillyTavern 1.12.6 ``checkWorldInfo`` (world-info.js 3704–4145): every pass re-checks every
entry against the joined buffer (``WorldInfoBuffer.get`` 204–241, ``matchKeys`` 243–277), the
budget is the recount of joined text with ``>=`` and ``break`` (4001–4036)."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.lorebook import activate
from engine.schema import ChatMessage, Lorebook, LorebookEntry, SelectiveLogic, WorldInfoSettings

from ._helpers import words
from .test_properties import entry_st, text_st


def match_keys(hay: str, needle: str, cs: bool, ww: bool) -> bool:
    if not cs:
        hay, needle = hay.lower(), needle.lower()
    if ww:
        if len(re.split(r"\s+", needle)) > 1:
            return needle in hay
        return re.search(r"(?:^|[^A-Za-z0-9_])" + re.escape(needle) + r"(?:\Z|[^A-Za-z0-9_])", hay) is not None
    return needle in hay


def reference(entries: list[LorebookEntry], messages: list[str], s: WorldInfoSettings, budget: int) -> list[Any]:
    """uids in allActivatedEntries order."""
    window = [m.strip() for m in reversed(messages)]
    order = sorted(entries, key=lambda e: -e.order)  # stable: uid order for ties
    activated: list[LorebookEntry] = []
    recurse: list[str] = []
    all_text = ""
    levels = sorted({e.delay_until_recursion for e in entries if e.delay_until_recursion})
    current = levels.pop(0) if levels else 0
    state, count, overflow = "initial", 0, False
    while state:
        if s.max_recursion_steps and s.max_recursion_steps <= count:
            break
        count += 1
        now = []
        for e in order:
            if e in activated or e.disable:
                continue
            if state != "recursion" and e.delay_until_recursion:
                continue
            if state == "recursion" and e.delay_until_recursion and e.delay_until_recursion > current:
                continue
            if state == "recursion" and s.recursive and e.exclude_recursion:
                continue
            if e.constant:
                now.append(e)
                continue
            if not e.keys:
                continue
            depth = s.scan_depth if e.scan_depth is None else e.scan_depth
            text = "" if depth <= 0 else "\x01" + "\n\x01".join(window[:depth]) + (
                "\n\x01" + "\n\x01".join(recurse) if recurse else "")
            cs = s.case_sensitive if e.case_sensitive is None else e.case_sensitive
            ww = s.match_whole_words if e.match_whole_words is None else e.match_whole_words

            def hit(k: str) -> bool:
                return bool(k) and match_keys(text, k.strip(), cs, ww)

            if not any(hit(k) for k in e.keys):
                continue
            if e.selective and e.secondary_keys:
                hits = [hit(k) for k in e.secondary_keys]
                logic = e.selective_logic
                ok = (any(hits) if logic == SelectiveLogic.AND_ANY else not all(hits) if logic == SelectiveLogic.NOT_ALL
                      else not any(hits) if logic == SelectiveLogic.NOT_ANY else all(hits))
                if not ok:
                    continue
            now.append(e)
        base = words(all_text)
        content = ""
        for e in now:
            content += e.content + "\n"
            if base + words(content) >= budget:
                overflow = True
                break
            activated.append(e)
        feed = [e for e in now if not e.prevent_recursion]
        nxt = "recursion" if s.recursive and not overflow and feed else ""
        if not nxt and levels:
            nxt, current = "recursion", levels.pop(0)
        state = nxt
        if state:
            t = "\n".join(e.content for e in feed)
            recurse.append(t)
            all_text = t + "\n" + all_text
    return [e.uid for e in activated]


settings_st = st.fixed_dictionaries({
    "scan_depth": st.integers(0, 4), "recursive": st.booleans(), "case_sensitive": st.booleans(),
    "match_whole_words": st.booleans(), "max_recursion_steps": st.sampled_from([0, 0, 1, 2, 3]),
    "include_names": st.just(False), "budget_cap": st.sampled_from([0, 3, 8, 20]),
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry_st, min_size=1, max_size=10), st.lists(text_st, max_size=5), settings_st)
def test_sillytavern_engine_matches_literal_reference(entry_dicts: list[dict[str, Any]], msgs: list[str],
                                                      s: dict[str, Any]) -> None:
    entries = [LorebookEntry(uid=i, **d) for i, d in enumerate(entry_dicts)]
    wi = WorldInfoSettings(**s)
    result = activate([Lorebook(name="b", entries=entries)],
                      [ChatMessage(role="user", content=m) for m in msgs], wi,
                      count_tokens=words, context_limit=10**6, compare_rules=False)
    got = [r.uid for r in sorted((t for t in result.trace if t.activated),
                                 key=lambda t: t.detail["order_of_activation"])]
    assert got == reference(entries, msgs, wi, result.budget)
