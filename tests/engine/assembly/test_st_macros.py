"""The macro engine against SillyTavern 1.12.6's own (``st_macro_cases.json``, run under Node).

Each case runs ``substituteParams`` (script.js 2474–2533) → ``evaluateMacros`` (macros.js
417–492, with ``replaceVariableMacros`` of variables.js 225–302) on one or more texts in turn,
carrying ``chat_metadata.variables`` and the global variables between them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.assembly.macros import MacroContext, expand_macros, macro_function

CASES: list[dict[str, Any]] = json.loads(Path(__file__).with_name("st_macro_cases.json").read_text("utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_macros_match_sillytavern(case: dict[str, Any]) -> None:
    c = case["ctx"]
    values = {k: v for k, v in c.items() if k not in ("user", "char")}
    ctx = MacroContext(user=c["user"], char=c["char"], values=values, variables=dict(case["variables"]),
                       global_variables=dict(case["global"]))
    got = [expand_macros(t, ctx)[0] for t in case["text"]]
    assert got == case["expected"]
    assert ctx.variables == case["variables_after"]
    assert ctx.global_variables == case["global_after"]


def test_unknown_macros_are_reported() -> None:
    seen: list[list[str]] = []
    sub = macro_function(MacroContext(user="A", char="B"), seen.append)
    assert sub("x {{mystery}} {{user}}") == "x {{mystery}} A"
    assert seen == [["{{mystery}}"]]
