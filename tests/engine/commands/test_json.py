"""engine/commands/_json.py: ``--format json`` writes exactly ``model_dump_json(indent=2)`` and a newline."""

from __future__ import annotations

import io

from engine.commands._json import write_model_json
from engine.schema import ChatMessage

MODEL = ChatMessage(role="user", content="héllo ✓ 🎉 \u2028 \"quoted\"\n", name="Zoë", extra_key=[1, {"a": None}])
EXPECTED = MODEL.model_dump_json(indent=2) + "\n"


def test_a_utf8_text_stream_gets_the_same_bytes_through_its_buffer() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=False)
    out.write("before\n")  # text already written stays first
    write_model_json(MODEL, out)
    out.flush()
    assert raw.getvalue() == ("before\n" + EXPECTED).encode("utf-8")


def test_streams_without_a_buffer_or_utf8_get_text() -> None:
    plain = io.StringIO()
    write_model_json(MODEL, plain)
    assert plain.getvalue() == EXPECTED
    raw = io.BytesIO()
    latin = io.TextIOWrapper(raw, encoding="utf-16", write_through=True)
    write_model_json(MODEL, latin)
    latin.flush()
    assert raw.getvalue().decode("utf-16") == EXPECTED


class _Trickle(io.RawIOBase):
    """A raw file that takes at most 7 bytes per write (as a pipe may take part of a large write)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        chunk = bytes(b[:7])
        self.data += chunk
        return len(chunk)


def test_a_raw_buffer_that_takes_part_of_each_write_gets_everything() -> None:
    raw = _Trickle()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # stdout under python -u
    write_model_json(MODEL, out)
    assert bytes(raw.data) == EXPECTED.encode("utf-8")


def test_stdout_is_the_default(capsys) -> None:
    write_model_json(MODEL)
    assert capsys.readouterr().out == EXPECTED
