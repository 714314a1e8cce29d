"""Last line of defence: map library exceptions that bad input can provoke to import errors.

Only exception types that malformed input is known to cause deep inside a library are mapped
(pydantic validation, recursion, memory). Anything else is a Loomscope bug and is not hidden:
the fuzz tests in ``tests/engine/importers`` exist to find those.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from ..errors import LoomscopeImportError

T = TypeVar("T")


def _loc(loc: tuple[object, ...]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def guarded(path: str | Path, fn: Callable[[], T]) -> T:
    """Run ``fn()``; map pydantic/recursion/memory failures to :class:`LoomscopeImportError`."""
    try:
        return fn()
    except LoomscopeImportError:
        raise
    except ValidationError as exc:
        err: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
        raise LoomscopeImportError(
            "IMPORT_WRONG_TYPE", f"invalid value: {err.get('msg', exc)}", file=str(path),
            place=_loc(tuple(err.get("loc", ()))),
        ) from None
    except RecursionError:
        raise LoomscopeImportError("IMPORT_TOO_DEEP", "the input nests too deeply",
                                   file=str(path)) from None
    except MemoryError:
        raise LoomscopeImportError("IMPORT_TOO_LARGE", "the input does not fit in memory",
                                   file=str(path)) from None
