"""Exact profiles of the open-weight families: Llama 3/4, Mistral v1/v3/v7/Tekken, Qwen, DeepSeek.

Each profile counts text with the family's own vocabulary file (:mod:`.vocab`, hash-checked on
first use, never downloaded) through the library that defines its format (:mod:`.backends`), and
counts a chat with the family's chat template (:mod:`.templates`). Its ``version`` names the
vocabulary file and its SHA-256; its description names the template source and whether the
file's hash matches a vendor publication.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .backends import get_encoder
from .profiles import TokenizerProfile
from .templates import ChatTemplate, DeepSeekTemplate, LlamaChatFormat, MistralInstruct, Qwen3ChatML, QwenChatML
from .vocab import VOCAB_FILES

#: profile name → (encoder key, family label, template factory); the encoder's file is
#: ``VOCAB_FILES[get_encoder(key).vocab_key]`` (the key itself except ``qwen3``).
OPEN_PROFILES: dict[str, tuple[str, str, Callable[[], ChatTemplate]]] = {
    "llama3": ("llama3", "Meta Llama 3 / 3.1 / 3.2 / 3.3", lambda: LlamaChatFormat(3)),
    "llama4": ("llama4", "Meta Llama 4", lambda: LlamaChatFormat(4)),
    "mistral-v1": ("mistral-v1", "Mistral 7B v0.1 / Mixtral 8x7B (SentencePiece v1)", lambda: MistralInstruct("v1")),
    "mistral-v3": ("mistral-v3", "Mistral 7B v0.3 / Mixtral 8x22B / Codestral 22B (SentencePiece v3)",
                   lambda: MistralInstruct("v3")),
    "mistral-v7": ("mistral-v7", "Mistral Large 2411 (SentencePiece v7)", lambda: MistralInstruct("v7")),
    "mistral-tekken": ("mistral-tekken", "Mistral NeMo and other Tekken models (Tekken, v3 template)",
                       lambda: MistralInstruct("v3")),
    "qwen": ("qwen", "Qwen 2 / 2.5", lambda: QwenChatML(lambda: get_encoder("qwen").special_pattern)),
    "qwen3": ("qwen3", "Qwen 3", lambda: Qwen3ChatML(lambda: get_encoder("qwen3").special_pattern)),
    "deepseek": ("deepseek", "DeepSeek V3 / R1 / V3.x", lambda: DeepSeekTemplate(
        lambda: get_encoder("deepseek").special_pattern)),
}


def _batch(key: str) -> Callable[[Sequence[str]], list[int]]:
    def run(texts: Sequence[str]) -> list[int]:
        return get_encoder(key).count_batch(texts)

    return run


def _spans(key: str) -> Callable[[str], list[tuple[int, int]]]:
    def run(text: str) -> list[tuple[int, int]]:
        return get_encoder(key).spans(text)

    return run


def open_profiles() -> Iterable[TokenizerProfile]:
    """The exact open-weight profiles (vocabularies load lazily, on the first count)."""
    for name, (key, family, template) in OPEN_PROFILES.items():
        vf = VOCAB_FILES["qwen" if key == "qwen3" else key]
        chat = template()
        verified = (f"SHA-256 matches {vf.vendor_hash}" if vf.vendor_hash
                    else "SHA-256 pinned from the package; not verified against a vendor-published hash")
        yield TokenizerProfile(
            name=name, approximate=False, version=vf.version,
            description=(f"exact: {family}; {vf.filename} from the {vf.distribution!r} package ({verified}); "
                         f"chat template: {chat.source}"),
            count_batch=_batch(key), spans=_spans(key), chat=chat,
        )
