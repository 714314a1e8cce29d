"""Lorebook lint (API on hand-made books) and ``loomscope lint-lorebook`` (CLI on real files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.lorebook.lint import LINT_CODES, lint_lorebook
from engine.schema import SelectiveLogic, WorldInfoSettings

from ._helpers import book, entry, tokens_of, words


def codes(findings: list) -> list[tuple[object, str]]:
    return [(f.uid, f.code) for f in findings]


def lint(b, **kw):
    kw.setdefault("context_limit", 4000)  # budget 1000 at 25 %
    return lint_lorebook(b, count_tokens=words, **kw)


def test_lint_codes_pinned() -> None:
    assert sorted(LINT_CODES) == sorted([
        "LINT_NO_KEYS", "LINT_INVALID_REGEX", "LINT_DISABLED", "LINT_EMPTY_CONTENT", "LINT_PROBABILITY_ZERO",
        "LINT_SECONDARY_CONTRADICTION", "LINT_DUPLICATE_KEY", "LINT_DUPLICATE_KEY_IN_ENTRY",
        "LINT_CONSTANT_OVER_SHARE", "LINT_CONSTANTS_EXCEED_BUDGET", "LINT_ENTRY_OVER_BUDGET",
        "LINT_COMMON_SUBSTRING",
        "LINT_CATASTROPHIC_REGEX",
        "LINT_NEGATIVE_SCAN_DEPTH", "LINT_PROBABILITY_RANGE", "LINT_NEGATIVE_NUMBER"])


def test_clean_book_has_no_findings() -> None:
    assert lint(book(entry(1, ["sword"]), entry(2, ["shield"]), entry(3, constant=True))) == []


def test_entries_that_can_never_fire() -> None:
    b = book(entry(1, []), entry(2, ["  "]), entry(3, ["/([a-z/"]), entry(4, ["x"], disable=True),
             entry(5, ["y"], probability=0), entry(6, constant=True),
             entry(7, ["z"], secondary_keys=["z"], selective_logic=SelectiveLogic.NOT_ANY))
    got = codes(lint(b))
    assert got == [(1, "LINT_NO_KEYS"), (2, "LINT_NO_KEYS"), (3, "LINT_INVALID_REGEX"), (3, "LINT_NO_KEYS"),
                   (4, "LINT_DISABLED"), (5, "LINT_PROBABILITY_ZERO"), (7, "LINT_SECONDARY_CONTRADICTION")]
    assert all(f.severity == "error" for f in lint(b) if f.code != "LINT_DISABLED")


def test_duplicate_keys_across_and_within_entries() -> None:
    got = codes(lint(book(entry(1, ["Sword", "sword"]), entry(2, ["SWORD"]), entry(3, ["axe"]))))
    assert got == [(1, "LINT_DUPLICATE_KEY_IN_ENTRY"), (1, "LINT_DUPLICATE_KEY"), (2, "LINT_DUPLICATE_KEY")]


def test_constant_share_and_total() -> None:
    b = book(entry("big", constant=True, content=tokens_of(600)), entry("small", constant=True, content=tokens_of(100)),
             entry("huge", ["x"], content=tokens_of(1200)))
    found = lint(b)
    assert codes(found) == [("big", "LINT_CONSTANT_OVER_SHARE"), ("huge", "LINT_ENTRY_OVER_BUDGET")]
    assert found[0].detail == {"tokens": 600, "budget": 1000, "share_percent": 60.0}
    found = lint(b, constant_share_percent=5, context_limit=2000)  # budget 500
    assert codes(found) == [("big", "LINT_CONSTANT_OVER_SHARE"), ("small", "LINT_CONSTANT_OVER_SHARE"),
                            ("huge", "LINT_ENTRY_OVER_BUDGET"), (None, "LINT_CONSTANTS_EXCEED_BUDGET")]


def test_common_substring_only_without_whole_words() -> None:
    b = book(entry(1, ["art", "Ei", "Gridania"]), entry(2, ["art2"], match_whole_words=False))
    assert lint(b) == []
    found = lint(b, settings=WorldInfoSettings(match_whole_words=False))
    assert codes(found) == [(1, "LINT_COMMON_SUBSTRING"), (1, "LINT_COMMON_SUBSTRING")]
    assert "start" in found[0].detail["examples"] and "their" in found[1].detail["examples"]


def test_empty_content_warning() -> None:
    assert codes(lint(book(entry(1, ["x"], content="")))) == [(1, "LINT_EMPTY_CONTENT")]


def test_cli_json_on_real_lorebook(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "lorebooks" / "Date a Live Arcs V1.1.0.json"
    assert main(["lint-lorebook", str(path), "--format", "json", "--context-limit", "8192"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == 13 and report["budget"] == 2048
    by_code: dict[str, list] = {}
    for f in report["findings"]:
        by_code.setdefault(f["code"], []).append(f["uid"])
    # 13 constant entries with empty keys; 3 disabled; the rest together exceed the budget
    assert sorted(by_code["LINT_DISABLED"]) == [9, 10, 11]
    assert "LINT_NO_KEYS" not in by_code
    assert by_code["LINT_CONSTANTS_EXCEED_BUDGET"] == [None]
    assert 5 in by_code["LINT_CONSTANT_OVER_SHARE"]  # the 32,165-character entry


def test_cli_table_and_strict(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "lorebooks" / "Date a Live 12.0.0.json"
    assert main(["lint-lorebook", str(path), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "LINT_DISABLED" in out and " error" in out
    # an 8,192-token context (the budget is 25 % of it) makes the constants exceed the budget
    assert main(["lint-lorebook", str(path), "--format", "json", "--strict", "--context-limit", "8192"]) == 1
    report = json.loads(capsys.readouterr().out)
    by_code: dict[str, list] = {}
    for f in report["findings"]:
        by_code.setdefault(f["code"], []).append(f["uid"])
    assert sorted(by_code["LINT_DISABLED"]) == [79, 83, 93, 94, 95, 96, 97]
    # the two entries with empty key lists (81, 89) are constant: they fire, no LINT_NO_KEYS
    assert "LINT_NO_KEYS" not in by_code
    assert by_code["LINT_CONSTANTS_EXCEED_BUDGET"] == [None]
    # "Ratatoskr" is a key of many entries (93..97 among them)
    dup = [f for f in report["findings"] if f["code"] == "LINT_DUPLICATE_KEY" and f["detail"]["key"] == "ratatoskr"]
    assert {93, 94, 95, 96, 97} <= {f["uid"] for f in dup}


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["lint-lorebook", str(bad)]) == 2
    assert "IMPORT_INVALID_JSON" in capsys.readouterr().err
    assert main(["lint-lorebook", str(bad), "--context-limit", "0"]) == 2
    assert "INVALID_SETTINGS" in capsys.readouterr().err


def test_cli_reads_card_embedded_book(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    card = shared_data / "cards" / "contest_Assistant_Sakana.png"
    assert main(["lint-lorebook", str(card), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["book"] == "Sakana-WI" and report["entries"] == 14
    found = {(f["uid"], f["code"]) for f in report["findings"]}
    assert (1, "LINT_DUPLICATE_KEY_IN_ENTRY") in found  # entry 1 lists "check" twice
    assert (0, "LINT_DUPLICATE_KEY") in found and (2, "LINT_DUPLICATE_KEY") in found  # "write" in 0 and 2
    no_book = shared_data / "cards" / "Raiden Ei (chat).json"
    assert main(["lint-lorebook", str(no_book)]) == 2
    assert "IMPORT_INVALID_LOREBOOK" in capsys.readouterr().err


def test_lint_table_shows_markup_like_text_verbatim(tmp_path, capsys):
    import json as _json

    from engine.cli import main

    book = {"entries": {"0": {"uid": 0, "key": [], "comment": "[sigh] [/b]", "content": "x"}}}
    path = tmp_path / "w.json"
    path.write_text(_json.dumps(book), encoding="utf-8")
    assert main(["lint-lorebook", str(path), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "[sigh] [/b]" in out and "1 error" in out


@pytest.mark.parametrize("key", ["/(a+)+$/", "/(a|aa)+$/", "/(\\w+\\s?)*$/", "/(.*)*x/i", "/([a-z]+)*$/"])
def test_catastrophic_regex_is_an_error(key: str) -> None:
    found = lint(book(entry(1, [key])))
    assert [(f.code, f.severity, f.detail["key"]) for f in found] == [("LINT_CATASTROPHIC_REGEX", "error", key)]
    found = lint(book(entry(2, ["x"], secondary_keys=[key])))
    assert [(f.code, f.detail["secondary"]) for f in found] == [("LINT_CATASTROPHIC_REGEX", True)]


@pytest.mark.parametrize("key", ["/(?:ab)+/", "/\\bcat\\b/i", "/x(ab|cd)+y/", "/(a+)b+/", "/\\p{Lu}{3}/u"])
def test_safe_regex_is_not_flagged(key: str) -> None:
    assert lint(book(entry(1, [key]))) == []


def test_invalid_regex_message_follows_the_rules() -> None:
    from engine.schema import WorldInfoSettings

    st = lint(book(entry(1, ["/([a-z/", "x"])))
    assert "plain text" in st[0].message
    ls = lint(book(entry(1, ["/([a-z/", "x"])), settings=WorldInfoSettings(rules="loomscope"))
    assert "plain text" not in ls[0].message
