"""Differential cases: SillyTavern 1.12.6's own ``checkWorldInfo`` answered these.

``st_cases.json`` holds 53 randomly generated cases (world books in SillyTavern's world format
with chat, character or global scope; a chat; settings; an injected scan prompt) and, for each,
what SillyTavern 1.12.6 computed: ``allActivatedEntries`` in insertion order (world, uid) and
the ``worldInfoBefore`` / ``worldInfoAfter`` texts. They were produced by running the
unmodified functions of ``public/scripts/world-info.js`` (``WorldInfoBuffer``,
``WorldInfoTimedEffects``, ``parseRegexFromString``, ``getSortedEntries``, ``parseDecorators``,
``checkWorldInfo``, ``filterByInclusionGroups`` and its helpers) under Node 20 with stubs for
the browser parts (token count = words, ``substituteParams`` = ``{{user}}``/``{{char}}``); the
same generator ran 4,300 cases with no difference. Probability rolls and weighted group picks
(``Math.random``) are left out: every group member has ``groupOverride``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.importers import load_lorebook
from engine.lorebook import activate
from engine.schema import ChatMessage, WorldInfoSettings

CASES: list[dict[str, Any]] = json.loads((Path(__file__).parent / "st_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_matches_sillytavern(case: dict[str, Any], tmp_path: Path) -> None:
    books = []
    for b in case["books"]:
        path = tmp_path / f"{b['name']}.json"
        path.write_text(json.dumps({"entries": b["entries"]}), encoding="utf-8")
        books.append(load_lorebook(path).model_copy(update={"name": b["name"]}))
    r = activate(books, [ChatMessage(role="user", content=m) for m in case["messages"]],
                 WorldInfoSettings(**case["settings"]), count_tokens=lambda t: len(t.split()),
                 context_limit=case["max_context"], user_name=case["user"], char_name=case["char"],
                 extra_scan_text=[case["inject"]] if case["inject"] else [],
                 book_scopes=[b["scope"] for b in case["books"]], compare_rules=False)
    order = sorted((t for t in r.trace if t.activated), key=lambda t: t.detail["order_of_activation"])
    assert [[t.book, t.uid] for t in order] == case["expected"]["activated"]
    assert "\n".join(a.content for a in r.activated if int(a.position) == 0) == case["expected"]["before"]
    assert "\n".join(a.content for a in r.activated if int(a.position) == 1) == case["expected"]["after"]


def test_cases_cover_the_interesting_paths() -> None:
    assert len(CASES) >= 50
    assert sum(1 for c in CASES if len(c["expected"]["activated"]) > 1) >= 20
    assert any(c["settings"]["min_activations"] for c in CASES)
    assert {b["scope"] for c in CASES for b in c["books"]} == {"global", "character", "chat"}
