"""The import graph of ``engine/`` and ``gui/`` (issue 29 item 4; STYLE.md 17).

Every module is parsed with :mod:`ast` (nothing is imported) and every ``import`` statement
becomes an edge to the internal module it loads: ``import a.b``, ``from a import b`` (to ``a.b``
when that is a module, else to ``a``), relative imports resolved against the importing package.
Each edge is of one kind:

* ``module``: runs when the module is imported (module level, class bodies, ``try`` blocks);
* ``function``: inside a ``def`` or ``lambda``, runs on the first call;
* ``typing``: inside ``if TYPE_CHECKING:``, never runs.

Decisions. (1) The circle check counts all three kinds: an annotation-only import still says
"this module needs that one to be understood", so a circle through ``TYPE_CHECKING`` is a
circle of layers all the same (import-linter's ``layers`` contract counts them too), and a
function-level import must not hide one either. The parent package that Python executes before a
submodule is not an edge of its own (``a.b.c`` does not depend on ``a.b/__init__`` unless it
imports it). (2) A function-level import of an engine/gui module is not allowed at all: it is
either a dodged circle or a layer confusion. (3) A function-level import of a third-party or
standard-library module is allowed only for the libraries of :data:`LAZY_LIBRARIES`, each with
the reason it stays lazy (an optional feature or a measured start-up cost).

While the parts of issue 29 are merged, the rules have explicit, owned allowlists
(:data:`OWNED_FUNCTION_IMPORTS`, :data:`OWNED_CIRCLE_EDGES`, :data:`OWNED_LAZY_STDLIB`): every entry
must still exist (the test fails on a stale one), so the lists can only shrink; the lead empties
them after merging. :data:`LAZY_FOR_START_UP` is the one list meant to stay: downward imports kept
lazy for a measured start-up cost. Not edges: the lazy attributes of ``engine``, ``engine.schema``
and ``engine.importers`` (PEP 562 ``__getattr__`` loading a submodule by name for the public
surface's start-up time), the CLI's command table and entry points (plugins by name).
``python tests/test_import_graph.py`` prints the graph.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "gui")

#: Third-party (and standard-library) modules a function may import lazily, with why (top-level name).
LAZY_LIBRARIES: dict[str, str] = {
    "numpy": "vector-recall's embedding vectors (engine/shifting/embedding.py); the shifting rules import it at"
             " module level (engine/shifting/columns.py), so every preview has it loaded",
    "bm25s": "vector-recall's BM25 backend: only the strategy that uses it pays its import",
    "sklearn": "summarize's TF-IDF centrality: only the summarize strategy pays scikit-learn's ~1 s import",
    "pysbd": "summarize's sentence splitter: only the summarize strategy uses it",
    "model2vec": "vector-recall's optional semantic backend (a model folder the writer downloads on request)",
    "huggingface_hub": "downloading an embedding model, only on `loomscope download-embedding-model`",
    "tqdm": "the embedding model download's progress bar (same command)",
    "sentence_transformers": "an optional embedding backend, never installed by default",
    "fastembed": "an optional embedding backend, never installed by default",
    "tiktoken": "OpenAI vocabularies: loaded when a profile first counts with them (start-up of other profiles)",
    "tiktoken_ext": "the offline tiktoken registry plug-in, loaded with tiktoken",
    "sentencepiece": "open-weight vocabularies, loaded when such a profile first counts",
    "tokenizers": "open-weight vocabularies (Hugging Face tokenizers), loaded when such a profile first counts",
    "PIL": "image cards and image token accounting only (Pillow ~60 ms)",
    "png": "PNG card chunks, only when a card is a PNG",
    "keyring": "the OS key store, only when a provider key is read or written (its backends probe the desktop)",
    "swagger_ui_bundle": "the API docs page's files, only when the docs page is served",
    "rich": "terminal tables and progress: JSON output and the fast preview process never load it",
    "alembic": "migrations, only when a library is opened (store)",
    "PySide6": "the GUI's optional Qt parts loaded on first use",
    "ctypes": "the app's platform probe (gui/app.py), only on the platforms that need it",
}

#: Standard-library (and light third-party) modules still imported in functions, in files other
#: parts of issue 29 own: (importing module, imported top-level module) → owner. Move them to module level.
OWNED_LAZY_STDLIB: dict[tuple[str, str], str] = {
}

#: Function-level imports of engine/gui modules kept on purpose, with the measured reason. Not a dodge:
#: each goes down the layers (pyproject's layers contract sees it like any other import).
LAZY_FOR_START_UP: dict[tuple[str, str], str] = {
    ("engine.commands.library", "engine.storage"):
        "open_library(), the command line's one door to the library: SQLAlchemy + Alembic add ~0.3 s and"
        " ~200 modules to `loomscope preview --chat FILE` (a whole-process bench figure), which never opens it",
    # Building the CLI parser imports every command module (`loomscope --help`, and `loomscope` alone,
    # which launches the app): the API server and the provider client load only when their command runs.
    ("engine.commands.serve", "engine.api.app"): "FastAPI + uvicorn (~0.5 s, ~300 modules), only for `loomscope serve`",
    ("engine.commands.serve", "engine.api.docs"): "with the API, only for `loomscope serve`",
    ("engine.commands.serve", "engine.api.server"): "with the API, only for `loomscope serve`",
    ("engine.commands.generate", "engine.generation"): "httpx and the provider clients, only for `loomscope generate`",
    ("engine.commands.generate", "engine.providers.openai_compat"): "httpx, only for `loomscope generate`",
    # The engine's CLI loads gui.cli through the `loomscope.commands` entry point for every command:
    # Qt and the app load only when `loomscope gui` runs (`loomscope preview` never loads PySide6).
    ("gui.cli", "gui.app"): "PySide6 and the whole app (~0.5 s), only for `loomscope gui`",
}

#: Function-level imports of engine/gui modules left in files other parts own: (importing module,
#: imported module) → owner. The fix for each is in the layers note (notes/issue-29-layers.md).
OWNED_FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
}

#: Edges that close a circle, left in files other parts own: (importing module, imported module) → owner.
#: Leaving these out of the graph must leave no circle. The engine's are also pyproject's ignore_imports.
OWNED_CIRCLE_EDGES: dict[tuple[str, str], str] = {
}


@dataclass(frozen=True)
class Edge:
    """One import statement's edge: ``source`` imports ``target`` (``line`` in ``path``), of ``kind``."""

    source: str
    target: str
    kind: str  # "module" | "function" | "typing"
    path: str
    line: int

    def where(self) -> str:
        """``path:line``."""
        return f"{self.path}:{self.line}"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of :data:`PACKAGES`: dotted name → (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import statement of ``tree`` with its kind (``module``, ``function`` or ``typing``)."""

    def walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, "function")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), "function" if kind == "function" else "typing")
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from walk(child, kind)

    yield from walk(tree, "module")


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names ``node`` imports (for ``from a import b``: ``a.b``, and ``a`` as the fallback)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[: len(package) - node.level + 1]
        name = ".".join([*base, *([node.module] if node.module else [])])
    else:
        name = node.module or ""
    return [f"{name}.{alias.name}" for alias in node.names] + [name]


def build_graph() -> tuple[list[Edge], list[Edge]]:
    """The internal edges and the external function-level imports (target = top-level name) of engine/gui."""
    modules = _modules()
    internal: list[Edge] = []
    external: list[Edge] = []
    for module, (path, is_package) in modules.items():
        rel = str(path.relative_to(ROOT))
        for node, kind in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            names = _imported_names(node, module, is_package)
            targets = set()
            for name in names[:-1] if isinstance(node, ast.ImportFrom) else names:
                target = _longest_module(name, modules)
                if target is None and isinstance(node, ast.ImportFrom):
                    target = _longest_module(names[-1], modules)
                if target is not None:
                    targets.add(target)
                elif kind == "function":
                    top = name.split(".")[0]
                    if top not in PACKAGES:
                        external.append(Edge(module, top, kind, rel, node.lineno))
            internal.extend(Edge(module, t, kind, rel, node.lineno) for t in sorted(targets) if t != module)
    return internal, _unique(external)


def _unique(edges: list[Edge]) -> list[Edge]:
    """``edges`` without repeats of one (source, target, line)."""
    seen: dict[tuple[str, str, int], Edge] = {}
    for e in edges:
        seen.setdefault((e.source, e.target, e.line), e)
    return list(seen.values())


def _longest_module(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The longest prefix of ``name`` that is a module of ours, or ``None`` (third-party or stdlib)."""
    parts = name.split(".")
    if parts[0] not in PACKAGES:
        return None
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def strongly_connected(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def one_circle(component: list[str], edges: list[Edge]) -> list[Edge]:
    """A shortest circle through the first module of ``component``, as the edges that make it."""
    members = set(component)
    by_source: dict[str, list[Edge]] = defaultdict(list)
    for e in edges:
        if e.source in members and e.target in members:
            by_source[e.source].append(e)
    start = component[0]
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for e in by_source[node]:
                if e.target == start:
                    return [*paths[node], e]
                if e.target not in paths:
                    paths[e.target] = [*paths[node], e]
                    following.append(e.target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # pragma: no cover (a component always has one)


def _describe(circle: list[Edge]) -> str:
    """``a -> b (path:line, kind) -> ...`` for a failure message."""
    return "\n".join(f"    {e.source} -> {e.target}   ({e.where()}, {e.kind})" for e in circle)


GRAPH = build_graph()


def test_no_import_circle() -> None:
    """No strongly connected component of more than one module (the owned edges left out)."""
    internal, _ = GRAPH
    kept = [e for e in internal if (e.source, e.target) not in OWNED_CIRCLE_EDGES]
    circles = strongly_connected(kept)
    message = "\n".join(f"import circle of {len(c)} modules: {', '.join(c)}\n  for example:\n{_describe(one_circle(c, kept))}"
                        for c in circles)
    assert not circles, message


def test_no_function_level_import_of_our_modules() -> None:
    """No engine/gui module imported inside a function (a dodged circle or a confused layer)."""
    internal, _ = GRAPH
    allowed = OWNED_FUNCTION_IMPORTS.keys() | LAZY_FOR_START_UP.keys()
    found = [e for e in internal if e.kind == "function" and (e.source, e.target) not in allowed]
    assert not found, "function-level imports of engine/gui modules (move them to module level):\n" + "\n".join(
        f"    {e.where()}: {e.source} imports {e.target}" for e in found)


def test_function_level_imports_of_libraries_are_the_lazy_ones() -> None:
    """Third-party and standard-library modules are imported in functions only when listed with a reason."""
    _, external = GRAPH
    found = [e for e in external if e.target not in LAZY_LIBRARIES and (e.source, e.target) not in OWNED_LAZY_STDLIB]
    assert not found, "function-level imports of libraries that are not lazy for a reason (LAZY_LIBRARIES):\n" + \
        "\n".join(f"    {e.where()}: {e.source} imports {e.target}" for e in found)


def test_allowlists_only_shrink() -> None:
    """Every owned allowlist entry still exists: a fixed edge must be taken off its list."""
    internal, external = GRAPH
    function_pairs = {(e.source, e.target) for e in internal if e.kind == "function"}
    all_pairs = {(e.source, e.target) for e in internal}
    lazy_pairs = {(e.source, e.target) for e in external}
    stale = [f"OWNED_FUNCTION_IMPORTS {k}" for k in OWNED_FUNCTION_IMPORTS if k not in function_pairs]
    stale += [f"LAZY_FOR_START_UP {k}" for k in LAZY_FOR_START_UP if k not in function_pairs]
    stale += [f"OWNED_CIRCLE_EDGES {k}" for k in OWNED_CIRCLE_EDGES if k not in all_pairs]
    stale += [f"OWNED_LAZY_STDLIB {k}" for k in OWNED_LAZY_STDLIB if k not in lazy_pairs]
    # a circle edge must be one that, put back, closes a circle (else it need not be listed)
    with_owned = strongly_connected(internal)
    in_circle = {m for c in with_owned for m in c}
    stale += [f"OWNED_CIRCLE_EDGES {k} (closes no circle)" for k in OWNED_CIRCLE_EDGES
              if k in all_pairs and not (k[0] in in_circle and k[1] in in_circle)]
    assert not stale, "allowlist entries that no longer exist (remove them):\n    " + "\n    ".join(stale)


def test_layers_contract_ignores_only_owned_edges() -> None:
    """pyproject's ``ignore_imports`` for the layers contract are owned circle edges (the two lists shrink together)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    assert layers, "pyproject.toml has no import-linter layers contract"
    ignored = {tuple(part.strip() for part in line.split("->")) for c in layers for line in c.get("ignore_imports", [])}
    assert ignored <= OWNED_CIRCLE_EDGES.keys(), f"ignored in pyproject but not owned here: {ignored - OWNED_CIRCLE_EDGES.keys()}"
    engine_owned = {k for k in OWNED_CIRCLE_EDGES if k[0].startswith("engine.")}
    assert engine_owned <= ignored, f"owned engine circle edges the layers contract does not ignore: {engine_owned - ignored}"


def test_the_walker_sees_each_kind() -> None:
    """The parser finds module-level, function-level and TYPE_CHECKING imports (a graph it cannot see is no check)."""
    tree = ast.parse("from typing import TYPE_CHECKING\nimport engine.errors\n"
                     "if TYPE_CHECKING:\n    from engine import registries\n"
                     "def f():\n    from .pipeline import preview\n")
    kinds = sorted(kind for _, kind in _imports(tree))
    assert kinds == ["function", "module", "module", "typing"]
    component = strongly_connected([Edge("a", "b", "module", "a.py", 1), Edge("b", "c", "typing", "b.py", 1),
                                    Edge("c", "a", "function", "c.py", 1), Edge("c", "d", "module", "c.py", 2)])
    assert component == [["a", "b", "c"]]


def main() -> None:
    """Print the graph: each module's imports of engine/gui modules (kind after the name)."""
    internal, external = GRAPH
    by_source: dict[str, list[str]] = defaultdict(list)
    for e in sorted(internal, key=lambda e: (e.source, e.target)):
        tag = "" if e.kind == "module" else f" [{e.kind}]"
        item = f"{e.target}{tag}"
        if item not in by_source[e.source]:
            by_source[e.source].append(item)
    for source in sorted(by_source):
        print(f"{source}\n    " + "\n    ".join(by_source[source]))
    print(f"\n{len(internal)} internal edges, {sum(e.kind == 'function' for e in internal)} function-level; "
          f"{len(external)} lazy library imports; circles: {strongly_connected(internal) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()
