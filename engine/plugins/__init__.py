"""The extension contract: interceptors, strategies and tokenizer profiles from plugins.

An interceptor runs on the final provider messages (SPEC §2 step 7):
``fn(messages: list[dict], ctx: InterceptorContext) -> (list[dict], list[str])`` returning the
new messages and diagnostics. The host validates the output, restores protected blocks an
interceptor removed, recounts and runs a final shifting pass (steps 8–9), so a plugin can
never push a request over the budget.

Third-party plugins are discovered through the entry-point group ``loomscope.plugins``: each
entry point names a callable ``setup(registries) -> list[cleanup]`` that registers through
the same ``register`` methods the built-ins use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from ..registry import NamedRegistry

ENTRY_POINT_GROUP = "loomscope.plugins"


@dataclass(frozen=True)
class InterceptorContext:
    """What an interceptor may read: model, budget (tokens), profile name, strategy."""

    model: str
    budget: int
    profile: str
    strategy: str


Interceptor = Callable[[list[dict[str, Any]], InterceptorContext], tuple[list[dict[str, Any]], list[str]]]


class InterceptorRegistry(NamedRegistry[Interceptor]):
    """Named interceptors, run in registration order; ``register`` returns a cleanup callable."""

    kind = "interceptor"

    def register(self, name: str, fn: Interceptor) -> Callable[[], None]:
        """Add interceptor ``name``; raises ``SettingsError(DUPLICATE_REGISTRATION)``."""
        return self._add(name, fn)


def load_entry_point_plugins(registries: object) -> tuple[list[Callable[[], None]], list[str]]:
    """Run every ``loomscope.plugins`` entry point's ``setup(registries)``.

    ``registries`` is the :class:`engine.registries.Registries` each plugin registers into, passed
    through untouched (the plugin contract sits below the registries bundle that holds its registry).

    Returns (cleanup callables, diagnostics). A plugin that fails to load is reported in
    the diagnostics, never raised.
    """
    cleanups: list[Callable[[], None]] = []
    diagnostics: list[str] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            setup = ep.load()
            result = setup(registries) or []
            cleanups.extend(result)
        except Exception as exc:  # a broken plugin must not break the app
            diagnostics.append(f"plugin {ep.name!r} failed to load: {type(exc).__name__}: {exc}")
    return cleanups, diagnostics
