"""``--format json`` output: a pydantic model as indented JSON on stdout, written as bytes where it can be."""

from __future__ import annotations

import codecs
import os
import sys
from typing import Any, TextIO

from pydantic import BaseModel


def write_model_json(model: BaseModel, stream: TextIO | None = None) -> None:
    """Write ``model.model_dump_json(indent=2)`` and a newline to ``stream`` (default ``sys.stdout``).

    The bytes are the same either way. When the stream is a UTF-8 text stream over a binary
    buffer (the usual stdout, or pytest's capture) on a system whose line separator is a line
    feed, pydantic's UTF-8 JSON goes to the buffer as it is: no decode to ``str`` and encode back
    (a 10,000-message preview prints about 10 MB; the round trip costs 20-30 ms). Otherwise it is
    written as text, as before.

    Raises
    ------
    OSError
        From the stream (``BrokenPipeError`` when the reader has gone).
    """
    out = sys.stdout if stream is None else stream
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if buffer is None or not encoding or os.linesep != "\n" or codecs.lookup(encoding).name != "utf-8":
        out.write(model.model_dump_json(indent=2) + "\n")
        return
    data = type(model).__pydantic_serializer__.to_json(model, indent=2)  # model_dump_json before .decode()
    out.flush()  # whatever was written as text goes first
    _write_all(buffer, data)
    _write_all(buffer, b"\n")


def _write_all(buffer: Any, data: bytes) -> None:
    """All of ``data`` to ``buffer``: a raw file (stdout under ``python -u``) may take part of it per call."""
    view = memoryview(data)
    while view:
        n = buffer.write(view)
        if n is None:  # a non-blocking file that cannot take more now
            raise BlockingIOError(11, "stdout would block", len(data) - len(view))
        view = view[n:]
