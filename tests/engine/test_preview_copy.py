"""Previews built without validation (engine.incremental, engine.lorebook.records) behave as pydantic models."""

from __future__ import annotations

from engine.pipeline import default_registries, preview
from engine.schema import Chat, ChatMessage, ContextSettings, MessageMeta, PreviewRequest


def test_cold_and_warm_previews_can_be_copied_with_updates() -> None:
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"turn {i} " * 30) for i in range(60)]
    request = PreviewRequest(chat=Chat(messages=msgs),
                             settings=ContextSettings(model="gpt-4o", context_limit=1500, reply_reserve=100))
    regs = default_registries()
    cold = preview(request, registries=regs)
    toggled = list(msgs)
    toggled[50] = msgs[50].model_copy(update={"meta": MessageMeta(pinned=True)})
    warm = preview(request.model_copy(update={"chat": Chat(messages=toggled)}), registries=regs)
    for pv in (cold, warm):
        assert pv.model_copy(update={"warnings": ["x"]}).warnings == ["x"]
        for block in pv.blocks:
            assert block.model_copy(update={"tokens": 7}).tokens == 7
        assert pv.model_dump() == type(pv).model_validate(pv.model_dump()).model_dump()
