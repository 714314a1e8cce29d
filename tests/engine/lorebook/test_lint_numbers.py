"""Issue 15 (9): ``lint-lorebook`` flags numbers out of range, giving the number as written.

Before: a negative scan depth, depth, sticky, cooldown, delay or group weight passed silently,
probability 150 passed, and probability -5 was reported as "probability 0".
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import main as cli_main
from engine.lorebook.lint import LINT_CODES, lint_lorebook, number_findings
from engine.schema.lorebook import Lorebook, LorebookEntry


def _lint(book: Lorebook):
    return lint_lorebook(book, context_limit=8192, count_tokens=len)


def _codes(findings, uid=None):
    return [(f.code, f.severity, f.message) for f in findings if uid is None or f.uid == uid]


def test_world_file_numbers_out_of_range(tmp_path: Path, capsys) -> None:
    world = tmp_path / "world.json"
    world.write_text(json.dumps({"entries": {
        "0": {"uid": 0, "key": ["a"], "content": "x", "scanDepth": -3, "probability": 150, "useProbability": True},
        "1": {"uid": 1, "key": ["b"], "content": "x", "probability": -5, "useProbability": True, "depth": -2,
              "sticky": -1, "cooldown": -4, "delay": -1, "groupWeight": -10},
        "2": {"uid": 2, "key": ["c"], "content": "x", "probability": 12.5, "depth": 0, "scanDepth": 0},
    }}))
    assert cli_main(["lint-lorebook", str(world), "--format", "json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    got = {(f["uid"], f["code"], f["message"]) for f in findings if f["code"] in (
        "LINT_NEGATIVE_SCAN_DEPTH", "LINT_PROBABILITY_RANGE", "LINT_NEGATIVE_NUMBER", "LINT_PROBABILITY_ZERO")}
    assert got == {
        (0, "LINT_NEGATIVE_SCAN_DEPTH", "scan depth -3 is negative: no message is scanned"),
        (0, "LINT_PROBABILITY_RANGE",
         "probability 150 is outside 0-100 percent: the entry always fires (did you mean a percentage?)"),
        (1, "LINT_PROBABILITY_RANGE", "probability -5 is outside 0-100 percent: the entry never fires"),
        (1, "LINT_NEGATIVE_NUMBER", "depth -2 is negative"),
        (1, "LINT_NEGATIVE_NUMBER", "sticky -1 is negative"),
        (1, "LINT_NEGATIVE_NUMBER", "cooldown -4 is negative"),
        (1, "LINT_NEGATIVE_NUMBER", "delay -1 is negative"),
        (1, "LINT_NEGATIVE_NUMBER", "group weight -10 is negative"),
    }
    assert cli_main(["lint-lorebook", str(world), "--format", "json", "--strict"]) == 1


def test_card_book_scan_depth_and_fractions() -> None:
    book = Lorebook(name="B", scan_depth=-1, entries=[
        LorebookEntry(uid=7, keys=["k"], content="c", probability=100.5),
        LorebookEntry(uid=8, keys=["k2"], content="c", probability=-0.5, use_probability=False),
    ])
    findings = _lint(book)
    assert ("LINT_NEGATIVE_SCAN_DEPTH", "error", "the book's scan depth is -1: no message is scanned") in _codes(findings)
    assert [f.uid for f in findings if f.code == "LINT_NEGATIVE_SCAN_DEPTH"] == [None]
    assert _codes(number_findings(book), 7) == [
        ("LINT_PROBABILITY_RANGE", "warning",
         "probability 100.5 is outside 0-100 percent: the entry always fires (did you mean a percentage?)")]
    # use_probability off: SillyTavern never rolls, so a negative number is only worth a warning
    assert _codes(number_findings(book), 8) == [
        ("LINT_PROBABILITY_RANGE", "warning", "probability -0.5 is outside 0-100 percent")]


def test_numbers_in_range_are_quiet() -> None:
    book = Lorebook(name="B", scan_depth=0, entries=[
        LorebookEntry(uid=1, keys=["k"], content="c", probability=0, use_probability=False, depth=0, sticky=0,
                      cooldown=0, delay=0, group_weight=0, scan_depth=0),
        LorebookEntry(uid=2, keys=["k2"], content="c", probability=100, depth=999, group_weight=1000),
    ])
    assert number_findings(book) == []


def test_new_codes_are_listed() -> None:
    assert {"LINT_NEGATIVE_SCAN_DEPTH", "LINT_PROBABILITY_RANGE", "LINT_NEGATIVE_NUMBER"} <= set(LINT_CODES)
