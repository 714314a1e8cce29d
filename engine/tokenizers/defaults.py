"""The default tokenizer registry: the built-in profiles, then the exact open-weight ones.

Above :mod:`.profiles` (the profile type and the OpenAI/approximate profiles) and
:mod:`.open_profiles` (which builds on both the profile type and the chat templates).
"""

from __future__ import annotations

from .open_profiles import open_profiles
from .profiles import TokenizerRegistry, builtin_profiles


def default_tokenizer_registry() -> TokenizerRegistry:
    """A fresh registry holding the built-in profiles.

    The OpenAI and approximate ones, then the exact open-weight ones (:func:`.open_profiles.open_profiles`).
    """
    reg = TokenizerRegistry()
    for p in builtin_profiles():
        reg.register(p)
    for p in open_profiles():
        reg.register(p)
    return reg
