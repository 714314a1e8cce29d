"""Models built from values that are already valid, without pydantic validation (the engine's hot paths).

One mechanism for the three places that need it: the per-message blocks of every preview
(:mod:`engine.assembly.stages`), lorebook trace records (:mod:`engine.lorebook.records`) and the
warm preview (:mod:`engine.incremental`). Like ``model_construct`` without its per-field default
handling: every value is given and of its field's type.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M")

_new = object.__new__
_set = object.__setattr__
_FIELDS: dict[type, frozenset[str]] = {}
#: pydantic's own slots of every model, set directly (``member_descriptor.__set__``)
_SET_FIELDS, _SET_EXTRA, _SET_PRIVATE = (BaseModel.__dict__[name].__set__ for name in (
    "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))


def model_fields_of(cls: type[Any]) -> frozenset[str]:
    """The field names of pydantic model class ``cls`` (cached per class)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = frozenset(cls.model_fields)
    return fields


def construct(cls: type[M], values: dict[str, Any], fields_set: Iterable[str] | None = None,
              extra: dict[str, Any] | None = None, private: dict[str, Any] | None = None) -> M:
    """An instance of pydantic model ``cls`` holding ``values`` (taken as its ``__dict__``, not copied).

    ``fields_set`` is what validation would record as explicitly set (default: every field). The
    instance gets a mutable set of its own, as ``model_copy(update=...)`` adds to it. ``extra``: the
    unknown keys a model with ``extra="allow"`` keeps (``model_extra``; validation gives such a model
    ``{}`` when there are none, so pass ``{}`` there too); ``None`` for models without extras.
    ``private``: the values of a model's private attributes (every one it declares), else ``None``.
    """
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(model_fields_of(cls) if fields_set is None else fields_set))
    _set(obj, "__pydantic_extra__", extra)
    _set(obj, "__pydantic_private__", private)
    return obj


def _consume(iterator: Iterable[Any]) -> None:
    deque(iterator, maxlen=0)


def construct_many(cls: type[M], dicts: Sequence[dict[str, Any]], fields_set: set[str]) -> list[M]:
    """Instances of pydantic model ``cls``, one per dict of ``dicts`` (each taken as its ``__dict__``).

    The warm preview's bulk path (thousands of preview rows per toggle): every step is one C-level
    pass (``map`` over ``object.__new__``, ``object.__setattr__`` and pydantic's slot
    descriptors), about a third of a Python loop's cost per instance. Every instance shares the
    one mutable ``fields_set`` (it must already hold every field name: ``model_copy(update=)``
    updates a copy of it, never this set). Extras and private attributes are set to ``None``:
    only for models without ``extra="allow"`` or private attributes (``PreviewBlock``).
    """
    objs: list[M] = list(map(_new, repeat(cls, len(dicts))))
    _consume(map(_set, objs, repeat("__dict__"), dicts))
    _consume(map(_SET_FIELDS, objs, repeat(fields_set)))
    _consume(map(_SET_EXTRA, objs, repeat(None)))
    _consume(map(_SET_PRIVATE, objs, repeat(None)))
    return objs
