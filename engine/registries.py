"""The plugin contract's registries: everything a preview can be extended with.

One :class:`Registries` holds the tokenizer profiles, context strategies, interceptors and
assembly stages a preview uses; :func:`default_registries` builds one with the built-ins (and,
optionally, the installed third-party plugins). Re-exported by :mod:`engine.pipeline` and
:mod:`engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .assembly import StageRegistry, register_builtin_stages
from .compaction.strategy import register_compact_strategy
from .plugins import InterceptorRegistry, load_entry_point_plugins
from .shifting import ContextStrategyRegistry, register_builtin_strategies
from .tokenizers import TokenizerRegistry, default_tokenizer_registry


@dataclass(frozen=True)
class Registries:
    """Everything pluggable: tokenizer profiles, strategies, interceptors, assembly stages.

    Attributes
    ----------
    tokenizers, strategies, interceptors, stages:
        The registries (each ``register`` returns a cleanup callable; duplicate names raise).
    plugin_diagnostics:
        One line per third-party plugin that failed to load (:func:`default_registries`).
    """

    tokenizers: TokenizerRegistry
    strategies: ContextStrategyRegistry
    interceptors: InterceptorRegistry
    stages: StageRegistry
    plugin_diagnostics: list[str] = field(default_factory=list)


def default_registries(*, load_plugins: bool = False) -> Registries:
    """Fresh registries holding the built-ins (each ``register`` returns a cleanup callable).

    With ``load_plugins``, third-party plugins from the ``loomscope.plugins`` entry-point group
    register too (the app and the CLI do this; tests usually do not); plugins that fail to load
    are listed in ``Registries.plugin_diagnostics``.
    """
    strategies = ContextStrategyRegistry()
    register_builtin_strategies(strategies)
    register_compact_strategy(strategies)
    stages = StageRegistry()
    register_builtin_stages(stages)
    regs = Registries(default_tokenizer_registry(), strategies, InterceptorRegistry(), stages)
    if load_plugins:
        _, diagnostics = load_entry_point_plugins(regs)
        regs.plugin_diagnostics.extend(diagnostics)
    return regs


@lru_cache(maxsize=1)
def shared_registries() -> Registries:
    """Built-ins and installed plugins, built once, for callers that pass no registries (the CLI, the API)."""
    return default_registries(load_plugins=True)


__all__ = ["Registries", "default_registries", "shared_registries"]
