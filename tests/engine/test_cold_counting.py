"""A cold preview counts the chat's texts in the encoder threads while step 3 assembles (issue 29, cold).

:func:`engine.pipeline._start_counting` hands the chat's message texts to the profile's
:meth:`~engine.tokenizers.TokenizerProfile.prefetch` before lorebook activation and assembly; step 4
then finds them counted. The preview is the one a profile that cannot start early gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from engine.pipeline import default_registries, preview
from engine.schema import Chat, ChatMessage, ContextSettings, Lorebook, LorebookEntry, MessageMeta, PreviewRequest
from engine.tokenizers import TokenizerProfile


def _words(texts: Sequence[str]) -> list[int]:
    return [len(t.split()) + 1 for t in texts]


def _profile(log: list[tuple[str, str]], *, early: bool) -> TokenizerProfile:
    def batch(texts: Sequence[str]) -> list[int]:
        log.extend(("batch", t) for t in texts)
        return _words(texts)

    def start(texts: Sequence[str]):  # type: ignore[no-untyped-def]
        log.extend(("start", t) for t in texts)
        counts = _words(texts)
        return lambda: counts

    return TokenizerProfile("probe", False, "1", "words + 1", count_batch=batch, start_batch=start if early else None)


def _request(strategy: str) -> PreviewRequest:
    messages = [ChatMessage(role="system", content="You narrate.")]
    for i in range(60):
        role = "user" if i % 2 == 0 else "assistant"
        meta = MessageMeta(pinned=i == 7, manualExcluded=i == 12)
        messages.append(ChatMessage(role=role, content=f"turn {i}: " + "the dragon sleeps " * (i % 9), meta=meta))
    messages.append(ChatMessage(role="user", content="Hello {{char}}, about the dragon?"))  # a macro: counted in step 4
    book = Lorebook(name="world", entries=[LorebookEntry(uid=1, keys=["dragon"], content="Dragons hoard gold.")])
    settings = ContextSettings(model="gpt-4o", tokenizer="probe", context_limit=400, reply_reserve=50,
                               strategy=strategy)
    return PreviewRequest(chat=Chat(messages=messages), settings=settings, lorebooks=[book])


@pytest.mark.parametrize("strategy", ["truncate", "summarize"])
def test_a_cold_preview_counts_the_chat_while_it_assembles(strategy: str) -> None:
    request = _request(strategy)
    log: list[tuple[str, str]] = []
    regs = default_registries()
    regs.tokenizers.register(_profile(log, early=True))
    out = preview(request, registries=regs)
    started = {t for kind, t in log if kind == "start"}
    counted = {t for kind, t in log if kind == "batch"}
    plain = {m.content for m in request.chat.messages if "{{" not in m.content}
    assert plain <= started  # every message text as written started before assembly
    assert not plain & counted  # and step 4 counted none of them again
    # the input's macro is expanded in step 3: its text as sent is counted in step 4
    sent_input = [t for t in counted if "about the dragon?" in t]
    assert sent_input and all("{{" not in t for t in sent_input)
    late: list[tuple[str, str]] = []
    regs_late = default_registries()
    regs_late.tokenizers.register(_profile(late, early=False))
    assert out.model_dump(mode="json") == preview(request, registries=regs_late).model_dump(mode="json")
    assert not [kind for kind, _ in late if kind == "start"]
