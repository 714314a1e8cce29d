"""Character cards: V1, V2, V3 and legacy Pygmalion JSON, as JSON files or PNG text chunks.

Sources: Character Card V2/V3 specs and SillyTavern ``src/character-card-parser.js`` /
``importCharacter`` (FORMATS.md b4):

- PNG: base64(UTF-8 JSON) in a ``tEXt``/``iTXt``/``zTXt`` chunk; keyword ``ccv3`` (V3) is
  preferred over ``chara`` (V1/V2); keywords compare case-insensitively; no fallback from a
  broken ``ccv3`` to ``chara`` (as SillyTavern); of several chunks with one keyword the first
  wins (a warning says so). Chunks are walked with pypng, pixels are never decoded.
- JSON: ``spec`` present → V2/V3 from ``data``; else ``name`` present → V1 (TavernAI);
  else ``char_name`` → Pygmalion/Gradio (``char_persona`` → description, ``world_scenario`` →
  scenario, ``char_greeting`` → first_mes, ``example_dialogue`` → mes_example).

``extensions`` is kept verbatim (``depth_prompt`` stays there; :meth:`Character.depth_prompt`
reads it). The embedded ``character_book`` becomes ``Character.character_book``.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

from ..schema import Character
from . import _io  # _io.MAX_FILE_BYTES read per call (a caller may lower the limit)
from ._fields import FieldReader
from ._guard import guarded
from ._io import decode_utf8, fail, parse_json, parse_json_document, read_bytes
from .lorebooks import parse_character_book

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: Card text fields shared by V1/V2/V3.
V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
#: Further V2 string fields.
V2_STRING_FIELDS = ("creator_notes", "system_prompt", "post_history_instructions", "creator",
                    "character_version")
#: Pygmalion/Gradio key → card field (SillyTavern ``importCharacter``).
PYGMALION_FIELDS = {"char_name": "name", "char_persona": "description",
                    "world_scenario": "scenario", "char_greeting": "first_mes",
                    "example_dialogue": "mes_example"}

_MAPPED_DATA = set(V1_FIELDS) | set(V2_STRING_FIELDS) | {
    "alternate_greetings", "tags", "extensions", "character_book", "nickname"}
_B64_RE = re.compile(r"\s+")


def _read_fields(r: FieldReader, src: dict[str, Any], path: str) -> dict[str, Any]:
    values: dict[str, Any] = {k: r.string(src, k, path) for k in V1_FIELDS + V2_STRING_FIELDS}
    values["alternate_greetings"] = r.str_list(src, "alternate_greetings", path)
    values["tags"] = r.keys(src, "tags", path)
    values["extensions"] = dict(r.dict_field(src, "extensions", path))
    values["nickname"] = r.opt_string(src, "nickname", path)
    book = src.get("character_book")
    if book is not None:
        values["character_book"] = parse_character_book(r, book, f"{path}.character_book")
    return values


def _extras(src: dict[str, Any], skip: set[str], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in src.items():
        if k in skip:
            continue
        out[f"{prefix}{k}" if k in Character.model_fields else k] = v
    return out


def parse_card_data(data: Any, file: str | None, reader: FieldReader | None = None
                    ) -> tuple[Character, str]:
    """Read parsed card JSON into a :class:`Character`. Returns ``(character, spec)``.

    ``spec`` is ``"chara_card_v3"``, ``"chara_card_v2"``, ``"chara_card_v1"`` or ``"pygmalion"``.

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_WRONG_TYPE`` (with JSON path), ``IMPORT_UNSUPPORTED_SPEC`` (``chara_card_v4``,
        V2 with ``spec_version`` 3, ...), ``IMPORT_UNSUPPORTED_FORMAT`` (not a card),
        ``IMPORT_INVALID_CARD``.
    """
    r = reader or FieldReader(file)
    d = r.obj(data, "$")
    spec = d.get("spec")
    if spec is not None:
        if not isinstance(spec, str):
            r.wrong("$.spec", "string", spec)
        if spec not in ("chara_card_v2", "chara_card_v3"):
            if spec.startswith("chara_card"):
                r.fail("IMPORT_UNSUPPORTED_SPEC", f"card spec {spec!r} is not supported", "$.spec")
            r.fail("IMPORT_UNSUPPORTED_FORMAT", f"spec {spec!r} is not a character card", "$.spec")
        version = d.get("spec_version")
        major = "3" if spec == "chara_card_v3" else "2"
        if version is None:
            r.warn(f"{spec} without spec_version; read as {major}.0")
        elif isinstance(version, (int, float)) and not isinstance(version, bool):
            version = str(version)
        if version is not None and (not isinstance(version, str) or version.split(".")[0] != major):
            r.fail("IMPORT_UNSUPPORTED_SPEC",
                   f"{spec} with spec_version {version!r} is not supported (expected {major}.x)",
                   "$.spec_version")
        inner = d.get("data")
        if inner is None:
            r.warn(f"{spec} card without a data object; fields read from the top level")
            inner, path = d, "$"
        else:
            inner, path = r.obj(inner, "$.data"), "$.data"
        values = _read_fields(r, inner, path)
        extras = _extras(inner, _MAPPED_DATA, "data_") if inner is not d else {}
        root = {k: v for k, v in d.items() if k not in ("spec", "spec_version", "data")}
        if inner is d:
            extras = _extras(d, _MAPPED_DATA | {"spec", "spec_version", "data"}, "data_")
        elif root:
            extras["root_fields"] = root
        if not values["name"]:
            r.warn(f"{path}.name is empty")
        char = Character(**values, spec=spec, spec_version=version, **extras)
        return char, spec
    if "name" in d or any(k in d for k in ("description", "first_mes")):
        values = _read_fields(r, d, "$")
        if not values["creator_notes"] and isinstance(d.get("creatorcomment"), str):
            values["creator_notes"] = d["creatorcomment"]
        extras = _extras(d, _MAPPED_DATA, "v1_")
        return Character(**values, **extras), "chara_card_v1"
    if "char_name" in d:
        mapped: dict[str, Any] = {field: r.string(d, key, "$") for key, field in PYGMALION_FIELDS.items()}
        extras = _extras(d, set(PYGMALION_FIELDS), "pyg_")
        return Character(**mapped, **extras), "pygmalion"
    r.fail("IMPORT_UNSUPPORTED_FORMAT",
           "not a character card (no spec, name or char_name field)", "$")


#: One PNG text chunk in file order: ``(chunk type, keyword, text)``. ``tEXt``/``zTXt`` text is
#: decoded as Latin-1 (lossless: re-encode to get the bytes), ``iTXt`` text as UTF-8.
PngText = tuple[str, str, str]


def read_png_text_chunk_list(data: bytes, file: str) -> list[PngText]:
    """Every PNG text chunk (``tEXt``, ``zTXt``, ``iTXt``) in file order, without decoding pixels.

    The chunks are walked with pypng's :meth:`png.Reader.chunks` (length, type, data and CRC of
    each chunk up to ``IEND``; the image data is never decompressed), so a 9000×9000 card costs
    no more than its file size. Chunks after ``IDAT`` are seen (SillyTavern writes ``chara``
    just before ``IEND``). Compressed text is inflated up to :data:`~engine.importers._io.MAX_FILE_BYTES`.

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_INVALID_PNG`` (bad signature, truncated, bad CRC, no ``IHDR`` first, malformed
        text chunk; place ``chunk N`` when one chunk is at fault), ``IMPORT_TOO_LARGE``
        (a compressed text chunk inflating past the size limit).
    """
    import png  # pypng

    out: list[PngText] = []
    reader = png.Reader(bytes=data)
    index = 0
    try:
        for index, (ctype, body) in enumerate(reader.chunks()):
            if index == 0 and ctype != b"IHDR":
                fail("IMPORT_INVALID_PNG", "corrupt PNG (the first chunk is not IHDR)", file, "chunk 0")
            if ctype in (b"tEXt", b"zTXt", b"iTXt"):
                out.append(_decode_text_chunk(ctype.decode("ascii"), body, file, index, _io.MAX_FILE_BYTES))
    except png.ChunkError as exc:
        fail("IMPORT_INVALID_PNG", f"truncated or corrupt PNG ({exc})", file, f"chunk {index}")
    except png.FormatError as exc:
        fail("IMPORT_INVALID_PNG", f"not a PNG file ({exc})", file, "byte 0")
    except (ValueError, struct.error, EOFError) as exc:
        fail("IMPORT_INVALID_PNG", f"truncated or corrupt PNG ({exc})", file)
    return out


def _inflate(body: bytes, file: str, where: str, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        fail("IMPORT_INVALID_PNG", f"compressed text chunk is corrupt ({exc})", file, where)
    if len(text) > limit or inflater.unconsumed_tail:
        fail("IMPORT_TOO_LARGE", f"compressed text chunk inflates past {limit:,} bytes", file, where)
    return text


def _decode_text_chunk(ctype: str, body: bytes, file: str, index: int, limit: int) -> PngText:
    """``(type, keyword, text)`` of one text chunk (PNG spec §11.3.4)."""
    where = f"chunk {index}"
    keyword_bytes, sep, rest = body.partition(b"\0")
    if not sep or not 1 <= len(keyword_bytes) <= 79:
        fail("IMPORT_INVALID_PNG", f"malformed {ctype} chunk (no keyword)", file, where)
    keyword = keyword_bytes.decode("latin-1")
    if ctype == "tEXt":
        return ctype, keyword, rest.decode("latin-1")
    if ctype == "zTXt":
        if not rest or rest[0] != 0:
            fail("IMPORT_INVALID_PNG", "malformed zTXt chunk (unknown compression method)", file, where)
        return ctype, keyword, _inflate(rest[1:], file, where, limit).decode("latin-1")
    # iTXt: compression flag, method, language tag \0, translated keyword \0, UTF-8 text
    if len(rest) < 2:
        fail("IMPORT_INVALID_PNG", "malformed iTXt chunk", file, where)
    flag, method, rest = rest[0], rest[1], rest[2:]
    _lang, sep1, rest = rest.partition(b"\0")
    _translated, sep2, text = rest.partition(b"\0")
    if not (sep1 and sep2) or flag not in (0, 1) or (flag and method != 0):
        fail("IMPORT_INVALID_PNG", "malformed iTXt chunk", file, where)
    if flag:
        text = _inflate(text, file, where, limit)
    return ctype, keyword, decode_utf8(text, file, f"chunk {keyword}")


def _pick_card_chunk(chunks: list[PngText], reader: FieldReader | None) -> PngText | None:
    """The chunk SillyTavern reads: ``ccv3`` before ``chara``, and of several, the first.

    SillyTavern ``src/character-card-parser.js`` ``read()`` (lines 47-75) filters the ``tEXt``
    chunks and takes ``findIndex`` of keyword ``ccv3``, then ``chara`` (case-insensitive): the
    FIRST such chunk. Loomscope also reads ``zTXt``/``iTXt`` cards, used only when no ``tEXt``
    chunk has the keyword. Several chunks with the chosen keyword give a warning.
    """
    for wanted in ("ccv3", "chara"):
        same = [c for c in chunks if c[1].lower() == wanted]
        if not same:
            continue
        text_first = [c for c in same if c[0] == "tEXt"] or same
        chosen = text_first[0]
        if len(same) > 1 and reader is not None:
            reader.warn(f"{len(same)} {wanted} chunks; the first {chosen[0]} chunk is read "
                        "(as SillyTavern does), the others are ignored")
        return chosen
    return None


def card_json_from_png(data: bytes, file: str, reader: FieldReader | None = None
                       ) -> tuple[Any, str]:
    """Extract and parse the card JSON from PNG bytes. Returns ``(parsed JSON, chunk keyword)``.

    The chunk is chosen as SillyTavern does (:func:`_pick_card_chunk`: ``ccv3`` first, and the
    first of several). Raises ``IMPORT_NO_CARD_CHUNK``, ``IMPORT_BAD_BASE64``,
    ``IMPORT_INVALID_UTF8``, ``IMPORT_INVALID_JSON`` (place ``chunk <kw>, line L, column C``) and
    the PNG errors of :func:`read_png_text_chunk_list`.
    """
    chunks = read_png_text_chunk_list(data, file)
    chosen = _pick_card_chunk(chunks, reader)
    if chosen is None:
        found = ", ".join(sorted({c[1] for c in chunks})) or "none"
        fail("IMPORT_NO_CARD_CHUNK", f"no chara/ccv3 text chunk (text chunks found: {found})", file)
    ctype, keyword, raw = chosen
    where = f"chunk {keyword}"
    stripped = raw.strip()
    if stripped.startswith("{"):
        if reader is not None:
            reader.warn(f"{where}: plain JSON instead of base64")
        # tEXt/zTXt text was decoded as Latin-1 (lossless: re-encode to get the bytes), iTXt as UTF-8
        payload = (stripped.encode("utf-8", "surrogatepass") if ctype == "iTXt"
                   else stripped.encode("latin-1", "replace"))
    else:
        compact = _B64_RE.sub("", raw)
        try:
            compact.encode("ascii")
        except UnicodeEncodeError:
            fail("IMPORT_BAD_BASE64", "card chunk holds non-ASCII characters, not base64", file, where)
        compact += "=" * (-len(compact) % 4)
        try:
            payload = base64.b64decode(compact, validate=True)
        except (binascii.Error, ValueError) as exc:
            fail("IMPORT_BAD_BASE64", f"card chunk is not valid base64 ({exc})", file, where)
    if not payload.strip():
        fail("IMPORT_EMPTY_FILE", "the card chunk is empty", file, where)
    text = decode_utf8(payload, file, where)
    return parse_json(text, file, what=where), keyword


def card_json_from_charx(data: bytes, file: str, reader: FieldReader | None = None) -> Any:
    """Parse ``card.json`` from a V3 ``.charx`` (zip) card. Assets are not read (a warning says so).

    Raises ``IMPORT_INVALID_CARD`` (corrupt zip, no ``card.json``), ``IMPORT_TOO_LARGE``
    (``card.json`` over the file size limit, checked on the declared and the read size) and the
    UTF-8/JSON errors (place ``card.json, line L, column C``).
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
            if "card.json" not in names:
                fail("IMPORT_INVALID_CARD", ".charx archive without card.json", file)
            info = zf.getinfo("card.json")
            if info.file_size > _io.MAX_FILE_BYTES:
                fail("IMPORT_TOO_LARGE", f"card.json is {info.file_size:,} bytes", file, "card.json")
            with zf.open(info) as fh:
                payload = fh.read(_io.MAX_FILE_BYTES + 1)
            if len(payload) > _io.MAX_FILE_BYTES:
                fail("IMPORT_TOO_LARGE", "card.json is over the size limit", file, "card.json")
            assets = [n for n in names if n.startswith("assets/") and not n.endswith("/")]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError,
            ValueError, RuntimeError, zlib.error, struct.error) as exc:  # corrupt archive, unsupported compression, bad CRC
        fail("IMPORT_INVALID_CARD", f"corrupt .charx archive ({exc})", file)
    if assets and reader is not None:
        reader.warn(f".charx: {len(assets)} asset file(s) not imported (only card.json is read)")
    return parse_json(decode_utf8(payload, file, "card.json"), file, what="card.json")


