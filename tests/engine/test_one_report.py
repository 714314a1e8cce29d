"""One step 10 (issue 29 item 2): every preview is built by :func:`engine.report.report_preview`.

The pipeline's three paths (block objects, columns, SillyTavern's template) differ in their rows
only; the ``ContextPreview`` around them is made in one place. Two checks: no other engine or GUI
module constructs a ``ContextPreview`` (an ast walk, which must find the one in ``engine/report.py``),
and each path's run goes through ``report_preview`` exactly once, with the preview it returns.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import engine.pipeline as pipeline
from engine.importers.st_folder import read_st_folder
from engine.registries import default_registries
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.storage import open_store
from tests.engine.assembly import tc_cases

ROOT = Path(__file__).resolve().parents[2]
#: ways to make a ContextPreview from values (``model_copy`` of an existing one is not a new preview)
_MAKERS = {"model_validate", "model_validate_json", "model_construct"}


def _makes_preview(node: ast.AST) -> bool:
    """Whether ``node`` is a call that builds a ``ContextPreview`` (a call, a ``construct`` or a validation)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name) and func.id == "ContextPreview":
        return True
    if isinstance(func, ast.Attribute) and func.attr in _MAKERS:
        return isinstance(func.value, ast.Name) and func.value.id == "ContextPreview"
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return (name == "construct" and bool(node.args) and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "ContextPreview")


def _preview_makers() -> list[str]:
    found: list[str] = []
    for package in ("engine", "gui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("engine/schema/"):
                continue  # the model itself (and its JSON helpers)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{rel}:{n.lineno}" for n in ast.walk(tree) if _makes_preview(n)]
    return found


def test_only_report_preview_builds_a_preview() -> None:
    makers = _preview_makers()
    assert [m.split(":")[0] for m in makers] == ["engine/report.py"], makers


def _plain_request(strategy: str, model: str = "gpt-4o") -> PreviewRequest:
    messages = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message {i} " * 20)
                for i in range(40)]
    return PreviewRequest(chat=Chat(messages=messages),
                          settings=ContextSettings(model=model, context_limit=900, reply_reserve=100,
                                                   strategy=strategy))


def _sillytavern_request(tmp_path: Path, main_api: str) -> PreviewRequest:
    folder = tc_cases.write_case(tmp_path / "st", "chatml", "cut", main_api=main_api)
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    return store.chats.build_request(next(r.id for r in report.added if r.kind == "chat"))


@pytest.mark.parametrize("path", ["columns", "blocks", "chat-template", "sillytavern-cc", "sillytavern-tc"])
def test_every_path_goes_through_report_preview_once(path: str, tmp_path: Path, monkeypatch) -> None:
    calls = []
    real = pipeline.report_preview

    def spy(run):
        calls.append(run)
        out = real(run)
        calls.append(out)
        return out

    monkeypatch.setattr(pipeline, "report_preview", spy)
    if path.startswith("sillytavern"):
        request = _sillytavern_request(tmp_path, "openai" if path.endswith("cc") else "textgenerationwebui")
    else:
        request = _plain_request("summarize" if path == "blocks" else "truncate",
                                 "llama-3-8b-instruct" if path == "chat-template" else "gpt-4o")
    prepared = pipeline.prepare(request, registries=default_registries())
    assert len(calls) == 2 and calls[1] is prepared.preview
    run = calls[0]
    assert run.columnar == (path == "columns") and (run.template is not None) == path.startswith("sillytavern")
    assert (run.profile.chat is not None) == (path == "chat-template")  # truncate off the columns: the template
    pv = prepared.preview
    assert pv.strategy == ("sillytavern" if path.startswith("sillytavern") else request.settings.strategy)
    assert pv.blocks and pv.headroom == pv.budget - pv.safety_margin - pv.prompt_tokens
    assert pv.messages == prepared.messages and pv.messages is not prepared.messages
