"""Stable codes are public: these tests pin the full lists (extend them, never rename)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.errors import ERROR_CODES, LoomscopeError
from engine.reasons import REASON_CODES, reasons_markdown_table

PINNED_REASONS = {
    "SYSTEM_PROMPT", "TOOL_SCHEMAS", "CHARACTER", "PERSONA", "LOREBOOK_CONSTANT", "PINNED", "CURRENT_INPUT",
    "INSTRUCTION", "LOREBOOK_MATCHED", "MEMORY", "SUMMARY", "EXAMPLE_DIALOGUE", "FITS_BUDGET",
    "INTERCEPTOR_ADDED", "MANUAL_EXCLUDED", "HIDDEN", "HISTORY_OLDEST_FIRST", "TOOL_GROUP_DROPPED",
    "TOOL_RESULT_ORPHANED", "TOO_LARGE_FOR_BUDGET", "EXAMPLES_PUSHED_OUT", "LOREBOOK_BUDGET", "LOW_RELEVANCE",
    "PRIORITY_LOWEST_FIRST", "INTERCEPTOR_REMOVED", "OVER_BUDGET_PROTECTED", "SUMMARIZED", "CUT",
    # issue 9: codes that already appeared on blocks, and the incomplete tool group
    "LOREBOOK_STICKY", "LOREBOOK_DECORATOR_ACTIVATE", "LOREBOOK_KEY_MATCH", "TOOL_PAIR_INCOMPLETE",
}


def test_reason_codes_pinned():
    assert set(REASON_CODES) == PINNED_REASONS
    for code, (category, words) in REASON_CODES.items():
        assert code.isupper() and category in ("kept", "excluded", "truncated") and words


def test_readme_documents_every_reason():
    # the reason table moved with the other internals from the README to docs/shifting.md (issue 31)
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "shifting.md").read_text(encoding="utf-8")
    assert reasons_markdown_table() in docs
    assert "docs/shifting.md" in (root / "README.md").read_text(encoding="utf-8")


PINNED_ERRORS_SUBSET = {
    "TOKEN_BUDGET_EXCEEDED", "EMPTY_PROMPT", "INVALID_SETTINGS", "UNKNOWN_STRATEGY", "UNKNOWN_TOKENIZER",
    "DUPLICATE_REGISTRATION", "STRATEGY_FAILED", "IMPORT_FILE_NOT_FOUND", "IMPORT_EMPTY_FILE",
    "IMPORT_TOO_LARGE", "IMPORT_INVALID_UTF8", "IMPORT_INVALID_JSON", "IMPORT_TOO_DEEP", "IMPORT_INVALID_PNG",
    "IMPORT_NO_CARD_CHUNK", "IMPORT_BAD_BASE64", "IMPORT_INVALID_CARD", "IMPORT_INVALID_LOREBOOK",
    "IMPORT_INVALID_CHAT", "IMPORT_WRONG_TYPE", "IMPORT_UNSUPPORTED_SPEC", "IMPORT_UNSUPPORTED_FORMAT",
    "CHAT_NOT_FOUND", "AUDIT_NOT_FOUND", "CHARACTER_NOT_FOUND", "LOREBOOK_NOT_FOUND", "MESSAGE_NOT_FOUND",
    "STORAGE_ERROR", "PROVIDER_TIMEOUT", "PROVIDER_RATE_LIMITED", "PROVIDER_AUTHENTICATION",
    "PROVIDER_CONTEXT_LENGTH_EXCEEDED", "PROVIDER_SERVER_ERROR", "PROVIDER_NETWORK_ERROR",
    "PROVIDER_BAD_RESPONSE", "PROVIDER_BAD_REQUEST", "CANCELLED", "NO_API_KEY", "INVALID_API_KEY", "PERSONA_NOT_FOUND",
    "INVALID_REQUEST", "ROUTE_NOT_FOUND", "INTERNAL_ERROR", "REMOTE_HOST_REFUSED", "ADDRESS_UNAVAILABLE",
    "NO_DISPLAY",
    # issue 26: a Text Completion prompt sent to an endpoint without /v1/completions
    "PROVIDER_NO_TEXT_COMPLETION",
}


def test_error_codes_pinned():
    assert set(ERROR_CODES) >= PINNED_ERRORS_SUBSET
    assert all(c.isupper() and " " not in c for c in ERROR_CODES)
    err = LoomscopeError("IMPORT_INVALID_JSON", "bad", file="a.json", place="line 3, column 7")
    assert err.to_dict()["code"] == "IMPORT_INVALID_JSON" and str(err) == "a.json: line 3, column 7: bad"


def test_engine_imports_without_pyside6():
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('PySide6', 'shiboken6', 'gui'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import engine, engine.pipeline, engine.cli, engine.shifting, engine.tokenizers, engine.assembly\n"
        "import engine.importers, engine.lorebook\n"
        "for m in ('engine.storage', 'engine.generation', 'engine.providers'):\n"
        "    try:\n"
        "        importlib = __import__('importlib'); importlib.import_module(m)\n"
        "    except ModuleNotFoundError as e:\n"
        "        if e.name != m: raise\n"
        "assert not any(k.startswith(('PySide6', 'gui')) for k in sys.modules)\n"
        "print('ok')\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
