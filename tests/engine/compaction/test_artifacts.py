"""Verbatim artifacts: code blocks, paths, error lines, stack traces."""

from __future__ import annotations

from engine.shifting.artifacts import find_artifacts, missing_artifacts

TRACE = """Traceback (most recent call last):
  File "/home/u/proj-fix-123/apps/api/mapper.py", line 42, in map_row
    return row["id"]
KeyError: 'id'"""


def test_traceback_paths_and_error_lines():
    arts = find_artifacts(f"I ran pytest.\n{TRACE}\nThen I opened apps/api/mapper.py again.")
    kinds = [(a.kind, a.text) for a in arts]
    assert ("trace", TRACE) in kinds
    assert ("path", "apps/api/mapper.py") in kinds
    nested = {a.text for a in find_artifacts(TRACE, nested=True)}
    assert "/home/u/proj-fix-123/apps/api/mapper.py" in nested and "KeyError: 'id'" in nested


def test_code_blocks_errors_and_windows_paths():
    text = "See:\n```py\nprint(1)\n```\nError: ENOENT: no such file\nsaved to C:\\Users\\ana\\notes.txt"
    got = {(a.kind, a.text) for a in find_artifacts(text)}
    assert ("code", "```py\nprint(1)\n```") in got
    assert ("error", "Error: ENOENT: no such file") in got
    assert ("path", "C:\\Users\\ana\\notes.txt") in got


def test_urls_fractions_and_prose_are_not_artifacts():
    text = "Visit https://example.com/a/b.html and/or pay 1/2 now. The error was small."
    assert find_artifacts(text) == []


def test_missing_compares_whitespace_loosely():
    arts = find_artifacts(TRACE)
    assert missing_artifacts(arts, "kept:\n" + TRACE.replace("\n  ", "\n    ")) == []
    assert missing_artifacts(arts, "was editing mapper.py") == arts
