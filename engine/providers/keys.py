"""Where the API key comes from. It is never stored in the library, logged, or put in an audit.

The lookup order has one owner, :func:`lookup_api_key`: the command line, the API and the GUI
(the provider dialog's "Current key: ..." line) all call it rather than repeat the order.
"""

from __future__ import annotations

import os
from typing import Literal, NamedTuple

EnvKeySource = Literal["LOOMSCOPE_API_KEY", "OPENAI_API_KEY"]
KeySource = Literal[EnvKeySource, "keyring", "keyring-disabled", "keyring-skipped", "none"]

#: Environment variables read, in order.
KEY_ENV_VARS: tuple[EnvKeySource, ...] = ("LOOMSCOPE_API_KEY", "OPENAI_API_KEY")
#: OS keyring service and user name under which the GUI saves the key.
KEYRING_SERVICE = "loomscope"
KEYRING_USERNAME = "api_key"
#: Set (to anything non-empty) to skip the OS keyring.
NO_KEYRING_ENV_VAR = "LOOMSCOPE_NO_KEYRING"


class ApiKeyLookup(NamedTuple):
    """The outcome of :func:`lookup_api_key`: the key and where it came from.

    Attributes
    ----------
    key:
        The key, stripped; ``None`` when none was found.
    source:
        ``"LOOMSCOPE_API_KEY"`` / ``"OPENAI_API_KEY"`` (the environment variable it came from),
        ``"keyring"`` (the OS keyring), or, with no key, ``"keyring-disabled"`` (no variable
        set, keyring skipped by ``$LOOMSCOPE_NO_KEYRING``), ``"keyring-skipped"`` (no variable
        set, keyring skipped by ``use_keyring=False``) or ``"none"`` (nothing anywhere).
    """

    key: str | None
    source: KeySource

    @property
    def description(self) -> str:
        """Where the key comes from, in words (the GUI's provider dialog shows it)."""
        return _SOURCE_WORDS[self.source]


_SOURCE_WORDS: dict[KeySource, str] = {
    "LOOMSCOPE_API_KEY": "environment (LOOMSCOPE_API_KEY)",
    "OPENAI_API_KEY": "environment (OPENAI_API_KEY)",
    "keyring": "OS keyring",
    "keyring-disabled": "none found (keyring disabled by LOOMSCOPE_NO_KEYRING)",
    "keyring-skipped": "none found (keyring not consulted)",
    "none": "none found (a local server may not need one)",
}


def _keyring_key() -> str | None:
    try:
        import keyring

        stored = keyring.get_password(KEYRING_SERVICE, KEYRING_USERNAME)
    except Exception:  # no backend, locked keychain, D-Bus absent
        return None
    return stored.strip() if stored and stored.strip() else None


def lookup_api_key(*, use_keyring: bool = True) -> ApiKeyLookup:
    """The API key and its source: ``$LOOMSCOPE_API_KEY``, then ``$OPENAI_API_KEY``, then the OS keyring.

    Parameters
    ----------
    use_keyring:
        ``False`` skips the OS keyring (as a non-empty ``$LOOMSCOPE_NO_KEYRING`` does).

    Returns
    -------
    ApiKeyLookup
        ``(key, source)``; the key is ``None`` when none is set (local servers often need
        no key). A variable holding only whitespace counts as unset; a keyring that is missing
        or locked counts as "no key" (never an error).
    """
    for name in KEY_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return ApiKeyLookup(value, name)
    if not use_keyring:
        return ApiKeyLookup(None, "keyring-skipped")
    if os.environ.get(NO_KEYRING_ENV_VAR):
        return ApiKeyLookup(None, "keyring-disabled")
    stored = _keyring_key()
    return ApiKeyLookup(stored, "keyring") if stored else ApiKeyLookup(None, "none")


def resolve_api_key(*, use_keyring: bool = True) -> str | None:
    """The API key alone (see :func:`lookup_api_key` for the order); ``None`` when there is none."""
    return lookup_api_key(use_keyring=use_keyring).key
