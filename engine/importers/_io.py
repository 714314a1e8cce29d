"""Reading input files safely: size limits, UTF-8, JSON with positions, nesting depth.

Every failure here is a :class:`~engine.errors.LoomscopeImportError` with a stable code and the
file name; nothing else escapes. The helpers are shared by the card, lorebook and chat readers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from .. import library_files
from ..errors import LoomscopeImportError

#: Largest input file read at all (bytes). Larger files get ``IMPORT_TOO_LARGE`` before reading.
MAX_FILE_BYTES: int = 64 * 1024 * 1024
#: Most lorebook entries accepted in one book (``IMPORT_TOO_LARGE`` above).
MAX_ENTRIES: int = 100_000
#: Most messages accepted in one chat (``IMPORT_TOO_LARGE`` above).
MAX_MESSAGES: int = 100_000
#: Longest single message accepted (characters of its text). 4 Mi characters is about a million
#: tokens, beyond every model's context window; a longer message (a 50 MB line without a space)
#: would cost minutes and gigabytes to tokenize, so it is refused with ``IMPORT_TOO_LARGE``.
MAX_MESSAGE_CHARS: int = 4 * 1024 * 1024
#: Deepest JSON nesting accepted (objects and arrays). Real cards and chats stay below ~12.
MAX_JSON_DEPTH: int = 200
#: SillyTavern's API keys file (``src/endpoints/secrets.js`` ``SECRETS_FILE``): never opened, not even
#: through a link with another name.
SECRETS_FILE = "secrets.json"


def fail(code: str, message: str, file: str | None, place: str | None = None) -> NoReturn:
    """Raise ``LoomscopeImportError(code, message, file=file, place=place)``."""
    raise LoomscopeImportError(code, message, file=file, place=place)


def read_bytes(path: str | Path) -> tuple[str, bytes]:
    """Read a whole input file, checking existence, size and emptiness first.

    Returns
    -------
    (display name, bytes)
        The display name is the path as given (used in error messages).

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_FILE_NOT_FOUND``, ``IMPORT_TOO_LARGE`` (over :data:`MAX_FILE_BYTES`, checked by
        ``stat`` before reading), ``IMPORT_EMPTY_FILE``; ``IMPORT_FORBIDDEN_FILE`` without
        opening the file for ``secrets.json`` (or a link to it) and for the library database this
        process has open (reading it would drop SQLite's locks, issue 25; :mod:`engine.library_files`).
    """
    name = str(path)
    p = Path(path)
    refuse_forbidden(p, name)
    try:
        st = p.stat()
    except FileNotFoundError:
        fail("IMPORT_FILE_NOT_FOUND", "file not found", name)
    except PermissionError:
        fail("IMPORT_FILE_NOT_FOUND", "cannot read the file: permission denied", name)
    except (OSError, ValueError) as exc:  # words, never a Python exception name (issue 31)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "the path is not valid"
        fail("IMPORT_FILE_NOT_FOUND", f"cannot read the file: {why.lower()}", name)
    if not p.is_file():
        fail("IMPORT_FILE_NOT_FOUND", "not a regular file", name)
    if st.st_size > MAX_FILE_BYTES:
        fail("IMPORT_TOO_LARGE",
             f"file is {st.st_size:,} bytes; the limit is {MAX_FILE_BYTES:,} bytes", name)
    try:
        data = p.read_bytes()
    except OSError as exc:
        fail("IMPORT_FILE_NOT_FOUND", f"cannot read the file: {(exc.strerror or str(exc)).lower()}", name)
    if len(data) > MAX_FILE_BYTES:  # grew between stat and read
        fail("IMPORT_TOO_LARGE", f"file is over {MAX_FILE_BYTES:,} bytes", name)
    if not data.strip():
        fail("IMPORT_EMPTY_FILE", "the file is empty" if not data else "the file holds only whitespace",
             name)
    return name, data


def link_target(path: Path) -> Path | None:
    """Where ``path`` leads when it or a folder on its way is a symbolic link (``None``: no link).

    Resolved without opening anything (``os.path.realpath`` reads links only).
    """
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None
    return None if real == Path(os.path.abspath(path)) else real


def refuse_forbidden(path: Path, name: str) -> None:
    """``IMPORT_FORBIDDEN_FILE`` for ``secrets.json`` (also through a link) and the open library file.

    Nothing is opened: names, links and ``stat`` only.
    """
    target = link_target(path)
    if path.name.lower() == SECRETS_FILE or (target is not None and target.name.lower() == SECRETS_FILE):
        fail("IMPORT_FORBIDDEN_FILE", f"{SECRETS_FILE} holds API keys and is never read", name)
    if library_files.is_library_file(path):
        fail("IMPORT_FORBIDDEN_FILE", "this is the open library database itself; it is read by SQLite "
             "only, never imported", name)


def reject_binary(data: bytes, file: str, expected: str) -> None:
    """``IMPORT_UNSUPPORTED_FORMAT`` for a PNG or zip given where a text file is expected."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        fail("IMPORT_UNSUPPORTED_FORMAT", f"a PNG image (a character card?), not a {expected}", file)
    if data.startswith(b"PK\x03\x04"):
        fail("IMPORT_UNSUPPORTED_FORMAT", f"a zip archive (a .charx card?), not a {expected}", file)


def decode_utf8(data: bytes, file: str | None, what: str = "") -> str:
    """Decode UTF-8 (a leading BOM is dropped).

    Raises ``IMPORT_INVALID_UTF8`` with the byte offset (and line) of the first bad byte.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        where = f"{what}byte {exc.start} (line {line})" if not what else f"{what}, byte {exc.start}"
        fail("IMPORT_INVALID_UTF8", f"invalid UTF-8 byte 0x{data[exc.start]:02x}", file, where)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def json_depth_ok(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests at most ``limit`` containers deep (iterative; no recursion)."""
    # level by level: the containers at depth 1, 2, ... (the scalars under them are skipped with
    # one isinstance each, which keeps a 10,000-message chat to a few milliseconds)
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return False
        children: list[Any] = []
        for v in level:
            children.extend(v.values() if isinstance(v, dict) else v)
        level = [x for x in children if isinstance(x, (dict, list))]
    return True


def parse_json(text: str, file: str | None, *, line_offset: int = 0, what: str = "") -> Any:
    r"""Parse JSON text, mapping every failure to a stable code.

    Parameters
    ----------
    text:
        The JSON document.
    line_offset:
        Added to reported line numbers (for one line of a JSONL file, pass its index).
    what:
        Prefix for the place (``"chunk chara"``).

    Lone UTF-16 surrogates (a ``\\uD83D`` escape without its pair, as JavaScript can write)
    become U+FFFD so that the text can be stored and written back as UTF-8.

    ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's ``json`` accepts but JSON, and
    SillyTavern's ``JSON.parse``, do not) are ``IMPORT_INVALID_JSON`` with their line and column:
    they could be neither stored as JSON (PostgreSQL refuses them) nor kept as written, and
    turning them into ``null`` silently would lose data.

    Raises
    ------
    LoomscopeImportError
        ``IMPORT_INVALID_JSON`` (with ``line L, column C``), ``IMPORT_TOO_DEEP`` (nesting beyond
        :data:`MAX_JSON_DEPTH` or Python's recursion limit).
    """
    prefix = f"{what}, " if what else ""
    try:
        value = _decoder().decode(text)
    except _NonFiniteNumber as exc:
        literal = exc.args[0]
        why = ("is not a JSON number (JSON has no NaN or Infinity)" if literal in ("NaN", "Infinity", "-Infinity")
               else "is too large for a 64-bit floating point number")
        fail("IMPORT_INVALID_JSON", f"invalid JSON: {literal[:40]} {why}", file,
             f"{prefix}{_constant_place(text, literal, line_offset)}")
    except json.JSONDecodeError as exc:
        fail("IMPORT_INVALID_JSON", f"invalid JSON: {exc.msg}", file,
             f"{prefix}line {exc.lineno + line_offset}, column {exc.colno}")
    except RecursionError:
        fail("IMPORT_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", file,
             f"{prefix}line {1 + line_offset}".rstrip())
    except (ValueError, TypeError) as exc:  # e.g. huge int literal conversion limits
        fail("IMPORT_INVALID_JSON", f"invalid JSON: {exc}", file, prefix.rstrip(", ") or None)
    # a document with fewer brackets than the limit cannot nest deeper than it (cheap test first)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and not json_depth_ok(value):
        fail("IMPORT_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", file,
             prefix.rstrip(", ") or "$")
    if _SURROGATE_ESCAPE.search(text):
        value = _fix_surrogates(value)
    return value


class _NonFiniteNumber(ValueError):
    """``NaN``/``Infinity``/``-Infinity`` met while parsing (args: the literal)."""


def _refuse_constant(name: str) -> Any:
    raise _NonFiniteNumber(name)


_DECODER: json.JSONDecoder | None = None


def _decoder() -> json.JSONDecoder:
    """One shared strict decoder (``json.loads`` with keyword arguments builds a new one per call)."""
    global _DECODER
    if _DECODER is None:
        _DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
    return _DECODER


def _finite_float(literal: str) -> float:
    """A JSON number literal as a float; one too large for a double (``1e999``) is refused."""
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise _NonFiniteNumber(literal)
    return value


_CONSTANT_RE = re.compile(r"(?<=[:\[,])\s*(-?Infinity|NaN|-?[0-9][0-9.eE+-]*)(?=\s*[,\]}])")


def _constant_place(text: str, name: str, line_offset: int) -> str:
    """``line L, column C`` of the first bare ``name`` used as a value (best effort)."""
    for m in _CONSTANT_RE.finditer(text):
        if m.group(1) == name:
            start = m.start(1)
            line = text.count("\n", 0, start) + 1
            col = start - (text.rfind("\n", 0, start) + 1) + 1
            return f"line {line + line_offset}, column {col}"
    return f"line {1 + line_offset}"


# A JSON escape of a UTF-16 surrogate (\uD800-\uDFFF). json.loads joins valid pairs, but a lone
# one becomes an unencodable str that storage and UTF-8 export would choke on later.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _fix_str(s: str) -> str:
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _fix_surrogates(value: Any) -> Any:
    """Replace lone surrogates in every string (and key) with U+FFFD (iteratively rebuilt)."""
    if isinstance(value, str):
        return _fix_str(value)
    if isinstance(value, list):
        return [_fix_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {(_fix_str(k) if isinstance(k, str) else k): _fix_surrogates(v) for k, v in value.items()}
    return value


def parse_json_document(text: str, file: str | None, expected: str) -> Any:
    """:func:`parse_json` for a file that must be one JSON document (a card or a lorebook).

    A JSONL file (several objects, one per line: a chat) gets ``IMPORT_UNSUPPORTED_FORMAT``
    ("a JSONL chat, not a <expected>") instead of a confusing "Extra data" JSON error.
    """
    try:
        return parse_json(text, file)
    except LoomscopeImportError as exc:
        if exc.code == "IMPORT_INVALID_JSON" and "Extra data" in exc.message:
            first = next(iter_lines(text), (1, ""))[1]
            try:
                ok = isinstance(json.loads(first), dict)
            except (ValueError, RecursionError):
                ok = False
            if ok:
                fail("IMPORT_UNSUPPORTED_FORMAT",
                     f"this is a JSONL file (one object per line, e.g. a chat), not a {expected}",
                     file, "line 2")
        raise


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(1-based line number, line)`` for the non-blank lines of ``text``."""
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield i, line


def type_name(value: Any) -> str:
    """The JSON type name of a Python value (for error messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def wrong_type(file: str | None, path: str, expected: str, value: Any) -> NoReturn:
    """Raise ``IMPORT_WRONG_TYPE`` for the JSON path ``path``."""
    fail("IMPORT_WRONG_TYPE", f"expected {expected}, got {type_name(value)}", file, path)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temp file in the same folder, then ``os.replace``.

    A failure leaves any existing file untouched and no temp file behind.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
