"""``getBiasStrings`` (script.js 4714–4746) and ``extractMessageBias`` (2671–2694), the function the
Text Completion path shares."""

from __future__ import annotations

from engine.assembly.st_bias import bias_strings, extract_message_bias
from engine.schema import ChatMessage, MessageMeta


def _m(role: str, text: str, bias: str | None = None, hidden: bool = False) -> ChatMessage:
    extra = {"extra": {"bias": bias}} if bias is not None else {}
    return ChatMessage(role=role, content=text, meta=MessageMeta(hidden=hidden, **extra))


def sub(t: str) -> str:
    return t.replace("{{char}}", "Mira")


def test_setting_when_no_message_has_a_bias() -> None:
    got = bias_strings([_m("user", "hi"), _m("assistant", "yo")], "{{char}}:", sub)
    assert (got.prompt_bias, got.is_user_prompt_bias) == ("Mira:", True)


def test_newest_user_message_bias_wins_and_the_search_stops_there() -> None:
    msgs = [_m("user", "a", bias=" old"), _m("assistant", "b"), _m("user", "c", bias=" new"), _m("assistant", "d")]
    assert bias_strings(msgs, "set", sub).prompt_bias == " new"
    # the newest user message has no bias: the loop breaks there (no older bias), the setting is used
    msgs2 = [_m("user", "a", bias=" old"), _m("assistant", "b"), _m("user", "c")]
    assert bias_strings(msgs2, "set", sub).prompt_bias == "set"


def test_hidden_message_counts_as_is_system() -> None:
    msgs = [_m("user", "a", bias=" old"), _m("assistant", "note", bias=" sys", hidden=True)]
    assert bias_strings(msgs, "", sub).prompt_bias == " sys"


def test_impersonate_and_continue_have_none_swipe_skips_newest() -> None:
    msgs = [_m("user", "a", bias=" u"), _m("assistant", "b")]
    assert bias_strings(msgs, "set", sub, generation_type="continue").prompt_bias == ""
    msgs2 = [_m("user", "a", bias=" first"), _m("user", "b", bias=" newest")]
    assert bias_strings(msgs2, "", sub, generation_type="swipe").prompt_bias == " first"


def test_textarea_bias_helper() -> None:
    assert extract_message_bias('Hi {{bias "She laughs."}} there {{bias "Then"}}') == " She laughs. Then"
    assert bias_strings([], "set", sub, textarea='x {{bias "B"}}').prompt_bias == " B"
