"""SillyTavern's World Info entry hash, which keys the stored timed effects.

SillyTavern 1.12.6 ``getSortedEntries`` (``public/scripts/world-info.js`` 3620–3627) gives each
entry ``hash = getStringHash(JSON.stringify(entry))`` where ``entry`` is the world file's entry
object as loaded (``{uid, world: <world name>, ...rest}``, ``getGlobalLore`` and friends) with
``decorators`` added and ``content`` replaced by its text after the decorators
(``parseDecorators``). ``WorldInfoTimedEffects`` finds a stored sticky / cooldown effect by that
hash (lines 519–524), so any edit of an entry, even of its title, orphans its timers.

To reproduce the hashes SillyTavern stored, the importer records the hash of each entry from its
raw JSON (:func:`raw_entry_hash`) next to a digest of the entry as Loomscope read it
(:func:`entry_basis`), in the book's ``st_entry_hashes``. :func:`entry_hash` uses the recorded
hash while the entry is unchanged and a hash of Loomscope's own JSON of the entry once it was
edited: a new hash, as SillyTavern gives an edited entry.
"""

from __future__ import annotations

import hashlib
import math
import re
from array import array
from collections.abc import Mapping
from typing import Any

from ..schema.lorebook import Lorebook, LorebookEntry

__all__ = ["KNOWN_DECORATORS", "entry_basis", "entry_hash", "js_number_string", "js_stringify",
           "parse_decorators", "raw_entry_hash", "string_hash"]

#: world-info.js ``KNOWN_DECORATORS``.
KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
#: The book extra holding the hashes recorded at import (``{basis digest: hash}``).
HASHES_FIELD = "st_entry_hashes"
#: The book extra listing entries the world file gave no ``position`` (entry digests).
NO_POSITION_FIELD = "st_no_position"
_M32 = 0xFFFFFFFF


def _imul(a: int, b: int) -> int:
    return (a * b) & _M32


def string_hash(text: str, seed: int = 0) -> int:
    """SillyTavern ``getStringHash`` (``utils.js`` 323–340, cyrb53) over UTF-16 code units.

    Returns a non-negative integer below 2**53, as the JavaScript function does.
    """
    h1 = (0xDEADBEEF ^ seed) & _M32
    h2 = (0x41C6CE57 ^ seed) & _M32
    units = array("H")
    units.frombytes(text.encode("utf-16-le", "surrogatepass"))
    for ch in units:
        h1 = _imul(h1 ^ ch, 2654435761)
        h2 = _imul(h2 ^ ch, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507) ^ _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507) ^ _imul(h1 ^ (h1 >> 13), 3266489909)
    return 4294967296 * (2097151 & h2) + (h1 & _M32)


def js_number(v: Any) -> float:
    """JavaScript ``Number(v)`` of a JSON value (``NaN`` where JavaScript gives ``NaN``).

    One rule for the timed effects' stored numbers (``world-info.js``) and the macro variables
    (``variables.js``): ``null`` 0, booleans 0/1, strings trimmed (empty 0; ``0x`` / ``0o`` / ``0b``
    integers; ``Infinity``; ``inf``, ``nan`` and ``_`` separators NaN), one-element arrays their element.
    """
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, list):
        return js_number(v[0]) if len(v) == 1 else (0.0 if not v else math.nan)
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return 0.0
        try:
            if s.lower().startswith(("0x", "0o", "0b")):
                return float(int(s, 0))
            if s.lower().lstrip("+-") in ("infinity",):
                return -math.inf if s.startswith("-") else math.inf
            if s.lower().lstrip("+-") in ("inf", "nan") or "_" in s:
                return math.nan
            return float(s)
        except ValueError:
            return math.nan
    return math.nan


