"""Static embeddings for ``vector-recall`` (issue 28 item 4): ``model2vec``, numpy only, on the CPU.

A model2vec ``StaticModel`` is a token → vector table (a few MB to a few tens of MB) with a
Hugging Face ``tokenizers`` tokenizer; a text's vector is the mean of its tokens' vectors, so
scoring a few hundred lorebook entries takes milliseconds and no GPU.

Where a model comes from (:func:`resolve_model_folder`), never the network during a preview:

1. a local folder holding a model2vec model (``model.safetensors``, ``tokenizer.json``,
   ``config.json``; the sentence-transformers static layouts load too);
2. a model id (``minishlab/potion-base-8M``, :data:`DEFAULT_MODEL`) already in the user's
   Hugging Face model cache (``HF_HUB_CACHE``, by default ``~/.cache/huggingface/hub``).

Anything else raises ``FileNotFoundError`` saying how to get it: downloading happens only when
the user asks (:func:`download_model`; CLI ``loomscope download-embedding-model``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

#: The model suggested for download: model2vec's small English static model (8M parameters, ~30 MB).
DEFAULT_MODEL = "minishlab/potion-base-8M"
#: Name of this backend in traces (``relevance_backend``).
BACKEND = "model2vec"


def _valid_layout(folder: Path) -> bool:
    from model2vec.persistence.datamodels import FOLDER_LAYOUTS

    return any(layout.with_parent(folder).is_valid() for layout in FOLDER_LAYOUTS)


def resolve_model_folder(ref: str) -> Path:
    """The local folder of the model ``ref`` (a folder, or a model id in the user's model cache).

    Never downloads.

    Raises
    ------
    FileNotFoundError
        ``ref`` is neither a model folder nor a cached model id (the message says how to download it).
    """
    folder = Path(ref).expanduser()
    if folder.is_dir():
        if not _valid_layout(folder):
            raise FileNotFoundError(f"{folder}: no model2vec model there (model.safetensors, tokenizer.json, "
                                    "config.json)")
        return folder
    from model2vec.persistence.hf import maybe_get_cached_model_path

    cached = maybe_get_cached_model_path(ref)
    if cached is not None and _valid_layout(cached):
        return cached
    raise FileNotFoundError(f"embedding model {ref!r} is not a folder and not in the model cache; "
                            f"download it with `loomscope download-embedding-model {ref}`")


@lru_cache(maxsize=2)
def _load(folder: str, stamp: float) -> Any:
    from model2vec import StaticModel

    return StaticModel.from_pretrained(folder, force_download=False)


def load_model(ref: str) -> Any:
    """The ``model2vec.StaticModel`` of ``ref`` (see :func:`resolve_model_folder`), loaded once per folder version.

    Raises ``FileNotFoundError`` (see :func:`resolve_model_folder`) or ``ValueError`` for a broken model folder.
    """
    folder = resolve_model_folder(ref)
    stamp = max((p.stat().st_mtime for p in folder.iterdir() if p.is_file()), default=0.0)
    return _load(str(folder), stamp)


def embedding_scores(documents: Sequence[str], query: str, ref: str) -> list[float]:
    """Cosine similarity of each document to ``query`` with the static model ``ref``, in [-1, 1].

    A text none of whose tokens the model knows has a zero vector and scores 0.

    Raises
    ------
    FileNotFoundError
        No such model locally (nothing is downloaded).
    """
    if not documents:
        return []
    import numpy as np

    model = load_model(ref)
    vectors = np.asarray(model.encode([query, *documents]), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    return [float(v) for v in unit[1:] @ unit[0]]


def download_model(ref: str = DEFAULT_MODEL, *, on_progress: Callable[[int, int], None] | None = None) -> Path:
    """Download the model ``ref`` into the user's model cache (only the model2vec files) and return its folder.

    ``on_progress(done, total)`` is called as files arrive (counts of files). Only ever called
    because the user asked (CLI flag or command, the app's button).

    Raises
    ------
    OSError
        The download failed (no network, unknown model id); the message says which.
    """
    import huggingface_hub
    from model2vec.persistence.datamodels import get_all_model2vec_paths
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    class _Progress(tqdm):
        def update(self, n: float | None = 1) -> bool | None:
            out = super().update(n)
            if on_progress is not None and self.total:
                on_progress(int(self.n), int(self.total))
            return out

    try:
        folder = huggingface_hub.snapshot_download(ref, repo_type="model", tqdm_class=_Progress,
                                                   allow_patterns=[*get_all_model2vec_paths(), "README.md"])
    except Exception as exc:  # the hub raises many kinds; the caller shows one message
        raise OSError(f"could not download embedding model {ref!r}: {exc}") from None
    path = Path(folder)
    if not _valid_layout(path):
        raise OSError(f"{ref!r} downloaded to {path} but holds no model2vec model")
    return path
