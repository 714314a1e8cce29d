"""Verbatim artifacts: code blocks, paths, error lines, stack traces."""

from __future__ import annotations

import pytest

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


def test_urls_are_urls_and_fractions_and_prose_are_not_artifacts():
    text = "Visit https://example.com/a/b.html and/or pay 1/2 now. The error was small."
    assert [(a.kind, a.text) for a in find_artifacts(text)] == [("url", "https://example.com/a/b.html")]
    prose = ("Hi, I need help planning a trip to Lisbon in May for four days. e.g. this and i.e. that. "
             "She walked 3 miles and saw 2 ships in the bay. The function(s) of the keeper matter. "
             "It was 5 in the morning. Mr. Smith went home.")
    assert find_artifacts(prose) == []


#: One sample per kind of issue 28 item 1: (text, kind, the artifact's exact text).
KIND_CASES = [
    ("FAILED tests/test_mapper.py::test_map_row - KeyError: 'id'", "error", "KeyError: 'id'"),
    ("FAILED tests/test_mapper.py::test_map_row - KeyError: 'id'", "error",
     "FAILED tests/test_mapper.py::test_map_row - KeyError: 'id'"),
    ("ERROR tests/test_io.py - ImportError: cannot import name 'load'", "error",
     "ImportError: cannot import name 'load'"),
    ("It raised a ValueError when the file was empty.", "error", "ValueError"),
    ("2024-05-01 12:00:01,123 ERROR app.db: connection refused", "log",
     "2024-05-01 12:00:01,123 ERROR app.db: connection refused"),
    ("[WARN] disk 91% full on /var/lib/data", "log", "[WARN] disk 91% full on /var/lib/data"),
    ("The bug is in apps/api/mapper.py:42 today.", "path", "apps/api/mapper.py:42"),
    ("Open mapper.py:17:3 next.", "path", "mapper.py:17:3"),
    ("Then call `user.profile.save()` once.", "span", "`user.profile.save()`"),
    ("Use np.linalg.norm on the vector.", "identifier", "np.linalg.norm"),
    ("Call getUserById(42) first.", "identifier", "getUserById(42)"),
    ("Run load_config() at start.", "identifier", "load_config()"),
    ("We set MAX_RETRIES=5 for now.", "setting", "MAX_RETRIES=5"),
    ("Start it with --workers=4, please.", "setting", "--workers=4"),
    ("Docs: https://docs.example.org/v2/api#auth.", "url", "https://docs.example.org/v2/api#auth"),
    ("This is ticket PROJ-123.", "id", "PROJ-123"),
    ("Fixed in commit 3fa9c1e yesterday.", "id", "3fa9c1e"),
    ("See #1234 for the thread.", "id", "#1234"),
    ("We agreed on a 30 s timeout.", "quantity", "30 s"),
    ("npm ERR! code ENOENT", "log", "npm ERR! code ENOENT"),
    ('{"level":"error","msg":"db down"}', "log", '{"level":"error","msg":"db down"}'),
    ("Edit .env first.", "path", ".env"),
    ("Rerun tests/test_x.py::test_y[1] now.", "path", "tests/test_x.py::test_y[1]"),
    ("Use Vec::with_capacity(8) there.", "identifier", "Vec::with_capacity(8)"),
    ("Pin it to v1.0.0-rc.1 today.", "id", "v1.0.0-rc.1"),
    ("E       KeyError: 'id'", "error", "KeyError: 'id'"),
    ("Cap it at 512 MiB of memory.", "quantity", "512 MiB"),
]


@pytest.mark.parametrize(("text", "kind", "expected"), KIND_CASES)
def test_each_kind_is_found_where_it_lives(text, kind, expected):
    assert (kind, expected) in {(a.kind, a.text) for a in find_artifacts(text)}


def test_a_traceback_gives_its_last_line_when_nested():
    nested = [(a.kind, a.text) for a in find_artifacts(TRACE, nested=True)]
    assert ("error", "KeyError: 'id'") in nested
    assert [a.kind for a in find_artifacts(TRACE)] == ["trace"]  # not nested: the block carries it


def test_a_span_is_present_when_its_inside_is():
    [span] = find_artifacts("call `user.save()` now")
    assert missing_artifacts([span], "the agent called user.save() twice") == []


def test_missing_compares_whitespace_loosely():
    arts = find_artifacts(TRACE)
    assert missing_artifacts(arts, "kept:\n" + TRACE.replace("\n  ", "\n    ")) == []
    assert missing_artifacts(arts, "was editing mapper.py") == arts
