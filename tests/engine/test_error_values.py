"""An error quotes at most ~120 characters of a bad value (issue 25 item 6): a 100 KB value was quoted whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.errors import MAX_QUOTED_CHARS, LoomscopeImportError, clip_values
from engine.importers import load_any

BIG = "x" * 100_000


@pytest.mark.parametrize("doc", [
    {"spec": BIG, "spec_version": "2.0", "data": {"name": "a"}},
    {"spec": "chara_card_v2", "spec_version": BIG, "data": {"name": "a"}},
    [{"role": BIG, "content": "hi"}],
])
def test_a_huge_bad_value_is_quoted_short(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LoomscopeImportError) as err:
        load_any(path)
    assert len(err.value.message) < 300 and "(100,000 characters)" in err.value.message
    assert "x" * (MAX_QUOTED_CHARS + 1) not in str(err.value)


def test_the_cli_prints_one_short_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"role": BIG, "content": "hi"}]))
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < len(str(path)) + 300


def test_clip_values_keeps_short_text_and_paths() -> None:
    assert clip_values("unknown role 'tool'") == "unknown role 'tool'"
    path = "/a/" + "b" * 100 + "/" + "c" * 100
    assert clip_values(f"a link to {path}") == f"a link to {path}"
    assert clip_values("'" + "it\\'s " * 40 + "'").endswith("' (240 characters)")
