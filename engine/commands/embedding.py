"""``loomscope download-embedding-model [NAME]``: fetch a model2vec model for ``vector-recall`` (issue 28 item 4).

The only place the CLI downloads a model: a preview never does. The model goes into the user's
Hugging Face model cache (``HF_HUB_CACHE``), where ``preview --strategy vector-recall
--embedding-model NAME`` then finds it offline. Exit 0 with the folder printed; 4 when the
download failed (``PROVIDER_NETWORK_ERROR``, the reason in words first).
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ProviderError
from ..shifting import embedding


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``download-embedding-model`` subcommand."""
    p = sub.add_parser("download-embedding-model",
                       help="download a model2vec static embedding model for vector-recall (into the model cache)")
    p.add_argument("name", nargs="?", default=embedding.DEFAULT_MODEL,
                   help=f"model id on the Hugging Face hub (default {embedding.DEFAULT_MODEL})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Download ``args.name``, showing progress on stderr; print the folder and how to use it."""

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rdownloading {args.name}: {done}/{total} files")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    try:
        folder = embedding.download_model(args.name, on_progress=progress)
    except OSError as exc:
        raise ProviderError("PROVIDER_NETWORK_ERROR", str(exc), file=args.name) from None
    sys.stdout.write(f"{folder}\nuse it with: loomscope preview --strategy vector-recall "
                     f"--embedding-model {args.name}\n")
    return 0
