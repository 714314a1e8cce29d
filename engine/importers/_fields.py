"""Typed field readers for parsed JSON, with JSON paths in errors and warnings collected.

One :class:`FieldReader` per file: it knows the file name (for errors) and gathers the
warnings that end up in ``ImportedItem.warnings`` / ``InspectReport.warnings``.
Rules (FORMATS.md b1 robustness note): ``null`` means "not given" (the default applies);
for optional on/off numbers ``0``, ``null`` and ``false`` all mean off.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from ._io import fail, wrong_type


class FieldReader:
    """Reads typed values out of JSON objects, raising ``IMPORT_WRONG_TYPE`` with a JSON path."""

    def __init__(self, file: str | None) -> None:
        self.file = file
        self.warnings: list[str] = []

    # -- failures / notes --------------------------------------------------------------
    def wrong(self, path: str, expected: str, value: Any) -> NoReturn:
        """Raise ``IMPORT_WRONG_TYPE`` at ``path``."""
        wrong_type(self.file, path, expected, value)

    def fail(self, code: str, message: str, place: str | None = None) -> NoReturn:
        """Raise ``code`` for this file."""
        fail(code, message, self.file, place)

    def warn(self, message: str) -> None:
        """Record a warning (kept in order, duplicates dropped)."""
        if message not in self.warnings:
            self.warnings.append(message)

    # -- readers ----------------------------------------------------------------------------
    def obj(self, value: Any, path: str) -> dict[str, Any]:
        """``value`` must be a JSON object."""
        if not isinstance(value, dict):
            self.wrong(path, "object", value)
        return value

    def string(self, d: dict[str, Any], key: str, path: str, default: str = "") -> str:
        """A string field; missing or ``null`` gives ``default``; numbers are written as text."""
        v = d.get(key)
        if v is None:
            return default
        if isinstance(v, str):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            self.warn(f"{path}.{key}: number {v!r} read as text")
            return str(v)
        self.wrong(f"{path}.{key}", "string", v)

    def opt_string(self, d: dict[str, Any], key: str, path: str) -> str | None:
        """A string field or ``None`` when missing/null."""
        if d.get(key) is None:
            return None
        return self.string(d, key, path)

    def boolean(self, d: dict[str, Any], key: str, path: str, default: bool) -> bool:
        """A boolean; ``null``/missing gives ``default``; 0/1 are accepted."""
        v = d.get(key)
        if v is None:
            return default
        if isinstance(v, bool):
            return v
        if isinstance(v, (int, float)) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in ("true", "false"):
            self.warn(f"{path}.{key}: string {v!r} read as a boolean")
            return v.strip().lower() == "true"
        self.wrong(f"{path}.{key}", "boolean", v)

    def opt_bool(self, d: dict[str, Any], key: str, path: str) -> bool | None:
        """An optional boolean override (``None`` = use the global setting)."""
        if d.get(key) is None:
            return None
        return self.boolean(d, key, path, False)

    def number(self, d: dict[str, Any], key: str, path: str, default: float) -> float:
        """A finite number; ``null``/missing gives ``default``; numeric strings are accepted."""
        v = d.get(key)
        if v is None:
            return default
        if isinstance(v, bool):
            self.wrong(f"{path}.{key}", "number", v)
        if isinstance(v, (int, float)):
            if not math.isfinite(v):
                self.wrong(f"{path}.{key}", "finite number", v)
            return v
        if isinstance(v, str):
            try:
                f = float(v.strip())
            except ValueError:
                self.wrong(f"{path}.{key}", "number", v)
            if not math.isfinite(f):
                self.wrong(f"{path}.{key}", "finite number", v)
            self.warn(f"{path}.{key}: string {v!r} read as a number")
            return int(f) if f.is_integer() else f
        self.wrong(f"{path}.{key}", "number", v)

    def integer(self, d: dict[str, Any], key: str, path: str, default: int) -> int:
        """An integer (floats with no fraction accepted)."""
        v = self.number(d, key, path, default)
        if isinstance(v, float):
            if not v.is_integer():
                self.wrong(f"{path}.{key}", "integer", d.get(key))
            return int(v)
        return int(v)

    def opt_int(self, d: dict[str, Any], key: str, path: str) -> int | None:
        """An optional integer where ``null`` and ``false`` mean "not set" (``None``)."""
        v = d.get(key)
        if v is None or v is False:
            return None
        if v is True:
            self.wrong(f"{path}.{key}", "integer", v)
        return self.integer(d, key, path, 0)

    def off_int(self, d: dict[str, Any], key: str, path: str) -> int | None:
        """A timed-effect count (sticky/cooldown/delay): 0, ``null`` and ``false`` all mean off (``None``)."""
        v = self.opt_int(d, key, path)
        return v if v else None

    def keys(self, d: dict[str, Any], key: str, path: str) -> list[str]:
        """A key list: an array of strings, or a comma-separated string (split, trimmed).

        Numbers inside the list are read as text. ``null``/missing gives ``[]``.
        """
        v = d.get(key)
        if v is None:
            return []
        if isinstance(v, str):
            parts = [p.strip() for p in v.split(",")]
            self.warn(f"{path}.{key}: keys given as a comma-separated string; split into a list")
            return [p for p in parts if p]
        if isinstance(v, list):
            out: list[str] = []
            for i, item in enumerate(v):
                if isinstance(item, str):
                    out.append(item)
                elif isinstance(item, (int, float)) and not isinstance(item, bool):
                    out.append(str(item))
                else:
                    self.wrong(f"{path}.{key}[{i}]", "string", item)
            return out
        self.wrong(f"{path}.{key}", "array of strings or a comma-separated string", v)

    def str_list(self, d: dict[str, Any], key: str, path: str) -> list[str]:
        """An array of strings; a lone string becomes a one-item list (with a warning)."""
        v = d.get(key)
        if v is None:
            return []
        if isinstance(v, str):
            self.warn(f"{path}.{key}: a single string where a list was expected; read as one item")
            return [v] if v else []
        if not isinstance(v, list):
            self.wrong(f"{path}.{key}", "array of strings", v)
        out: list[str] = []
        for i, item in enumerate(v):
            if not isinstance(item, str):
                self.wrong(f"{path}.{key}[{i}]", "string", item)
            out.append(item)
        return out

    def dict_field(self, d: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        """An object field; missing or ``null`` gives ``{}``."""
        v = d.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            self.wrong(f"{path}.{key}", "object", v)
        return v

