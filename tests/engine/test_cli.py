"""The CLI's command registry: engine commands, and commands contributed through entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.cli import (
    COMMAND_ENTRY_POINT_GROUP,
    COMMAND_MODULES,
    ENGINE_COMMANDS,
    _engine_parser,
    _with_command,
    build_parser,
    contributed_commands,
    main,
    split_global_options,
)

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


#: Reports on stderr whether the collector is on when main() starts, and registers an exit handler.
_SPY = """
import atexit, gc, sys
import engine.cli
atexit.register(print, 'TEARDOWN', flush=True)
_main = engine.cli.main
def _spy(argv=None):
    sys.stderr.write(f'GC {gc.isenabled()}\\n')
    return _main(argv)
engine.cli.main = _spy
"""


def _console(args: list[str], tmp: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """The console script's entry point in a child process (``sys.argv[1:]`` are ``args``)."""
    code = f"{prelude}\nfrom engine.cli import console_main\nconsole_main()"
    # this checkout's engine, whichever one the environment has installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp, env=env)


def _long_chat(path: Path, n: int) -> Path:
    messages = [{"role": "system", "content": "You are terse."}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "words " * 40}
                 for i in range(n)]
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_console_preview_flushes_the_whole_json_and_exits_0(tmp_path: Path, capsys) -> None:
    from engine.cli import main

    chat = _long_chat(tmp_path / "long.json", 401)  # JSON output of ~500 KB: several pipe buffers
    args = ["preview", "--chat", str(chat), "--format", "json"]
    out = _console(args, tmp_path, prelude=_SPY)
    assert out.returncode == 0, out.stderr
    assert main(args) == 0
    assert out.stdout == capsys.readouterr().out  # byte for byte what main() writes in-process
    assert len(out.stdout) > 256_000 and json.loads(out.stdout)["blocks"]
    assert "TEARDOWN" not in out.stdout  # ended by os._exit: the interpreter's exit handlers did not run
    assert out.stderr == "GC False\n"  # preview runs without the cyclic collector
    import gc

    assert gc.isenabled()  # in-process main() left it as it was


def test_console_preview_keeps_the_exit_codes_and_the_one_line_errors(tmp_path: Path) -> None:
    chat = _long_chat(tmp_path / "long.json", 41)
    over = _console(["preview", "--chat", str(chat), "--format", "json", "--context-limit", "150",
                     "--reply-reserve", "100"], tmp_path)
    assert over.returncode == 3
    assert json.loads(over.stdout)["error"]["code"] == "TOKEN_BUDGET_EXCEEDED"
    assert over.stderr.startswith("loomscope: preview: TOKEN_BUDGET_EXCEEDED: ")
    missing = _console(["preview", "--chat", str(tmp_path / "nope.json")], tmp_path)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith("loomscope: ") and "IMPORT_FILE_NOT_FOUND" in missing.stderr
    usage = _console(["preview", "--context-limit", "many"], tmp_path)
    assert usage.returncode == 2 and "USAGE" in usage.stderr


def test_console_runs_other_commands_to_an_ordinary_exit(tmp_path: Path) -> None:
    out = _console(["chats", "--db", "sqlite://", "--format", "json"], tmp_path, prelude=_SPY)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("TEARDOWN")
    assert out.stderr == "GC True\n"


def test_engine_commands_name_the_module_that_registers_each() -> None:
    registered = {module: set(_engine_parser((module,))[1].choices) for module in COMMAND_MODULES}
    assert {name for names in registered.values() for name in names} == set(ENGINE_COMMANDS)
    for name, module in ENGINE_COMMANDS.items():
        assert name in registered[module]


def test_an_engine_command_parses_as_with_the_full_parser(capsys) -> None:
    import pytest

    from engine.cli import main

    full, _ = _engine_parser()
    args = ["preview", "--chat", "c.json", "--model", "gpt-4o", "--format", "json"]
    assert vars(full.parse_args(args)) == vars(_engine_parser((ENGINE_COMMANDS["preview"],))[0].parse_args(args))
    for bad in (["preview", "--no-such-flag"], ["preview", "--context-limit", "x"], ["chats", "extra"]):
        with pytest.raises(SystemExit) as exc:
            full.parse_args(bad)
        expected = capsys.readouterr().err
        with pytest.raises(SystemExit) as exc2:
            main(bad)
        assert exc.value.code == exc2.value.code == 2
        assert capsys.readouterr().err == expected  # the same one line
        assert expected.startswith("loomscope: ") and "USAGE" in expected and len(expected.strip().splitlines()) == 1


def test_global_options_are_cut_from_the_front_only() -> None:
    assert split_global_options(["--db", "x.db", "chats", "--format", "json"]) == (["--db", "x.db"],
                                                                                  ["chats", "--format", "json"])
    assert split_global_options(["--db=x.db", "chats"]) == (["--db=x.db"], ["chats"])
    assert split_global_options(["chats", "--db", "x.db"]) == ([], ["chats", "--db", "x.db"])
    assert split_global_options(["--db"]) == (["--db"], [])
    assert split_global_options([]) == ([], [])
    import gui.cli

    # `loomscope --db URL --screenshot out.png`: the app's leading flags still select it
    leading, rest = split_global_options(["--db", "x.db", "--screenshot", "out.png"])
    assert (leading, _with_command(rest, {"gui": gui.cli})) == (["--db", "x.db"], ["gui", "--screenshot", "out.png"])


def test_db_before_the_command_name_is_the_commands_db(tmp_path: Path, capsys, monkeypatch) -> None:
    """``loomscope --db URL <cmd>`` = ``loomscope <cmd> --db URL`` (README: every library command takes it)."""
    monkeypatch.setenv("LOOMSCOPE_DB", f"sqlite:///{tmp_path / 'env.db'}")  # must stay untouched
    chat = _long_chat(tmp_path / "chat.json", 4)
    db = tmp_path / "lib.db"
    assert main(["--db", str(db), "import", str(chat), "--format", "json"]) == 0
    capsys.readouterr()
    listings = []
    for args in (["--db", str(db), "chats"], [f"--db={db}", "chats"], ["chats", "--db", str(db)],
                 ["--db", str(db), "chats", "--db", str(db)]):
        assert main([*args, "--format", "json"]) == 0
        listings.append(json.loads(capsys.readouterr().out))
    assert len(listings[0]) == 1 and all(listing == listings[0] for listing in listings)
    assert db.exists() and not (tmp_path / "env.db").exists()


def test_db_before_the_command_name_usage_errors(tmp_path: Path, capsys) -> None:
    import pytest

    for args, words in ((["--db", "a.db", "chats", "--db", "b.db"], "two different libraries"),
                        (["--db", "a.db", "inspect", "card.png"], "`inspect` opens no library"),
                        (["--db"], "expected one argument")):
        with pytest.raises(SystemExit) as exc:
            main(args)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith("loomscope: loomscope: USAGE: ")
        assert words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a.db").exists()


def test_console_preview_after_a_leading_db_still_exits_fast(tmp_path: Path) -> None:
    out = _console(["--db", "sqlite://", "preview", "--chat", str(_long_chat(tmp_path / "c.json", 5)),
                    "--format", "json"], tmp_path, prelude=_SPY)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["blocks"] and "TEARDOWN" not in out.stdout and out.stderr == "GC False\n"
