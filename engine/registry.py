"""``NamedRegistry``: the one register/cleanup mechanism behind every pluggable registry.

Tokenizer profiles, context strategies, interceptors and assembly stages all register by
name; ``register`` returns a cleanup callable that removes exactly what it added; a duplicate
name raises ``SettingsError(DUPLICATE_REGISTRATION)``; an unknown name raises the registry's
own code. Built-ins register through the same API as plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from .errors import SettingsError

T = TypeVar("T")


class NamedRegistry(Generic[T]):
    """Items of type ``T`` by unique name, in registration order.

    Subclasses set ``kind`` (used in messages) and ``unknown_code`` (the error code of
    :meth:`get` for an unknown name).
    """

    kind = "item"
    unknown_code = "INVALID_SETTINGS"

    def __init__(self) -> None:
        self._items: dict[str, T] = {}

    def _add(self, name: str, item: T) -> Callable[[], None]:
        if name in self._items:
            raise SettingsError("DUPLICATE_REGISTRATION", f"{self.kind} {name!r} is already registered")
        self._items[name] = item

        def cleanup() -> None:
            if self._items.get(name) is item:
                del self._items[name]

        return cleanup

    def get(self, name: str) -> T:
        """The item registered as ``name``; raises ``SettingsError(unknown_code)``."""
        try:
            return self._items[name]
        except KeyError:
            raise SettingsError(
                self.unknown_code,
                f"unknown {self.kind} {name!r} (known: {', '.join(self._items) or 'none'})") from None

    def pick(self, names: Iterable[str]) -> tuple[tuple[str, T], ...]:
        """``(name, item)`` for each of ``names`` that is registered, in the order of ``names`` (C-level passes)."""
        items = self._items
        found = list(filter(items.__contains__, names))
        return tuple(zip(found, map(items.__getitem__, found)))

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, item) pairs, in registration order."""
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items
