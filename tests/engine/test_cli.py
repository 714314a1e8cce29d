"""The CLI's command registry: engine commands, and commands contributed through entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from engine.cli import COMMAND_ENTRY_POINT_GROUP, _with_command, build_parser, contributed_commands

ROOT = Path(__file__).resolve().parents[2]


def test_the_gui_command_is_contributed_by_the_gui_package() -> None:
    import gui.cli

    commands = contributed_commands()
    assert COMMAND_ENTRY_POINT_GROUP == "loomscope.commands"
    assert commands["gui"] is gui.cli
    assert "gui" in build_parser()._subparsers._group_actions[0].choices


def test_no_arguments_and_leading_gui_flags_select_the_contributed_default() -> None:
    import gui.cli

    contributed = {"gui": gui.cli}
    assert _with_command([], contributed) == ["gui"]
    assert _with_command(["--screenshot", "x.png"], contributed) == ["gui", "--screenshot", "x.png"]
    assert _with_command(["--tab=chat"], contributed) == ["gui", "--tab=chat"]
    assert _with_command(["preview", "chat.jsonl"], contributed) == ["preview", "chat.jsonl"]
    assert _with_command(["--help"], contributed) == ["--help"]
    assert _with_command([], {}) == []


def _modules_after(code: str) -> dict[str, bool]:
    probe = (f"import sys\n{code}\n"
             "import json; print(json.dumps({m: m in sys.modules for m in ('gui', 'gui.cli', 'gui.app', 'PySide6')}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_engine_command_loads_nothing_of_the_gui() -> None:
    seen = _modules_after("from engine.cli import main\nmain(['chats', '--db', 'sqlite://'])")
    assert seen == {"gui": False, "gui.cli": False, "gui.app": False, "PySide6": False}


def test_the_full_parser_and_gui_help_load_no_qt() -> None:
    seen = _modules_after("from engine.cli import build_parser\nbuild_parser()")
    assert seen == {"gui": True, "gui.cli": True, "gui.app": False, "PySide6": False}
    helped = subprocess.run([sys.executable, "-m", "engine.cli", "gui", "--help"], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert helped.returncode == 0 and "--screenshot" in helped.stdout
