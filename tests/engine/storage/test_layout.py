"""The storage package's shape (issue 29 item 6): a small Store over per-area repositories.

Walks the source of ``engine/storage`` with :mod:`ast`: no import inside a function (every
import at module level, so no circle hides behind one; the one exception is the project-wide
one, a library ``tests/test_import_graph.py`` lists with its reason: Alembic, only when a library
is migrated), no function over 80 lines, and ``Store`` a composition root that exposes
repositories instead of delegating methods.
"""

from __future__ import annotations

import ast
from pathlib import Path

import engine.storage as storage
from engine.storage import Store
from engine.storage.imports import ImportService
from engine.storage.repositories import (
    AuditRepository,
    CharacterRepository,
    ChatRepository,
    CompactionRepository,
    LorebookRepository,
    MessageRepository,
    PersonaRepository,
    SyncRepository,
)
from tests.test_import_graph import LAZY_LIBRARIES

PACKAGE = Path(storage.__file__).parent
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_function_level_imports() -> None:
    found = []
    for path in _sources():
        for fn in _functions(ast.parse(path.read_text("utf-8"))):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    top = (node.module if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                           else node.names[0].name if isinstance(node, ast.Import) else "").split(".")[0]
                    if top not in LAZY_LIBRARIES:
                        found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} in {fn.name}")
    assert found == []


def test_no_function_over_80_lines() -> None:
    long = [f"{path.relative_to(PACKAGE)}:{fn.name} ({fn.end_lineno - fn.lineno + 1} lines)"
            for path in _sources() for fn in _functions(ast.parse(path.read_text("utf-8")))
            if (fn.end_lineno or fn.lineno) - fn.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


def test_store_is_a_composition_root(tmp_path) -> None:
    public = {n for n, v in vars(Store).items() if not n.startswith("_")}
    assert public == {"open", "url", "dialect", "close"}  # no layer of delegating wrappers
    with Store.open(str(tmp_path / "lib.db"), seed=False) as store:
        kinds = {name: type(getattr(store, name)) for name in (
            "chats", "messages", "characters", "personas", "lorebooks", "audits", "compaction", "sync", "imports")}
        assert kinds == {"chats": ChatRepository, "messages": MessageRepository, "characters": CharacterRepository,
                         "personas": PersonaRepository, "lorebooks": LorebookRepository, "audits": AuditRepository,
                         "compaction": CompactionRepository, "sync": SyncRepository, "imports": ImportService}
        # one database (engine, sessions, write lock) shared by every repository
        assert all(getattr(store, name)._db is store.database for name in kinds)
