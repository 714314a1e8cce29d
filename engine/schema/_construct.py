"""Models built from values that are already valid, without pydantic validation (the engine's hot paths).

One mechanism for the three places that need it: the per-message blocks of every preview
(:mod:`engine.assembly.stages`), lorebook trace records (:mod:`engine.lorebook.records`) and the
warm preview (:mod:`engine.incremental`). Like ``model_construct`` without its per-field default
handling: every value is given and of its field's type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

M = TypeVar("M")

_new = object.__new__
_set = object.__setattr__
_FIELDS: dict[type, frozenset[str]] = {}


def model_fields_of(cls: type[Any]) -> frozenset[str]:
    """The field names of pydantic model class ``cls`` (cached per class)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = frozenset(cls.model_fields)
    return fields


def construct(cls: type[M], values: dict[str, Any], fields_set: Iterable[str] | None = None,
              extra: dict[str, Any] | None = None) -> M:
    """An instance of pydantic model ``cls`` holding ``values`` (taken as its ``__dict__``, not copied).

    ``fields_set`` is what validation would record as explicitly set (default: every field). The
    instance gets a mutable set of its own, as ``model_copy(update=...)`` adds to it. ``extra``: the
    unknown keys a model with ``extra="allow"`` keeps (``model_extra``; validation gives such a model
    ``{}`` when there are none, so pass ``{}`` there too); ``None`` for models without extras.
    """
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(model_fields_of(cls) if fields_set is None else fields_set))
    _set(obj, "__pydantic_extra__", extra)
    _set(obj, "__pydantic_private__", None)
    return obj