def load_character_with_info(path: str | Path) -> tuple[Character, str, list[str]]:
    """Like :func:`load_character` but also returns ``(spec, warnings)``."""
    name, raw = read_bytes(path)
    r = FieldReader(name)
    if raw.startswith(PNG_SIGNATURE):
        data, _keyword = card_json_from_png(raw, name, r)
    elif Path(name).suffix.lower() in (".png", ".apng"):
        fail("IMPORT_INVALID_PNG", "not a PNG file (bad signature)", name, "byte 0")
    elif raw[:4] == b"PK\x03\x04":
        data = card_json_from_charx(raw, name, r)
    else:
        data = parse_json_document(decode_utf8(raw, name), name, "character card")
    char, spec = parse_card_data(data, name, r)
    return char, spec, r.warnings


def load_character(path: str | Path) -> Character:
    """Read a character card from a PNG or JSON file.

    Parameters
    ----------
    path:
        A PNG with a ``ccv3``/``chara`` text chunk, a JSON file (V1, V2, V3, legacy
        Pygmalion keys), or a V3 ``.charx`` zip (its ``card.json``; assets are not read).

    Returns
    -------
    Character
        Card fields; ``extensions`` verbatim (``depth_prompt`` included); the embedded
        ``character_book`` as a :class:`~engine.schema.Lorebook`; unknown fields kept as extras
        (``root_fields`` holds V1 fields mirrored at the top of a V2/V3 card).

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_FILE_NOT_FOUND``, ``IMPORT_EMPTY_FILE``, ``IMPORT_TOO_LARGE``,
        ``IMPORT_INVALID_PNG``, ``IMPORT_NO_CARD_CHUNK``, ``IMPORT_BAD_BASE64``,
        ``IMPORT_INVALID_CARD`` (corrupt ``.charx``),
        ``IMPORT_INVALID_UTF8``, ``IMPORT_INVALID_JSON``, ``IMPORT_TOO_DEEP``,
        ``IMPORT_WRONG_TYPE``, ``IMPORT_INVALID_LOREBOOK``, ``IMPORT_UNSUPPORTED_SPEC``,
        ``IMPORT_UNSUPPORTED_FORMAT``. Nothing else.
    """
    return guarded(path, lambda: load_character_with_info(path)[0])
