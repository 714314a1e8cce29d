"""Issue 15 (3): PNG cards are read as SillyTavern reads them, without decoding the pixels.

SillyTavern ``src/character-card-parser.js`` ``read()`` (1.12.6, lines 47-75) takes the FIRST
``tEXt`` chunk whose keyword is ``ccv3``, else the first ``chara`` (``Array.findIndex``), and
never decodes the image. Before: Pillow's ``im.text`` dict let the LAST chunk win, and
``load()`` decoded every pixel (a 9000×9000 card cost ~350 MB and seconds).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from engine.errors import LoomscopeError
from engine.importers import inspect_file, load_character
from engine.importers.cards import load_character_with_info, read_png_text_chunk_list
from engine.storage import open_store

from .helpers import V2_CARD, b64, png_bytes, write


def chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack("!I", len(body)) + ctype + body + struct.pack("!I", zlib.crc32(ctype + body))


def raw_png(width: int, height: int, *, before_idat: list[bytes] = (), after_idat: list[bytes] = (),
            idat: bytes = b"not a zlib stream at all") -> bytes:
    """A PNG built chunk by chunk (valid CRCs; the IDAT payload is whatever is given)."""
    ihdr = struct.pack("!IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + b"".join(before_idat) + chunk(b"IDAT", idat)
            + b"".join(after_idat) + chunk(b"IEND", b""))


def text(keyword: str, value: str) -> bytes:
    return chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + value.encode("latin-1"))


def card(name: str) -> dict:
    return {**V2_CARD, "data": {**V2_CARD["data"], "name": name}}


def test_first_of_two_chara_chunks_wins_with_a_warning(tmp_path: Path) -> None:
    p = write(tmp_path / "two.png", png_bytes([("tEXt", "chara", b64(card("First"))),
                                               ("tEXt", "chara", b64(card("Second")))]))
    character, _spec, warnings = load_character_with_info(p)
    assert character.name == "First"
    assert any("2 chara chunks" in w and "first" in w for w in warnings)
    report = inspect_file(p)
    assert report.name == "First" and any("2 chara chunks" in w for w in report.warnings)


def test_first_chara_wins_across_idat_and_case(tmp_path: Path) -> None:
    # SillyTavern's write() puts chara just before IEND; a second one before IDAT still comes first
    data = raw_png(2, 2, before_idat=[text("Chara", b64(card("Early")))],
                   after_idat=[text("chara", b64(card("Late")))])
    _c, _s, warnings = load_character_with_info(write(tmp_path / "c.png", data))
    assert _c.name == "Early" and warnings


def test_text_chunk_is_preferred_over_itxt_like_sillytavern(tmp_path: Path) -> None:
    p = write(tmp_path / "mixed.png", png_bytes([("iTXt", "chara", b64(card("From iTXt"))),
                                                 ("tEXt", "chara", b64(card("From tEXt")))]))
    assert load_character(p).name == "From tEXt"


def test_ccv3_still_beats_chara_and_a_single_chunk_gives_no_warning(tmp_path: Path) -> None:
    v3 = {"spec": "chara_card_v3", "spec_version": "3.0", "data": {**V2_CARD["data"], "name": "V3"}}
    p = write(tmp_path / "v3.png", png_bytes([("tEXt", "chara", b64(card("V2"))), ("tEXt", "ccv3", b64(v3))]))
    c, _spec, warnings = load_character_with_info(p)
    assert c.name == "V3" and not any("chunks;" in w for w in warnings)


def test_pixels_are_never_decoded(tmp_path: Path) -> None:
    """A 9000×9000 card whose IDAT is not even a zlib stream still reads: no pixel is decoded
    (the old Pillow ``load()`` path failed here, after trying to allocate the image)."""
    data = raw_png(9000, 9000, after_idat=[text("chara", b64(card("Huge")))])
    assert len(data) < 10_000
    p = write(tmp_path / "huge.png", data)
    assert load_character(p).name == "Huge"
    with open_store(f"sqlite:///{tmp_path / 'lib.db'}", seed=False) as store:
        [ref] = store.imports.files([p])
        assert ref.name == "Huge"


def test_compressed_text_chunks_are_read_and_bounded(tmp_path: Path, monkeypatch) -> None:
    body = b"chara\0\0" + zlib.compress(b64(card("Zipped")).encode())
    p = write(tmp_path / "z.png", raw_png(1, 1, after_idat=[chunk(b"zTXt", body)]))
    assert load_character(p).name == "Zipped"
    itxt = b"chara\0\x01\x00en\0\0" + zlib.compress(json.dumps(card("Ünï")).encode())
    p = write(tmp_path / "i.png", raw_png(1, 1, after_idat=[chunk(b"iTXt", itxt)]))
    assert load_character(p).name == "Ünï"
    import engine.importers._io as io_mod

    monkeypatch.setattr(io_mod, "MAX_FILE_BYTES", 1000)
    bomb = b"chara\0\0" + zlib.compress(b"A" * 100_000)
    p = write(tmp_path / "bomb.png", raw_png(1, 1, after_idat=[chunk(b"zTXt", bomb)]))
    with pytest.raises(LoomscopeError) as err:
        load_character(p)
    assert err.value.code == "IMPORT_TOO_LARGE" and err.value.place == "chunk 2"


@pytest.mark.parametrize(("data", "code"), [
    (raw_png(1, 1)[:-6], "IMPORT_INVALID_PNG"),                                    # cut inside IEND
    (raw_png(1, 1)[:33], "IMPORT_INVALID_PNG"),                                    # IHDR only, no IEND
    (b"\x89PNG\r\n\x1a\n" + chunk(b"tEXt", b"chara\0x") + chunk(b"IEND", b""), "IMPORT_INVALID_PNG"),  # no IHDR
    (raw_png(1, 1, after_idat=[chunk(b"tEXt", b"no separator")]), "IMPORT_INVALID_PNG"),
    (raw_png(1, 1, after_idat=[chunk(b"zTXt", b"chara\0\0garbage")]), "IMPORT_INVALID_PNG"),
    (raw_png(1, 1, after_idat=[chunk(b"iTXt", b"chara\0\x05\x00\0\0x")]), "IMPORT_INVALID_PNG"),
    (raw_png(1, 1, after_idat=[chunk(b"iTXt", b"chara\0\x00\x00\0\0\xff")]), "IMPORT_INVALID_UTF8"),
    (raw_png(1, 1), "IMPORT_NO_CARD_CHUNK"),
])
def test_malformed_chunks_are_clean_errors(tmp_path: Path, data: bytes, code: str) -> None:
    p = write(tmp_path / "bad.png", data)
    with pytest.raises(LoomscopeError) as err:
        load_character(p)
    assert err.value.code == code and err.value.file == str(p)


def test_chunk_list_keeps_file_order_and_kinds(tmp_path: Path) -> None:
    data = png_bytes([("tEXt", "a", "1"), ("zTXt", "b", "2"), ("iTXt", "c", "3 ✓")])
    assert read_png_text_chunk_list(data, "x.png") == [("tEXt", "a", "1"), ("zTXt", "b", "2"),
                                                       ("iTXt", "c", "3 ✓")]