def js_number_string(x: float) -> str:
    """ECMAScript ``Number::toString`` (shortest round trip, JavaScript's exponent rules)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int) and abs(x) < 2**53:
        return str(x)
    f = float(x)
    if math.isnan(f) or math.isinf(f):
        return "null"  # JSON.stringify(NaN) === "null"
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    mant, _, exp = repr(abs(f)).partition("e")
    digits_part = mant.replace(".", "")
    point = mant.index(".") if "." in mant else len(mant)
    e10 = point + (int(exp) if exp else 0)  # value = 0.digits * 10**e10
    digits = digits_part.lstrip("0")
    e10 -= len(digits_part) - len(digits_part.lstrip("0"))
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), e10
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    es = f"+{e}" if e >= 0 else str(e)
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + es


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')


def _js_string(s: str) -> str:
    def esc(m: re.Match[str]) -> str:
        ch = m.group()
        if ch in _ESCAPES:
            return _ESCAPES[ch]
        return f"\\u{ord(ch):04x}"

    if not _NEEDS_ESCAPE.search(s):
        return f'"{s}"'
    # well-formed JSON.stringify: a surrogate pair stays as is, a lone surrogate is escaped
    out = _NEEDS_ESCAPE.sub(esc, s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass"))
    return f'"{out}"'


def _js_key_order(keys: list[str]) -> list[str]:
    """JavaScript property order: array-index keys ascending first, then insertion order."""
    def is_index(k: str) -> bool:
        return k.isascii() and k.isdigit() and (k == "0" or not k.startswith("0")) and int(k) < 2**32 - 1

    idx = sorted((k for k in keys if is_index(k)), key=int)
    return idx + [k for k in keys if not is_index(k)]


def js_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON-shaped Python data (dicts in insertion order)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number_string(value)
    if isinstance(value, str):
        return _js_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(js_stringify(v) for v in value) + "]"
    if isinstance(value, Mapping):
        keys = _js_key_order([str(k) for k in value])
        by_str = {str(k): v for k, v in value.items()}
        return "{" + ",".join(f"{_js_string(k)}:{js_stringify(by_str[k])}" for k in keys) + "}"
    return _js_string(str(value))


def parse_decorators(content: str) -> tuple[list[str], str]:
    """``parseDecorators`` (world-info.js 3646–3694): (decorators, content without them)."""
    if not content.startswith("@@"):
        return [], content

    def known(data: str) -> bool:
        if data.startswith("@@@"):
            data = data[1:]
        return any(data.startswith(d) for d in KNOWN_DECORATORS)

    new_content = content
    lines = content.split("\n")
    decorators: list[str] = []
    fallbacked = False
    for i, line in enumerate(lines):
        if line.startswith("@@"):
            if line.startswith("@@@") and not fallbacked:
                continue
            if known(line):
                decorators.append(line[1:] if line.startswith("@@@") else line)
                fallbacked = False
            else:
                fallbacked = True
        else:
            new_content = "\n".join(lines[i:])
            break
    return decorators, new_content


def _scan_entry(rest: Mapping[str, Any], uid: Any, world: str) -> dict[str, Any]:
    """The object SillyTavern hashes: ``{uid, world, ...rest}``, then decorators and content."""
    obj: dict[str, Any] = {}
    if uid is not None:
        obj["uid"] = uid
    obj["world"] = world
    for k, v in rest.items():
        if k != "uid":
            obj[k] = v
    content = rest.get("content")
    decorators, body = parse_decorators(content if isinstance(content, str) and content else "")
    obj["decorators"] = decorators
    obj["content"] = body
    return obj


def raw_entry_hash(raw: Mapping[str, Any], world: str) -> int:
    """The hash SillyTavern gives a world file's entry ``raw`` in world ``world``."""
    return string_hash(js_stringify(_scan_entry(raw, raw.get("uid"), world)))


def entry_basis(entry: LorebookEntry, world: str) -> str:
    """A digest of ``entry`` as Loomscope holds it (any edit changes it)."""
    data = f"{world}\0{entry.model_dump_json()}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def entry_hash(entry: LorebookEntry, book: Lorebook) -> int:
    """The SillyTavern hash of ``entry`` of ``book``.

    The hash recorded at import when the entry is unchanged since; otherwise the hash of
    Loomscope's JSON of the entry in SillyTavern's shape (uid, world, fields, decorators, content).
    """
    recorded = (book.model_extra or {}).get(HASHES_FIELD)
    if isinstance(recorded, Mapping) and recorded:
        got = recorded.get(entry_basis(entry, book.name))
        if isinstance(got, int) and not isinstance(got, bool):
            return got
    rest = entry.model_dump(mode="json")
    return string_hash(js_stringify(_scan_entry(rest, entry.uid, book.name)))


def no_position(entry: LorebookEntry, book: Lorebook) -> bool:
    """Whether the world file gave ``entry`` no ``position`` (recorded at import, unchanged since).

    SillyTavern then activates the entry but places it nowhere (world-info.js 4133–4173).
    """
    listed = (book.model_extra or {}).get(NO_POSITION_FIELD)
    return bool(listed) and isinstance(listed, list) and entry_basis(entry, book.name) in listed


def record_hashes(book: Lorebook, raw_entries: Any) -> Lorebook:
    """``book`` with ``st_entry_hashes`` recorded from the world file's raw ``entries``.

    ``raw_entries`` is the file's ``entries`` value (an object keyed by uid, or a list), in file
    order, matching ``book.entries`` one to one; anything else leaves the book unchanged.
    """
    if isinstance(raw_entries, Mapping):
        raws = list(raw_entries.values())
    elif isinstance(raw_entries, list):
        raws = list(raw_entries)
    else:
        return book
    if len(raws) != len(book.entries) or not all(isinstance(r, Mapping) for r in raws):
        return book
    hashes = {entry_basis(e, book.name): raw_entry_hash(r, book.name)
              for e, r in zip(book.entries, raws, strict=True)}
    extra = dict(book.model_extra or {})
    extra[HASHES_FIELD] = hashes
    return book.model_copy(update=extra)
