"""Read-only columns that read as lists: :class:`ListColumn`, and :class:`PatchedList` (a warm run's columns).

:class:`ListColumn` is what a preview's columns (``engine.schema.preview.FitWindows``,
``ReasonDetails``) and :class:`PatchedList` share: a sequence kept in another form than a list
(an array, a list with a few positions replaced) that equals, prints and iterates as the list of
its values (:meth:`ListColumn.tolist`).

A read-only list that shares all but a few positions with the list it came from:
A pin / exclude toggle at 10,000 messages changes a handful of positions of a run's per-block
columns (each block's status and reason, its flags). Copying such a column costs more than its
size suggests: its 10,000 entries are a few shared objects (``"kept"``, ``True``), and copying or
freeing it updates their reference counts 10,000 times in a row (~25 µs a column, twice). A
:class:`PatchedList` keeps the earlier column and the positions that differ instead; after
:data:`FLATTEN` differences it is written out as a plain list once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: Differences a :class:`PatchedList` holds before :meth:`PatchedList.of` writes a plain list instead.
FLATTEN = 64


class ListColumn(Sequence[T]):
    """A read-only sequence that equals, prints and iterates as the list of its values (:meth:`tolist`)."""

    __slots__ = ()

    def tolist(self) -> list[T]:
        """The values as a new plain list."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[T]:
        return iter(self.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.tolist()!r})"


#: :meth:`PatchedList.__getitem__`'s marker of a position without a change.
_UNCHANGED = object()


class PatchedList(ListColumn[T]):
    """``base`` with the positions in ``changes`` replaced (read-only; ``base`` is never changed).

    Reads as a sequence: one position in O(1), a slice as fast as a list's, iteration and
    :meth:`tolist` as fast as a list copy. Made by :meth:`of`, which also keeps chains flat (a patch of a patch patches the first
    list).
    """

    __slots__ = ("_base", "_changes", "_keys")

    def __init__(self, base: Sequence[T], changes: dict[int, T]) -> None:
        self._base, self._changes = base, changes
        self._keys = sorted(changes)

    @classmethod
    def of(cls, base: Sequence[T], changes: Iterable[tuple[int, T]]) -> Sequence[T]:
        """``base`` with ``changes`` (``(position, value)``, nonnegative positions) applied.

        Returns a :class:`PatchedList` over the first plain list, or a plain list once the
        differences exceed :data:`FLATTEN`.
        """
        if isinstance(base, PatchedList):
            root, merged = base._base, dict(base._changes)
        else:
            root, merged = base, {}
        merged.update(changes)
        if len(merged) <= FLATTEN:
            return cls(root, merged)
        flat = list(root)
        for k, v in merged.items():
            flat[k] = v
        return flat

    @property
    def root(self) -> Sequence[T]:
        """The plain list the changes apply to (never changed)."""
        return self._base

    @property
    def changed(self) -> frozenset[int]:
        """The positions whose value is not the root's."""
        return frozenset(self._changes)

    def __len__(self) -> int:
        return len(self._base)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if type(index) is int and index >= 0:  # the usual read: one dict lookup, then the root
            found = self._changes.get(index, _UNCHANGED)
            return self._base[index] if found is _UNCHANGED else found  # type: ignore[return-value]
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._base))
            if step != 1:
                return self.tolist()[index]
            part = self._base[start:stop]  # a plain list's slice (one C-level copy), then its changed positions
            out = part if type(part) is list else list(part)
            keys, changes = self._keys, self._changes
            for k in keys[bisect_left(keys, start):bisect_left(keys, stop)]:
                out[k - start] = changes[k]
            return out
        k = index + len(self._base) if index < 0 else index
        if k < 0:  # past the start, as a list's index
            raise IndexError("PatchedList index out of range")
        changes = self._changes
        return changes[k] if k in changes else self._base[k]

    def tolist(self) -> list[T]:
        """The values as a new plain list."""
        out = list(self._base)
        for k, v in self._changes.items():
            out[k] = v
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (self.tolist(),)


__all__ = ["FLATTEN", "ListColumn", "PatchedList"]
