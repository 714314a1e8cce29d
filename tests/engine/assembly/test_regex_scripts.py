"""Regex scripts against SillyTavern 1.12.6's own engine (``st_regex_cases.json``, run under Node).

``getRegexedString`` / ``runRegexScript`` / ``filterString`` (extensions/regex/engine.js) with
``regexFromString`` (utils.js 971–986).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.assembly.macros import MacroContext, macro_function
from engine.assembly.regex_scripts import RegexRunner, regex_from_string, scripts_for
from engine.lorebook.jsregex import RegexClock
from engine.schema.sillytavern import RegexScript

CASES: list[dict[str, Any]] = json.loads(Path(__file__).with_name("st_regex_cases.json").read_text("utf-8"))["cases"]


def _runner(case: dict[str, Any]) -> RegexRunner:
    scripts = scripts_for([RegexScript.model_validate(s) for s in case["scripts"]], {"regex_scripts": case["card"]},
                          allowed=case["allowed"], disabled=False)
    return RegexRunner(scripts, macro_function(MacroContext(user="Ana", char="Mira")), RegexClock(0.05, 0.5))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_regex_scripts_match_sillytavern(case: dict[str, Any]) -> None:
    out, changes = _runner(case).apply(case["text"], case["placement"], depth=case["depth"])
    assert out == case["expected"]
    assert bool(changes) == (out != case["text"])


def test_script_that_does_not_compile_is_named_and_skipped() -> None:
    case = next(c for c in CASES if c["name"] == "invalid_regex_skipped")
    runner = _runner(case)
    out, changes = runner.apply(case["text"], case["placement"], depth=0)
    assert out == "y(unclosed" and len(changes) == 1
    assert any("'broken'" in w and "does not compile" in w for w in runner.warnings)


def test_changes_record_before_and_after() -> None:
    case = next(c for c in CASES if c["name"] == "chain_in_order")
    _out, changes = _runner(case).apply("ab", 2, depth=0)
    assert [c.as_dict() for c in changes] == [{"script": "one", "before": "ab", "after": "bb"},
                                             {"script": "two", "before": "bb", "after": "cc"}]


def test_runaway_pattern_times_out_and_leaves_the_text() -> None:
    script = RegexScript(scriptName="slow", findRegex="/(a|aa)+c/", replaceString="x", placement=[2])
    runner = RegexRunner([script], lambda t: t, RegexClock(0.02, 0.1))
    text = "a" * 40 + "!"
    out, changes = runner.apply(text, 2, depth=0)
    assert out == text and not changes
    assert any("'slow'" in w and "ran out" in w for w in runner.warnings)


def test_regex_from_string() -> None:
    assert regex_from_string("/a/b/gi") == ("a/b", "gi")
    assert regex_from_string("plain") == ("plain", "")
    assert regex_from_string("/x/q") == ("/x/q", "")
