"""A cold preview counts the chat's texts while step 3 assembles (issue 29, cold).

:func:`engine.pipeline._assemble_blocks` runs the assembly in a helper thread while the caller's
thread counts the chat's message texts (:func:`engine.pipeline._beside`), when the profile counts
outside the GIL (``counts_without_gil``); step 4 then finds them counted. The preview is the one
a profile that counts only in step 4 gives, and an error of the assembly reaches the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

import engine.columnar
import engine.pipeline
from engine.errors import SettingsError
from engine.pipeline import default_registries, preview
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, MessageMeta, PreviewRequest
from engine.tokenizers import TokenizerProfile


def _profile(log: list[tuple[str, str]], *, beside: bool) -> TokenizerProfile:
    def batch(texts: Sequence[str]) -> list[int]:
        log.extend((threading.current_thread().name, t) for t in texts)
        return [len(t.split()) + 1 for t in texts]

    return TokenizerProfile("probe", False, "1", "words + 1", count_batch=batch, counts_without_gil=beside)


def _request(strategy: str, template: list[str] | None = None) -> PreviewRequest:
    messages = [ChatMessage(role="system", content="You narrate.")]
    for i in range(60):
        role = "user" if i % 2 == 0 else "assistant"
        meta = MessageMeta(pinned=i == 7, manualExcluded=i == 12)
        messages.append(ChatMessage(role=role, content=f"turn {i}: " + "the dragon sleeps " * (i % 9), meta=meta))
    messages.append(ChatMessage(role="user", content="Hello {{char}}, about the dragon?"))  # a macro: counted in step 4
    book = Lorebook(name="world", entries=[LorebookEntry(uid=1, keys=["dragon"], content="Dragons hoard gold.")])
    settings = ContextSettings(model="gpt-4o", tokenizer="probe", context_limit=400, reply_reserve=50,
                               strategy=strategy, **({"template": template} if template else {}))
    return PreviewRequest(chat=Chat(messages=messages), settings=settings, lorebooks=[book])


@pytest.mark.parametrize("strategy", ["truncate", "summarize"])
def test_a_cold_preview_counts_the_chat_while_it_assembles(strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 0)  # the test chat is small
    request = _request(strategy)
    log: list[tuple[str, str]] = []
    regs = default_registries()
    regs.tokenizers.register(_profile(log, beside=True))
    out = preview(request, registries=regs)
    plain = {m.content for m in request.chat.messages if "{{" not in m.content}
    here = threading.current_thread().name
    assert plain <= {t for thread, t in log if thread == here}  # the chat's texts: counted in this thread
    assert len([t for _, t in log if t in plain]) == len(plain)  # each once: step 4 counted none again
    # the assembly ran in the helper: the lorebook entry (activation) and the expanded input were counted there
    assert {t for thread, t in log if thread == "loomscope-assembly"} >= {"Dragons hoard gold."}
    sent_input = [t for _, t in log if "about the dragon?" in t and "{{" not in t]
    assert sent_input  # the input as sent (its macro expanded) is counted too
    regs_late = default_registries()
    regs_late.tokenizers.register(_profile([], beside=False))
    assert out.model_dump(mode="json") == preview(request, registries=regs_late).model_dump(mode="json")


def test_an_assembly_error_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 0)
    regs = default_registries()
    regs.tokenizers.register(_profile([], beside=True))
    with pytest.raises(SettingsError) as err:
        preview(_request("truncate", template=["system", "no-such-stage", "history"]), registries=regs)
    assert err.value.code == "INVALID_SETTINGS" and "no-such-stage" in err.value.message


def test_a_profile_that_holds_the_gil_counts_in_step_4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 0)
    log: list[tuple[str, str]] = []
    regs = default_registries()
    regs.tokenizers.register(_profile(log, beside=False))
    preview(_request("truncate"), registries=regs)
    assert log and all(thread != "loomscope-assembly" for thread, _ in log)


def test_step_3_hands_its_columns_and_rows_to_step_4_from_the_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the column path the helper also reads the new blocks' count-free columns and drafts their rows
    (:func:`engine.pipeline._read_assembly`) while this thread counts; the preview is the one made without a helper."""
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 0)
    threads: dict[str, str] = {}

    def spy(name: str, fn: Any) -> Any:
        def run(*args: object) -> Any:
            threads[name] = threading.current_thread().name
            return fn(*args)
        return run

    for module, name in ((engine.columnar, "read_columns"), (engine.pipeline, "draft_rows"),
                         (engine.pipeline, "time_dependent")):
        monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    request = _request("truncate")
    regs = default_registries()
    regs.tokenizers.register(_profile([], beside=True))
    out = preview(request, registries=regs)
    assert threads == dict.fromkeys(("read_columns", "draft_rows", "time_dependent"), "loomscope-assembly")
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 10**9)  # no helper: step 3 in this thread
    regs_late = default_registries()
    regs_late.tokenizers.register(_profile([], beside=True))
    assert preview(request, registries=regs_late).model_dump_json() == out.model_dump_json()
    assert threads["draft_rows"] == threading.current_thread().name


def test_drafted_rows_are_the_rows_built_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold run's rows drafted in step 3 and filled in step 10 are, field for field and in field order, the rows
    :func:`engine.rows.build_rows` builds at once."""
    pairs: list[tuple[list[Any], list[Any]]] = []
    build = engine.columnar.build_rows

    def spy(src: Any, outcome: Any, prior: Any, drafts: Any = None) -> Any:
        if drafts is not None:
            pairs.append((build(src, outcome, prior)[0], drafts))
        return build(src, outcome, prior, drafts)

    monkeypatch.setattr(engine.columnar, "build_rows", spy)
    regs = default_registries()
    regs.tokenizers.register(_profile([], beside=True))
    preview(_request("manual"), registries=regs)
    [(at_once, drafted)] = pairs
    assert [list(r.__dict__.items()) for r in drafted] == [list(r.__dict__.items()) for r in at_once]
    assert {r.status for r in drafted} == {"kept", "excluded"}


def test_the_same_chat_again_assembles_in_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block-path strategy has no warm run: the second preview of a counted chat starts no helper."""
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 0)
    calls: list[int] = []
    beside = engine.pipeline._beside
    monkeypatch.setattr(engine.pipeline, "_beside", lambda work, count: calls.append(1) or beside(work, count))
    regs = default_registries()
    regs.tokenizers.register(_profile([], beside=True))
    first = preview(_request("summarize"), registries=regs)
    assert calls == [1]
    assert preview(_request("summarize"), registries=regs).model_dump(mode="json") == first.model_dump(mode="json")
    assert calls == [1]


def test_a_new_chat_sharing_its_first_and_last_text_with_a_counted_one_counts_beside(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Many chats share their system prompt or a last line: those alone do not make a chat "counted before"."""
    monkeypatch.setattr(engine.pipeline, "COUNT_BESIDE_CHARS", 0)
    calls: list[int] = []
    beside = engine.pipeline._beside
    monkeypatch.setattr(engine.pipeline, "_beside", lambda work, count: calls.append(1) or beside(work, count))
    profile = _profile([], beside=True)
    regs = default_registries()
    regs.tokenizers.register(profile)
    request = _request("truncate")
    texts = [m.content for m in request.chat.messages]
    profile.count_many([texts[0], texts[-1], texts[-2]])
    preview(request, registries=regs)
    assert calls == [1]
