"""A cold preview counts the chat's texts while step 3 assembles (issue 29, cold).

:func:`engine.pipeline._assemble_blocks` runs the assembly in a helper thread while the caller's
thread counts the chat's message texts (:func:`engine.pipeline._beside`), when the profile counts
outside the GIL (``counts_without_gil``); step 4 then finds them counted. The preview is the one
a profile that counts only in step 4 gives, and an error of the assembly reaches the caller.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

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
