"""SillyTavern's ``Generate`` as the pipeline's assembly step (issue 29 item 2).

The template (:func:`engine.assembly.st_result.assemble_sillytavern`) takes the inputs the
pipeline's steps 1–2 resolved and returns a typed :class:`AssembledPrompt`; it resolves nothing
itself (no import of the layers above the assembly). The pipeline's steps 4–10 take its counts and
fates as final: ``engine.preview``'s rows are the template's blocks in story order
(:func:`engine.assembly.st_result.preview_rows`), its count and budget error SillyTavern's rules
(:mod:`engine.assembly.st_result`), its header the one every preview has. The folder is ``tc_cases``' ChatML case
(SillyTavern 1.12.6 ``Generate`` → ``scripts/openai.js`` ``populateChatCompletion`` over Chat
Completion, ``getCombinedPrompt`` over Text Completion).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from engine.assembly.st_group import speaker_request
from engine.assembly.st_result import assemble_sillytavern, preview_rows, sillytavern_prompt_tokens
from engine.assembly.st_types import AssembledPrompt, SillyTavernInputs
from engine.importers.st_folder import read_st_folder
from engine.pipeline import prepare, preview
from engine.registries import default_registries
from engine.resolve import lorebook_plan, sillytavern_book_groups, sillytavern_limits, speaker_names
from engine.schema import PreviewRequest
from engine.storage import open_store
from tests.engine.assembly import tc_cases

ASSEMBLY = Path(__file__).resolve().parents[3] / "engine" / "assembly"
TEMPLATE_FILES = ("sillytavern", "textcompletion", "st_group", "story_string", "instruct", "st_bias",
                  "regex_scripts", "st_types", "st_result")
ABOVE = ("resolve", "registries", "pipeline", "incremental", "storage", "shifting", "compaction", "generation")


def _request(tmp_path: Path, main_api: str) -> PreviewRequest:
    folder = tc_cases.write_case(tmp_path / "st", "chatml", "cut", main_api=main_api)
    store = open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False)
    report = store.imports.st_folder(read_st_folder(folder))
    return store.chats.build_request(next(r.id for r in report.added if r.kind == "chat"))


def _inputs(request: PreviewRequest, **change: int) -> SillyTavernInputs:
    """What the pipeline's steps 1–2 hand the template (as ``engine.pipeline``'s ``_resolve_sillytavern`` and ``_assemble_template`` do)."""
    st_request, speaker = speaker_request(request)
    assert st_request.sillytavern is not None
    limits = sillytavern_limits(st_request, default_registries().tokenizers)
    names, plan = speaker_names(st_request), lorebook_plan(st_request)
    groups = sillytavern_book_groups([s or "global" for s in plan.scopes],
                                     st_request.settings.world_info.character_strategy)
    inputs = SillyTavernInputs(
        request=st_request, setup=st_request.sillytavern, profile=limits.profile,
        context_limit=limits.context_limit, reply_reserve=limits.reply_reserve, budget=limits.budget,
        user_name=names.user, char_name=names.char, books=plan.books, book_order=plan.order,
        book_groups=tuple(tuple(g) for g in groups), text_tokenizer=limits.text_tokenizer, speaker=speaker,
        warnings=limits.warnings)
    return dataclasses.replace(inputs, **change)


@pytest.mark.parametrize("name", TEMPLATE_FILES)
def test_the_template_imports_nothing_above_the_assembly(name: str) -> None:
    """The template is handed its model, limits and books: no import of resolve, registries, pipeline ..."""
    tree = ast.parse((ASSEMBLY / f"{name}.py").read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level in (0, 2):
            found.append(node.module if node.level == 0 else f"engine.{node.module}")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    found = [m for m in found if m.startswith("engine.") and m.split(".")[1] in ABOVE]
    assert found == []
    nested = [n.lineno for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert nested == [], "function-level imports"


@pytest.mark.parametrize("main_api", ["openai", "textgenerationwebui"])
def test_steps_4_to_10_take_the_template_s_counts_and_fates(main_api: str, tmp_path: Path) -> None:
    """``preview(request)`` is the template's prompt: its rows, count, trace, warnings and notes, nothing added."""
    request = _request(tmp_path, main_api)
    inputs = _inputs(request)
    assembled = assemble_sillytavern(inputs)
    assert isinstance(assembled, AssembledPrompt)
    assert assembled.api == ("chat_completion" if main_api == "openai" else "text_completion")
    assert assembled.sent and {b.status for b in assembled.sent} == {"kept"}
    assert assembled.left_out and {b.status for b in assembled.left_out} == {"excluded"}
    assert any(b.reason == "HISTORY_OLDEST_FIRST" for b in assembled.left_out)  # SillyTavern's own fill
    if main_api == "openai":
        assert len(assembled.messages) == len(assembled.sent) and assembled.prompt is None
        assert [m["content"] for m in assembled.messages] == [b.text for b in assembled.sent]
    else:
        assert assembled.messages == [] and assembled.prompt == "".join(b.text for b in assembled.sent)
        assert assembled.stop
    prepared = prepare(request)
    pv = prepared.preview
    assert [b.model_dump() for b in pv.blocks] == [b.model_dump() for b in preview_rows(assembled, None)]
    assert pv.prompt_tokens == sillytavern_prompt_tokens(assembled, inputs) > 0
    assert (pv.context_limit, pv.reply_reserve, pv.budget, pv.safety_margin, pv.overhead_tokens) == (
        inputs.context_limit, inputs.reply_reserve, inputs.budget, 0, 0)
    assert pv.headroom == inputs.budget - pv.prompt_tokens and pv.strategy == "sillytavern"
    assert (pv.warnings, pv.diagnostics, pv.lorebook_trace) == (
        assembled.warnings, assembled.diagnostics, assembled.lorebook_trace)
    assert (pv.api, pv.prompt, pv.stop, pv.messages, pv.tools) == (
        assembled.api, assembled.prompt, assembled.stop, assembled.messages, [])
    assert prepared.messages == assembled.messages and prepared.budget_ok and prepared.tools == []
    assert prepared.timed_effects == assembled.timed_effects
    assert pv.model_dump_json() == preview(request).model_dump_json()


def test_a_required_prompt_over_the_budget_is_an_overflow_the_steps_report(tmp_path: Path) -> None:
    """``ChatCompletion.checkTokenBudget`` throws ``TokenBudgetExceededError``: the template reports
    the overflow; step 9 makes it ``TOKEN_BUDGET_EXCEEDED`` and nothing is sent."""
    request = _request(tmp_path, "openai")
    request = request.model_copy(update={"settings": request.settings.model_copy(
        update={"context_limit": 260, "reply_reserve": 220})})
    inputs = _inputs(request)
    assert inputs.budget == 40
    assembled = assemble_sillytavern(inputs)
    assert assembled.overflow is not None and assembled.overflow.tokens > assembled.overflow.left
    result = prepare(request)
    assert not result.budget_ok and result.messages == []
    pv = result.preview
    assert pv.error is not None and pv.error.code == "TOKEN_BUDGET_EXCEEDED"
    assert pv.error.details["prompt"] == assembled.overflow.prompt and pv.prompt_tokens == 0
    assert pv.messages == [] and pv.headroom == 40
    sent_rows = [b for b in pv.blocks if b.reason == "OVER_BUDGET_PROTECTED"]
    assert len(sent_rows) == len(assembled.sent) and all(b.status == "excluded" for b in sent_rows)
