"""No engine or GUI function over 80 lines (issue 29 item 6; STYLE.md: functions stay under 80 lines).

Every ``def`` of ``engine/`` and ``gui/`` (methods and nested functions included) is measured with
:mod:`ast` from its ``def`` line to its last line, docstring included. The failure names each one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80


def long_functions(root: Path = ROOT) -> list[str]:
    """``path:line name (N lines)`` of every function longer than :data:`LIMIT` lines."""
    found = []
    for package in ("engine", "gui"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > LIMIT:
                        found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_engine_or_gui_function_is_over_80_lines() -> None:
    assert long_functions() == []


def test_the_walk_sees_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "gui").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "engine" / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == [f"engine/m.py:5 long ({LIMIT + 1} lines)"]
