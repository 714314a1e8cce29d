"""Assembly: stage order, macros, depth insertions, protection flags."""

from __future__ import annotations

from datetime import datetime

import pytest

from engine.assembly import MacroContext, expand_macros
from engine.errors import SettingsError
from engine.pipeline import default_registries, preview
from engine.schema import (
    Character,
    Chat,
    ChatMessage,
    ContextSettings,
    MessageMeta,
    Persona,
    PreviewRequest,
)


def _req(**kw):
    settings = kw.pop("settings", ContextSettings(model="gpt-4o", context_limit=100_000, reply_reserve=1000))
    return PreviewRequest(settings=settings, **kw)


CARD = Character(
    name="Mira", description="{{char}} is a cartographer who knows {{user}}.", personality="curious",
    scenario="A <BOT> and <USER> map the coast.", mes_example="<START>\n{{user}}: hi\n{{char}}: hello",
    system_prompt="{{original}} Stay in character as {{char}}.",
    post_history_instructions="{{original}}Reply in under 100 words.",
    extensions={"depth_prompt": {"prompt": "Mira hides a secret.", "depth": 2, "role": "system"}},
)


def _chat(n=6, last_user=True):
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(n)]
    if last_user:
        msgs.append(ChatMessage(role="user", content="What now?"))
    return Chat(messages=msgs, user_name="Ana", character_name="Mira")


@pytest.mark.parametrize("text,expected,unknown", [
    ("{{char}} meets {{user}}", "Mira meets Ana", []),
    ("{{CHAR}} / {{User}}", "Mira / Ana", []),
    ("<BOT> and <USER> and <char>", "Mira and Ana and Mira", []),
    ("a{{newline}}b", "a\nb", []),
    ("x{{// a comment}}y", "xy", []),
    ("{{noop}}z", "z", []),
    ("keep {{mystery}} here", "keep {{mystery}} here", ["{{mystery}}"]),
    ("{{isodate}}", "2026-11-29", []),
    ("{{original}}!", "!", []),
])
def test_macros(text, expected, unknown):
    out, unk = expand_macros(text, MacroContext(user="Ana", char="Mira", now=datetime(2026, 11, 29, 22, 0)))
    assert out == expected and unk == unknown


def test_random_macros_are_seeded():
    ctx = MacroContext(seed=5)
    a = expand_macros("{{random::a::b::c::d}} {{roll:3d6}}", ctx)[0]
    assert a == expand_macros("{{random::a::b::c::d}} {{roll:3d6}}", MacroContext(seed=5))[0]


def test_prompt_order_and_protection():
    pv = preview(_req(chat=_chat(), character=CARD, persona=Persona(name="Ana", description="Ana is a sailor."),
                      system_prompt="Be vivid."))
    sources = [b.source for b in pv.blocks]
    assert sources[:6] == ["system", "persona", "character:description", "character:personality",
                           "character:scenario", "character:mes_example"]
    # post-history instructions come after history, the current input last
    assert sources[-2:] == ["character:post_history_instructions", "message:6"]
    blocks = {b.source: b for b in pv.blocks}
    assert blocks["system"].text == "Be vivid. Stay in character as Mira."
    assert blocks["character:description"].text == "Mira is a cartographer who knows Ana."
    assert blocks["character:personality"].text == "Mira's personality: curious"
    assert blocks["character:scenario"].text == "Scenario: A Mira and Ana map the coast."
    assert blocks["character:mes_example"].text.startswith("[Example Chat]\nAna: hi")
    assert blocks["character:post_history_instructions"].text == "Reply in under 100 words."
    assert blocks["message:6"].reason == "CURRENT_INPUT" and blocks["message:6"].protected
    for s in ("system", "character:description", "persona", "character:post_history_instructions"):
        assert blocks[s].protected
    assert not blocks["character:mes_example"].protected
    assert "creator_notes" not in " ".join(sources)


def test_depth_prompt_inserted_at_depth():
    pv = preview(_req(chat=_chat(), character=CARD))
    sources = [b.source for b in pv.blocks if b.source.startswith(("message:", "character:depth"))]
    # depth 2: before the last two chat messages (message:5 and the current input message:6)
    assert sources[-3:] == ["character:depth_prompt", "message:5", "message:6"]


def test_author_note_from_chat_metadata():
    chat = _chat()
    chat.metadata = {"note_prompt": "[Tone: tense]", "note_depth": 0, "note_role": 0}
    pv = preview(_req(chat=chat, character=CARD))
    assert pv.blocks[-1].source == "author_note" or [b.source for b in pv.blocks][-1] == "author_note"
    note = next(b for b in pv.blocks if b.source == "author_note")
    assert note.protected and note.reason == "INSTRUCTION"


def test_no_current_input_when_chat_ends_on_assistant():
    pv = preview(_req(chat=_chat(last_user=False)))
    assert not any(b.reason == "CURRENT_INPUT" for b in pv.blocks)


def test_hidden_messages_are_excluded_with_their_reason():
    chat = _chat()
    chat.messages[1] = chat.messages[1].model_copy(update={"meta": MessageMeta(hidden=True)})
    pv = preview(_req(chat=chat))
    b = next(b for b in pv.blocks if b.source == "message:1")
    assert (b.status, b.reason) == ("excluded", "HIDDEN")
    assert all(m["content"] != "m1" for m in pv.messages)


def test_unknown_macro_warning():
    chat = Chat(messages=[ChatMessage(role="user", content="hello {{weird_macro}}")])
    pv = preview(_req(chat=chat))
    assert any("{{weird_macro}}" in w for w in pv.warnings)
    assert pv.messages[-1]["content"] == "hello {{weird_macro}}"


def test_custom_template_order_and_stage_registry():
    regs = default_registries()
    seen = []

    def banner(ctx):
        seen.append(True)
        return [ctx.text_block(__import__("engine").BlockKind.INSTRUCTION, "instruction:banner", "BANNER",
                               protected=True, reason="INSTRUCTION")]

    cleanup = regs.stages.register("banner", banner)
    settings = ContextSettings(model="gpt-4o", context_limit=10_000, reply_reserve=100,
                               template=["history", "input", "banner", "system"])
    pv = preview(_req(chat=_chat(), character=CARD, settings=settings), registries=regs)
    assert [b.source for b in pv.blocks][-2:] == ["instruction:banner", "system"]
    with pytest.raises(SettingsError):
        regs.stages.register("banner", banner)
    cleanup()
    with pytest.raises(SettingsError) as err:
        preview(_req(chat=_chat(), settings=settings), registries=regs)
    assert err.value.code == "INVALID_SETTINGS"


def test_example_dialogue_goes_before_history():
    settings = ContextSettings(model="gpt-4o", context_limit=143, reply_reserve=10, strategy="truncate")
    pv = preview(_req(chat=_chat(), character=CARD, settings=settings))
    ex = next(b for b in pv.blocks if b.source == "character:mes_example")
    assert (ex.status, ex.reason) == ("excluded", "EXAMPLES_PUSHED_OUT")
    assert all(b.status == "kept" for b in pv.blocks if b.source.startswith("message:"))


def test_hidden_messages_do_not_count_towards_depth():
    chat = _chat()
    chat.messages[5] = chat.messages[5].model_copy(update={"meta": MessageMeta(hidden=True)})
    pv = preview(_req(chat=chat, character=CARD))
    order = [b.source for b in pv.blocks if b.source.startswith(("message:", "character:depth"))]
    # depth 2 counts the sent messages message:4 and message:6 (message:5 is hidden)
    assert order[-4:] == ["character:depth_prompt", "message:4", "message:5", "message:6"]
