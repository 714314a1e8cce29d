"""Issue 10's no-behaviour-change guard: ``loomscope preview --format json`` is byte-identical.

For every file in ``../shared/data`` (each chat, each card and each lorebook, plus every chat of
the SillyTavern user folder imported into a fresh library) at two context windows, the SHA-256
of the JSON the command prints is compared with the digest recorded in
``golden_preview.json``. The digests were recorded on ``main`` before issue 10's refactor; a
refactor that changes any byte of any preview fails here.

Only digests are stored (never the shared files or their text). Regenerate deliberately, after a
reviewed behaviour change, with ``LOOMSCOPE_GOLDEN_UPDATE=1 pytest tests/engine/commands/test_preview_golden.py``.
Skips cleanly when ``../shared/data`` is absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from engine.cli import main
from tests.conftest import shared_data_path, st_user_copy

GOLDEN = Path(__file__).with_name("golden_preview.json")
GOLDEN_STRATEGIES = Path(__file__).with_name("golden_preview_strategies.json")
#: Every built-in strategy but the default ``manual`` (covered above), at the window that cuts.
STRATEGIES = ("truncate", "summarize", "vector-recall", "compact")
BUDGETS = ("2000", "16000")  # context windows in tokens: one that cuts, one that mostly fits
CHAT_FOR_CARDS = "Seraphina - 2023-5-12 @21h 32m 29s 224ms.jsonl"


def _cases(data: Path) -> list[tuple[str, list[str]]]:
    """(case name, preview arguments) for every shared file; names are relative paths."""
    chats, cards, books = data / "chats", data / "cards", data / "lorebooks"
    cases: list[tuple[str, list[str]]] = []
    for chat in sorted(chats.iterdir()):
        cases.append((f"chats/{chat.name}", ["--chat", str(chat)]))
    base_chat = str(chats / CHAT_FOR_CARDS)
    for card in sorted(cards.iterdir()):
        cases.append((f"cards/{card.name}", ["--chat", base_chat, "--card", str(card)]))
    seraphina = str(cards / "default_Seraphina.png")
    for book in sorted(books.iterdir()):
        cases.append((f"lorebooks/{book.name}", ["--chat", base_chat, "--card", seraphina, "--lorebook", str(book)]))
    return cases


def _run(capsys, args: list[str]) -> str:
    """Exit code, stdout and stderr of one preview, as one text (an error is behaviour too)."""
    code = main(["preview", *args, "--format", "json"])
    out = capsys.readouterr()
    assert code in (0, 3), out.err  # 3: TOKEN_BUDGET_EXCEEDED, still a preview
    return f"exit {code}\n{out.out}\n--- stderr\n{out.err}"


#: Fields added after the digests were recorded, at the value every Chat Completion preview has
#: (issue 26: ``api`` / ``prompt`` / ``stop`` and each block's ``span``). Only these exact lines are
#: dropped before hashing: any other value of them (or any other change) still changes the digest.
_ADDED_DEFAULT_LINES = re.compile(
    r',\n *"span": null(?=\n)|,\n  "api": "chat_completion",\n  "prompt": null,\n  "stop": \[\](?=\n\})')


def _digest(text: str) -> str:
    return hashlib.sha256(_ADDED_DEFAULT_LINES.sub("", text).encode("utf-8")).hexdigest()


def _st_user_digests(capsys, data: Path, tmp_path: Path, budget: str) -> dict[str, str]:
    """Import ``st-user/default-user`` into a fresh SQLite library; digest each chat's preview by chat name.

    The folder says ``main_api: koboldhorde`` (Text Completion, issue 26, tested in
    ``tests/engine/assembly/test_textcompletion*.py``); these digests guard the Chat Completion path,
    so a copy saying ``openai`` is imported.
    """
    db = str(tmp_path / f"golden-{budget}.db")
    folder = st_user_copy(data, tmp_path / f"cc-{budget}")
    code = main(["import", str(folder), "--db", db, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code in (0, 1), report
    out: dict[str, str] = {}
    for row in sorted((r for r in report["added"] if r["kind"] == "chat"), key=lambda r: r["name"]):
        text = _run(capsys, ["--chat-id", row["id"], "--db", db, "--context-limit", budget])
        out[f"st-user/{row['name']}@{budget}"] = _digest(text.replace(row["id"], "<chat-id>"))
    return out


def test_preview_json_is_byte_identical_for_every_shared_file(capsys, tmp_path: Path) -> None:
    data = shared_data_path()
    if data is None:
        pytest.skip("../shared/data is absent")
    digests: dict[str, str] = {}
    for name, args in _cases(data):
        for budget in BUDGETS:
            digests[f"{name}@{budget}"] = _digest(_run(capsys, [*args, "--context-limit", budget]))
    for budget in BUDGETS:
        digests.update(_st_user_digests(capsys, data, tmp_path, budget))
    if os.environ.get("LOOMSCOPE_GOLDEN_UPDATE"):
        GOLDEN.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    changed = sorted(k for k in expected.keys() | digests.keys() if expected.get(k) != digests.get(k))
    assert not changed, f"preview JSON changed for {len(changed)} case(s): {changed}"


def test_preview_json_is_byte_identical_under_every_builtin_strategy(capsys) -> None:
    """Every shared chat, card and lorebook case under each other built-in strategy at 2,000 tokens.

    Digests recorded on the tree before issue 10's refactor (commit 924390e), as above.
    """
    data = shared_data_path()
    if data is None:
        pytest.skip("../shared/data is absent")
    digests: dict[str, str] = {}
    for name, args in _cases(data):
        for strategy in STRATEGIES:
            text = _run(capsys, [*args, "--context-limit", BUDGETS[0], "--strategy", strategy])
            digests[f"{name}@{BUDGETS[0]}/{strategy}"] = _digest(text)
    if os.environ.get("LOOMSCOPE_GOLDEN_UPDATE") == "1":
        GOLDEN_STRATEGIES.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"recorded {len(digests)} digests in {GOLDEN_STRATEGIES.name}")
    recorded = json.loads(GOLDEN_STRATEGIES.read_text(encoding="utf-8"))
    changed = sorted(k for k in recorded if digests.get(k) != recorded[k])
    assert sorted(digests) == sorted(recorded), "the set of cases changed"
    assert not changed, f"{len(changed)} previews changed: {changed[:10]}"
